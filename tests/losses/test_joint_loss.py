"""JointLoss: weighted sum of terms against the terms' NumPy references; terms logged by name."""

import keras
import numpy as np
import pytest

import keras_cosent
from keras_cosent.losses import CoSENTLoss
from keras_cosent.losses import InfoNCELoss
from keras_cosent.losses import JointLoss
from tests import kit
from tests.losses.test_cosent_loss import reference_cosent
from tests.losses.test_cosent_loss import reference_cosines
from tests.losses.test_infonce_loss import reference_infonce
from tests.losses.test_triplet_loss import reference as reference_triplet


def _batch(seed=3, n=10):
    rng = np.random.default_rng(seed)
    pairs = rng.normal(size=(n, 2, 16)).astype("float32")
    scores = np.round(rng.uniform(0, 5, n), 1).astype("float32")
    return scores, pairs


def reference_joint(scores, pairs, threshold=2.5, weights=(1.0, 0.5)):
    # InfoNCE per anchor over the whole batch (all rows' second sentences are
    # candidates), averaged over the rows scored above the threshold only.
    per_row = reference_infonce(np.arange(len(scores)), pairs, 0.05, False, False)
    selected = scores > threshold
    infonce = per_row[selected].mean() if selected.any() else 0.0
    cosent = reference_cosent(scores, reference_cosines(pairs), 20.0)
    return weights[0] * infonce + weights[1] * cosent, infonce, cosent


def _loss():
    return JointLoss([InfoNCELoss(), CoSENTLoss()], weights=[1.0, 0.5], positive_above=[2.5, None])


def test_kit_against_the_terms_references():
    """Float16 tolerance 5e-2: InfoNCE at temperature 0.05 and CoSENT at scale 20 (see theirs)."""
    scores, pairs = _batch()
    expected, _, _ = reference_joint(scores, pairs)
    kit.run_loss_test(_loss(), scores, pairs, expected, mixed_rtol=5e-2)


def test_terms_are_the_unweighted_references():
    scores, pairs = _batch()
    _, infonce, cosent = reference_joint(scores, pairs)
    terms = _loss().terms(scores, pairs)
    assert sorted(terms) == ["cosent", "infonce"]
    np.testing.assert_allclose(float(keras.ops.convert_to_numpy(terms["infonce"])), infonce, rtol=1e-5)
    np.testing.assert_allclose(float(keras.ops.convert_to_numpy(terms["cosent"])), cosent, rtol=1e-5)


def test_sample_weight_weighs_each_term_as_its_loss_does():
    # The InfoNCE term (rows above 2.5): sum(loss_i * w_i) over those rows, divided
    # by their count. CoSENT, one value per batch, is scaled by the mean weight, as
    # Keras weighs it alone. The weights used to scale the whole total by their mean.
    scores, pairs = _batch()
    weights = np.random.default_rng(5).choice([0.0, 1.0, 3.0], size=len(scores)).astype("float32")
    per_row = reference_infonce(np.arange(len(scores)), pairs, 0.05, False, False)
    selected = scores > 2.5
    infonce = np.sum((per_row * weights)[selected]) / selected.sum()
    cosent = reference_cosent(scores, reference_cosines(pairs), 20.0) * weights.mean()
    got = _loss()(scores, pairs, sample_weight=weights)
    np.testing.assert_allclose(float(got), infonce + 0.5 * cosent, rtol=1e-4)
    terms = _loss().terms(scores, pairs, sample_weight=weights)
    np.testing.assert_allclose(float(terms["infonce"]), infonce, rtol=1e-4)
    np.testing.assert_allclose(float(terms["cosent"]), cosent, rtol=1e-4)


