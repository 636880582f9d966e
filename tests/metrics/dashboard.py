"""The Grafana dashboard stepview ships, read as Grafana would: its variables and every panel's
queries, with the variables and Grafana's own macros put in as Grafana puts them in."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from stepview.metrics.prometheus import DASHBOARD as DASHBOARD_FILE
from stepview.metrics.prometheus import files

DASHBOARD = files() / DASHBOARD_FILE
MACROS = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "5m"}
"""Grafana's macros, as it would fill them for a short range scraped every second."""


@dataclass(frozen=True)
class Query:
    panel: str
    ref: str
    expr: str


def load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def variables(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {var["name"]: var for var in dashboard["templating"]["list"]}


def queries(dashboard: dict[str, Any]) -> list[Query]:
    return [
        Query(panel["title"], target["refId"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel["targets"]
    ]


def filled(expr: str, values: dict[str, str]) -> str:
    """``expr`` with Grafana's macros and the dashboard's variables (``$name``: a regex of the
    chosen values, as Grafana writes a multi-value variable into ``=~``) put in."""
    for macro, value in MACROS.items():
        expr = expr.replace(macro, value)
    return re.sub(r"\$(\w+)", lambda m: values[m.group(1)], expr)
