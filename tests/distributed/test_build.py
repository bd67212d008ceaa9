"""`build` and `build_multi` inside `data_parallel(2)`, on each backend's engine.

`tests/distributed/build_worker.py` runs in a fresh process (two `torchrun`
processes on PyTorch). An unseeded `build` must shuffle alike on every rank:
each rank reads its slice of every global batch, so one epoch must train each
row exactly once, whichever rank drew which seed. `build_multi`, whose batches
are neither split over devices nor gathered, must refuse to build there.
"""

import json
import os

import keras
import pytest

from tests.distributed.launch import run_on_two_devices

WORKER = os.path.join(os.path.dirname(__file__), "build_worker.py")


def run_worker(out, backend):
    run_on_two_devices(WORKER, out, backend)
    with open(out / "result.json") as f:
        return json.load(f)


@pytest.mark.slow
def test_build_on_two_devices(tmp_path):
    result = run_worker(tmp_path, keras.backend.backend())
    # 16 rows, batches of 4: every row once, none repeated, in the first epoch.
    assert result["rows"] == list(range(16))
    assert len(set(result["seeds"])) == 1, result["seeds"]
    assert result["build_multi_error"] is not None
    assert len(result["losses"]) == 1 and result["losses"][0] > 0, result["losses"]
    assert "multi-dataset run trains on one device" in result["build_multi_error"]
    # An encoder created before the context: `fit` failed inside JAX or TensorFlow
    # (devices, `colocate_vars_with`); each PyTorch process holds its own copy.
    if keras.backend.backend() == "torch":
        assert result["outside_error"] is None
    else:
        assert "were created outside this `keras_cosent.distributed.data_parallel(2)` " \
               "context: create or load the encoder inside it" in result["outside_error"]
