"""The Prometheus rules stepview ships (``stepview/metrics/prometheus``), judged by Prometheus'
own tool and held to the metrics they read.

``promtool check rules`` parses them as a Prometheus server would load them, and ``promtool
test rules`` runs their unit tests (series in, alerts and recorded values out). promtool
comes with Debian's ``prometheus`` package, which ``scripts/setup.sh test`` installs: a
machine without it fails here, saying so, rather than passing untested rules. The rest needs
no promtool: every series a rule reads is one stepview serves (:class:`StepviewMetrics`, so a
renamed metric breaks the suite, not somebody's alerts) or one of vLLM's listed in
:data:`VLLM_METRICS`; every alert carries what an on-call person reads, every rule is
exercised by a unit test, and each runbook names real flags and keys.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from stepview.cli.args import stepview_parser
from stepview.metrics.families import StepviewMetrics
from stepview.metrics.prometheus import RULES, RULES_TEST, files
from tests.helpers import ROOT

VLLM_METRICS = frozenset(
    {
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
    }
)
"""vLLM's series the rules read, as its ``/metrics`` names them (counters with ``_total``)."""
PROMETHEUS_SERIES = frozenset({"up"})  # what Prometheus itself records for every target
SEVERITIES = ("critical", "warning", "info")
ANNOTATIONS = {"summary", "description", "runbook"}
RECORDED_NAME = re.compile(r"[a-z_]+:[a-z0-9_]+:[a-z0-9_]+")  # level:metric:operations

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}|\[[^\]]*\]")  # label matchers, range durations
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_WORD = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?")
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset"})


