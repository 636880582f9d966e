"""What stepview costs a running vLLM server: its throughput alone, with the plug-in, and watched.

One command measures, side by side and under the same fixed request load, the completions
throughput of vLLM's OpenAI API server on the demo model (CPU, the README's command):

* ``alone``: the server as vLLM ships it, no ``--scheduler-cls``;
* ``plugin``: with stepview's scheduler plug-in publishing, and nobody attached (the plug-in
  then captures nothing: it checks for subscribers once per step);
* ``attached``: with the plug-in, and ``stepview --attach ADDRESS`` drawing the run in a
  120x40 tmux pane on the same machine (2 cores here: the attached TUI competes with the
  server's own front-end process for the second one), at stepview's default ``--nice 10``;
* ``attached-nice0`` (with ``--unniced``): the same at the server's own CPU priority.

Each measurement starts a fresh server, sends a warm-up completion, then the load: ``--requests``
greedy completions of ``--max-tokens`` tokens each (``ignore_eos``), all sent at once from as
many client threads. Throughput is completion tokens over the span from the first send to the
last answer. The variants take turns (the order rotates each round) and each figure is the
median over rounds. For the attached variants it also prints the share of the machine's CPU
(all cores) stepview's own process used during the load: the CPU it took from the server on
a machine they share, measured directly, whatever the run-to-run noise of the throughput.
The last line is ``ratios: plugin/alone=X attached/alone=Y``.

Run it alone on the machine (``flock /tmp/stepview-engine.lock ...``); each server start takes
~25 s, so a round of three variants takes about two minutes. ``--server URL --publish ADDRESS
--alone-server URL`` measures servers already running instead (:mod:`benchmarks.given_server`):
every variant then shares the one of its kind, so the figures are not a fresh server's; the
smoke test runs ``--quick`` so on the test suite's shared servers.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.given_server import GivenServer, add_server_flags, given, plugged
from benchmarks.tmux_pane import Tmux, stepview_command
from stepview.testing.vllm_server import (
    ApiServer,
    complete,
    free_port,
    server_command,
    server_env,
)

VARIANTS = ("alone", "plugin", "attached")
UNNICED = "attached-nice0"
"""An extra variant (``--unniced``): attached, with ``--nice 0`` (stepview at the server's
CPU priority), to show what stepview's default ``--nice 10`` buys on a shared machine."""
ATTACH_TIMEOUT_S = 60.0


def send_load(port: int, requests: int, max_tokens: int) -> tuple[int, float]:
    """Send the load at once; completion tokens and the span from first send to last answer."""
    tokens: list[int] = []
    failures: list[BaseException] = []

    def one(i: int) -> None:
        try:
            answer = complete(
                port,
                f"request {i}: tell me about the sea",
                max_tokens,
                timeout=600,
                ignore_eos=True,
            )
            tokens.append(int(answer["usage"]["completion_tokens"]))
        except BaseException as exc:  # reported below, after every thread is done
            failures.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(requests)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    span = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} completions failed: {failures[0]!r}")
    return sum(tokens), span


def attach(publish: str, port: int, workdir: Path, nice: int | None) -> Tmux:
    """``stepview --attach`` in tmux (``--nice nice`` if given), once it shows the server."""
    argv = [
        *stepview_command(),
        "--attach",
        publish,
        *([] if nice is None else ["--nice", str(nice)]),
        "--api",
        f"http://127.0.0.1:{port}",
        "--results",
        str(workdir / "attached.jsonl"),
        "--log-file",
        str(workdir / "stepview.log"),
    ]
    tmux = Tmux(f"stepview-server-bench-{workdir.name}", server_env(None))
    tmux.start(shlex.join(argv))
    deadline = time.monotonic() + ATTACH_TIMEOUT_S
    while f"@ {publish}" not in tmux.screen():
        if time.monotonic() > deadline or not tmux.alive():
            tmux.kill()
            raise RuntimeError(f"stepview --attach did not show the server; see {workdir}")
        time.sleep(0.2)
    return tmux


def server_for(
    variant: str, workdir: Path, servers: dict[str, GivenServer]
) -> tuple[ApiServer, str]:
    """The server ``variant`` is measured on, not yet started, and where its plug-in
    publishes: a fresh one, or the one given for its kind (``alone`` or ``plugin``)."""
    kind = "alone" if variant == "alone" else "plugin"
    if kind in servers:
        server = servers[kind]
        return server, server.publish or ""
    from stepview.engine.own.tiny_model import ensure_tiny_model

    port, publish = free_port(), f"tcp://127.0.0.1:{free_port()}"
    plugin = kind == "plugin"
    command = server_command(ensure_tiny_model(), port, plugin=plugin)
    env = server_env(publish if plugin else None)
    return ApiServer(command, env, port, workdir / f"server-{variant}.log"), publish


