"""``stepview --attach ADDRESS --headless``: the real command, in a child process, watching a
publisher that plays an engine core (no vLLM): finished requests on stdout as JSON lines, the
link on stderr, Ctrl+C as the normal end with the unfinished recorded and the table printed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from stepview.engine.records.facts import EndedFacts
from stepview.engine.watch.api.server_api import api_client_id
from stepview.testing.vllm_server import free_port
from tests.engine.watch.attach_helpers import (
    ANSWER,
    EXIT_S,
    Lines,
    Server,
    record,
    request,
    wait_until,
    watch_command,
    watching,
)
from tests.engine.watch.fake_api import FakeApi
from tests.engine.watch.fake_metrics import FakeMetrics


def finish_one(server: Server, core_id: str, step: int) -> None:
    """Another client's request runs (record ``step``) and ends (the next record)."""
    server.send(
        record(step, request(core_id, outputs=1, new=[7])),
        record(
            step + 1,
            idle=True,
            finished=[core_id],
            ended=[EndedFacts(core_id, 2, [7, 8], "length")],
        ),
    )


def signal_masks(pid: int) -> tuple[set[int], set[int]]:
    """The signals process ``pid`` ignores and those it catches (Linux's /proc)."""

    def signals(mask: str) -> set[int]:
        bits = int(mask, 16)
        return {n for n in range(1, 65) if bits >> (n - 1) & 1}

    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = dict(line.partition(":")[::2] for line in status)
    return signals(fields["SigIgn"].strip()), signals(fields["SigCgt"].strip())


