#!/usr/bin/env bash
# Set up (once) what the tests need and run them: lint, types, the layer contracts, then pytest.
#
#   ./test.sh            the whole suite, real vLLM on the CPU and tmux included (what CI runs)
#   ./test.sh --quick    the quick loop: no real engine, no tmux, vLLM and torch hidden
#
# Both run on pytest-xdist workers (tests/scheduling.py): a test module is a unit of work, the
# tests of the shared API servers and the heavy ones (tmux, engine-core processes) are each one
# group run one after another, longest units first. The whole suite runs vLLM on two workers
# (one per core) and the tests without vLLM, which mostly wait on screens, on a third; the
# quick loop has only those and runs six (on two cores: they wait far more than they compute).
# The slowest 25 tests are listed at the end.
# `./test.sh -n 0` runs everything in one process, in order.
#
# Other arguments go to pytest:  ./test.sh -k driver   ./test.sh --quick tests/ui
set -euo pipefail
cd "$(dirname "$0")"
quick=0
if [ "${1:-}" = --quick ]; then
  quick=1
  shift
fi
scripts/setup.sh test
export HF_HUB_OFFLINE=1
# Python's byte-code caches, even where the environment turns them off (this machine's does):
# without them every worker compiles and assertion-rewrites every test module anew (8 s of a
# worker's collection, 3 s with them) and every child process compiles what it imports.
unset PYTHONDONTWRITEBYTECODE
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports --no-cache
parallel=(--dist loadgroup --no-loadscope-reorder)
if [ "$quick" = 1 ]; then
  # tests/hide_vllm/sitecustomize.py makes vLLM, torch and transformers unimportable in every
  # process of the run: a test that needs them and is not marked `engine` fails at once.
  export PYTHONPATH="$PWD/tests/hide_vllm${PYTHONPATH:+:$PYTHONPATH}"
  exec .venv/bin/python -m pytest -n 6 "${parallel[@]}" -m "not engine and not e2e" "$@"
fi
# vLLM releases besides the installed one, for the scheduler conformance suite (once).
.venv/bin/python -m tests.conformance.wheels
exec .venv/bin/python -m pytest -n 3 "${parallel[@]}" --durations=25 "$@"
