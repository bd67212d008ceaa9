import re

import keras
import numpy as np
import pytest

import keras_cosent
from tests import kit
from tests.losses import helpers
from tests.losses.test_infonce_loss import reference_infonce as infonce_reference
from tests.losses.test_supcon_loss import reference as supcon_reference


def test_matches_weighted_sum_of_reference():
    x = np.random.default_rng(0).normal(size=(6, 8))
    y = np.array([0, 1, 0, 1, 2, 2])
    loss = keras_cosent.losses.MatryoshkaLoss(
        keras_cosent.losses.SupConLoss(temperature=0.1), dims=(8, 4, 2), weights=(1.0, 0.5, 0.25)
    )
    expected = sum(w * supcon_reference(y, x[:, :d], 0.1) for d, w in zip((8, 4, 2), (1.0, 0.5, 0.25)))
    np.testing.assert_allclose(float(loss(y, x.astype("float32"))), expected, rtol=1e-5)


def test_sample_weight_reaches_the_inner_loss_rows():
    # InfoNCE weighs each anchor: sum(loss_i * w_i) / batch on every slice. The
    # weights used to multiply the summed scalar instead (mean(loss) * mean(w)).
    tuples = np.random.default_rng(2).normal(size=(6, 2, 8)).astype("float32")
    weights = np.array([1.0, 0.0, 0.0, 2.0, 0.5, 0.0], "float32")
    loss = keras_cosent.losses.MatryoshkaLoss(
        keras_cosent.losses.InfoNCELoss(), dims=(8, 4), weights=(1.0, 0.5))
    expected = sum(
        w * np.sum(infonce_reference(np.arange(6), tuples[..., :d], 0.05, False, False) * weights) / 6
        for d, w in zip((8, 4), (1.0, 0.5)))
    got = loss(np.zeros(6, "float32"), tuples, sample_weight=weights)
    np.testing.assert_allclose(float(got), expected, rtol=1e-5)
    assert keras.backend.standardize_dtype(got.dtype) == "float32"
    # Without weights, as before: the plain sum.
    plain = sum(w * infonce_reference(np.arange(6), tuples[..., :d], 0.05, False, False).mean()
                for d, w in zip((8, 4), (1.0, 0.5)))
    np.testing.assert_allclose(float(loss(np.zeros(6, "float32"), tuples)), plain, rtol=1e-5)


def test_truncate_embeddings():
    x = np.random.default_rng(1).normal(size=(3, 6)).astype("float32")
    got = np.asarray(keras.ops.convert_to_numpy(keras_cosent.utils.truncate_embeddings(x, 4)))
    ref = x[:, :4] / np.linalg.norm(x[:, :4], axis=1, keepdims=True)
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    # A NumPy integer (a dims array's element) is an int, as in check_truncate_dim.
    got = keras.ops.convert_to_numpy(keras_cosent.utils.truncate_embeddings(x, np.int64(4)))
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    with pytest.raises(ValueError, match="dim"):
        keras_cosent.utils.truncate_embeddings(x, 7)
    with pytest.raises(ValueError, match=r"`dim`=True"):
        keras_cosent.utils.truncate_embeddings(x, True)
    with pytest.raises(ValueError, match="dim"):
        keras_cosent.utils.truncate_embeddings(x, 0)


def test_validation():
    inner = keras_cosent.losses.NTXentLoss()
    with pytest.raises(ValueError, match="dims"):
        keras_cosent.losses.MatryoshkaLoss(inner, dims=(4, 0))
    with pytest.raises(ValueError, match="weights"):
        keras_cosent.losses.MatryoshkaLoss(inner, dims=(4, 2), weights=(1.0,))
    with pytest.raises(ValueError, match="loss"):
        keras_cosent.losses.MatryoshkaLoss("ntxent", dims=(4,))
    loss = keras_cosent.losses.MatryoshkaLoss(inner, dims=(16, 4))
    with pytest.raises(ValueError, match="16"):
        loss(np.zeros(2), np.ones((2, 2, 8), "float32"))


def test_an_inner_losss_shape_error_names_the_shape_it_was_given():
    # InfoNCE said "Received shape (4, 4)", the slice, for a (4, 8) y_pred (probe).
    loss = keras_cosent.losses.MatryoshkaLoss(keras_cosent.losses.InfoNCELoss(), dims=(4,))
    with pytest.raises(ValueError, match=re.escape(
            "(`MatryoshkaLoss` gave it `y_pred` of shape (4, 8) cut to its first 4 "
            "coordinates)")):
        loss(np.zeros(4), np.ones((4, 8), "float32"))


