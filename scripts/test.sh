#!/usr/bin/env bash
# The test command: installs what is missing, then runs the suite once per Keras
# backend (tensorflow, jax, torch) and prints one combined closing line.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m slow`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python scripts/run_tests.py "$@"
