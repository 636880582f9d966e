"""The fleet screen at 64 busy servers on a real terminal: how long a key takes to show.

``fleet_scale`` measures the watch headless; a user sees the fleet screen, whose keys were
answered 5-10 s late at 64 servers (its thread waited for the interpreter lock behind the
watches'). Here the same simulated fleet (:class:`~benchmarks.fleet_scale.SimulatedFleet`) is
watched by ``stepview --attach-file FILE`` in a private tmux (its defaults: ``--nice 10``),
and once its title says every server is up (and ``SETTLE_S`` later), keys are sent one per
``send-keys`` call, each timed from just before the call until ``capture-pane`` shows its
effect: ``End`` and
``Home`` (the cursor to the last server and back: the rows scroll), ``s`` twice (the title
names the sort), ``/`` (the filter bar: the footer offers to clear it), ``h`` (the title
counts the matches), Escape (the filter cleared), Enter (the server's full view) and Escape
(the fleet again). A key not shown within ``KEY_TIMEOUT_S`` counts as that long.

``--tree LABEL=PATH`` (repeatable) runs the stepview of another checkout (``PATH`` first on
``PYTHONPATH``), so that a change and what it changed are measured in one run, beside one
fleet, in the same conditions: the trees take turns, round after round. The last line is
``fleet_keys: servers=64 rounds=R LABEL_key_s_p50=A LABEL_key_s_max=B LABEL_up_s=U ...``:
the median and the worst of every key of every round, and the median time from the start
until every server was up on screen. ``--cpus 0`` runs the fleet and stepview on one CPU
(``taskset``), as on a machine its servers keep busy: where stepview gets less CPU than its
watches ask for, the screen's thread waits longest. ``--dead 0.25``: a quarter of the servers
down or hung, as ``fleet_scale --dead`` has them; a fleet with dead servers is never all up,
so the keys start once the title counts every live one up (a hung plug-in server, connected
and silent, counts as up: at least the live ones). ``--quick``: 4 servers, one round, 1 s to
settle.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.children import ROOT
from benchmarks.fleet_scale import SimulatedFleet
from benchmarks.tmux_pane import Tmux

KEY_TIMEOUT_S = 60.0
UP_TIMEOUT_S = 180.0
POLL_S = 0.02
SETTLE_S = 10.0
"""Seconds between every server up and the first key: the fleet's notices gone, its watches
at their steady pace (a user looks before pressing)."""
FLEET_TITLE = "stepview fleet · "
Shown = Callable[[str], bool]
SESSIONS = itertools.count()


SERVER_HEADER = re.compile(r"^ stepview (.+ @ |vLLM server at )", re.MULTILINE)

SCROLLS_PAST = 30
"""Servers past which the table is taller than the pane: ``End`` and ``Home`` scroll it."""


def keys(first: str, last: str, servers: int) -> list[tuple[str, str, Shown]]:
    """Each key, its name, and what on screen says it was handled (``first`` and ``last``:
    the addresses of the first and last servers listed; a fleet that fits the pane is not
    scrolled, so its ``End`` and ``Home`` show nothing and are not sent)."""

    def row(address: str) -> Callable[[str], bool]:  # not a longer port's row
        found = re.compile(re.escape(address) + r"(?!\d)").search
        return lambda s: found(s) is not None

    top, bottom = row(first), row(last)
    ends: list[tuple[str, str, Shown]] = [
        ("End", "end", lambda s: bottom(s) and not top(s)),
        ("Home", "home", lambda s: top(s) and not bottom(s)),
    ]
    return [
        *(ends if servers > SCROLLS_PAST else []),
        ("s", "sort", lambda s: "· by server" in s),
        ("s", "sort", lambda s: "· by waiting" in s),
        ("/", "filter", lambda s: "Clear filter" in s),  # the footer: the bar is up
        ("h", "type", lambda s: "match “h”" in s),
        ("Escape", "clear", lambda s: "match “" not in s and "Clear filter" not in s),
        ("Enter", "open", server_view),
        ("Escape", "back", lambda s: FLEET_TITLE in s),
    ]


def server_view(screen: str) -> bool:
    """A single server's view is up: its header (``stepview MODEL @ ADDRESS``, or ``stepview
    vLLM server at ADDRESS`` for one that has not answered: the cursor may be on a dead one)."""
    return FLEET_TITLE not in screen and SERVER_HEADER.search(screen) is not None


def all_up(servers: int, live: int) -> Shown:
    """The fleet screen's title counts ``servers`` servers and at least ``live`` of them up."""
    title = re.compile(rf"{re.escape(FLEET_TITLE)}{servers} servers, (\d+) up")

    def shown(screen: str) -> bool:
        found = title.search(screen)
        return found is not None and int(found[1]) >= live

    return shown