def test_watches_headless_until_ctrl_c(server: Server, tmp_path: Path) -> None:
    results, trace = tmp_path / "results.jsonl", tmp_path / "run.trace.jsonl"
    command = watch_command(server.address, tmp_path)
    with watching([*command, "--results", str(results), "--record", str(trace)]) as watch:
        server.wait_subscribed(timeout=30)
        watch.err.wait_for("stepview: watching")
        # Another client's request runs and finishes; a second is in flight.
        server.send(
            record(1, request("a-0123abcd", outputs=1, new=[7])),
            record(
                2, request("a-0123abcd", outputs=2, new=[8], intro=False), request("b-0123abcd")
            ),
            record(
                3,
                request("b-0123abcd", intro=False, outputs=1, new=[9]),
                finished=["a-0123abcd"],
                ended=[EndedFacts("a-0123abcd", 3, [7, 8, 6], "length")],
            ),
        )
        first = json.loads(watch.out.wait_for('"id": "a"'))
        assert first["state"] == "finished"
        assert first["completions"][0]["token_ids"] == [7, 8, 6]
        assert first["completions"][0]["finish_reason"] == "length"
        assert first["timeline"][-1]["state"] == "decode"

        # The server goes away and comes back: stderr says so, stdout stays results only.
        server.kill()
        watch.err.wait_for("DISCONNECTED from")
        server.restart()
        watch.err.wait_for("back in touch with")

        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(EXIT_S) == 0
        lines = watch.err.rest()
        stopped = f"stopped watching (1 unfinished request, recorded in {results})"
        assert any(stopped in line for line in lines), lines
        assert any("TTFT" in line for line in lines), lines  # the latency table
        assert all(line.startswith("{") for line in watch.out.rest())
    states = {r["id"]: r["state"] for r in map(json.loads, results.read_text().splitlines())}
    assert states == {"a": "finished", "b": "unfinished"}
    summary = subprocess.run(
        [sys.executable, "-m", "stepview", "--replay", str(trace), "--summary"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert summary.returncode == 0, summary.stderr
    assert "TTFT" in summary.stdout + summary.stderr


def test_with_prompts_it_ends_when_they_are_answered_not_before(
    server: Server, fake_api: FakeApi, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": "mine", "prompt": "Hello", "params": {"max_tokens": 3}}))
    command = [*watch_command(server.address, tmp_path), "--api", fake_api.url]
    with watching([*command, "--prompts", str(prompts)]) as watch:
        server.wait_subscribed(timeout=30)
        watch.err.wait_for("stepview: watching")
        wait_until(lambda: len(fake_api.bodies) == 1, timeout=15)
        assert fake_api.bodies[0]["prompt"] == "Hello"
        # Another client's request finishes first: the run goes on.
        server.send(
            record(1, request("other-0123abcd", outputs=1, new=[7])),
            record(
                2,
                idle=True,
                finished=["other-0123abcd"],
                ended=[EndedFacts("other-0123abcd", 2, [7, 8], "stop")],
            ),
        )
        assert json.loads(watch.out.wait_for('"id": "other"'))["state"] == "finished"
        # It went on past that: a later one is read and printed too, and it still runs.
        finish_one(server, "later-0123abcd", 3)
        assert json.loads(watch.out.wait_for('"id": "later"'))["state"] == "finished"
        assert watch.child.poll() is None, watch.err.rest()
        # Its own is answered: the run ends by itself, with the answer printed.
        fake_api.answer = ANSWER
        fake_api.release.set()
        mine = json.loads(watch.out.wait_for('"id": "mine"'))
        assert (mine["state"], mine["completions"][0]["text"]) == ("finished", " world!")
        assert watch.child.wait(EXIT_S) == 0


def test_an_address_nobody_publishes_on_says_what_to_check_and_fails(tmp_path: Path) -> None:
    address = f"ipc://{tmp_path / 'nobody.sock'}"
    with watching(watch_command(address, tmp_path)) as watch:
        hint = watch.err.wait_for("waiting for the server's records")
        assert f"STEPVIEW_PUBLISH={address}" in hint and "--scheduler-cls" in hint
        watch.child.send_signal(signal.SIGINT)
        assert watch.child.wait(EXIT_S) == 1
        rest = watch.err.rest()
        assert "stepview: stopped watching: nothing ever came from the server" in rest, rest
        assert not any("TTFT" in line for line in rest)  # no empty latency table
        assert watch.out.rest() == []


def test_a_metrics_address_that_never_answers_says_so_and_fails(tmp_path: Path) -> None:
    """The same for ``--attach http://``: a port nothing listens on is said once, with why,
    and the stop ends the watch with exit 1 and a line saying no vLLM metrics ever came
    (it ended exit 0, "stopped watching", as if it had watched a server)."""
    address = f"http://127.0.0.1:{free_port()}"
    with watching(watch_command(address, tmp_path)) as watch:
        said = watch.err.wait_for(f"connecting to {address}: ")
        assert said.endswith("Connection refused; trying again"), said
        watch.child.send_signal(signal.SIGTERM)
        assert watch.child.wait(EXIT_S) == 1
        rest = watch.err.rest()
        assert rest[-1] == f"stepview: stopped watching {address}: no vLLM metrics ever came"
        assert [line for line in rest[:-1] if "connecting to" not in line] == [], rest
        assert watch.out.rest() == []


def test_under_nohup_a_hang_up_does_not_end_the_watch(server: Server, tmp_path: Path) -> None:
    with watching(["nohup", *watch_command(server.address, tmp_path)]) as watch:
        server.wait_subscribed(timeout=30)
        watch.err.wait_for("stepview: watching")
        # nohup execs stepview: its hang-up stays ignored (the kernel drops it on sending),
        # while a stop it handles is caught. Handlers are in place before "watching".
        ignored, caught = signal_masks(watch.child.pid)
        assert signal.SIGHUP in ignored and signal.SIGHUP not in caught
        assert signal.SIGTERM in caught
        watch.child.send_signal(signal.SIGHUP)  # the terminal closed: nohup ignores it
        # Past it: a request that ends after the hang-up is read and printed.
        finish_one(server, "after-0123abcd", 1)
        watch.out.wait_for('"id": "after"')
        assert watch.child.poll() is None, watch.err.rest()
        watch.child.send_signal(signal.SIGTERM)  # a stop it does not ignore
        assert watch.child.wait(EXIT_S) == 0
        assert any("stopped watching" in line for line in watch.err.rest())


def test_its_own_prompt_lost_with_the_server_fails_the_run(
    server: Server, fake_api: FakeApi, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": "mine", "prompt": "Hello", "params": {"max_tokens": 9}}))
    csv = tmp_path / "run.csv"
    command = [*watch_command(server.address, tmp_path), "--api", fake_api.url]
    with watching([*command, "--prompts", str(prompts), "--export-csv", str(csv)]) as watch:
        server.wait_subscribed(timeout=30)
        wait_until(lambda: len(fake_api.bodies) == 1, timeout=15)
        core_id = f"{api_client_id(fake_api.bodies[0]['request_id'])}-0123abcd"
        server.send(
            record(1, request(core_id, outputs=1, new=[7], prompt=2), request("other-0123abcd")),
            record(
                2,
                request(core_id, outputs=1, prompt=2, intro=False),
                finished=["other-0123abcd"],
                ended=[EndedFacts("other-0123abcd", 1, [5], "length")],
            ),
        )
        watch.out.wait_for('"id": "other"')  # read, so the record before it too: mine runs
        server.restart()  # a new core: what ran in the old one is lost (no answer comes)
        lost = json.loads(watch.out.wait_for('"id": "mine"', timeout=30))
        assert (lost["state"], lost["completions"][0]["token_ids"]) == ("aborted", [7])
        assert watch.child.wait(EXIT_S) == 1  # its only prompt was not answered
    assert "mine" in csv.read_text()  # the export is written all the same


def test_a_reader_that_goes_away_ends_the_watch_quietly(server: Server, tmp_path: Path) -> None:
    child = subprocess.Popen(
        watch_command(server.address, tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stderr is not None
        err = Lines(child.stderr)
        server.wait_subscribed(timeout=30)
        err.wait_for("stepview: watching")
        child.stdout.close()  # as `| head -1` does once it has its line
        server.send(
            record(1, request("a-0123abcd", outputs=1, new=[7])),
            record(2, finished=["a-0123abcd"], ended=[EndedFacts("a-0123abcd", 1, [7], "stop")]),
        )
        assert child.wait(EXIT_S) == 141
        assert not any("Traceback" in line for line in err.rest())
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)


@pytest.mark.parametrize("fleet", [False, True], ids=["metrics", "fleet"])
def test_a_reader_that_goes_away_ends_a_metrics_watch_or_a_fleet_quietly(
    fake_metrics: FakeMetrics, tmp_path: Path, fleet: bool
) -> None:
    """The /metrics watch and the fleet print a line per scrape: a closed pipe ends them as
    it ends a filter, exit 141 without a traceback."""
    address = f"{fake_metrics.url},{fake_metrics.url.replace('127.0.0.1', 'localhost')}"
    command = watch_command(address if fleet else fake_metrics.url, tmp_path)
    child = subprocess.Popen(
        [*command, "--scrape-interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stderr is not None
        err = Lines(child.stderr)
        assert child.stdout.readline().startswith("{")  # it is printing
        child.stdout.close()  # as `| head -1` does once it has its line
        assert child.wait(EXIT_S) == 141
        assert not any("Traceback" in line for line in err.rest())
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