def test_cosines_instead_of_embeddings_are_refused():
    # (batch,) cosines: the last axis is the batch, which dims 8 and 4 cut and
    # re-normalised into a finite loss without a word.
    loss = keras_cosent.losses.MatryoshkaLoss(keras_cosent.losses.CoSENTLoss(), dims=(8, 4))
    cosines = np.linspace(-1, 1, 16).astype("float32")
    with pytest.raises(ValueError, match=re.escape("not one value per row (cosines). Received "
                                                   "shape (16,)")):
        loss(np.arange(16, dtype="float32"), cosines)
    with pytest.raises(ValueError, match=re.escape("Received shape (16,)")):
        keras_cosent.losses.matryoshka_loss(np.arange(16, dtype="float32"), cosines,
                                            keras_cosent.losses.CoSENTLoss(), dims=(8, 4))


@pytest.mark.parametrize(
    "kwargs, shown",
    [
        ({"dims": (4, 2), "weights": (1.0, float("nan"))}, "`weights`=nan"),
        ({"dims": (4, 2), "weights": (1.0, -1.0)}, "`weights`=-1.0"),
        ({"dims": (4, 2), "weights": 1.0}, "`weights`=1.0"),
        ({"dims": 4}, "`dims`=4"),
        ({"dims": (4, 4)}, "Received: `dims`=(4, 4)"),
        ({"dims": (8, 4, 8, 4)}, "`dims` repeats [4, 8]; each dimension counts once"),
        ({"dims": (4, 2.0)}, "`dims`=(4, 2.0)"),
        # A loss of 0 whatever the embeddings; JointLoss refused it, this took it.
        ({"dims": (4, 2), "weights": (0, 0.0)}, "at least one dim a positive weight. "
                                                "Received: `weights`=(0, 0.0)"),
    ],
)
def test_bad_dims_and_weights_are_named_with_their_value(kwargs, shown):
    with pytest.raises(ValueError, match=re.escape(shown)):
        keras_cosent.losses.MatryoshkaLoss(keras_cosent.losses.SupConLoss(), **kwargs)


def test_dims_in_any_order_give_the_same_loss_and_numpy_ints_are_taken():
    y = np.array([0, 1, 0, 1])
    x = np.random.default_rng(4).normal(size=(4, 8)).astype("float32")
    inner = keras_cosent.losses.SupConLoss()
    ascending = keras_cosent.losses.MatryoshkaLoss(inner, dims=np.array([2, 4, 8]))
    descending = keras_cosent.losses.MatryoshkaLoss(inner, dims=(8, 4, 2), weights=(1, 1, 0))
    assert ascending.dims == (2, 4, 8) and type(ascending.dims[0]) is int
    expected = sum(supcon_reference(y, x[:, :d], 0.1) for d in (8, 4))
    np.testing.assert_allclose(float(descending(y, x)), expected, rtol=1e-5)


def test_serialization_round_trip_with_inner_loss():
    loss = keras_cosent.losses.MatryoshkaLoss(
        keras_cosent.losses.TripletLoss(margin=0.3), dims=(8, 4), weights=(1.0, 2.0)
    )
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert isinstance(restored.loss, keras_cosent.losses.TripletLoss)
    assert restored.loss.margin == 0.3
    assert restored.get_config() == loss.get_config()
    x = np.random.default_rng(2).normal(size=(4, 3, 8)).astype("float32")
    np.testing.assert_allclose(float(restored(np.zeros(4), x)), float(loss(np.zeros(4), x)), rtol=1e-6)


def test_finite_at_extremes_and_fit_step():
    a = np.eye(2, 4, dtype="float32")
    loss = keras_cosent.losses.MatryoshkaLoss(keras_cosent.losses.NTXentLoss(temperature=1e-3), dims=(4, 2))
    helpers.assert_finite_value_and_grad(lambda y: loss(np.zeros(2), y), np.stack([a, -a], axis=1))
    x = np.random.default_rng(3).normal(size=(8, 6)).astype("float32")
    losses = helpers.fit_history(helpers.embedding_model(2, 4), loss, x, np.zeros(8), epochs=2)
    assert np.all(np.isfinite(losses))


def test_kit():
    """The shared checks (tests/kit.py): value, serialisation, float16 inputs."""
    labels = np.array([0, 1, 0, 2, 1, 3, 2, 0], "int32")
    y_pred = np.random.default_rng(7).normal(size=(8, 16)).astype("float32")
    loss = keras_cosent.losses.MatryoshkaLoss(keras_cosent.losses.SupConLoss(), dims=(16, 8, 4))
    expected = sum(supcon_reference(labels, y_pred[:, :d], 0.1) for d in (16, 8, 4))
    kit.run_loss_test(loss, labels, y_pred, expected)
