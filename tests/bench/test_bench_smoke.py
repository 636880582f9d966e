"""The benchmarks still run and still print their figures in the documented format.

Only the shape of the output is checked, never a timing: CI machines are shared and a timed
assertion would fail for reasons that have nothing to do with the change under test. The
figures themselves are for people (``python -m benchmarks NAME`` without ``--quick``; README).
Each runs as a user runs it, ``python -m benchmarks NAME --quick`` from the repository root,
at the smallest size that still prints every line: the vLLM ones are mostly engine start-up
(one engine per child process), which no smaller load shortens. The server benchmarks start
none: they measure the suite's shared servers (``tests/servers.py``: real vLLM, started once
per run), handed in with ``--server`` (``benchmarks/given_server.py``). ``engine_overhead``
runs ``--smoke``, its five variants on the fake engine; what they ran of vLLM's own,
``core_cpu``'s smoke test runs on real vLLM with the same calls.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from tests.helpers import ROOT
from tests.servers import Served

NUMBER = r"\d+(?:\.\d+)?"


def run_quick(name: str, timeout: float, *args: str, size: str = "--quick") -> list[str]:
    """Run ``python -m benchmarks NAME --quick ARGS...`` (or ``size`` for ``--quick``) from
    the repository root; its stdout lines (fails on a non-zero exit)."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", name, size, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    return done.stdout.splitlines()


def given(server: Served) -> tuple[str, ...]:
    """The flags that hand a shared plug-in server to a server benchmark."""
    return ("--server", server.url, "--publish", server.publish or "")


def assert_has_line(lines: list[str], pattern: str) -> None:
    assert any(re.fullmatch(pattern, line) for line in lines), (
        f"no line matches {pattern!r} in:\n" + "\n".join(lines)
    )


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("tmux") is None, reason="the tui variant runs stepview in tmux")
def test_engine_overhead_smoke() -> None:
    """Every variant and every line of the report, on the fake engine (``--smoke``): four
    children and the real stepview in tmux, no vLLM. The five engine start-ups of
    ``--quick`` took 212 to 250 s here; what they ran of vLLM's own, the bare loop and the
    driver's engine, ``test_core_cpu_quick`` runs on real vLLM."""
    lines = run_quick("engine_overhead", 240, size="--smoke")
    for variant in ("bare", "bare-inproc", "driver", "driver+record", "tui"):
        figures = rf"{re.escape(variant)}\s+(?:{NUMBER}\s+){{6}}{NUMBER}%\s+{NUMBER}"
        assert_has_line(lines, figures)
    assert_has_line(lines, rf"first frame .*: median {NUMBER} s, min {NUMBER}, max {NUMBER}")
    assert_has_line(
        lines,
        r"work per run: (\d+ steps \((mp|inproc)\), )+\d+ output tokens \(identical in every run\)",
    )
    assert_has_line(
        lines, rf"engine core: stepview's default is (mp|inproc); bare-inproc/bare={NUMBER}"
    )
    assert_has_line(
        lines, rf"cpu ratios \(.*\): driver={NUMBER} driver\+record={NUMBER} tui={NUMBER}"
    )
    assert_has_line(
        lines,
        rf"driver's own CPU per step \(same process\): {NUMBER} us = {NUMBER}% of vLLM's step\(\)"
        rf" -> driver/bare {NUMBER} if that were all",
    )
    assert re.fullmatch(rf"ratios: driver/bare={NUMBER} tui/bare={NUMBER}", lines[-1]), lines[-1]


def test_ui_scale_quick() -> None:
    lines = run_quick("ui_scale", timeout=180)
    ms = rf"p50={NUMBER}ms p95={NUMBER}ms max={NUMBER}ms"
    assert_has_line(lines, rf"snapshot-to-screen: {ms} \(n=\d+\)")
    assert_has_line(lines, rf"publish-to-screen: {ms} \(incl\. poll wait\)")
    assert_has_line(
        lines,
        rf"frame cost: {NUMBER}ms UI CPU per frame, UI CPU share {NUMBER}%, {NUMBER} KiB per frame",
    )
    assert_has_line(lines, rf"redraws: {NUMBER}/s while snapshots arrive at {NUMBER}/s")
    assert_has_line(lines, r"memory: rss=\d+MB .* tracemalloc: snapshots=\d+MB .*")
    assert_has_line(lines, r"history: \d+ bytes per request per step \(.*history_size=\d+\)")


