"""InfoNCELoss against an explicit float64 softmax loop (hard negatives, symmetric, masking)."""

import math
import re

import keras
import numpy as np
import pytest

from keras_cosent.losses import InfoNCELoss
from keras_cosent.losses import infonce_loss
from tests import kit
from tests.losses import helpers


def cos(u, v):
    u, v = np.asarray(u, "float64"), np.asarray(v, "float64")
    return float(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))


def neg_log_softmax(logits, target):
    top = max(logits)
    log_z = top + math.log(sum(math.exp(z - top) for z in logits))
    return log_z - logits[target]


def reference_infonce(groups, tuples, temperature, symmetric, mask):
    batch, columns = tuples.shape[0], tuples.shape[1]
    # Candidates in column order: every row's positive, then every row's
    # first hard negative, and so on.
    candidates = []
    for column in range(1, columns):
        for row in range(batch):
            candidates.append((row, column))
    losses = []
    for i in range(batch):
        logits, target = [], None
        for row, column in candidates:
            if (row, column) == (i, 1):
                target = len(logits)
            elif mask and column == 1 and groups[row] == groups[i]:
                continue
            logits.append(cos(tuples[i, 0], tuples[row, column]) / temperature)
        forward = neg_log_softmax(logits, target)
        if not symmetric:
            losses.append(forward)
            continue
        logits, target = [], None
        for j in range(batch):
            if j == i:
                target = len(logits)
            elif mask and groups[j] == groups[i]:
                continue
            logits.append(cos(tuples[i, 1], tuples[j, 0]) / temperature)
        losses.append((forward + neg_log_softmax(logits, target)) / 2)
    return np.array(losses)


@pytest.mark.parametrize("hard_negatives", [0, 2])
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("mask", [False, True])
def test_matches_reference(hard_negatives, symmetric, mask):
    rng = np.random.default_rng(0)
    tuples = rng.normal(size=(8, 2 + hard_negatives, 6)).astype("float32")
    groups = np.array([0, 1, 0, 2, 3, 1, 0, 4], "int32")
    expected = reference_infonce(groups, tuples, 0.1, symmetric, mask)
    per_row = infonce_loss(
        groups, tuples, temperature=0.1, symmetric=symmetric, mask_false_negatives=mask
    )
    np.testing.assert_allclose(keras.ops.convert_to_numpy(per_row), expected, rtol=1e-5)
    loss = InfoNCELoss(temperature=0.1, symmetric=symmetric, mask_false_negatives=mask)
    np.testing.assert_allclose(float(loss(groups, tuples)), expected.mean(), rtol=1e-5)


def test_masking_changes_the_loss_only_for_duplicated_groups():
    rng = np.random.default_rng(1)
    tuples = rng.normal(size=(4, 3, 5)).astype("float32")
    groups = np.array([7, 7, 8, 9], "int32")
    plain = keras.ops.convert_to_numpy(infonce_loss(groups, tuples, temperature=1.0))
    masked = keras.ops.convert_to_numpy(
        infonce_loss(groups, tuples, temperature=1.0, mask_false_negatives=True)
    )
    assert np.all(masked[:2] < plain[:2])
    np.testing.assert_allclose(masked[2:], plain[2:], rtol=1e-6)


def test_one_group_without_hard_negatives_leaves_only_the_own_positive():
    tuples = np.random.default_rng(2).normal(size=(5, 2, 4)).astype("float32")
    loss = InfoNCELoss(mask_false_negatives=True, symmetric=True)
    assert float(loss(np.zeros(5, "int32"), tuples)) == 0.0


def test_y_true_is_ignored_without_masking():
    tuples = np.random.default_rng(3).normal(size=(6, 3, 4)).astype("float32")
    loss = InfoNCELoss()
    np.testing.assert_array_equal(
        float(loss(np.zeros(6), tuples)), float(loss(np.arange(6), tuples))
    )


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_identical_and_opposite_embeddings_have_finite_gradients(dtype):
    u = np.random.default_rng(4).normal(size=(4, 6))
    u[1] = u[0]  # two identical rows: identical anchors and positives
    tuples = np.stack([u, u, -u], axis=1).astype(dtype)
    groups = np.array([0, 0, 1, 2], "int32")
    # The symmetric, masked path exercises every -inf branch at once.
    value, _ = helpers.assert_finite_value_and_grad(
        lambda t: keras.ops.mean(
            infonce_loss(groups, t, temperature=0.01, symmetric=True,
                         mask_false_negatives=True)
        ),
        tuples,
    )
    expected = reference_infonce(groups, tuples.astype("float64"), 0.01, True, True)
    np.testing.assert_allclose(value, expected.mean(), rtol=1e-3, atol=1e-3)


def test_float16_inputs_match_float32_reference():
    tuples = np.random.default_rng(5).normal(size=(6, 3, 8)).astype("float16")
    expected = reference_infonce(np.arange(6), tuples.astype("float64"), 0.05, False, False)
    np.testing.assert_allclose(float(InfoNCELoss()(np.arange(6), tuples)), expected.mean(), rtol=1e-2)


