#!/usr/bin/env bash
# The main job: fine-tunes the packaged all-MiniLM-L6-v2 with CoSENT on the packaged
# demo set, evaluates it, exports it for TF Serving and audits the export. A few
# minutes on 2 CPU cores. Each run trains afresh into runs/demo (replacing the
# previous demo run there); set KERAS_BACKEND to pick tensorflow, jax or torch.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
kc=.venv/bin/keras-cosent
run=runs/demo

"$kc" train --recipe sts-cosent --output "$run" --overwrite
"$kc" evaluate "$run" recipes/data/demo-dev.tsv --format pair-tsv --json "$run/dev-evaluation.json"
"$kc" export "$run" "$run/export" --version 1 --overwrite
"$kc" check-serving "$run/export/1"
