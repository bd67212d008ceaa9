"""`MultiTaskEncoder`'s per-task losses, against the task's loss called directly."""

import keras
import numpy as np
import pytest

from keras_cosent.losses import CoSENTLoss
from keras_cosent.losses import InfoNCELoss
from keras_cosent.losses import MultiTaskLoss
from keras_cosent.models import MultiTaskEncoder
from tests.models.conftest import make_tiny_encoder


@pytest.mark.parametrize("weights", [None, [1.0, 0.0, 0.0, 0.0], [0.5, 2.0, 1.0, 0.0]])
def test_a_batch_of_one_task_logs_its_loss_as_the_loss(weights):
    # loss_<task> dropped the sample weights, so it disagreed with `loss` (and
    # with the task's loss called with them) on a batch of that task alone.
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(5, 30, (4, 2, 6)).astype("int32"),
         "padding_mask": np.ones((4, 2, 6), bool), "segment_ids": np.zeros((4, 2, 6), "int32")}
    y = np.stack([np.arange(4.0), np.ones(4)], axis=1).astype("float32")  # all task 1
    weights = None if weights is None else np.array(weights, "float32")
    model = MultiTaskEncoder(make_tiny_encoder(num_layers=1))
    infonce = InfoNCELoss(temperature=0.1)
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=MultiTaskLoss(
        [CoSENTLoss(), infonce], names=["sts", "nli"], columns=[2, 2]))
    logs = model.evaluate(x, y, sample_weight=weights, verbose=0, return_dict=True)
    embeddings = model.predict_on_batch(x)
    expected = float(infonce(None, embeddings) if weights is None
                     else infonce(None, embeddings, sample_weight=weights))
    assert logs["loss_nli"] == pytest.approx(expected, rel=1e-5)
    assert logs["loss"] == pytest.approx(expected, rel=1e-5)
