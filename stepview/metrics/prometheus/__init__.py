"""Prometheus rules for stepview's metrics, shipped in the package so a pip install has them.

``stepview-rules.yml``
    recording rules (``level:metric:operations``) and alerting rules, each alert with a
    severity, a summary, a description and a one-line runbook saying what to open in
    stepview; for stepview's series, and for vLLM's own where a failure shows there too.
``stepview-rules.test.yml``
    their unit tests for ``promtool test rules``: series in, alerts and values out (the
    suite runs them, and ``promtool check rules``).

Plain files, not code: Prometheus reads them where the package is installed, which
:func:`files` says (``rule_files:`` in ``prometheus.yml`` names them there, or a copy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

RULES: Final = "stepview-rules.yml"
RULES_TEST: Final = "stepview-rules.test.yml"


def files() -> Path:
    """The folder holding :data:`RULES` and :data:`RULES_TEST` in this installation."""
    return Path(__file__).resolve().parent
