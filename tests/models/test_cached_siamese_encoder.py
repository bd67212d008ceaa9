"""`CachedSiameseEncoder` (GradCache) against the uncached step, on every backend.

The reference is Keras' own training step on a model that keeps every
activation: `SiameseEncoder` over the whole batch (dropout off), or, with
dropout on, a model that embeds the same mini-batches one after the other
inside one differentiable call, so that it draws its dropout masks in the
order the cached step's first pass does. After one step of plain SGD with
learning rate 1, the weights differ from the starting ones by exactly the
gradient, so equal weights mean equal gradients.
"""

import keras
import numpy as np
import pytest
from keras import ops

import keras_cosent
from keras_cosent import runtime
from keras_cosent.losses import CoSENTLoss
from keras_cosent.losses import InfoNCELoss
from keras_cosent.losses import JointLoss
from keras_cosent.losses import MatryoshkaLoss
from keras_cosent.models import CachedSiameseEncoder
from keras_cosent.models import SiameseEncoder
from tests.models.conftest import make_tiny_encoder

ROWS, MINI, SEQ = 8, 3, 7


class MiniBatchedSiameseEncoder(SiameseEncoder):
    """The uncached reference with dropout: the mini-batches embedded in turn, in one graph."""

    def __init__(self, encoder, mini_batch_size, **kwargs):
        super().__init__(encoder, **kwargs)
        self.mini_batch_size = mini_batch_size

    def call(self, inputs, training=None):
        rows = inputs["token_ids"].shape[0]
        parts = [
            super(MiniBatchedSiameseEncoder, self).call(
                {k: v[start:start + self.mini_batch_size] for k, v in inputs.items()},
                training=training,
            )
            for start in range(0, rows, self.mini_batch_size)
        ]
        return ops.concatenate(parts, axis=0)


def batch(columns, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, SEQ + 1, size=(ROWS, columns))
    mask = np.arange(SEQ) < lengths[..., None]
    token_ids = np.where(mask, rng.integers(5, 30, size=(ROWS, columns, SEQ)), 0)
    x = {
        "token_ids": token_ids.astype("int32"),
        "padding_mask": mask,
        "segment_ids": np.zeros((ROWS, columns, SEQ), "int32"),
    }
    scores = rng.uniform(0, 5, size=(ROWS,)).astype("float32")
    return x, scores


def one_step(model, loss, x, y, seed=7):
    # Plain SGD with rate 1: new weights = old weights - gradient. The cached
    # step never uses XLA (it compiles its pieces itself); the reference does on
    # JAX, where op-by-op execution took most of the test's time.
    model.compile(optimizer=keras.optimizers.SGD(1.0), loss=loss,
                  jit_compile=keras.backend.backend() == "jax")
    # The same global generators (PyTorch draws keras-hub's dropout from them).
    keras.utils.set_random_seed(seed)
    logs = model.train_on_batch(x, y, return_dict=True)
    return logs, [np.asarray(w) for w in model.trainable_weights]


def assert_same_step(cached, reference, before):
    cached_logs, cached_weights = cached
    reference_logs, reference_weights = reference
    assert sorted(cached_logs) == sorted(reference_logs)
    for name in reference_logs:
        np.testing.assert_allclose(cached_logs[name], reference_logs[name], rtol=1e-5, atol=1e-6)
    moved = 0.0
    for ours, theirs, start in zip(cached_weights, reference_weights, before):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
        moved = max(moved, float(np.abs(theirs - start).max()))
    assert moved > 1e-3  # the step did something to compare


def matryoshka_joint_loss():
    # InfoNCE with a hard negative (3 columns), under Matryoshka, beside plain
    # InfoNCE in a JointLoss (which logs each term): one compile on JAX for all.
    return JointLoss(
        [MatryoshkaLoss(InfoNCELoss(temperature=0.1), dims=(16, 8, 4)), InfoNCELoss()],
        weights=[1.0, 0.5], names=["matryoshka", "infonce"],
    )


LOSSES = {
    "matryoshka-infonce-hard-negatives": (3, matryoshka_joint_loss),
    "cosent": (2, lambda: CoSENTLoss()),
    "infonce": (2, lambda: InfoNCELoss(temperature=0.1)),
}


@pytest.mark.parametrize("name", [
    "matryoshka-infonce-hard-negatives",
    # The default one covers these; about a minute each on JAX (2 cores).
    pytest.param("cosent", marks=pytest.mark.slow),
    pytest.param("infonce", marks=pytest.mark.slow),
])
def test_step_equals_the_uncached_step_without_dropout(name):
    columns, make_loss = LOSSES[name]
    x, y = batch(columns)
    encoder = make_tiny_encoder(num_layers=1, seed=0)
    before = [np.asarray(w) for w in encoder.trainable_weights]
    reference = one_step(SiameseEncoder(make_tiny_encoder(num_layers=1, seed=0)), make_loss(), x, y)
    cached = one_step(CachedSiameseEncoder(encoder, mini_batch_size=MINI), make_loss(), x, y)
    assert_same_step(cached, reference, before)
    if name.startswith("matryoshka"):
        assert {"loss_matryoshka", "loss_infonce"} <= set(cached[0])


