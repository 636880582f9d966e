"""The metrics stepview serves, by name: one registry, each metric's type, labels and help.

Only what vLLM's own ``/metrics`` cannot say is here: why requests wait (stepview's reasons),
what preemptions cost, how a step spent its token budget, how long the oldest request has
waited, which alerts hold, whether the scheduler plug-in still reports (one that switched
itself off leaves the server running as before, with no per-request view: nothing else tells a
monitor), and, watching a server, how far the view is behind it and which of its ranks are
reached. Names follow Prometheus' conventions: a ``stepview_`` prefix, base units in the name
(``_seconds``, ``_tokens``), ``_total`` on counters (which ``prometheus_client`` adds), and a
help text that says what is counted and from what.

The registry is stepview's own, not ``prometheus_client``'s global one: vLLM registers its
metrics in the global registry when it runs in stepview's process, and serving those too
would answer twice what the server's ``/metrics`` already answers. The process collector
(stepview's resident memory, CPU seconds, open files) is added to it: a watch left running
for weeks is judged by its memory.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Info, ProcessCollector

from stepview.model.scheduling import UNKNOWN, WAIT_CODES
from stepview.model.snapshot import EngineState

RANK: Final = "rank"
REASON: Final = "reason"
KIND: Final = "kind"
BUDGET_KINDS: Final = ("prefill", "decode", "unused")


class StepviewMetrics:
    """Every metric stepview serves, registered in :attr:`registry`."""

    def __init__(self, *, process: bool = True) -> None:
        """``process``: add the process collector (tests that compare exact output leave it
        out: its figures change by themselves)."""
        registry = self.registry = CollectorRegistry(auto_describe=True)
        if process:
            ProcessCollector(registry=registry)
        self.waiting = Gauge(
            "stepview_waiting_requests",
            "Requests waiting after the latest step, by stepview's reason they got nothing "
            f"({', '.join(code for code in WAIT_CODES if code != UNKNOWN)}; {UNKNOWN}: none "
            "could be named) and by the engine core (data-parallel rank) they wait in",
            [RANK, REASON],
            registry=registry,
        )
        self.oldest_waiting = Gauge(
            "stepview_oldest_waiting_request_age_seconds",
            "Seconds since the oldest request still waiting (or preempted, or in stepview's "
            "own queue) arrived; 0 when none waits",
            registry=registry,
        )
        self.events_dropped = Counter(
            "stepview_events_dropped",
            "Events of the --events http:// stream a reader did not get: it fell further "
            "behind than --events-queue (each reader's loss counted; see docs/events.md)",
            registry=registry,
        )
        self.preemptions = Counter(
            "stepview_preemptions",
            "Preemptions: times the engine took a request's KV cache away to make room",
            registry=registry,
        )
        self.tokens_lost = Counter(
            "stepview_preemption_lost_tokens",
            "Computed tokens (prompt and output) whose KV cache preemptions threw away, to be "
            "computed again",
            registry=registry,
        )
        self.budget = Gauge(
            "stepview_step_budget_tokens",
            "The latest step's token budget (max_num_batched_tokens) by what it went to: "
            "prefill, decode, or unused",
            [KIND],
            registry=registry,
        )
        self.budget_total = Counter(
            "stepview_budget_tokens",
            "Token budget of the steps stepview saw, by what it went to (prefill, decode, "
            "unused); rate() of unused over the sum is the budget left idle",
            [KIND],
            registry=registry,
        )
        self.steps = Counter(
            "stepview_steps",
            "Engine steps stepview saw (a watched server's steps read as one, when the view "
            "falls behind, count once)",
            registry=registry,
        )
        self.alerts = Gauge(
            "stepview_active_alerts",
            "Alerts that hold after the latest step, by kind (thrash: one per request; "
            "stall, kv_full: one each)",
            [KIND],
            registry=registry,
        )
        self.alerts_raised = Counter(
            "stepview_alerts_raised",
            "Alerts raised since stepview started, by kind",
            [KIND],
            registry=registry,
        )
        self.behind = Gauge(
            "stepview_view_behind_seconds",
            "How far stepview's view is behind the watched server, in seconds, while records "
            "wait to be read (0 when caught up, and for an engine of stepview's own)",
            registry=registry,
        )
        self.unseen = Counter(
            "stepview_requests_unseen",
            "Requests of the watched server that arrived and ended within records stepview "
            "lost (its view too far behind, or the link down): counted, in no results file",
            registry=registry,
        )
        self.spans_dropped = Counter(
            "stepview_otlp_spans_dropped",
            "Spans of --otlp-traces-endpoint that did not reach the trace receiver: its "
            "export queue was full, or it failed or refused a batch (the run went on)",
            registry=registry,
        )
        self.rank_connected = Gauge(
            "stepview_rank_connected",
            "1 while stepview is connected to the watched server's engine core of this "
            "data-parallel rank, 0 while it is not (only with --attach-ranks)",
            [RANK],
            registry=registry,
        )
        self.plugin_active = Gauge(
            "stepview_plugin_active",
            "1 while stepview's scheduler plug-in reports each request's scheduler state, 0 "
            "once it switched itself off in an engine core (a vLLM whose scheduler it cannot "
            "read: the log and the status line say why) and only the engine's totals are known",
            registry=registry,
        )
        self.engine_state = Enum(
            "stepview_engine_state",
            "What the engine is doing as stepview sees it (disconnected: a watched server "
            "went away)",
            states=[state.value for state in EngineState],
            registry=registry,
        )
        self.engine = Info(
            "stepview_engine",
            "The engine stepview shows: model, vLLM version, and the address it watches",
            registry=registry,
        )
