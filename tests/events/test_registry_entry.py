"""``--events`` as an entry of the output registry: what a run's outputs do with it, as the
modes get them from :func:`~stepview.launch.outputs.open_outputs` (no engine needed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from stepview.cli.args import parse_own_args
from stepview.cli.specs import run_spec
from stepview.insight.run import RunInsight
from stepview.launch.outputs import RunOutputs, open_outputs
from stepview.model.address import watch_address
from stepview.model.snapshot import EngineState, StepSnapshot
from stepview.model.targets import Member, Target
from stepview.outputs.events import EVENTS, EventsStream
from stepview.outputs.watching import METRICS, ServedMetrics
from stepview.testing.sources import StaticSource
from tests.events.checks import FixedRoster


def _opened(args: list[str]) -> RunOutputs:
    options, _ = parse_own_args(args)
    outputs = open_outputs(run_spec(options, []), dict, RunInsight(), default_results=False)
    assert isinstance(outputs, RunOutputs)
    return outputs


def test_a_stream_on_stdout_leaves_the_front_end_nothing_to_print_there(tmp_path: Path) -> None:
    plain = _opened(["--headless", "--events", str(tmp_path / "a.jsonl")])
    assert plain.printing_to() is sys.stdout
    plain.close()
    printed = _opened(["--headless", "--events", "-"])
    try:
        out = printed.printing_to()
        assert out is not sys.stdout and out.name == "/dev/null"
        assert printed.printing_to(quiet=True) is not sys.stdout
    finally:
        printed.close()


def test_readers_losses_are_counted_by_the_exporter_opened_before_the_stream() -> None:
    outputs = _opened(["--headless", "--metrics-port", "0", "--events", "http://127.0.0.1:0"])
    try:
        stream = outputs.opened[EVENTS.name]
        metrics = outputs.opened[METRICS.name]
        assert isinstance(stream, EventsStream) and isinstance(metrics, ServedMetrics)
        counter = stream.output.count_dropped
        assert counter is not None
        counter(3)
        registry = metrics.exporter.metrics.registry
        assert registry.get_sample_value("stepview_events_dropped_total") == 3
    finally:
        outputs.discard()  # the run never started: the port and the stream given back


def test_a_fleets_servers_and_each_servers_sink_share_one_stream(tmp_path: Path) -> None:
    path = tmp_path / "fleet.jsonl"
    outputs = _opened(["--headless", "--events", str(path)])
    address = "tcp://10.0.0.1:5570"
    source = StaticSource(StepSnapshot(step=1, clock=1.0, engine_state=EngineState.IDLE))
    outputs.follow_fleet(
        FixedRoster([Member(Target(watch_address(address)), source)]), lambda s: None
    )
    (sink,) = outputs.sinks_for(address, RunInsight())
    sink.close()  # a fleet's driver closing its sink leaves the shared stream open
    outputs.close()
    said = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(e["event"], e["server"], e["state"]) for e in said] == [
        ("server", address, "joined"),
        ("server", address, "up"),
    ]
