#!/usr/bin/env bash
# Creates .venv with everything keras-cosent, its tests and its benchmarks need.
# Idempotent: a second run only checks that the pins are satisfied.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1; then PY="$cand"; break; fi
  done
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.keras-cosent-installed
# The editable install maps the top-level packages that existed when it ran, so
# a new one (e.g. recipes/ after keras_cosent/) must trigger a reinstall too.
want=$( { cat setup.cfg scripts/bootstrap.sh; ls -d -- */__init__.py; } | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "keras-cosent: installing into .venv (first run takes a few minutes)" >&2
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
# PyTorch first, pinned: anything that later asks for `torch` is then satisfied
# instead of pulling the CUDA wheels. The CPU build comes from pip's configuration
# (or PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu; README).
.venv/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]"
echo "$want" > "$stamp"
