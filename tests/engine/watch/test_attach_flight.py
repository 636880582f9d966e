"""``stepview --attach ADDRESS --headless --flight-recorder``: the real command, a publisher
playing an engine core (no vLLM), and the recordings it writes on an alert and on SIGUSR1.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from stepview.cli import main
from stepview.engine.records.facts import RequestFacts
from stepview.model.alerts import STUCK
from stepview.model.flight import ON_SIGNAL
from stepview.trace.reader import load_trace
from tests.engine.watch.attach_helpers import (
    WAITING,
    Server,
    Watch,
    record,
    request,
    wait_until,
    watch_command,
    watching,
)


def recorded_steps(path: Path) -> set[int]:
    """The steps a recording being written holds so far (its whole lines)."""
    lines = path.read_text().splitlines()
    return {json.loads(line)["step"] for line in lines if line.startswith('{"k":"step"')}


def recorded_path(line: str) -> Path:
    """The file a ``flight recording (...) in PATH`` line names."""
    return Path(line.rsplit(" in ", 1)[-1])


def flight_command(server: Server, folder: Path, stuck_after: str) -> list[str]:
    """The headless watch, with a flight recorder writing to ``folder`` and the stuck limit."""
    return [
        *watch_command(server.address, folder.parent),
        *("--flight-recorder", "10m", "--flight-dir", str(folder), "--stuck-after", stuck_after),
    ]


def seen_one_waiting(server: Server, watch: Watch, waited: float) -> RequestFacts:
    """Once the watch is subscribed: one record, a request running and ``w`` waiting (its
    facts, returned, for later records)."""
    server.wait_subscribed(timeout=30)
    watch.err.wait_for("stepview: watching")
    held = request("w-0123abcd", WAITING, waited=waited)
    server.send(record(1, request("r-0123abcd", outputs=1, new=[7]), held))
    return held


def test_a_stuck_request_writes_a_recording_and_sigusr1_extends_it(
    server: Server, tmp_path: Path
) -> None:
    folder = tmp_path / "flight"
    with watching(flight_command(server, folder, "3")) as watch:
        old = seen_one_waiting(server, watch, waited=5.0)  # past the limit when first seen
        line = watch.err.wait_for("flight recording (w stuck")
        path = recorded_path(line)
        assert path.parent == folder and path.name.startswith("flight-")
        assert "-stuck-step" in path.name and path.exists()
        watch.child.send_signal(signal.SIGUSR1)  # within the window: the same file goes on
        extended = watch.err.wait_for("flight recording goes on (asked for with SIGUSR1): ")
        assert recorded_path(extended.replace("): ", ") in ")) == path
        server.send(record(2, request("r-0123abcd", outputs=2, new=[8]), old))
        wait_until(lambda: 2 in recorded_steps(path))  # the recording went on with it
        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(30) == 0
        err = watch.err.rest()
    assert f"stepview: flight recording complete: {path}" in err
    assert f"stepview: 1 flight recording in {folder} (latest: {path})" in err
    assert sorted(folder.iterdir()) == [path]  # extended, never a second file
    trace = load_trace(path)
    flight = trace.header["flight"]
    assert flight["kind"] == STUCK and "waiting for" in flight["why"]
    steps = [s.step for s in trace.snapshots]
    assert flight["step"] == 1 and steps[-1] == 2  # it went on after the alert
    text = path.read_text()
    assert f'"kind":"{ON_SIGNAL}"' in text  # the SIGUSR1 that extended it, as a flight line


def test_a_request_stuck_on_a_server_gone_quiet_is_still_caught(
    server: Server, tmp_path: Path
) -> None:
    """A hung server sends no record at all (its /health may stay green): the watch's clock
    goes on without one, and the request held waiting is caught when it passes the limit."""
    with watching(flight_command(server, tmp_path / "flight", "2")) as watch:
        seen_one_waiting(server, watch, waited=0.5)
        line = watch.err.wait_for("flight recording (w stuck")  # with no record after the first
        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(30) == 0
    trace = load_trace(recorded_path(line))
    assert trace.header["flight"]["kind"] == STUCK and trace.header["flight"]["step"] == 1


def test_sigusr1_without_a_recorder_says_so_and_the_watch_goes_on(
    server: Server, tmp_path: Path
) -> None:
    with watching(watch_command(server.address, tmp_path)) as watch:
        server.wait_subscribed(timeout=30)
        watch.err.wait_for("stepview: watching")
        watch.child.send_signal(signal.SIGUSR1)
        watch.err.wait_for("SIGUSR1: there is no flight recorder")
        assert watch.child.poll() is None  # a SIGUSR1 does not end a watch
        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(30) == 0


def test_a_flight_folder_that_cannot_be_made_stops_before_watching(
    tmp_path: Path, capsys: object
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    args = ["--attach", "ipc:///nowhere", "--headless", "--log-file", str(tmp_path / "log")]
    args += ["--flight-recorder", "10m", "--flight-dir", str(blocker / "flight")]
    assert main(args) == 2
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err.startswith("stepview: cannot make the flight recorder's folder ")
    assert err.count("\n") == 1