def test_a_batch_with_no_row_above_the_threshold_gives_a_zero_term():
    scores, pairs = _batch()
    scores = np.minimum(scores, 2.0)
    terms = _loss().terms(scores, pairs)
    assert float(keras.ops.convert_to_numpy(terms["infonce"])) == 0.0


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"weights": [1.0]}, "one entry per loss"),
        ({"weights": [1.0, float("nan")]}, "finite"),
        ({"weights": [-1.0, 1.0]}, "`weights`=-1.0"),
        ({"weights": 1.0}, "`weights`=1.0"),
        ({"weights": [0.0, 0.0]}, "at least one loss a positive weight"),
        ({"names": ["a", "a"]}, "distinct"),
        ({"names": ["a", "b c"]}, "'b c'"),
        ({"positive_above": [2.5, "high"]}, "positive_above"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        JointLoss([InfoNCELoss(), CoSENTLoss()], **kwargs)


@pytest.mark.parametrize("cls", [JointLoss, keras_cosent.losses.MultiTaskLoss])
def test_a_single_loss_outside_a_list_is_refused_by_name(cls):
    extra = {} if cls is JointLoss else {"names": ["a"], "columns": [2]}
    with pytest.raises(ValueError, match=r"wrap a single loss in a list\). Received: `losses`="):
        cls(CoSENTLoss(), **extra)


def test_a_zero_weight_keeps_the_term_out_of_the_total():
    scores, pairs = _batch()
    loss = JointLoss([InfoNCELoss(), CoSENTLoss()], weights=[0.0, 1.0])
    terms = loss.terms(scores, pairs)
    np.testing.assert_allclose(float(loss(scores, pairs)), float(terms["cosent"]), rtol=1e-6)


def test_a_threshold_on_a_batch_level_loss_is_refused():
    scores, pairs = _batch()
    loss = JointLoss([CoSENTLoss()], positive_above=[2.5])
    with pytest.raises(ValueError, match="one value per row"):
        loss(scores, pairs)


@pytest.mark.heavy
def test_siamese_encoder_logs_every_term_and_the_total_is_their_weighted_sum():
    import keras_hub

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat", "the"]
    rng = np.random.default_rng(0)
    first = [" ".join(rng.choice(vocab[5:], 4)) for _ in range(24)]
    second = [" ".join(rng.choice(vocab[5:], 3)) for _ in range(24)]
    scores = rng.uniform(0, 5, 24).astype("float32")
    encoder = keras_cosent.models.SentenceEncoder(
        keras_hub.models.BertBackbone(vocabulary_size=len(vocab), num_layers=1, num_heads=2,
                                      hidden_dim=8, intermediate_dim=16, max_sequence_length=16),
        keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True), max_length=16,
    )
    setup = keras_cosent.training.build(
        encoder, keras_cosent.data.PairDataset([first, second], scores, source="inline"),
        "cosent", batch_size=8, epochs=2,
    )
    setup.model.compile(optimizer=setup.optimizer, loss=_loss())
    history = setup.model.fit(setup.batches, epochs=2, shuffle=False, verbose=0).history
    assert sorted(history) == ["loss", "loss_cosent", "loss_infonce"]
    # Epoch means are linear: the total's mean is the weighted sum of the terms' means.
    np.testing.assert_allclose(
        history["loss"],
        np.add(history["loss_infonce"], 0.5 * np.asarray(history["loss_cosent"])),
        rtol=1e-5,
    )


def test_siamese_encoder_logs_terms_weighted_as_the_loss():
    # With sample weights the logged terms are the weighted ones, whose weighted
    # sum is the loss (they were logged unweighted beside a weighted total).
    from tests.models.conftest import make_tiny_encoder

    rng = np.random.default_rng(1)
    x = {"token_ids": rng.integers(5, 20, size=(6, 2, 5)).astype("int32"),
         "padding_mask": np.ones((6, 2, 5), bool),
         "segment_ids": np.zeros((6, 2, 5), "int32")}
    scores = np.array([4.0, 1.0, 5.0, 3.0, 0.5, 2.6], "float32")
    weights = np.array([1.0, 0.0, 2.0, 1.0, 0.0, 3.0], "float32")
    model = keras_cosent.models.SiameseEncoder(make_tiny_encoder(num_layers=1))
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=_loss())
    logs = model.train_on_batch(x, scores, sample_weight=weights, return_dict=True)
    embeddings = np.asarray(keras.ops.convert_to_numpy(model.predict_on_batch(x)))
    terms = _loss().terms(scores, embeddings, sample_weight=weights)
    np.testing.assert_allclose(logs["loss_infonce"], float(terms["infonce"]), rtol=1e-5)
    np.testing.assert_allclose(logs["loss_cosent"], float(terms["cosent"]), rtol=1e-5)
    np.testing.assert_allclose(logs["loss"], logs["loss_infonce"] + 0.5 * logs["loss_cosent"],
                               rtol=1e-5)


