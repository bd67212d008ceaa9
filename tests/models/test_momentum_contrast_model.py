"""MomentumContrastModel: the EMA formula, a first-in-first-out queue, the loss it feeds, and its state
surviving `.keras` files and an interrupted `fit`. References are NumPy recursions and a float64 loop."""

import keras
import numpy as np
import pytest

import keras_cosent
from keras_cosent.callbacks import ResumableTraining
from keras_cosent.models import MomentumContrastModel
from tests.losses.test_infonce_queue import reference_queue_infonce
from tests.models.conftest import VOCAB
from tests.models.conftest import make_tiny_encoder


def _numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def _batch(batch, seed, length=6):
    rng = np.random.default_rng(seed)
    return {
        "token_ids": rng.integers(5, len(VOCAB), (batch, 2, length)).astype("int32"),
        "padding_mask": np.ones((batch, 2, length), bool),
        "segment_ids": np.zeros((batch, 2, length), "int32"),
    }


def _model(queue_size=5, momentum=0.8, learning_rate=0.5):
    model = MomentumContrastModel(make_tiny_encoder(num_layers=1), queue_size, momentum=momentum)
    # Plain SGD, large steps: the weights move visibly between steps. Eager on
    # TensorFlow and PyTorch, so that the small steps of these tests compile
    # nothing (the docstring example and the resume test train compiled); on JAX
    # op-by-op execution costs more than compiling the step once.
    model.compile(optimizer=keras.optimizers.SGD(learning_rate),
                  loss=keras_cosent.losses.InfoNCELoss(mask_false_negatives=True),
                  run_eagerly=keras.backend.backend() != "jax")
    return model


@pytest.mark.heavy
def test_momentum_weights_follow_the_ema_formula_after_k_steps():
    model, mu = _model(momentum=0.8), 0.8
    encoder_weights = model.encoder.trainable_variables
    expected = [_numpy(v) for v in encoder_weights]  # theta_m starts as theta_0
    np.testing.assert_array_equal(_numpy(model.momentum_weights[0]), expected[0])
    for step in range(3):
        before = [_numpy(v) for v in encoder_weights]
        # theta_m <- mu * theta_m + (1 - mu) * theta, theta the weights the step starts from.
        expected = [mu * m + (1 - mu) * theta for m, theta in zip(expected, before)]
        model.train_on_batch(_batch(4, step), np.arange(4))
        moved = max(np.abs(_numpy(v) - b).max() for v, b in zip(encoder_weights, before))
        assert moved > 1e-4  # the optimizer did change the weights
    for weight, want in zip(model.momentum_weights, expected):
        np.testing.assert_allclose(_numpy(weight), want, rtol=1e-5, atol=1e-6)


def test_the_queue_is_first_in_first_out_with_wrap_around():
    model = _model(queue_size=5)
    slots, total, seen = np.zeros((5, model.encoder.embedding_dim), "float32"), 0, []
    rng = np.random.default_rng(0)
    # 5 is no multiple of these; 7 is more than the queue holds.
    for batch in (2, 3, 4, 7, 1):
        keys = rng.normal(size=(batch, model.encoder.embedding_dim)).astype("float32")
        model._enqueue(keras.ops.convert_to_tensor(keys))
        for key in keys:  # a ring buffer, written one key at a time
            slots[total % 5] = key
            total += 1
        seen.extend(keys)
        queue = _numpy(model.queue)
        np.testing.assert_array_equal(queue, slots)
        assert int(_numpy(model.queue_pointer)) == total % 5
        assert int(_numpy(model.queue_count)) == min(total, 5)
        # It holds exactly the last min(total, 5) keys.
        filled = queue[: min(total, 5)]
        for key in seen[-min(total, 5):]:
            assert np.any(np.all(filled == key, axis=1))


@pytest.mark.heavy
def test_a_train_step_queues_the_momentum_embeddings_of_the_positives():
    model = _model(queue_size=7, momentum=0.5)
    first, second = _batch(3, 10), _batch(4, 11)
    model.train_on_batch(first, np.arange(3))
    model.train_on_batch(second, np.arange(4))
    # An independent momentum encoder: a copy of the encoder holding the weights
    # the momentum weights had at each step (the EMA recursion, as above).
    queued = _numpy(model.queue)[:7]
    assert int(_numpy(model.queue_count)) == 7 and int(_numpy(model.queue_pointer)) == 0
    reference = make_tiny_encoder(num_layers=1)
    for variable, weight in zip(reference.trainable_variables, model.momentum_weights):
        variable.assign(_numpy(weight))
    positives = {k: v[:, 1] for k, v in second.items()}
    np.testing.assert_allclose(queued[3:], _numpy(reference(positives, training=False)),
                               rtol=1e-4, atol=1e-5)


def test_the_training_loss_is_infonce_with_the_queue_before_the_step():
    model = _model(queue_size=6)
    model.train_on_batch(_batch(4, 0), np.arange(4))  # 4 of 6 slots filled
    x, groups = _batch(4, 1), np.array([0, 1, 0, 2])
    embeddings = _numpy(model(x, training=False))  # no dropout: the training embeddings
    queue, count = _numpy(model.queue), int(_numpy(model.queue_count))
    expected = reference_queue_infonce(
        groups, embeddings.astype("float64"), queue, np.arange(6) < count, 0.05, True
    ).mean()
    loss = model.train_on_batch(x, groups)
    np.testing.assert_allclose(float(np.ravel(loss)[0]), expected, rtol=1e-4)
    # Evaluation is the plain loss, and leaves the state alone.
    pointer = int(_numpy(model.queue_pointer))
    model.evaluate(x, groups, verbose=0)
    assert int(_numpy(model.queue_pointer)) == pointer


