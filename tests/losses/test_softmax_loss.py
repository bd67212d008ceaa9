"""SoftmaxLoss against a float64 log-softmax loop, trained through SoftmaxClassifierHead."""

import json
import math
import re

import keras
import numpy as np
import pytest

import keras_cosent
from keras_cosent.losses import SoftmaxLoss
from keras_cosent.losses import softmax_loss
from tests import kit
from tests.losses import helpers


def reference_cross_entropy(labels, logits):
    out = []
    for label, row in zip(labels, np.asarray(logits, "float64")):
        log_z = math.log(sum(math.exp(z) for z in row))
        out.append(log_z - row[int(label)])
    return np.array(out)


def test_matches_reference():
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=3.0, size=(10, 3)).astype("float32")
    labels = rng.integers(0, 3, 10).astype("int32")
    expected = reference_cross_entropy(labels, logits)
    per_pair = keras.ops.convert_to_numpy(softmax_loss(labels, logits, num_labels=3))
    np.testing.assert_allclose(per_pair, expected, rtol=1e-5)
    np.testing.assert_allclose(float(SoftmaxLoss(3)(labels, logits)), expected.mean(), rtol=1e-5)
    np.testing.assert_allclose(
        float(SoftmaxLoss()(labels[:, None], logits)), expected.mean(), rtol=1e-5
    )


@pytest.mark.parametrize("bad_label", [-1, 3, 1.5])
def test_invalid_labels_make_the_loss_nan(bad_label):
    logits = np.zeros((3, 3), "float32")
    labels = np.array([0, 1, bad_label], "float32")
    per_pair = keras.ops.convert_to_numpy(softmax_loss(labels, logits, num_labels=3))
    np.testing.assert_allclose(per_pair[:2], math.log(3), rtol=1e-6)
    assert np.isnan(per_pair[2])


def test_large_logits_and_float16_are_finite():
    logits = np.array([[60.0, -60.0, 0.0], [-60.0, 60.0, 0.0]], "float16")
    labels = np.array([1, 0], "int32")
    value, _ = helpers.assert_finite_value_and_grad(
        lambda z: keras.ops.mean(softmax_loss(labels, z)), logits
    )
    np.testing.assert_allclose(value, 120.0, rtol=1e-3)


def test_num_labels_mismatch_is_reported():
    with pytest.raises(ValueError, match=re.escape("`SoftmaxLoss(num_labels=3)` received logits for 4")):
        SoftmaxLoss(num_labels=3)(np.zeros(2), np.zeros((2, 4), "float32"))
    with pytest.raises(ValueError, match=r"\(batch, num_labels\)"):
        SoftmaxLoss()(np.zeros(2), np.zeros((2, 2, 4), "float32"))


@pytest.mark.parametrize("num_labels", [0, 1, 2.0, "3", True])
def test_bad_num_labels_is_rejected_with_its_value(num_labels):
    with pytest.raises(ValueError, match=re.escape(f"`num_labels`={num_labels!r}")):
        SoftmaxLoss(num_labels=num_labels)


def test_a_numpy_integer_num_labels_is_taken_as_an_int():
    # `np.unique(labels).size` is a NumPy integer; the config must stay JSON.
    loss = helpers.check_serialization(SoftmaxLoss(num_labels=np.int64(3)))
    assert loss.num_labels == 3 and type(loss.num_labels) is int
    assert json.dumps(SoftmaxLoss(num_labels=np.int64(3)).get_config())


def test_serialization_round_trip():
    assert helpers.check_serialization(SoftmaxLoss(num_labels=3)).num_labels == 3
    assert helpers.check_serialization(SoftmaxLoss()).num_labels is None


def test_fit_lowers_loss_and_saved_model_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(24, 6)).astype("float32")
    y = rng.integers(0, 3, 24).astype("int32")
    head = keras_cosent.layers.SoftmaxClassifierHead(num_labels=3)
    helpers.check_fit_and_saved_model(
        tmp_path, SoftmaxLoss(num_labels=3), x, y, columns=2, dim=8, head=head
    )


def test_mixed_float16():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(16, 6)).astype("float32")
    y = rng.integers(0, 3, 16).astype("int32")
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        head = keras_cosent.layers.SoftmaxClassifierHead(num_labels=3)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    helpers.check_mixed_float16(SoftmaxLoss(3), x, y, columns=2, dim=8, head=head)


def test_kit():
    """The shared checks (tests/kit.py): value, serialisation, float16 logits."""
    rng = np.random.default_rng(7)
    logits = rng.normal(size=(12, 3)).astype("float32")
    labels = rng.integers(0, 3, 12).astype("int32")
    expected = float(np.mean(reference_cross_entropy(labels, logits)))
    kit.run_loss_test(SoftmaxLoss(), labels, logits, expected)


def test_a_label_count_other_than_the_batch_names_both():
    logits = np.zeros((3, 3), "float32")
    with pytest.raises(ValueError, match=r"`SoftmaxLoss` expects one label per pair: `y_true` "
                                         r"of shape \(4,\) does not match 3 pairs"):
        SoftmaxLoss(num_labels=3)(np.array([0, 1, 1, 2]), logits)
