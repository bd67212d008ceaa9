"""`build` and `build_multi` inside `data_parallel(2)`, on each backend's engine.

`tests/distributed/build_worker.py` runs in a fresh process (two `torchrun`
processes on PyTorch). An unseeded `build` must shuffle alike on every rank:
each rank reads its slice of every global batch, so one epoch must train each
row exactly once, whichever rank drew which seed. `build_multi`, whose batches
are neither split over devices nor gathered, must refuse to build there.
"""

import json
import os
import subprocess
import sys

import keras
import pytest

WORKER = os.path.join(os.path.dirname(__file__), "build_worker.py")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_worker(out, backend):
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT,
               XLA_FLAGS="--xla_force_host_platform_device_count=2")
    command = [sys.executable, WORKER, str(out)]
    if backend == "torch":
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc_per_node", "2", *command[1:]]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    with open(out / "result.json") as f:
        return json.load(f)


@pytest.mark.slow
def test_build_on_two_devices(tmp_path):
    result = run_worker(tmp_path, keras.backend.backend())
    # 16 rows, batches of 4: every row once, none repeated, in the first epoch.
    assert result["rows"] == list(range(16))
    assert len(set(result["seeds"])) == 1, result["seeds"]
    assert result["build_multi_error"] is not None
    assert "multi-dataset run trains on one device" in result["build_multi_error"]
