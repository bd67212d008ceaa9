"""SiameseEncoder: column folding against per-column encoder calls, saving, a fit step."""

import re
import warnings

import keras
import numpy as np
import pytest
from keras import ops

import keras_cosent
from keras_cosent.data.padding import pad_batch
from keras_cosent.models import SentenceEncoder
from keras_cosent.models import SiameseEncoder
from tests.models.conftest import make_tiny_encoder

PAIRS = [
    ("the cat sat on the mat", "a cat sat", "the guitar"),
    ("a man is playing guitar", "a man is playing piano", "red car"),
    ("the dog runs fast", "a dog runs", "the small tree"),
    ("big red house", "a big house", "the quick brown fox"),
]


def _batch(encoder, rows):
    """(batch, columns, seq) arrays, all columns padded to one length."""
    columns = len(rows[0])
    flat = pad_batch(encoder.tokenize([t for row in rows for t in row]))
    return {k: v.reshape(len(rows), columns, -1) for k, v in flat.items()}


@pytest.fixture(scope="module")
def tiny_encoder():
    return make_tiny_encoder()


@pytest.mark.parametrize("columns", [2, 3])
def test_matches_encoder_per_column(tiny_encoder, columns):
    encoder = tiny_encoder
    model = SiameseEncoder(encoder)
    rows = [row[:columns] for row in PAIRS]
    x = _batch(encoder, rows)
    out = ops.convert_to_numpy(model(x))
    assert out.shape == (len(rows), columns, 16)
    for c in range(columns):
        column = {k: v[:, c] for k, v in x.items()}
        np.testing.assert_allclose(out[:, c], ops.convert_to_numpy(encoder(column)), atol=1e-5)
    assert model.encoder is encoder


def test_rejects_flat_inputs(tiny_encoder):
    encoder = tiny_encoder
    with pytest.raises(ValueError, match=r"\(batch, columns, seq\)"):
        SiameseEncoder(encoder)(encoder.preprocess(["a cat"]))


@pytest.mark.parametrize("name, cut", [("padding_mask", (slice(None), slice(0, 1))),
                                       ("segment_ids", (slice(None), slice(None), slice(0, -1)))])
def test_inputs_shaped_unlike_the_token_ids_are_named(tiny_encoder, name, cut):
    # A mask with one column too few, or ids one position short, failed deep inside
    # the backbone (Softmax, a reshape), naming no input.
    x = _batch(tiny_encoder, [row[:2] for row in PAIRS])
    x[name] = x[name][cut]
    with pytest.raises(ValueError, match=rf"`{name}` of the shape of `token_ids`, "
                                         rf"\(batch, columns, seq\): \({len(PAIRS)}, 2, "):
        SiameseEncoder(tiny_encoder)(x)


def test_save_and_load(tmp_path, tiny_encoder):
    encoder = tiny_encoder
    model = SiameseEncoder(encoder)
    x = _batch(encoder, PAIRS)
    expected = ops.convert_to_numpy(model(x))
    path = tmp_path / "siamese.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, SiameseEncoder) and isinstance(restored.encoder, SentenceEncoder)
    np.testing.assert_allclose(ops.convert_to_numpy(restored(x)), expected, atol=1e-6)
    # the inner encoder still embeds raw text (tokenizer came back)
    np.testing.assert_allclose(
        restored.encoder.encode(["a cat sat"]), encoder.encode(["a cat sat"]), atol=1e-6
    )
    config = model.get_config()
    assert isinstance(SiameseEncoder.from_config(config).encoder, SentenceEncoder)