def measure(
    variant: str, args: argparse.Namespace, workdir: Path, servers: dict[str, GivenServer]
) -> tuple[float, float | None]:
    """One fresh (or given) server of ``variant`` under the load: completion tokens per
    second, and for an attached variant the share of the machine's CPU stepview used
    meanwhile."""
    server, publish = server_for(variant, workdir, servers)
    port = server.port
    tmux: Tmux | None = None
    try:
        server.start()
        complete(port, "warm up", 4)
        if variant.startswith("attached"):
            tmux = attach(publish, port, workdir, 0 if variant == UNNICED else None)
        before = tmux.cpu_seconds() if tmux is not None else 0.0
        tokens, span = send_load(port, args.requests, args.max_tokens)
        share = None
        if tmux is not None:
            share = (tmux.cpu_seconds() - before) / (span * (os.cpu_count() or 1))
        if tokens != args.requests * args.max_tokens:
            raise RuntimeError(f"{variant}: {tokens} tokens, expected every max_tokens")
        if tmux is not None:
            tmux.press("q")
            time.sleep(1.0)
            if not server.healthy():
                raise RuntimeError("the server stopped answering when stepview quit")
        return tokens / span, share
    finally:
        if tmux is not None:
            tmux.kill()
        server.kill()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each variant (default 5)")
    parser.add_argument(
        "--requests", type=int, default=64, help="completions per load (default 64)"
    )
    # 64 x 256 tokens: ~2 s of work for the server alone here (48 x 96 was 0.5 s, too short
    # to tell a few per cent from the noise of one HTTP round and one scheduling hiccup).
    parser.add_argument("--max-tokens", type=int, default=256, help="tokens each (default 256)")
    parser.add_argument("--quick", action="store_true", help="1 round of 8 x 16 (smoke test)")
    parser.add_argument("--keep", type=Path, help="keep server and stepview logs here")
    parser.add_argument(
        "--unniced",
        action="store_true",
        help=f"also measure {UNNICED}: attached with stepview at the server's CPU priority",
    )
    add_server_flags(parser, alone=True)
    args = parser.parse_args(argv)
    plug, unplugged = plugged(args), given(args.alone_server, None)
    if (plug is None) != (unplugged is None):
        print("server_overhead: --server and --alone-server go together", file=sys.stderr)
        return 2
    servers = {"plugin": plug, "alone": unplugged} if plug and unplugged else {}
    if args.quick:
        args.rounds, args.requests, args.max_tokens = 1, 8, 16
    if shutil.which("tmux") is None:
        print("server_overhead: the attached variant needs tmux", file=sys.stderr)
        return 2
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="stepview-server-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    variants = (*VARIANTS, UNNICED) if args.unniced else VARIANTS
    rates: dict[str, list[float]] = {variant: [] for variant in variants}
    shares: dict[str, list[float]] = {variant: [] for variant in variants}
    print(
        f"server_overhead: {args.rounds} rounds, {args.requests} completions x "
        f"{args.max_tokens} tokens, "
        + ("the servers given" if servers else "demo model, a fresh API server each"),
        flush=True,
    )
    for round_no in range(args.rounds):
        turn = round_no % len(variants)
        for variant in variants[turn:] + variants[:turn]:
            rate, share = measure(variant, args, workdir, servers)
            rates[variant].append(rate)
            used = ""
            if share is not None:
                shares[variant].append(share)
                used = f"   stepview used {share:6.1%} of the machine's CPU"
            print(f"  round {round_no + 1} {variant:<14} {rate:8.1f} tok/s{used}", flush=True)
    medians = {variant: statistics.median(values) for variant, values in rates.items()}
    for variant in variants:
        values = " ".join(f"{v:.1f}" for v in rates[variant])
        print(f"{variant:<14} median {medians[variant]:8.1f} tok/s   ({values})")
    for variant in variants:
        if shares[variant]:
            print(
                f"{variant:<14} stepview's CPU: median {statistics.median(shares[variant]):.1%} "
                "of the machine during the load"
            )
    if args.keep is None:
        shutil.rmtree(workdir, ignore_errors=True)
    alone = medians["alone"]
    unniced = f" {UNNICED}/alone={medians[UNNICED] / alone:.2f}" if args.unniced else ""
    print(
        f"ratios: plugin/alone={medians['plugin'] / alone:.2f} "
        f"attached/alone={medians['attached'] / alone:.2f}{unniced}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
