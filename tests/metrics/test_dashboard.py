"""The Grafana dashboard, checked without Grafana: importable JSON whose panels all read the
``datasource`` variable, one variable per server and one per rank, and every query PromQL
that a real Prometheus accepts (its data is checked in ``test_prometheus_real``)."""

from __future__ import annotations

import re
from pathlib import Path

from stepview.metrics.families import StepviewMetrics
from stepview.testing.prometheus import Prometheus
from tests.metrics.dashboard import filled, load, queries, variables

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def test_every_panel_reads_the_chosen_prometheus_and_the_variables_are_server_and_rank() -> None:
    dashboard = load()
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    found = variables(dashboard)
    assert set(found) == {"datasource", "instance", "rank"}
    chosen = found["datasource"]
    assert chosen["type"] == "datasource" and chosen["query"] == "prometheus"
    for name in ("instance", "rank"):
        assert found[name]["type"] == "query" and found[name]["multi"] and found[name]["includeAll"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["description"], panel["title"]
        assert panel["targets"], panel["title"]
        assert all(target["datasource"] == DATASOURCE for target in panel["targets"])
        # Every panel follows the server variable: none shows another server's figures.
        assert all('instance=~"$instance"' in t["expr"] for t in panel["targets"]), panel["title"]


def test_every_metric_a_panel_reads_is_one_stepview_serves() -> None:
    suffix = {"counter": "_total", "info": "_info"}
    served = {
        family.name + suffix.get(family.type, "")
        for family in StepviewMetrics(process=False).registry.collect()
    } | {"process_resident_memory_bytes", "process_cpu_seconds_total"}
    for query in queries(load()):
        names = set(re.findall(r"\b((?:stepview|process)_[a-z_]+)\b", query.expr))
        assert names and names <= served, (query.panel, names - served)


def test_every_query_is_promql_a_real_prometheus_runs(tmp_path: Path) -> None:
    dashboard = load()
    with Prometheus(tmp_path) as prometheus:
        for query in queries(dashboard):
            prometheus.query(filled(query.expr, {"instance": ".*", "rank": ".*"}))  # raises
        for name in ("instance", "rank"):
            # Grafana's label_values(SELECTOR, LABEL) is Prometheus' label values API.
            selector, label = re.fullmatch(
                r"label_values\((.+), (\w+)\)", variables(dashboard)[name]["definition"]
            ).groups()  # type: ignore[union-attr]
            match = filled(selector, {"instance": ".*"})
            prometheus.api(f"label/{label}/values", **{"match[]": match})