def _compiled_models():
    # Each overrides `compile`, which Keras alone does not redo on loading.
    scores = np.array([5.0, 3.0, 4.0, 1.0], dtype="float32")
    encoder = make_tiny_encoder(num_layers=1)
    yield "SiameseEncoder+JointLoss", SiameseEncoder(encoder), keras_cosent.losses.JointLoss(
        [keras_cosent.losses.CoSENTLoss(scale=10.0), keras_cosent.losses.InfoNCELoss()],
        weights=[1.0, 0.5]), scores
    encoder = make_tiny_encoder(num_layers=1)
    yield "CachedSiameseEncoder", keras_cosent.models.CachedSiameseEncoder(
        encoder, mini_batch_size=2), keras_cosent.losses.CoSENTLoss(scale=10.0), scores
    encoder = make_tiny_encoder(num_layers=1)
    # Its head is built in `compile`, and must take the saved weights back.
    yield "SoftmaxClassifierModel", keras_cosent.models.SoftmaxClassifierModel(
        SiameseEncoder(encoder), num_labels=3), keras_cosent.losses.SoftmaxLoss(num_labels=3), \
        np.array([0, 2, 1, 0], dtype="int32")


@pytest.mark.parametrize("index", [0, 1, 2])
def test_compiled_model_comes_back_compiled_from_a_keras_file(tmp_path, index):
    name, model, loss, y = list(_compiled_models())[index]
    x = _batch(model.encoder, [row[:2] for row in PAIRS])
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=loss)
    model.train_on_batch(x, y)
    path = tmp_path / "model.keras"
    model.save(path)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*compile\\(\\) was not called")
        restored = keras.saving.load_model(path)
    assert restored.compiled, name
    assert restored.loss.get_config() == model.loss.get_config()
    # The `jit_compile` given ("auto"), not the one it resolved to on this backend;
    # the cached model's outer step always runs without XLA.
    cached = isinstance(model, keras_cosent.models.CachedSiameseEncoder)
    assert restored.get_compile_config()["jit_compile"] == (False if cached else "auto")
    if not cached:
        # XLA as every keras-cosent model has it, on TensorFlow's CPU too (the
        # classifier kept Keras' resolution, off there).
        assert model.jit_compile is restored.jit_compile is (
            keras.backend.backend() in ("tensorflow", "jax")), name
    # The optimizer state came back: the next step is the one the saved model takes.
    assert int(ops.convert_to_numpy(restored.optimizer.iterations)) == 1
    for got, want in zip(restored.optimizer.variables, model.optimizer.variables):
        np.testing.assert_array_equal(ops.convert_to_numpy(got), ops.convert_to_numpy(want))
    model.train_on_batch(x, y)
    restored.train_on_batch(x, y)
    for got, want in zip(restored.trainable_variables, model.trainable_variables):
        np.testing.assert_allclose(ops.convert_to_numpy(got), ops.convert_to_numpy(want),
                                   atol=1e-6)


def cosent_loss(y_true, y_pred):
    """CoSENT, written out for the test: log(1 + sum_{s_ij > s_kl} exp(20 (cos_kl - cos_ij)))."""
    a = ops.normalize(y_pred[:, 0], axis=-1)
    b = ops.normalize(y_pred[:, 1], axis=-1)
    cos = ops.sum(a * b, axis=-1) * 20.0
    y = ops.reshape(ops.cast(y_true, "float32"), (-1,))
    diff = cos[None, :] - cos[:, None]  # [i, j] = cos_j - cos_i
    diff = ops.where(y[:, None] > y[None, :], diff, float("-inf"))
    diff = ops.concatenate([ops.zeros((1,)), ops.reshape(diff, (-1,))], axis=0)
    return ops.logsumexp(diff)


def test_fit_step_lowers_cosent_loss():
    encoder = make_tiny_encoder(num_layers=1)
    model = SiameseEncoder(encoder)
    x = _batch(encoder, [row[:2] for row in PAIRS])
    y = np.array([5.0, 3.0, 4.0, 1.0], dtype="float32")
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=cosent_loss)
    # One batch per epoch, no dropout: epoch 1's loss is the loss before any update.
    losses = model.fit(x, y, batch_size=4, epochs=5, verbose=0).history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


@pytest.mark.parametrize("make, message", [
    (lambda encoder: keras_cosent.models.SiameseEncoder(None),
     r"`encoder` should be a keras_cosent.models.SentenceEncoder .* of type NoneType"),
    (lambda encoder: keras_cosent.models.MultiTaskEncoder("all-MiniLM-L6-v2"),
     r"`encoder` should be .* of type str"),
    # The sentence encoder itself where its siamese wrapper goes.
    (lambda encoder: keras_cosent.models.SoftmaxClassifierModel(encoder, 3),
     r"`siamese` should be a keras_cosent.models.SiameseEncoder.* of type SentenceEncoder"),
])
def test_a_wrapper_given_the_wrong_object_says_so_at_construction(make, message):
    # They used to construct and fail at the first call ('NoneType' object is not
    # callable) or with an AttributeError.
    with pytest.raises(TypeError, match=message):
        make(make_tiny_encoder())


