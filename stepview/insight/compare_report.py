"""``--compare`` as text: the two runs' figures side by side, request deltas, first divergence.

Printed by ``stepview --replay A --compare B --summary``; the first-difference line is also
what the compare TUI's status bar says (:func:`difference_line`), so the two never disagree.
"""

from __future__ import annotations

from collections.abc import Iterable

from stepview.insight.compare import Comparison, Decision, Divergence, RunFigures
from stepview.insight.percentiles import QUANTILES

_LABEL = 22
_CELL = 11
LATENCY_ROWS = (("queue", "queue"), ("ttft", "TTFT"), ("itl", "ITL"), ("e2e", "e2e"))
TOP_CHANGES = 10
# A request's end-to-end latency "changed" when it moved by more than this (seconds).
CHANGE_EPSILON_S = 0.001
_SHOWN_IDS = 8


def _cell(value: float | int | None, digits: int) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _diff(a: float | int | None, b: float | int | None, digits: int) -> str:
    if a is None or b is None:
        return "-"
    change = b - a
    text = f"{change:+.{digits}f}" if isinstance(change, float) else f"{change:+d}"
    if a:
        text += f" ({change / a:+.0%})"
    return text


def _row(label: str, a: float | int | None, b: float | int | None, digits: int = 4) -> str:
    return (
        f"{label:<{_LABEL}}{_cell(a, digits):>{_CELL}}{_cell(b, digits):>{_CELL}}"
        f"  {_diff(a, b, digits)}"
    )


def _percentile(figures: RunFigures, metric: str, name: str) -> float | None:
    dist = figures.summary["latency"]["all"][metric]
    return None if dist is None else float(dist[name])


def figures_table(a: RunFigures, b: RunFigures) -> list[str]:
    """Throughput, steps, requests, latency percentiles and preemptions: A, B, B - A."""
    lines = [
        f"{'':<{_LABEL}}{'A':>{_CELL}}{'B':>{_CELL}}  B - A",
        _row("output tok/s (busy)", a.throughput, b.throughput, 1),
        _row("busy span (s)", a.busy_s, b.busy_s, 3),
        _row("steps", a.steps, b.steps),
        _row("requests", a.requests, b.requests),
        _row("output tokens", a.output_tokens, b.output_tokens),
    ]
    for metric, label in LATENCY_ROWS:
        for name, _ in QUANTILES:
            lines.append(
                _row(
                    f"{label} {name} (s)",
                    _percentile(a, metric, name),
                    _percentile(b, metric, name),
                )
            )
    pre_a, pre_b = a.summary["preemptions"], b.summary["preemptions"]
    lines.append(_row("preemptions", pre_a["count"], pre_b["count"]))
    lines.append(_row("preempted requests", pre_a["requests"], pre_b["requests"]))
    return lines


def describe_decision(decision: Decision, names: dict[str, str] | None = None) -> str:
    """``schedules r3 r5 (32 tokens), preempts r2`` (ids as the run names them)."""
    rename = names or {}
    scheduled = sorted((rid, tokens) for rid, tokens, state in decision if state != "preempted")
    preempted = sorted(rid for rid, _, state in decision if state == "preempted")
    parts = []
    if scheduled:
        ids = [rename.get(rid, rid) for rid, _ in scheduled]
        more = f" +{len(ids) - _SHOWN_IDS}" if len(ids) > _SHOWN_IDS else ""
        text = "schedules " + " ".join(ids[:_SHOWN_IDS]) + more
        counted = [tokens for _, tokens in scheduled if tokens is not None]
        if counted:
            text += f" ({sum(counted)} tokens)"
        parts.append(text)
    if preempted:
        parts.append("preempts " + " ".join(rename.get(rid, rid) for rid in preempted))
    return ", ".join(parts) or "schedules nothing"


def difference_line(
    divergence: Divergence, b_names: dict[str, str] | None = None, b_shift: int = 0
) -> str:
    """``first scheduling difference: step 7 — A schedules …, B schedules …`` or none; with
    B's steps shifted (an aligned comparison), B's own step number too."""
    if divergence.step is None:
        return f"no scheduling difference over {divergence.steps} steps"
    own = f" (B's step {divergence.step - b_shift})" if b_shift else ""
    return (
        f"first scheduling difference: step {divergence.step}{own} — "
        f"A {describe_decision(divergence.a)}, B {describe_decision(divergence.b, b_names)}"
    )


def _request_lines(comparison: Comparison) -> Iterable[str]:
    m = comparison.matching
    yield (
        f"requests matched: {m.by_id + m.by_prompt} ({m.by_id} by id, {m.by_prompt} by prompt "
        f"and sampling parameters); only in A: {m.only_a}, only in B: {m.only_b}"
    )
    deltas = comparison.deltas
    changed = [d for d in deltas if abs(d.e2e_change) > CHANGE_EPSILON_S]
    slower = sum(d.e2e_change > 0 for d in changed)
    yield (
        f"finished in both: {len(deltas)}; e2e changed for {len(changed)} "
        f"({slower} slower in B, {len(changed) - slower} faster)"
    )
    if not changed:
        return
    yield f"biggest changes (top {min(TOP_CHANGES, len(changed))}):"
    yield f"  {'request':<14}{'e2e A':>9}{'e2e B':>9}{'Δ e2e':>9}{'TTFT A':>9}{'TTFT B':>9}"
    names = comparison.b_names
    for delta in changed[:TOP_CHANGES]:
        a, b = delta
        rid = (
            a.request_id
            if names.get(a.request_id, a.request_id) == a.request_id
            else (f"{a.request_id}/{b.request_id}")
        )
        yield (
            f"  {rid:<14}{_cell(a.e2e, 3):>9}{_cell(b.e2e, 3):>9}{delta.e2e_change:>+9.3f}"
            f"{_cell(a.ttft, 3):>9}{_cell(b.ttft, 3):>9}"
        )


def format_comparison(comparison: Comparison, name_a: str, name_b: str) -> str:
    """The whole ``--compare --summary`` text (no trailing newline)."""
    lines = [f"A: {name_a}", f"B: {name_b}", ""]
    lines += figures_table(comparison.a, comparison.b)
    lines.append("")
    lines += _request_lines(comparison)
    lines.append("")
    lines.append(difference_line(comparison.divergence, comparison.b_names, comparison.b_shift))
    return "\n".join(lines)