def test_simcse_dropout_gives_two_views_in_training_only():
    """Unsupervised SimCSE: the same sentence twice, views differ by dropout."""
    features = keras.Input((2, 6))
    hidden = keras.layers.Dense(16)(features)
    outputs = keras.layers.Dropout(0.3)(hidden)
    encoder = keras.Model(features, outputs)
    sentences = np.random.default_rng(6).normal(size=(8, 6)).astype("float32")
    same_twice = np.stack([sentences, sentences], axis=1)
    loss = InfoNCELoss(temperature=0.05)

    train_views = keras.ops.convert_to_numpy(encoder(same_twice, training=True))
    assert not np.allclose(train_views[:, 0], train_views[:, 1])
    second_pass = keras.ops.convert_to_numpy(encoder(same_twice, training=True))
    assert not np.allclose(train_views, second_pass)
    assert float(loss(np.zeros(8), train_views)) > 0.0

    eval_views = keras.ops.convert_to_numpy(encoder(same_twice, training=False))
    np.testing.assert_array_equal(eval_views[:, 0], eval_views[:, 1])


@pytest.mark.parametrize(
    "kwargs, shown",
    [
        ({"temperature": 0}, "`temperature`=0"),
        ({"temperature": -0.05}, "`temperature`=-0.05"),
        ({"temperature": float("nan")}, "`temperature`=nan"),
        ({"temperature": "0.05"}, "`temperature`='0.05'"),
        # 0 or subnormal in float32: the logits were inf and the loss NaN.
        ({"temperature": 1e-39}, "smallest normal value 1.175e-38 to its maximum 3.403e+38 "
                                 "(it is computed in float32). Received: `temperature`=1e-39"),
        ({"temperature": 10**400}, "`temperature` should be a positive float"),  # OverflowError
        ({"symmetric": 1}, "`symmetric`=1"),
        ({"mask_false_negatives": "yes"}, "`mask_false_negatives`='yes'"),
    ],
)
def test_bad_arguments_are_rejected_with_their_value(kwargs, shown):
    with pytest.raises(ValueError, match=re.escape(shown)):
        InfoNCELoss(**kwargs)


@pytest.mark.parametrize("shape", [(4, 8), (4, 1, 8), (4,)])
def test_bad_shapes_are_rejected(shape):
    with pytest.raises(ValueError, match=r"\(batch, 2 \+ k, dim\)"):
        InfoNCELoss()(np.zeros(4), np.ones(shape, "float32"))


def test_serialization_round_trip():
    loss = InfoNCELoss(temperature=0.02, symmetric=True, mask_false_negatives=True)
    restored = helpers.check_serialization(loss)
    assert (restored.temperature, restored.symmetric, restored.mask_false_negatives) == (
        0.02, True, True
    )


def test_fit_lowers_loss_and_saved_model_round_trip(tmp_path):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(16, 6)).astype("float32")
    groups = np.repeat(np.arange(8), 2).astype("int32")
    loss = InfoNCELoss(temperature=0.1, symmetric=True, mask_false_negatives=True)
    helpers.check_fit_and_saved_model(tmp_path, loss, x, groups, columns=3, dim=8)


def test_mixed_float16():
    x = np.random.default_rng(8).normal(size=(16, 6)).astype("float32")
    helpers.check_mixed_float16(InfoNCELoss(), x, np.zeros(16, "int32"), columns=3, dim=8)


@pytest.mark.parametrize("symmetric", [False, True])
def test_matches_sentence_transformers(symmetric):
    import sentence_transformers.sentence_transformer.losses as st_losses
    import torch
    tuples = np.random.default_rng(9).normal(size=(8, 3 if not symmetric else 2, 6))
    tuples = tuples.astype("float32")
    directions = ("query_to_doc", "doc_to_query") if symmetric else ("query_to_doc",)
    peer = st_losses.MultipleNegativesRankingLoss(
        model=None, scale=20.0, directions=directions, partition_mode="per_direction"
    )
    columns = [torch.tensor(tuples[:, c]) for c in range(tuples.shape[1])]
    expected = float(peer.compute_loss_from_embeddings(columns, None))
    got = float(InfoNCELoss(temperature=0.05, symmetric=symmetric)(np.zeros(8), tuples))
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_kit():
    """The shared checks (tests/kit.py); temperature 0.05 scales a float16 cosine error
    of 1e-3 to 2e-2 in a logit, so the float16 tolerance is 5e-2."""
    rng = np.random.default_rng(7)
    y_pred = rng.normal(size=(8, 3, 16)).astype("float32")
    groups = np.arange(8, dtype="int32")
    expected = float(np.mean(reference_infonce(groups, y_pred, 0.05, False, True)))
    kit.run_loss_test(InfoNCELoss(), groups, y_pred, expected, mixed_rtol=5e-2)
