#!/usr/bin/env bash
# Set up (once) what the tests need and run the whole suite: lint, types, then pytest.
# Extra arguments go to pytest:  ./test.sh -k driver   ./test.sh -m "not engine"
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh test
export HF_HUB_OFFLINE=1
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports --no-cache
exec .venv/bin/python -m pytest "$@"