def test_a_model_compiled_again_trains_on_its_new_loss():
    # Staged training compiles the same model again with another loss. JAX's
    # compiled pieces had kept the first loss: the step after recompiling
    # reported (and trained on) CoSENT at scale 20, not InfoNCE.
    x, y = batch(2)
    model = CachedSiameseEncoder(make_tiny_encoder(num_layers=1, seed=0), mini_batch_size=MINI)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=CoSENTLoss())
    model.train_on_batch(x, y)
    # Rate 0: the step reports the new loss of the weights as they are.
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=InfoNCELoss(temperature=0.1))
    logs = model.train_on_batch(x, y, return_dict=True)
    embeddings = model.predict_on_batch(x)
    expected = InfoNCELoss(temperature=0.1)(y, embeddings)
    np.testing.assert_allclose(logs["loss"], float(expected), rtol=1e-5)
    assert abs(float(CoSENTLoss()(y, embeddings)) - float(expected)) > 0.1  # they differ


@pytest.mark.heavy
def test_dropout_masks_are_replayed():
    x, y = batch(3)
    loss = InfoNCELoss(temperature=0.1)
    encoder = make_tiny_encoder(num_layers=1, seed=0, dropout=0.3)
    before = [np.asarray(w) for w in encoder.trainable_weights]
    reference = one_step(
        MiniBatchedSiameseEncoder(make_tiny_encoder(num_layers=1, seed=0, dropout=0.3), MINI),
        loss, x, y,
    )
    cached = one_step(CachedSiameseEncoder(encoder, mini_batch_size=MINI), loss, x, y)
    assert_same_step(cached, reference, before)

    # Dropout is on: other masks (other seed-generator states on TensorFlow and
    # JAX, another global seed on PyTorch) on the same weights give another
    # loss, so the equality above holds only because the masks were replayed.
    other_encoder = make_tiny_encoder(num_layers=1, seed=1, dropout=0.3)
    other_encoder.set_weights(make_tiny_encoder(num_layers=1, seed=0, dropout=0.3).get_weights())
    other = one_step(MiniBatchedSiameseEncoder(other_encoder, MINI), loss, x, y, seed=8)
    assert not np.allclose(other[0]["loss"], reference[0]["loss"], rtol=1e-4)


@pytest.mark.heavy
def test_fit_on_pair_batches_logs_the_loss():
    pairs = keras_cosent.data.PairDataset(
        [["a cat sat", "the dog ran", "a red car", "the man is playing", "a woman runs"],
         ["a cat", "the dog runs", "a car", "a man playing", "the woman runs fast"]],
        np.array([4.0, 3.0, 5.0, 4.5, 3.5], "float32"), source="inline",
    )
    setup = keras_cosent.training.build(
        make_tiny_encoder(num_layers=1), pairs, "infonce", batch_size=5, epochs=1,
        mini_batch_size=2,
    )
    assert isinstance(setup.model, CachedSiameseEncoder)
    assert not setup.batches.packing
    history = setup.model.fit(setup.batches, epochs=1, shuffle=False, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_refuses_packed_batches_and_bad_sizes():
    with pytest.raises(ValueError, match="`mini_batch_size`=0"):
        CachedSiameseEncoder(make_tiny_encoder(num_layers=1), mini_batch_size=0)
    model = CachedSiameseEncoder(make_tiny_encoder(num_layers=1), mini_batch_size=2)
    model.compile(optimizer="sgd", loss=InfoNCELoss())
    packed = {key: np.zeros((2, 8), "int32") for key in ("token_ids", "positions", "segment_ids",
                                                         "pack_ids")}
    packed["gather_index"] = np.zeros((2, 2, 8), "int32")
    packed["gather_mask"] = np.zeros((2, 2, 8), bool)
    with pytest.raises(ValueError, match="packed"):
        model.train_on_batch(packed, np.zeros((2,), "float32"))


def test_serialization_round_trip():
    model = CachedSiameseEncoder(make_tiny_encoder(num_layers=1), mini_batch_size=4)
    restored = CachedSiameseEncoder.from_config(model.get_config())
    assert restored.mini_batch_size == 4


def test_the_pytorch_step_embeds_inside_cached_step_allocations(monkeypatch):
    # Which glibc settings a cached step makes, in order: those while it embeds,
    # then those after (runtime's own tests check what each setting does).
    calls = []
    monkeypatch.setattr(runtime, "_mallopt", lambda settings: calls.append(settings) or True)
    monkeypatch.setitem(runtime._records, "glibc_mmap_threshold", {"on": True, "detail": ""})
    model = CachedSiameseEncoder(make_tiny_encoder(num_layers=1), mini_batch_size=2)
    model.compile(optimizer="sgd", loss=InfoNCELoss())
    x = {"token_ids": np.random.randint(5, 10, (4, 2, 6)).astype("int32"),
         "padding_mask": np.ones((4, 2, 6), bool),
         "segment_ids": np.zeros((4, 2, 6), "int32")}
    model.train_on_batch(x, np.zeros((4,), "float32"))
    model.train_on_batch(x, np.zeros((4,), "float32"))
    per_step = [runtime.CACHED_STEP_SETTINGS, runtime.AFTER_CACHED_STEP_SETTINGS]
    # Only PyTorch's eager passes allocate through glibc per mini-batch.
    assert calls == (per_step * 2 if keras.backend.backend() == "torch" else []), calls