@pytest.mark.e2e
@pytest.mark.skipif(
    shutil.which("tmux") is None, reason="the attached variant runs stepview in tmux"
)
def test_server_overhead_quick(plain_server: Served, plugged_server: Served) -> None:
    lines = run_quick(
        "server_overhead", 300, *given(plugged_server), "--alone-server", plain_server.url
    )
    for variant in ("alone", "plugin", "attached"):
        assert_has_line(lines, rf"{variant}\s+median\s+{NUMBER} tok/s\s+\({NUMBER}\)")
    assert re.fullmatch(rf"ratios: plugin/alone={NUMBER} attached/alone={NUMBER}", lines[-1])


@pytest.mark.engine
def test_capture_cost_quick() -> None:
    lines = run_quick("capture_cost", timeout=240)
    per_step = rf"{NUMBER} \({NUMBER}%\)"
    assert_has_line(lines, rf"\s+16\s+{NUMBER}\s+{per_step}(\s+{per_step}){{5}}")
    assert_has_line(lines, rf"the first, full record .*: 16: {NUMBER} ms")
    assert_has_line(
        lines,
        rf"a hung step's stacks, per step: .*: 16: {NUMBER} us \(\d+ wakes of {NUMBER} us\) "
        rf"against {NUMBER} us \(capture {NUMBER} us; steps of {NUMBER} us\)",
    )
    assert_has_line(lines, rf"the log of ends: 16: \d+ ends, {NUMBER} us each, .* held each")
    assert_has_line(
        lines,
        rf"a watch joining mid-run .*: 16: \+{NUMBER} ms at most \({NUMBER} with the \d+ GC "
        rf"collections that ran in it; usual {NUMBER} us; pictures in \d+\+\d+ steps, named "
        rf"(\d+)\+(\d+) of \1\+\2 held\)",
    )
    names = ("capture", "log", "publish", "view", "watch", "driver")
    line = " ".join(rf"{name}_us={NUMBER}" for name in names)
    assert re.fullmatch(rf"scaling: {line} attach_ms={NUMBER}", lines[-1]), lines[-1]


def test_flight_size_quick() -> None:
    lines = run_quick("flight_size", timeout=120)
    per_batch = (
        rf"\s*\d+ decoding: +{NUMBER} KB/step, +{NUMBER} us/step to encode, +{NUMBER} MB/min"
    )
    assert_has_line(lines, per_batch + rf" at 20 steps/s: \d+ MB hold {NUMBER} min")
    assert re.fullmatch(
        rf"flight_size: mb_per_min_8={NUMBER} mb_per_min_16={NUMBER} "
        rf"us_per_step_8={NUMBER} us_per_step_16={NUMBER}",
        lines[-1],
    ), lines[-1]


def test_watch_memory_quick() -> None:
    """No vLLM: a synthetic core publishes, the watch subscribes (the quick loop runs it)."""
    lines = run_quick("watch_memory", timeout=300)
    assert_has_line(lines, rf" +500 requests  rss +{NUMBER} MB +\d+ s")
    assert_has_line(lines, r"exit code 0; 500 requests in the results file")
    assert re.fullmatch(
        rf"watch_memory: rss_mb_5={NUMBER} rss_mb_50={NUMBER} rss_mb_500={NUMBER}", lines[-1]
    ), lines[-1]


def test_fleet_scale_quick() -> None:
    """No vLLM: a simulated fleet (3 plug-in servers, 1 /metrics page), one watch of them all."""
    lines = run_quick("fleet_scale", timeout=300)
    assert_has_line(lines, rf"all 4 servers up after {NUMBER} s; measured for 8 s")
    assert_has_line(
        lines, rf"fleet_scale rows: live=4 dead=0 threads={NUMBER} stale_s_p50={NUMBER} "
        rf"stale_s_max={NUMBER} stale_s_max_plugin={NUMBER} stale_s_max_metrics={NUMBER} "
        rf"read_age_s_p50={NUMBER} read_age_s_max={NUMBER}",
    )  # fmt: skip
    assert re.fullmatch(
        rf"fleet_scale: servers=4 cpu_pct_per_server={NUMBER} lag_s_p50={NUMBER} "
        rf"lag_s_max={NUMBER} rss_mb={NUMBER} cpu_pct={NUMBER} up=4",
        lines[-1],
    ), lines[-1]


