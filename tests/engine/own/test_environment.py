"""prepare_vllm_environment and redirect_native_stderr, each in a fresh interpreter.

Both change process-global state (environment, ``sys.modules``, file descriptor 2), so they
run in a subprocess whose fd 2 is a pipe we can read, standing in for the terminal.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine


def _run(
    code: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_native_writes_go_to_log_python_stderr_to_terminal(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    proc = _run(
        """
        import ctypes, sys
        from pathlib import Path
        from stepview.engine.own.environment import redirect_native_stderr

        restore = redirect_native_stderr(Path(sys.argv[1]))
        libc = ctypes.CDLL(None)
        msg = b"native line via write(2)\\n"
        libc.write(2, msg, len(msg))
        print("python line via sys.__stderr__", file=sys.__stderr__, flush=True)
        print("python line via sys.stderr", file=sys.stderr, flush=True)
        restore()
        restore()  # idempotent
        libc.write(2, b"native after restore\\n", 21)
        print("restored", sys.stderr is sys.__stderr__, file=sys.stderr, flush=True)
        """,
        str(log),
    )
    assert proc.returncode == 0, proc.stderr
    terminal = proc.stderr
    assert "python line via sys.__stderr__" in terminal
    assert "python line via sys.stderr" in terminal
    assert "native after restore" in terminal
    assert "restored True" in terminal
    assert "native line via write(2)" not in terminal
    assert log.read_text() == "native line via write(2)\n"


def test_prepare_sets_defaults_blocks_cuda_extras_and_routes_logging(tmp_path: Path) -> None:
    log = tmp_path / "sub" / "vllm.log"
    env = {
        k: v
        for k, v in __import__("os").environ.items()
        if k not in {"OMP_NUM_THREADS", "TORCH_COMPILE_DISABLE", "VLLM_ENABLE_V1_MULTIPROCESSING"}
    }
    env["OMP_NUM_THREADS"] = "3"  # a user's own setting is kept
    proc = _run(
        """
        import logging, os, sys
        from pathlib import Path
        from stepview.engine.own.environment import cpu_build_installed, prepare_vllm_environment

        prepare_vllm_environment(Path(sys.argv[1]))
        prepare_vllm_environment(Path(sys.argv[1]))  # twice: no second handler
        print("mp", os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"])
        print("cfg", os.environ["VLLM_CONFIGURE_LOGGING"])
        print("omp", os.environ.get("OMP_NUM_THREADS"))
        print("compile", os.environ.get("TORCH_COMPILE_DISABLE"))
        print("cpu", cpu_build_installed())
        try:
            import torchvision  # noqa: F401
            print("torchvision importable")
        except ImportError:
            print("torchvision blocked")
        logger = logging.getLogger("vllm.some.child")
        logger.info("hello from a child logger")
        root = logging.getLogger("vllm")
        print("handlers", len(root.handlers), "propagate", root.propagate)
        """,
        str(log),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert "mp 0" in out
    assert "cfg 0" in out
    assert "omp 3" in out
    assert "handlers 1 propagate False" in out
    if "cpu True" in out:
        assert "compile 1" in out
        assert "torchvision blocked" in out
    assert "hello from a child logger" in log.read_text()
    assert "hello from a child logger" not in proc.stderr + proc.stdout
