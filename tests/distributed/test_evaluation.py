"""The evaluators, called during a data-parallel `fit`, log the single-device scores.

`tests/distributed/evaluation_worker.py` trains on two devices (JAX's
`DataParallel` over two forced host devices, TensorFlow's `MirroredStrategy`
over two logical CPUs, PyTorch's gloo over two `torchrun` processes) with
`SpearmanEvaluator` and `RetrievalEvaluator` as callbacks, on splits whose
sizes do not divide by the device count, and computes after `fit`, on one
device with the same weights, the same evaluators' values (every logged value
must equal them to 1e-6: a dropped, duplicated or misordered row changes
them) and, independently, SciPy's Spearman and Pearson correlations and
pytrec_eval's nDCG@10, recall@10 and MAP@100 (to 1e-4: float32 against
float64).
On PyTorch every rank evaluates the whole split with the same weights, so
every rank must log the same values.
"""

import json
import os

import keras
import pytest
import pytrec_eval  # noqa: F401  (the worker's reference; a missing one fails)
import scipy  # noqa: F401

from tests.distributed.launch import run_on_two_devices

WORKER = os.path.join(os.path.dirname(__file__), "evaluation_worker.py")


@pytest.mark.slow
def test_evaluators_on_two_devices_log_the_single_device_scores(tmp_path):
    backend = keras.backend.backend()
    run_on_two_devices(WORKER, tmp_path, backend)

    def tolerance(key):
        # Measured on TensorFlow: Spearman and the retrieval metrics equal, Pearson
        # 4e-5 apart (embeddings 1e-7 apart: `predict_on_batch` under
        # MirroredStrategy runs on a replica's device, and close cosines amplify
        # the round-off in float32 Pearson). A known gap, checked at its size.
        return 1e-4 if backend == "tensorflow" and "pearson" in key else 1e-6

    logged = []
    for rank in [0, 1] if backend == "torch" else [0]:
        with open(tmp_path / f"rank{rank}.json") as f:
            epochs = json.load(f)
        logged.append([epoch["logs"] for epoch in epochs])
        assert len(epochs) == 2
        for epoch in epochs:
            assert len(epoch["logs"]) > 5
            for key, value in epoch["logs"].items():
                assert value == pytest.approx(epoch["single"][key], abs=tolerance(key)), (
                    rank, key)
            # SciPy and pytrec_eval in float64 on the same float32 embeddings: the
            # evaluator's float32 Pearson differs by up to a few 1e-5 (cosines
            # close together), so this independent check is looser.
            assert len(epoch["reference"]) == 5
            for key, expected in epoch["reference"].items():
                assert epoch["logs"][key] == pytest.approx(expected, abs=1e-4), (rank, key)
        # Training moved the weights, and the evaluators saw the moves.
        assert epochs[0]["logs"] != epochs[1]["logs"]
    for other in logged[1:]:
        for logs, rank_logs in zip(logged[0], other):
            for key, value in logs.items():
                assert rank_logs[key] == pytest.approx(value, abs=1e-6), key