@pytest.mark.parametrize("num_labels", [2.7, "three", True, 1, np.float32(3.0)])
def test_softmax_classifier_model_refuses_a_num_labels_that_is_not_an_int(num_labels):
    # int() made 2.7 two classes, and "three" or True gave messages that did not show
    # the value passed.
    siamese = keras_cosent.models.SiameseEncoder(make_tiny_encoder())
    with pytest.raises(ValueError, match=r"`num_labels` should be an int >= 2. Received: "
                                         rf"`num_labels`={re.escape(repr(num_labels))}$"):
        keras_cosent.models.SoftmaxClassifierModel(siamese, num_labels=num_labels)
    assert keras_cosent.models.SoftmaxClassifierModel(siamese, np.int64(3)).num_labels == 3


def test_embeddings_are_float32_whatever_a_custom_encoder_returns():
    # Under mixed precision a custom encoder returns float16; the docstring (and
    # the losses) say float32.
    policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        inputs = {name: keras.Input((None,), dtype=dtype, name=name) for name, dtype in (
            ("token_ids", "int32"), ("padding_mask", "bool"), ("segment_ids", "int32"))}
        hidden = keras.layers.GlobalAveragePooling1D()(
            keras.layers.Embedding(40, 8)(inputs["token_ids"]), mask=inputs["padding_mask"])
        encoder = keras.Model(inputs, keras.layers.Dense(8)(hidden))
        model = SiameseEncoder(encoder)
        x = {"token_ids": np.ones((4, 2, 6), "int32"), "padding_mask": np.ones((4, 2, 6), bool),
             "segment_ids": np.zeros((4, 2, 6), "int32")}
        flat = {k: v.reshape(8, 6) for k, v in x.items()}
        assert keras.backend.standardize_dtype(encoder(flat).dtype) == "float16"
        out = model(x)
        assert keras.backend.standardize_dtype(out.dtype) == "float32"
        np.testing.assert_array_equal(
            ops.convert_to_numpy(out).reshape(8, 8),
            ops.convert_to_numpy(ops.cast(encoder(flat), "float32")))
    finally:
        keras.config.set_dtype_policy(policy)


@pytest.mark.parametrize("head", [False, True])
def test_keras_backup_and_restore_resumes_a_wrapper_fit(tmp_path, head):
    # Keras' own BackupAndRestore restores into a built model only; TensorFlow's
    # fit calls the model after the callbacks' on_train_begin, so the wrapper is
    # built with its encoder (and the classifier with its head, at compile).
    x = _batch(make_tiny_encoder(num_layers=1), [row[:2] for row in PAIRS])
    y = np.array([2, 0, 1, 0] if head else [5.0, 3.0, 4.0, 1.0], "float32")

    def fit(epochs):
        model = SiameseEncoder(make_tiny_encoder(num_layers=1))
        loss = cosent_loss
        if head:
            model = keras_cosent.models.SoftmaxClassifierModel(model, num_labels=3)
            loss = keras_cosent.losses.SoftmaxLoss()
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=loss)
        history = model.fit(x, y, batch_size=4, epochs=epochs, verbose=0, callbacks=[
            keras.callbacks.BackupAndRestore(tmp_path / "backup", delete_checkpoint=False)])
        return model, history.epoch

    first, first_epochs = fit(1)
    # A fresh model restores epoch 1 (its trained weights) and has nothing left to fit.
    second, second_epochs = fit(1)
    assert first_epochs == [0] and second_epochs == []
    assert len(first.weights) == len(second.weights)
    for trained, restored in zip(first.weights, second.weights):
        np.testing.assert_array_equal(ops.convert_to_numpy(restored),
                                      ops.convert_to_numpy(trained))
