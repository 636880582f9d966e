#!/usr/bin/env bash
# Set up (once) and run stepview. With no --model it runs the built-in demo model on the CPU.
# Any flag is passed on:  ./run.sh --headless   ./run.sh --model /path/to/model
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh run
exec .venv/bin/stepview "$@"
