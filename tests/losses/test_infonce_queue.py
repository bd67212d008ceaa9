"""InfoNCELoss with a queue of extra negatives (MoCo / ESimCSE) against a float64 softmax loop."""

import keras
import numpy as np
import pytest

from keras_cosent.losses import InfoNCELoss
from tests.losses.test_infonce_loss import cos
from tests.losses.test_infonce_loss import neg_log_softmax


def reference_queue_infonce(groups, tuples, queue, filled, temperature, mask):
    """Each anchor's softmax over every in-batch candidate plus every filled queue entry."""
    batch, columns = tuples.shape[:2]
    losses = []
    for i in range(batch):
        logits, target = [], None
        for column in range(1, columns):
            for row in range(batch):
                if (row, column) == (i, 1):
                    target = len(logits)
                elif mask and column == 1 and groups[row] == groups[i]:
                    continue
                logits.append(cos(tuples[i, 0], tuples[row, column]) / temperature)
        for entry, keep in zip(queue, filled):
            if keep:
                logits.append(cos(tuples[i, 0], entry) / temperature)
        losses.append(neg_log_softmax(logits, target))
    return np.array(losses)


def _data(batch=5, columns=2, size=7, dim=6, seed=0):
    rng = np.random.default_rng(seed)
    tuples = rng.normal(size=(batch, columns, dim)).astype("float32")
    queue = rng.normal(size=(size, dim)).astype("float32")
    return tuples, queue


@pytest.mark.parametrize("columns", [2, 4])
@pytest.mark.parametrize("mask", [False, True])
@pytest.mark.parametrize("filled_count", [0, 3, 7])
def test_equals_infonce_with_the_queue_appended_as_negatives(columns, mask, filled_count):
    tuples, queue = _data(columns=columns)
    groups = np.array([0, 1, 0, 2, 1])
    filled = np.arange(len(queue)) < filled_count
    loss = InfoNCELoss(temperature=0.07, mask_false_negatives=mask, reduction=None)
    value = loss(groups, {"embeddings": tuples, "queue": queue, "queue_mask": filled})
    expected = reference_queue_infonce(groups, tuples, queue, filled, 0.07, mask)
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    np.testing.assert_allclose(keras.ops.convert_to_numpy(value), expected, rtol=1e-5, atol=1e-5)


def test_an_empty_queue_is_plain_infonce_and_a_missing_mask_keeps_all():
    tuples, queue = _data()
    groups = np.arange(5)
    loss = InfoNCELoss(reduction=None)
    plain = keras.ops.convert_to_numpy(loss(groups, tuples))
    empty = loss(groups, {"embeddings": tuples, "queue": queue,
                          "queue_mask": np.zeros(len(queue), bool)})
    np.testing.assert_allclose(keras.ops.convert_to_numpy(empty), plain, rtol=1e-6, atol=1e-6)
    full = loss(groups, {"embeddings": tuples, "queue": queue})
    expected = reference_queue_infonce(groups, tuples, queue, [True] * len(queue), 0.05, False)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(full), expected, rtol=1e-5, atol=1e-5)
    # More negatives can only raise each anchor's loss.
    assert np.all(keras.ops.convert_to_numpy(full) > plain)


def test_float16_inputs_give_float32_close_to_float32():
    tuples, queue = _data()
    loss = InfoNCELoss()
    filled = np.arange(len(queue)) < 4
    exact = loss(np.arange(5), {"embeddings": tuples, "queue": queue, "queue_mask": filled})
    half = loss(np.arange(5), {"embeddings": tuples.astype("float16"),
                               "queue": queue.astype("float16"), "queue_mask": filled})
    assert keras.backend.standardize_dtype(half.dtype) == "float32"
    np.testing.assert_allclose(float(half), float(exact), rtol=1e-2, atol=1e-2)


def test_a_dict_without_queue_is_refused():
    tuples, _ = _data()
    with pytest.raises(ValueError, match="queue"):
        InfoNCELoss()(np.arange(5), {"embeddings": tuples})