def test_queue_and_momentum_weights_survive_a_keras_file(tmp_path):
    model = _model(queue_size=5)
    # Two steps of 4 rows wrap around the 5 slots; one batch shape, one compiled step.
    for step, batch in enumerate((4, 4)):
        model.train_on_batch(_batch(batch, step), np.arange(batch))
    path = tmp_path / "momentum.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, MomentumContrastModel)
    # Compiled again as saved (its `compile` checks the loss), optimizer state included.
    assert restored.loss.get_config() == model.loss.get_config()
    assert int(_numpy(restored.optimizer.iterations)) == 2
    assert (restored.queue_size, restored.momentum) == (5, 0.8)
    for name in ("queue", "queue_pointer", "queue_count"):
        np.testing.assert_array_equal(_numpy(getattr(restored, name)), _numpy(getattr(model, name)))
    for got, want in zip(restored.momentum_weights, model.momentum_weights):
        np.testing.assert_array_equal(_numpy(got), _numpy(want))
    # The momentum weights differ from the encoder's: it is not the encoder saved twice.
    assert not np.allclose(_numpy(model.momentum_weights[0]), _numpy(model.encoder.trainable_variables[0]))


def test_bad_arguments_are_refused_by_name():
    encoder = make_tiny_encoder(num_layers=1)
    with pytest.raises(ValueError, match="queue_size"):
        MomentumContrastModel(encoder, 0)
    with pytest.raises(ValueError, match="momentum"):
        MomentumContrastModel(encoder, 4, momentum=1.0)
    model = MomentumContrastModel(encoder, 4)
    with pytest.raises(ValueError, match="InfoNCE"):
        model.compile(optimizer="sgd", loss=keras_cosent.losses.CoSENTLoss())


# === An interrupted fit resumes with the queue and momentum weights it had ===

EPOCHS = 2


class Interrupt(Exception):
    pass


class InterruptAfter(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        if epoch == 0:
            raise Interrupt


def _setup(initial=None):
    sentences = [" ".join(np.random.default_rng(i).choice(VOCAB[5:-3], 4, replace=False))
                 for i in range(14)]
    dataset = keras_cosent.data.PairDataset([sentences], None, source="inline")
    encoder = make_tiny_encoder(num_layers=1, dropout=0.2)
    setup = keras_cosent.training.build(
        encoder, dataset, "simcse", batch_size=4, epochs=EPOCHS, learning_rate=1e-3,
        queue_size=6, momentum=0.9, word_repetition=0.5,
    )
    variables = setup.model.variables
    if initial is None:
        initial = [_numpy(v) for v in variables]
    else:
        for variable, value in zip(variables, initial):
            variable.assign(value)
    if keras.backend.backend() == "torch":
        import torch

        torch.manual_seed(0)
    return setup, initial


def _state(model):
    return [_numpy(v) for v in model.weights]


@pytest.mark.slow
def test_an_interrupted_fit_resumes_with_its_queue_and_momentum_weights(tmp_path):
    setup, initial = _setup()
    assert isinstance(setup.model, MomentumContrastModel)
    history = setup.model.fit(setup.batches, epochs=EPOCHS, shuffle=False, verbose=0,
                              callbacks=[ResumableTraining(tmp_path / "ref", setup.batches)])
    expected_losses, expected = history.history["loss"], _state(setup.model)

    setup, _ = _setup(initial)
    with pytest.raises(Interrupt):
        setup.model.fit(setup.batches, epochs=EPOCHS, shuffle=False, verbose=0,
                        callbacks=[ResumableTraining(tmp_path / "backup", setup.batches),
                                   InterruptAfter()])
    setup, _ = _setup(initial)
    history = setup.model.fit(setup.batches, epochs=EPOCHS, shuffle=False, verbose=0,
                              callbacks=[ResumableTraining(tmp_path / "backup", setup.batches)])
    np.testing.assert_allclose(history.history["loss"], expected_losses[1:], rtol=1e-5)
    names = [v.path for v in setup.model.weights]
    assert any("queue" in n for n in names) and any("momentum" in n for n in names)
    for name, got, want in zip(names, _state(setup.model), expected):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0, err_msg=name)


# The example compiles a training step (about 30 s on JAX); its behaviour is tested above.
@pytest.mark.heavy
def test_docstring_example_runs():
    import doctest

    from keras_cosent.models import momentum_contrast_model

    result = doctest.testmod(momentum_contrast_model, verbose=False)
    assert result.attempted > 0 and result.failed == 0


def test_a_layer_frozen_after_the_model_was_built_trains_as_one_frozen_before():
    # The momentum copies were paired with the encoder's current trainable weights:
    # one fewer after freezing, and the step failed with a shape error.
    def frozen_model(freeze_first):
        encoder = make_tiny_encoder(num_layers=1)
        layer = encoder.backbone.get_layer("token_embedding")
        if freeze_first:
            layer.trainable = False
        model = MomentumContrastModel(encoder, 5, momentum=0.8)
        layer.trainable = False
        model.compile(optimizer=keras.optimizers.SGD(0.5),
                      loss=keras_cosent.losses.InfoNCELoss(mask_false_negatives=True),
                      run_eagerly=keras.backend.backend() != "jax")
        return model

    after, before = frozen_model(False), frozen_model(True)
    for step in range(2):
        losses = [float(model.train_on_batch(_batch(4, step), np.arange(4)))
                  for model in (after, before)]
        np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)
    np.testing.assert_allclose(_numpy(after.queue), _numpy(before.queue), rtol=1e-5, atol=1e-6)
    for a, b in zip(after.encoder.variables, before.encoder.variables):
        np.testing.assert_allclose(_numpy(a), _numpy(b), rtol=1e-5, atol=1e-6)
