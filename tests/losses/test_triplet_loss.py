import keras
import numpy as np
import pytest

import keras_cosent
from tests import kit
from tests.losses import helpers


def _d(u, v, distance):
    if distance == "cosine":
        return 1.0 - float(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))
    return float(np.linalg.norm(u - v))


def reference(y_pred, margin, distance):
    return float(np.mean([
        max(0.0, _d(r[0], r[1], distance) - _d(r[0], r[2], distance) + margin) for r in y_pred
    ]))


def reference_batch_hard(labels, x, margin, distance):
    out = []
    for a in range(len(x)):
        pos = [_d(x[a], x[p], distance) for p in range(len(x)) if p != a and labels[p] == labels[a]]
        neg = [_d(x[a], x[n], distance) for n in range(len(x)) if labels[n] != labels[a]]
        if pos and neg:
            out.append(max(0.0, max(pos) - min(neg) + margin))
    return float(np.mean(out)) if out else 0.0


@pytest.mark.parametrize("distance", ["cosine", "euclidean"])
@pytest.mark.parametrize("margin", [0.0, 0.5])
def test_matches_reference(distance, margin):
    x = np.random.default_rng(0).normal(size=(6, 3, 5))
    x[2] = x[1]
    loss = keras_cosent.losses.TripletLoss(margin=margin, distance=distance)
    np.testing.assert_allclose(
        float(loss(np.zeros(6), x.astype("float32"))), reference(x, margin, distance), rtol=1e-5, atol=1e-7
    )


@pytest.mark.parametrize("distance", ["cosine", "euclidean"])
@pytest.mark.parametrize("labels", [[0, 1, 0, 1, 2, 0, 3], [0] * 7, list(range(7))])
def test_batch_hard_matches_reference(distance, labels):
    x = np.random.default_rng(1).normal(size=(7, 5))
    x[1] = x[0]
    labels = np.array(labels)
    loss = keras_cosent.losses.TripletLoss(margin=0.3, distance=distance, mining="batch_hard")
    np.testing.assert_allclose(
        float(loss(labels, x.astype("float32"))),
        reference_batch_hard(labels, x, 0.3, distance), rtol=1e-5, atol=1e-7,
    )


@pytest.mark.parametrize("distance", ["cosine", "euclidean"])
def test_batch_hard_takes_views_each_with_its_rows_label(distance):
    # (batch, views, dim), as the training model gives one or more text columns.
    x = np.random.default_rng(2).normal(size=(5, 2, 4))
    labels = np.array([0, 1, 0, 2, 1])
    loss = keras_cosent.losses.TripletLoss(margin=0.3, distance=distance, mining="batch_hard")
    np.testing.assert_allclose(
        float(loss(labels, x.astype("float32"))),
        reference_batch_hard(np.repeat(labels, 2), x.reshape(10, 4), 0.3, distance),
        rtol=1e-5, atol=1e-7,
    )


@pytest.mark.parametrize("distance", ["cosine", "euclidean"])
def test_finite_at_extremes_and_zero_margin(distance):
    a = np.eye(2, 4, dtype="float32")
    x = np.stack([a, a, -a], axis=1)
    loss = keras_cosent.losses.TripletLoss(margin=0.0, distance=distance)
    helpers.assert_finite_value_and_grad(lambda y: loss(np.zeros(2), y), x)
    hard = keras_cosent.losses.TripletLoss(margin=0.0, distance=distance, mining="batch_hard")
    flat = np.concatenate([a, a, -a], axis=0)
    helpers.assert_finite_value_and_grad(lambda y: hard(np.array([0, 1, 0, 1, 2, 2]), y), flat)


@pytest.mark.parametrize(
    "kwargs,name", [({"margin": -0.1}, "margin"), ({"distance": "dot"}, "distance"), ({"mining": "semi"}, "mining")]
)
def test_validation_names_value(kwargs, name):
    with pytest.raises(ValueError, match=name):
        keras_cosent.losses.TripletLoss(**kwargs)


def test_serialization_and_half_precision():
    loss = keras_cosent.losses.TripletLoss(margin=0.3, distance="euclidean", mining="batch_hard")
    helpers.check_serialization(loss)
    assert keras.losses.deserialize(keras.losses.serialize(loss)).get_config() == loss.get_config()
    x = np.random.default_rng(1).normal(size=(4, 3, 8)).astype("float32")
    plain = keras_cosent.losses.TripletLoss(margin=1.0)
    expected = float(plain(np.zeros(4), x))
    for dtype in ("float16", "bfloat16"):
        np.testing.assert_allclose(float(plain(np.zeros(4), keras.ops.cast(x, dtype))), expected, rtol=2e-2)


def test_fit_step():
    x = np.random.default_rng(2).normal(size=(8, 6)).astype("float32")
    losses = helpers.fit_history(
        helpers.embedding_model(3, 4), keras_cosent.losses.TripletLoss(margin=1.0), x, np.zeros(8), epochs=2
    )
    assert np.all(np.isfinite(losses))


def test_kit():
    """The shared checks (tests/kit.py): value, serialisation, float16 inputs."""
    y_pred = np.random.default_rng(7).normal(size=(8, 3, 16)).astype("float32")
    kit.run_loss_test(keras_cosent.losses.TripletLoss(), np.zeros(8), y_pred,
                      reference(y_pred, 0.5, "cosine"))


def test_batch_hard_label_count_other_than_the_batch_names_both():
    emb = np.random.default_rng(0).normal(size=(3, 8)).astype("float32")
    with pytest.raises(ValueError, match=r"expects one label per row: `y_true` of shape \(4,\) "
                                         r"does not match 3 rows"):
        keras_cosent.losses.TripletLoss(mining="batch_hard")(np.arange(4), emb)
