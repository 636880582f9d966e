"""A stand-in for vLLM's engine core in a process of its own, for tests of a core that hangs.

Tests of what stepview does when the engine core stops answering (``kill -STOP``) need an
engine whose core runs in a child process. vLLM's takes ~60 s to start here (its core and
its worker each ``import vllm`` and torch again), for a test whose subject is not vLLM but
stepview's way out past it. One real case of each way out stays on vLLM
(``test_stuck_engine``); the others run on this stand-in, which is faithful in everything
stepview's stuck-engine handling looks at:

* **The processes**: a child named ``VLLM::EngineCore`` (vLLM sets its title with
  ``setproctitle``, as here) that starts a ``VLLM::Worker`` child of its own, as vLLM's CPU
  core does. stepview knows the engine's processes only from its process tree
  (:class:`~stepview.engine.own.processes.EngineProcesses`): the same tree, the same names.
* **The step**: each ``step()`` is a round trip to the core that waits with no timeout, as
  vLLM's client waits on its output queue; a stopped core leaves the driver thread blocked in
  ``step()`` for ever, exactly as with vLLM (and a dead one ends the step with an error).
* **The shutdown**: SIGTERM, a join of up to 2.5 s, then SIGKILL (vLLM's ``MPClient.shutdown``
  with stepview's grace), the core taking its worker with it. A core continued after
  ``kill -STOP`` and told SIGTERM takes a while to leave, and its worker ignores SIGTERM: both
  need stepview's SIGKILL, as vLLM's did here ("2 needed SIGKILL" in the log).

What the requests produce is :class:`FakeEngine`'s (vLLM's scheduling in miniature, the same
snapshots): the screens and results files the tests read are of the same shape.

    python tests/reliability/fake_core.py core|worker   (started by the engine, not by hand)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import IO, Any

CORE_NAME = "VLLM::EngineCore"
WORKER_NAME = "VLLM::Worker"
SHUTDOWN_GRACE_S = 2.5
"""As stepview's ``CORE_EXIT_GRACE_S``: how long the core may take to exit after SIGTERM."""
_PING = b"s"


def install() -> type[Any]:
    """Make stepview's live engine this stand-in (run before ``stepview.cli.main``): no
    ``import vllm``, no flags parsed by vLLM's parser. Returns the engine class, for faults
    that patch its ``step``."""
    from stepview.engine.own import live
    from stepview.engine.own.engine_args import ParsedEngineArgs
    from stepview.engine.own.vllm_engine import VllmEngine
    from stepview.testing.fake_engine import FakeEngine

    class CoreBackedEngine(FakeEngine):
        """:class:`FakeEngine` whose every step waits on the fake core's answer."""

        def __init__(self) -> None:
            super().__init__(model="fake-core")
            self._core: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, __file__, "core"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
            self._round_trip()  # the core says so once its worker has started

        def _round_trip(self) -> None:
            core = self._core
            assert core is not None and core.stdin is not None and core.stdout is not None
            core.stdin.write(_PING)
            core.stdin.flush()
            if core.stdout.read(1) != _PING:  # blocks while the core is stopped, as vLLM's
                raise RuntimeError("the engine core died")

        def step(self) -> Any:
            self._round_trip()
            return super().step()

        def shutdown(self) -> None:
            super().shutdown()
            core, self._core = self._core, None
            if core is None:
                return
            core.terminate()
            try:
                core.wait(SHUTDOWN_GRACE_S)
            except subprocess.TimeoutExpired:
                core.kill()
                core.wait()

    def parse(argv: list[str], say: Callable[[str], None] | None = None) -> ParsedEngineArgs:
        return ParsedEngineArgs(
            engine_args=None,  # type: ignore[arg-type]
            demo_model=False,
            model_label="fake-core",
            as_dict={},
        )

    def create(*args: Any, **kwargs: Any) -> CoreBackedEngine:
        return CoreBackedEngine()

    live.parse_engine_args = parse  # type: ignore[attr-defined]
    VllmEngine.create = create  # type: ignore[method-assign,assignment]
    return CoreBackedEngine


def _name(title: str) -> None:
    import setproctitle  # comes with vLLM, which names its processes with it

    setproctitle.setproctitle(title)


def _core(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """Start the worker and wait until it has its name, then answer each step until stdin
    closes. SIGTERM does not end it (vLLM's core, continued after ``kill -STOP``, still ran
    0.5 s after SIGTERM here, past stepview's grace): held, not timed, so that stepview must
    SIGKILL it on any machine, and its worker, re-parented away when the core dies, as with
    vLLM."""
    _name(CORE_NAME)
    worker = subprocess.Popen(
        [sys.executable, __file__, "worker"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    )
    assert worker.stdout is not None
    worker.stdout.read(1)

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while stdin.read(1) == _PING:
        stdout.write(_PING)
        stdout.flush()
    worker.kill()  # stdin closed: the engine was shut down as vLLM's client does it
    os._exit(0)


def _worker(stdout: IO[bytes]) -> None:
    """Named, it says so, then waits; SIGTERM does not end it (vLLM's CPU worker needed
    SIGKILL here too): its core, or stepview, kills it."""
    _name(WORKER_NAME)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stdout.write(_PING)
    stdout.flush()
    while True:
        signal.pause()


if __name__ == "__main__":
    if sys.argv[1] == "core":
        _core(sys.stdin.buffer, sys.stdout.buffer)
    else:
        _worker(sys.stdout.buffer)
