"""Prometheus rules and a Grafana dashboard for stepview's metrics, in the package: a pip
install has them.

``stepview-rules.yml``
    recording rules (``level:metric:operations``) and alerting rules, each alert with a
    severity, a summary, a description and a one-line runbook saying what to open in
    stepview; for stepview's series, and for vLLM's own where a failure shows there too.
``stepview-rules.test.yml``
    their unit tests for ``promtool test rules``: series in, alerts and values out (the
    suite runs them, and ``promtool check rules``).
``stepview-dashboard.json``
    a Grafana dashboard (import it; a ``datasource`` variable picks the Prometheus, then one
    variable per server and per data-parallel rank), every query of which the suite runs
    against a real Prometheus scraping a real run.

Plain files, not code: Prometheus reads them where the package is installed, which
:func:`files` says (``rule_files:`` in ``prometheus.yml`` names them there, or a copy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

RULES: Final = "stepview-rules.yml"
RULES_TEST: Final = "stepview-rules.test.yml"
DASHBOARD: Final = "stepview-dashboard.json"


def files() -> Path:
    """The folder holding :data:`RULES`, :data:`RULES_TEST` and :data:`DASHBOARD` here."""
    return Path(__file__).resolve().parent