def one_session(
    tree: Path,
    listing: Path,
    servers: int,
    folder: Path,
    settle: float,
    wrap: Sequence[str],
    live: int | None = None,
    flags: Sequence[str] = (),
) -> tuple[float, list[float]]:
    """One stepview of ``tree`` (run under ``wrap``, given ``flags`` too) on the fleet in
    tmux: how long until every server (``live`` of them, when some are dead) was up on
    screen, and each key's time to show (the first ``settle`` s after that). Each session
    has a tmux server of its own: one just killed may still hold its socket."""
    addresses = listing.read_text().split()
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [*wrap, sys.executable, "-m", "stepview", "--attach-file", str(listing), *flags]
    log = folder / f"tui-{os.getpid()}.log"
    command += ["--log-file", str(log)]
    tmux = Tmux(f"stepview-fleet-keys-{os.getpid()}-{next(SESSIONS)}", env)
    began = time.perf_counter()
    tmux.start(f"cd {shlex.quote(str(tree))} && exec {shlex.join(command)}")
    try:
        _until(tmux, all_up(servers, servers if live is None else live), UP_TIMEOUT_S, "up")
        reached = time.perf_counter() - began
        time.sleep(settle)
        took = []
        for key, _, shown in keys(addresses[0], addresses[-1], servers):
            sent = time.perf_counter()
            tmux.press(key)
            took.append(_until(tmux, shown, KEY_TIMEOUT_S, key) - sent)
        return reached, took
    except SystemExit as exc:  # stepview ended: its log says why (the folder goes with the run)
        said = log.read_text(errors="replace").splitlines()[-8:] if log.exists() else []
        raise SystemExit("\n".join([str(exc), "its log ends:", *said])) from None
    finally:
        tmux.kill()


def _until(tmux: Tmux, shown: Shown, timeout: float, what: str) -> float:
    """When the pane first showed ``shown`` (perf_counter); a key not shown in time counts as
    shown at the timeout."""
    deadline = time.perf_counter() + timeout
    while True:
        if shown(tmux.screen()):
            return time.perf_counter()
        if time.perf_counter() > deadline:
            if not tmux.alive():
                raise SystemExit(f"stepview ended while waiting for {what}")
            print(f"  {what}: not shown within {timeout:.0f} s", flush=True)
            return deadline
        time.sleep(POLL_S)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--servers", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps-per-s", type=float, default=20.0, help="each plug-in server's")
    parser.add_argument(
        "--tree", action="append", default=[], metavar="LABEL=PATH",
        help="a checkout whose stepview to run (repeatable: they take turns); default: this one",
    )  # fmt: skip
    parser.add_argument(
        "--cpus", metavar="LIST",
        help="run the fleet and stepview on these CPUs only (taskset -c LIST): a busy machine",
    )  # fmt: skip
    parser.add_argument(
        "--dead", type=float, default=0.0, metavar="SHARE",
        help="this share of the servers down or hung (0.25: a quarter)",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="4 servers, one round")
    args = parser.parse_args(argv)
    servers, rounds = (4, 1) if args.quick else (args.servers, args.rounds)
    settle = 1.0 if args.quick else SETTLE_S
    # The smoke test checks the plumbing, not the figure: its watch is not niced. Alone in
    # its tmux session, a niced watch lowers the session's scheduler autogroup too, and
    # beside a test run's engines the smoke test took 42 s instead of under 20.
    flags = ("--nice", "0") if args.quick else ()
    wrap = ("taskset", "-c", args.cpus) if args.cpus else ()
    trees = [tuple(t.split("=", 1)) for t in args.tree] or [("this", str(ROOT))]
    names = [name for _, name, _ in keys("", "", servers)]
    ups: dict[str, list[float]] = {label: [] for label, _ in trees}
    took: dict[str, list[list[float]]] = {label: [] for label, _ in trees}
    with (
        tempfile.TemporaryDirectory(prefix="stepview-fleet-keys-") as tmp,
        SimulatedFleet(
            servers, args.steps_per_s, Path(tmp), wrap, round(servers * args.dead)
        ) as fleet,
    ):
        for number in range(rounds):
            for label, path in trees:
                up, each = one_session(
                    Path(path), fleet.listing, servers, Path(tmp), settle, wrap, fleet.live, flags
                )
                ups[label].append(up)
                took[label].append(each)
                shown = " ".join(f"{n}={t:.2f}" for n, t in zip(names, each, strict=True))
                print(f"round {number + 1} {label}: up {up:.1f} s; {shown}", flush=True)
    figures = [f"servers={servers}", f"rounds={rounds}"]
    for label, _ in trees:
        every = [t for each in took[label] for t in each]
        figures += [
            f"{label}_key_s_p50={statistics.median(every):.2f}",
            f"{label}_key_s_max={max(every):.2f}",
            f"{label}_up_s={statistics.median(ups[label]):.1f}",
        ]
    print("fleet_keys: " + " ".join(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