def _promtool(*args: str | Path) -> None:
    """Run promtool in the rules' folder (the test file names the rules relative to it)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail(
            "promtool is not installed: the rules cannot be checked. It comes with Debian's "
            "`prometheus` package (scripts/setup.sh test installs it: apt-get install "
            "prometheus)"
        )
    done = subprocess.run(
        [promtool, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=files(),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"promtool {' '.join(map(str, args))}:\n{done.stdout}{done.stderr}"


def _rules() -> list[dict[str, Any]]:
    loaded = yaml.safe_load((files() / RULES).read_text(encoding="utf-8"))
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def _alerts() -> list[dict[str, Any]]:
    return [rule for rule in _rules() if "alert" in rule]


def metric_names(expr: str) -> set[str]:
    """The series a PromQL expression reads: every name left once strings, label matchers,
    ranges and grouping labels are taken out, less functions (a name before ``(``) and
    keywords."""
    bare = _GROUPING.sub("", _MATCHERS.sub("", _STRING.sub('""', expr)))
    return {
        match[1] for match in _WORD.finditer(bare) if match[2] is None and match[1] not in _KEYWORDS
    }


def _served() -> set[str]:
    """Every series name stepview's exporter can serve, as a scrape shows it."""
    served: set[str] = set()
    for family in StepviewMetrics().registry.collect():
        suffix = {"counter": "_total", "info": "_info"}.get(family.type, "")
        served.add(family.name + suffix)
    return served


def test_promtool_checks_the_rules() -> None:
    _promtool("check", "rules", RULES)


def test_promtool_unit_tests_pass() -> None:
    _promtool("test", "rules", RULES_TEST)


def test_the_metric_name_parser_finds_series_not_labels_or_functions() -> None:
    expr = (
        'sum by (job, reason) (rate(stepview_x_total{kind="a b"}[5m])) > 0 '
        "and on (job) level:y:sum unless vllm:z == bool 1"
    )
    assert metric_names(expr) == {"stepview_x_total", "level:y:sum", "vllm:z"}


def test_every_series_the_rules_read_is_served_or_recorded() -> None:
    rules = _rules()
    recorded = {rule["record"] for rule in rules if "record" in rule}
    known = _served() | recorded | VLLM_METRICS | PROMETHEUS_SERIES
    unknown = {
        name: rule.get("alert") or rule.get("record")
        for rule in rules
        for name in metric_names(rule["expr"])
        if name not in known
    }
    assert not unknown, f"series no one serves (renamed in StepviewMetrics?): {unknown}"
    assert "stepview_plugin_active" in _served()  # sanity: the exporter's own gauge is seen


def test_recording_rules_are_named_level_metric_operations() -> None:
    names = [rule["record"] for rule in _rules() if "record" in rule]
    assert names and all(RECORDED_NAME.fullmatch(name) for name in names), names


def test_every_alert_says_how_bad_what_and_what_to_open() -> None:
    for alert in _alerts():
        name = alert["alert"]
        assert alert["labels"]["severity"] in SEVERITIES, name
        assert set(alert["annotations"]) == ANNOTATIONS, name
        assert "for" in alert, f"{name}: say how long it must hold (for: 0m if at once)"
        runbook = alert["annotations"]["runbook"]
        assert "\n" not in runbook and runbook.startswith("stepview "), (name, runbook)


def test_runbooks_name_real_flags_and_keys() -> None:
    flags = {option for action in stepview_parser()._actions for option in action.option_strings}
    keys = set(re.findall(r"^\| `([^`]+)`", (ROOT / "docs" / "keys.md").read_text(), re.M))
    for alert in _alerts():
        runbook = alert["annotations"]["runbook"]
        named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", runbook))
        assert named <= flags, (alert["alert"], named - flags)
        pressed = set(re.findall(r"\bthen ([^\s,;()]+)", runbook)) - {"the", "that"}
        assert pressed <= keys, (alert["alert"], pressed - keys)


def test_every_rule_has_a_unit_test() -> None:
    tests = yaml.safe_load((files() / RULES_TEST).read_text(encoding="utf-8"))["tests"]
    fired = {
        case["alertname"]
        for test in tests
        for case in test.get("alert_rule_test", ())
        if case["exp_alerts"]
    }
    exprs = " ".join(case["expr"] for test in tests for case in test.get("promql_expr_test", ()))
    alerts = {alert["alert"] for alert in _alerts()}
    assert alerts <= fired, f"alerts no test sees fire: {alerts - fired}"
    recorded = {rule["record"] for rule in _rules() if "record" in rule}
    assert recorded <= metric_names(exprs), f"recorded, no value tested: {recorded}"


def test_the_rules_are_package_data() -> None:
    """What a pip install brings: pyproject's package-data takes both files into the wheel
    (built and installed by tests/launch/test_wheel.py)."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    patterns = tool["setuptools"]["package-data"]["stepview"]
    shipped = {path.resolve() for pattern in patterns for path in (ROOT / "stepview").glob(pattern)}
    assert {files() / RULES, files() / RULES_TEST} <= shipped, patterns


def test_every_alert_and_recording_rule_is_in_the_docs() -> None:
    page = (ROOT / "docs" / "leaving-it-running.md").read_text(encoding="utf-8")
    section = page[page.index("### Alert rules") :]
    named = {rule.get("alert") or rule["record"] for rule in _rules()}
    missing = {name for name in named if f"`{name}`" not in section}
    assert not missing, f"say what these are in docs/leaving-it-running.md: {missing}"


@pytest.mark.engine  # needs vLLM installed (read, not imported)
def test_the_vllm_series_are_in_vllms_own_source() -> None:
    """vLLM renaming one of these would leave its alert silent: read the installed vLLM's
    metric definitions (counters are registered without ``_total``)."""
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.submodule_search_locations, "vLLM is not installed"
    loggers = Path(next(iter(spec.submodule_search_locations))) / "v1" / "metrics" / "loggers.py"
    source = loggers.read_text(encoding="utf-8")
    missing = [
        name for name in VLLM_METRICS if f'name="{name.removesuffix("_total")}"' not in source
    ]
    assert not missing, f"not defined in {loggers}: {missing}"