@pytest.mark.e2e  # the real stepview in tmux: out of the quick loop, one tmux test at a time
@pytest.mark.skipif(shutil.which("tmux") is None, reason="the fleet screen runs in tmux")
def test_fleet_keys_quick() -> None:
    """No vLLM: the fleet screen of 4 simulated servers in tmux, each key seen to take effect."""
    lines = run_quick("fleet_keys", timeout=300)
    assert_has_line(lines, rf"round 1 this: up {NUMBER} s; sort={NUMBER} sort={NUMBER} .*")
    assert not [line for line in lines if "not shown within" in line], lines
    assert re.fullmatch(
        rf"fleet_keys: servers=4 rounds=1 this_key_s_p50={NUMBER} this_key_s_max={NUMBER} "
        rf"this_up_s={NUMBER}",
        lines[-1],
    ), lines[-1]


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("tmux") is None, reason="the fleet screen runs in tmux")
def test_fleet_keys_quick_with_dead_servers() -> None:
    """Half of the 4 servers down or hung: the keys start once the live ones are up (before,
    the benchmark waited for every server up, which a fleet with dead servers never is)."""
    lines = run_quick("fleet_keys", 300, "--dead", "0.5")
    assert_has_line(lines, rf"round 1 this: up {NUMBER} s; sort={NUMBER} sort={NUMBER} .*")
    assert not [line for line in lines if "not shown within" in line], lines
    assert re.fullmatch(rf"fleet_keys: servers=4 rounds=1 this_key_s_p50={NUMBER} .*", lines[-1])


def test_watch_server_rss_quick(plugged_server: Served) -> None:
    """On real vLLM: every request the clients completed is in the watch's results file."""
    lines = run_quick("watch_server_rss", 420, *given(plugged_server))
    assert_has_line(lines, rf"minute 0\.25: watch rss +{NUMBER} MB, \d+ requests")
    assert_has_line(lines, r"watch exit code 0; \d+ requests in its results file; files in .*")
    assert re.fullmatch(
        rf"watch_server_rss: minutes=0\.25 requests=(\d+) results=\1 unseen=0 caught_up=\d+ "
        rf"rss_mb_first={NUMBER} rss_mb_last={NUMBER} rss_mb_max={NUMBER} flight=ok",
        lines[-1],
    ), lines[-1]


@pytest.mark.engine
def test_core_cpu_quick() -> None:
    lines = run_quick("core_cpu", timeout=300)
    for variant in ("bare", "driver@mp"):
        assert_has_line(
            lines,
            rf"  pair 1 {re.escape(variant)} +core CPU {NUMBER} s over \d+ steps "
            rf"\({NUMBER} ms/step\)",
        )
    assert re.fullmatch(rf"core cpu: driver@mp/bare={NUMBER} \(median of 1 pairs\)", lines[-1])


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("tmux") is None, reason="the attached rounds run stepview in tmux")
def test_long_queue_quick(plugged_server: Served) -> None:
    lines = run_quick("long_queue", 300, *given(plugged_server), "--without-api")
    for name in ("attached", "without --api"):
        assert_has_line(
            lines,
            rf"  pair 1: plugin {NUMBER} tok/s, {name} {NUMBER} tok/s \(ratio {NUMBER}\); "
            rf"results at most {NUMBER} s behind the answers \(its gauge: {NUMBER} s\), "
            rf"all results {NUMBER} s after the last answer",
        )
    # The shared server's model is a folder on this machine: every text decoded here.
    assert_has_line(lines, r"    with their text \(--api\): 64 results")
    assert_has_line(lines, rf"without --api: attached/plugin={NUMBER} behind_max_s={NUMBER}")
    assert re.fullmatch(
        rf"long queue: attached/plugin={NUMBER} behind_max_s={NUMBER} catch_up_s={NUMBER}",
        lines[-1],
    ), lines[-1]
