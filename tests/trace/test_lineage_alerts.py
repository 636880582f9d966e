"""Traces carry a request's lineage and the alerts that held, so a replay shows both."""

from __future__ import annotations

import json
from pathlib import Path

from stepview.model.alerts import THRASH, Alert, alert_from_record, alert_record
from stepview.model.chat import ChatMessage, headline
from stepview.model.lineage import Lineage, LineageKind
from stepview.model.sampling import SamplingSpec
from stepview.model.snapshot import EngineState, RequestState, RequestView, StepSnapshot, Timings
from stepview.trace.format import alert_line, dump_line
from stepview.trace.reader import load_trace
from tests.helpers import DATA
from tests.trace.runs import write_trace

REPLAY_V1 = DATA / "replay.trace.jsonl"


def _view(request_id: str, **fields: object) -> RequestView:
    return RequestView(
        request_id, "hi", SamplingSpec(), RequestState.WAITING, Timings(0.0), **fields
    )  # type: ignore[arg-type]


def _snap(step: int, *active: RequestView, alerts: tuple[Alert, ...] = ()) -> StepSnapshot:
    return StepSnapshot(
        step=step, clock=float(step), engine_state=EngineState.RUNNING, active=active, alerts=alerts
    )


def test_lineage_is_written_once_and_restored_on_every_version(tmp_path: Path) -> None:
    clone = _view("r4", lineage=Lineage("r3", LineageKind.CLONE))
    fork = _view("r5", lineage=Lineage("r3", LineageKind.FORK, completion=1, token=17))
    running = clone._replace(state=RequestState.DECODING, scheduled_tokens=1)
    path = tmp_path / "lineage.trace.jsonl"
    write_trace(path, [_snap(1, clone, fork), _snap(2, running, fork), _snap(3, running)])
    lines = [json.loads(x) for x in path.read_text().splitlines()[1:]]
    assert sum('"ln"' in json.dumps(line) for line in lines if line["k"] == "step") == 1
    snapshots = load_trace(path).snapshots
    assert [v.lineage for v in snapshots[0].active] == [clone.lineage, fork.lineage]
    assert snapshots[2].active[0].lineage is not None
    assert snapshots[2].active[0].lineage.label() == "clone of r3"
    assert snapshots[0].active[1].lineage.label() == "fork of r3 @ token 17 of sample 1"  # type: ignore[union-attr]


def test_alerts_hold_in_the_replay_exactly_as_long_as_live(tmp_path: Path) -> None:
    thrash = Alert(THRASH, 2, 2.0, "r1 preempted 3 times, 96 tokens lost", "r1")
    live = [_snap(1), _snap(2, alerts=(thrash,)), _snap(3, alerts=(thrash,)), _snap(4)]
    path = tmp_path / "alerts.trace.jsonl"
    write_trace(path, live)
    assert [s.alerts for s in load_trace(path).snapshots] == [s.alerts for s in live]


def test_a_trace_with_alert_lines_only_shows_each_at_its_step(tmp_path: Path) -> None:
    """Traces recorded before the step lines carried ``alerts`` had the alert lines only."""
    thrash = Alert(THRASH, 2, 2.0, "r1 thrashes", "r1")
    path = tmp_path / "old.trace.jsonl"
    write_trace(path, [_snap(1), _snap(2), _snap(3)])
    lines = path.read_text().splitlines(keepends=True)
    lines.insert(3, dump_line(alert_line(thrash)))  # after the step-2 line
    path.write_text("".join(lines))
    assert [s.alerts for s in load_trace(path).snapshots] == [(), (thrash,), ()]


def test_alert_lines_with_the_earlier_keys_still_read(tmp_path: Path) -> None:
    """Alert lines once named the kind ``alert`` and the request ``id``."""
    thrash = Alert(THRASH, 2, 2.0, "r1 thrashes", "r1")
    path = tmp_path / "old_keys.trace.jsonl"
    write_trace(path, [_snap(1), _snap(2), _snap(3)])
    lines = path.read_text().splitlines(keepends=True)
    old = {"alert": THRASH, "step": 2, "clock": 2.0, "id": "r1", "text": "r1 thrashes"}
    lines.insert(3, dump_line({"k": "alert", **old}))
    path.write_text("".join(lines))
    assert [s.alerts for s in load_trace(path).snapshots] == [(), (thrash,), ()]


def test_an_alert_line_has_the_summarys_keys() -> None:
    """One serialisation: a tool reading alert lines or the summary finds the same keys."""
    thrash = Alert(THRASH, 2, 2.0000001234, "r1 thrashes", "r1")
    line = alert_line(thrash)
    assert line == {"k": "alert", **alert_record(thrash)}
    assert set(alert_record(thrash)) == {"kind", "step", "clock", "request_id", "text"}
    assert alert_from_record(alert_record(thrash)) == thrash._replace(clock=2.0)


def test_a_version_1_trace_has_no_lineage_and_no_alerts() -> None:
    snapshots = load_trace(REPLAY_V1).snapshots
    assert all(not s.alerts for s in snapshots)
    assert all(v.lineage is None for s in snapshots for v in s.requests())


def test_a_chat_requests_messages_are_written_once_and_replayed(tmp_path: Path) -> None:
    messages = (ChatMessage("system", "Be brief."), ChatMessage("user", "Why is the sky blue?"))
    chat = _view("c1", messages=messages)
    running = chat._replace(state=RequestState.DECODING, scheduled_tokens=1)
    path = tmp_path / "chat.trace.jsonl"
    write_trace(path, [_snap(1, chat), _snap(2, running), _snap(3, running)])
    lines = [json.loads(x) for x in path.read_text().splitlines()[1:]]
    assert sum('"m"' in json.dumps(line) for line in lines if line["k"] == "step") == 1
    replayed = [s.active[0] for s in load_trace(path).snapshots]
    assert [v.messages for v in replayed] == [messages] * 3
    # One line of a pane shows the question asked, not the template's boilerplate.
    assert headline(replayed[0].prompt, replayed[0].messages) == "Why is the sky blue?"
    assert headline("plain prompt", ()) == "plain prompt"