def test_the_logged_terms_add_up_to_the_loss_when_the_last_batch_is_smaller():
    # Keras averages `loss` over batches weighted by their rows; the terms were plain
    # means of the batches, so a last batch of 1 row of 5 left them off the total.
    from tests.models.conftest import make_tiny_encoder

    rng = np.random.default_rng(2)
    x = {"token_ids": rng.integers(5, 20, size=(5, 2, 5)).astype("int32"),
         "padding_mask": np.ones((5, 2, 5), bool),
         "segment_ids": np.zeros((5, 2, 5), "int32")}
    scores = np.array([4.0, 1.0, 5.0, 3.0, 0.5], "float32")
    model = keras_cosent.models.SiameseEncoder(make_tiny_encoder(num_layers=1))
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=_loss())
    logs = model.evaluate(x, scores, batch_size=2, verbose=0, return_dict=True)
    embeddings = np.asarray(keras.ops.convert_to_numpy(model.predict(x, verbose=0)))
    batches = [slice(0, 2), slice(2, 4), slice(4, 5)]
    for name in ("infonce", "cosent"):
        per_batch = [float(_loss().terms(scores[b], embeddings[b])[name]) for b in batches]
        np.testing.assert_allclose(logs[f"loss_{name}"], np.average(per_batch, weights=[2, 2, 1]),
                                   rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(logs["loss"], logs["loss_infonce"] + 0.5 * logs["loss_cosent"],
                               rtol=1e-5)


def test_docstring_example_runs():
    import doctest

    from keras_cosent.losses import joint_loss

    result = doctest.testmod(joint_loss, verbose=False)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("wrapper", ["joint", "matryoshka", "multi_task"])
def test_an_inner_reduction_none_is_reduced_by_the_wrapper_with_weights_too(wrapper):
    # The wrapper's own reduction averages the weighted per-row values of an
    # inner loss that reduces nothing. With `sample_weight` the rows used to come
    # back unreduced, one loss per row, where without it the wrapper averaged.
    rows = np.random.default_rng(5).normal(size=(6, 3, 8))
    weights = np.array([2.0, 0.0, 1.0, 0.5, 0.0, 1.0], "float32")
    inner = keras_cosent.losses.TripletLoss(margin=0.5, reduction="none")
    labels, dims = np.zeros(6, "float32"), (8,)
    if wrapper == "joint":
        loss = JointLoss([inner])
    elif wrapper == "matryoshka":
        loss, dims = keras_cosent.losses.MatryoshkaLoss(inner, dims=(8, 4)), (8, 4)
    else:
        loss = keras_cosent.losses.MultiTaskLoss([inner], names=["nli"], columns=[3])
        labels = np.zeros((6, 2), "float32")
    per_row = np.array([
        sum(reference_triplet(rows[i : i + 1, :, :dim], 0.5, "cosine") for dim in dims)
        for i in range(6)
    ])
    unweighted = keras.ops.convert_to_numpy(loss(labels, rows.astype("float32")))
    weighted = keras.ops.convert_to_numpy(
        loss(labels, rows.astype("float32"), sample_weight=weights))
    assert unweighted.shape == weighted.shape == ()
    np.testing.assert_allclose(unweighted, per_row.mean(), rtol=1e-5)
    np.testing.assert_allclose(weighted, np.sum(per_row * weights) / 6, rtol=1e-5)
