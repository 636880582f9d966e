"""The long fuzz: every parser of outside input, for minutes, seed after seed (no vLLM).

``tests/fuzz/`` runs in the suite with a few examples per parser (Hypothesis' ``quick``
profile); this runs the same tests with the ``long`` profile (thousands of examples each),
one pytest run per seed, until ``--minutes`` have passed, and says which tests failed with
which seed, so that a failure is run again with ``pytest tests/fuzz --hypothesis-seed=SEED``
(``STEPVIEW_FUZZ=long``) and kept as an ``@example`` once fixed. Run it niced on a shared
machine: ``nice -n 10 python -m benchmarks fuzz --minutes 10``. Its last line:
``fuzz: minutes=M runs=R examples_per_test=N failed=F``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LONG_EXAMPLES = 2_000
"""The ``long`` profile's examples per test per run (tests/fuzz/profiles.py)."""


def run_once(seed: int, select: str | None) -> tuple[bool, list[str]]:
    """One pytest run of the fuzz set with ``seed``: whether it passed, the failed tests."""
    env = {**os.environ, "STEPVIEW_FUZZ": "long", "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "-q",
        "--timeout",
        "3600",
        f"--hypothesis-seed={seed}",
        "tests/fuzz",
    ]
    if select:
        command += ["-k", select]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    failed = re.findall(r"^FAILED (\S+)", done.stdout, re.MULTILINE)
    if done.returncode != 0:
        print(done.stdout[-6000:], flush=True)
    return done.returncode == 0, failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long (default 10)")
    parser.add_argument("--seed", type=int, default=1, help="the first seed (default 1)")
    parser.add_argument("-k", dest="select", help="only the tests pytest's -k selects")
    parser.add_argument("--quick", action="store_true", help="one run, for the smoke test")
    args = parser.parse_args(argv)
    end = time.monotonic() + args.minutes * 60
    seed, runs, failures = args.seed, 0, 0
    began = time.monotonic()
    while True:
        passed, failed = run_once(seed, args.select)
        runs += 1
        print(f"seed {seed}: {'passed' if passed else 'FAILED ' + ' '.join(failed)}", flush=True)
        failures += not passed
        seed += 1
        if args.quick or time.monotonic() >= end:
            break
    minutes = (time.monotonic() - began) / 60
    print(
        f"fuzz: minutes={minutes:.1f} runs={runs} examples_per_test={LONG_EXAMPLES} "
        f"failed={failures}"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
