"""ResumableTraining: an interrupted `fit` restored from its backup ends as if never stopped.

Dropout is on (0.3), so the test fails when the seed generators' states (or, on
PyTorch, the global generator keras-hub's unseeded dropout draws from) are not
restored; the batches reshuffle every epoch, so it fails when the restored run
starts from epoch 0's batch order. The reference is the same `fit` left to
finish, from the same initial variables.
"""

import json
import re

import keras
import numpy as np
import pytest

import keras_cosent
from keras_cosent.callbacks import ResumableTraining

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat", "the", "on", "mat"]
EPOCHS = 3


class Interrupt(Exception):
    pass


class InterruptAfter(keras.callbacks.Callback):
    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epoch:
            raise Interrupt


def _pairs():
    rng = np.random.default_rng(0)
    first = [" ".join(rng.choice(VOCAB[5:], 4)) for _ in range(32)]
    second = [" ".join(rng.choice(VOCAB[5:], 3)) for _ in range(32)]
    scores = rng.uniform(0, 5, 32).astype("float32")
    return keras_cosent.data.PairDataset([first, second], scores, source="inline")


def _setup(initial=None):
    """A fresh training set-up; `initial` sets every variable (seed states included)."""
    import keras_hub

    encoder = keras_cosent.models.SentenceEncoder(
        keras_hub.models.BertBackbone(
            vocabulary_size=len(VOCAB), num_layers=1, num_heads=2, hidden_dim=8,
            intermediate_dim=16, max_sequence_length=16, dropout=0.3,
        ),
        keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=True),
        max_length=16,
    )
    setup = keras_cosent.training.build(
        encoder, _pairs(), "cosent", batch_size=8, epochs=EPOCHS, learning_rate=1e-3
    )
    variables = encoder.variables
    if initial is None:
        initial = [keras.ops.convert_to_numpy(v.value) for v in variables]
    else:
        for variable, value in zip(variables, initial):
            variable.assign(value)
    if keras.backend.backend() == "torch":
        import torch

        torch.manual_seed(0)
    return setup, initial


def _weights(model):
    return [keras.ops.convert_to_numpy(w) for w in model.weights]


@pytest.mark.heavy
def test_a_restored_fit_ends_with_the_uninterrupted_weights(tmp_path):
    stop_after = 0
    setup, initial = _setup()
    reference_backup = ResumableTraining(tmp_path / "reference", setup.batches)
    history = setup.model.fit(
        setup.batches, epochs=EPOCHS, shuffle=False, verbose=0, callbacks=[reference_backup]
    )
    expected_losses, expected = history.history["loss"], _weights(setup.model)
    assert not (tmp_path / "reference").exists()  # delete_checkpoint=True by default

    backup = tmp_path / "backup"
    setup, _ = _setup(initial)
    with pytest.raises(Interrupt):
        setup.model.fit(
            setup.batches, epochs=EPOCHS, shuffle=False, verbose=0,
            callbacks=[ResumableTraining(backup, setup.batches), InterruptAfter(stop_after)],
        )
    # A new process would start from scratch: new model, new batches, fresh generators.
    setup, _ = _setup(initial)
    history = setup.model.fit(
        setup.batches, epochs=EPOCHS, shuffle=False, verbose=0,
        callbacks=[ResumableTraining(backup, setup.batches)],
    )
    np.testing.assert_allclose(
        history.history["loss"], expected_losses[stop_after + 1:], rtol=1e-6
    )
    for got, want in zip(_weights(setup.model), expected):
        np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)


def test_restored_seed_states_draw_the_interrupted_runs_dropout_masks(tmp_path):
    """The restore itself, on every backend without a fit (the restored-fit test
    above is `heavy`): the masks drawn after an epoch's backup are drawn again by a
    fresh model resumed from it, and not by a fresh model left as it starts."""
    setup, initial = _setup()
    inputs = setup.batches[0][0]
    callback = ResumableTraining(tmp_path, setup.batches)
    callback.set_model(setup.model)
    setup.model(inputs, training=True)  # epoch 0 draws masks: the states move on
    callback.on_epoch_end(0)  # the backup of epoch 1's start
    expected = keras.ops.convert_to_numpy(setup.model(inputs, training=True))

    fresh, _ = _setup(initial)
    unrestored = keras.ops.convert_to_numpy(fresh.model(inputs, training=True))
    assert np.abs(unrestored - expected).max() > 1e-3  # other masks: the check can fail

    resumed, _ = _setup(initial)
    callback = ResumableTraining(tmp_path, resumed.batches)
    callback.set_model(resumed.model)
    callback.on_train_begin()  # restores epoch 1's start, weights and all
    callback.on_epoch_begin(1)
    got = keras.ops.convert_to_numpy(resumed.model(inputs, training=True))
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)


def test_a_first_backup_cut_short_starts_again_from_the_first_epoch(tmp_path):
    # Killed while writing epoch 1's weights: no metadata, no previous copy.
    (tmp_path / "latest.weights.h5").write_bytes(b"\x89HDF\r\n\x1a\n cut short")
    setup, _ = _setup()
    callback = ResumableTraining(tmp_path, setup.batches)
    callback.set_model(setup.model)
    with pytest.warns(UserWarning, match="cut short.*starts from the first epoch"):
        callback.on_train_begin()
    assert not (tmp_path / "latest.weights.h5").exists()
    assert getattr(setup.model, "_initial_epoch", None) in (None, 0)
    # With a finished epoch on record the unreadable weights are not discarded.
    (tmp_path / "latest.weights.h5").write_bytes(b"\x89HDF\r\n\x1a\n cut short")
    (tmp_path / "training_metadata.json").write_text('{"epoch": 1}')
    callback = ResumableTraining(tmp_path, setup.batches)
    callback.set_model(setup.model)
    with pytest.raises(OSError):
        callback.on_train_begin()
    assert (tmp_path / "latest.weights.h5").exists()


def _built(setup):
    """The model and its optimizer built, as they are when `fit` backs up an epoch."""
    setup.model(setup.batches[0][0], training=False)
    setup.model.optimizer.build(setup.model.trainable_variables)
    return setup


def _backed_up(setup, directory, epochs):
    _built(setup)
    callback = ResumableTraining(directory, setup.batches)
    callback.set_model(setup.model)
    saved = []
    for epoch in range(epochs):
        for variable in setup.model.trainable_variables[:1]:
            variable.assign(variable + 1.0)  # each epoch's weights told apart
        saved.append(_weights(setup.model))
        callback.on_epoch_end(epoch)
    return saved


def test_weights_cut_short_that_still_open_fall_back_to_the_previous_epoch(tmp_path):
    # An h5 file with none of the model's variables opens, and Keras' load raises
    # ValueError, not the OSError its own fallback catches: the previous epoch's
    # copy is restored, with its metadata.
    import h5py

    setup, initial = _setup()
    saved = _backed_up(setup, tmp_path, 2)
    with h5py.File(tmp_path / "latest.weights.h5", "w"):
        pass
    resumed, _ = _setup(initial)
    callback = ResumableTraining(tmp_path, resumed.batches)
    callback.set_model(resumed.model)
    callback.on_train_begin()
    assert resumed.model._initial_epoch == 1
    for got, want in zip(_weights(resumed.model), saved[0]):
        np.testing.assert_array_equal(got, want)


def test_a_kill_between_the_weights_and_the_metadata_resumes_from_the_epoch_before(
        tmp_path, monkeypatch):
    # The weights and the metadata are two renames: killed between them, the backup
    # paired epoch 3's weights with epoch 2's metadata, and the resumed run trained
    # epoch 3 a second time on top of them.
    from keras_cosent.callbacks import resumable_training

    class Killed(Exception):
        pass

    setup, initial = _setup()
    saved = _backed_up(setup, tmp_path, 2)
    write = resumable_training._write_replacing

    def killed_after_the_weights(path, writer):
        write(path, writer)
        if path.endswith("latest.weights.h5"):
            raise Killed

    monkeypatch.setattr(resumable_training, "_write_replacing", killed_after_the_weights)
    callback = ResumableTraining(tmp_path, setup.batches)
    callback.set_model(setup.model)
    for variable in setup.model.trainable_variables[:1]:
        variable.assign(variable + 1.0)
    with pytest.raises(Killed):
        callback.on_epoch_end(2)
    monkeypatch.setattr(resumable_training, "_write_replacing", write)
    assert json.loads((tmp_path / "training_metadata.json").read_text())["epoch"] == 2

    resumed, _ = _setup(initial)
    callback = ResumableTraining(tmp_path, resumed.batches)
    callback.set_model(resumed.model)
    with pytest.warns(UserWarning, match="cut short between the weights and the metadata of "
                                         "epoch 3.*resumes after epoch 2"):
        callback.on_train_begin()
    assert resumed.model._initial_epoch == 2
    for got, want in zip(_weights(resumed.model), saved[1]):
        np.testing.assert_array_equal(got, want)
    callback.on_epoch_begin(2)  # the seed states of the epoch trained again are there


def test_ctrl_c_while_backing_up_takes_effect_once_the_backup_is_whole(tmp_path, monkeypatch):
    import os
    import signal

    setup, initial = _setup()
    _built(setup)
    save_weights = setup.model.save_weights

    def interrupted_save(path, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C arrives mid-save
        save_weights(path, **kwargs)

    monkeypatch.setattr(setup.model, "save_weights", interrupted_save)
    callback = ResumableTraining(tmp_path, setup.batches)
    callback.set_model(setup.model)
    with pytest.raises(KeyboardInterrupt):
        callback.on_epoch_end(0)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "latest.weights.h5", "seed_states-1.npz", "training_metadata.json"]
    resumed, _ = _setup(initial)
    callback = ResumableTraining(tmp_path, resumed.batches)
    callback.set_model(resumed.model)
    callback.on_train_begin()
    assert resumed.model._initial_epoch == 1
    for got, want in zip(_weights(resumed.model), _weights(setup.model)):
        np.testing.assert_array_equal(got, want)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_backup_without_seed_states_is_refused_by_name(tmp_path):
    # Keras' own BackupAndRestore state restores epoch 2 but holds no seed states.
    setup, _ = _setup()
    callback = ResumableTraining(tmp_path, setup.batches)
    callback.set_model(setup.model)
    with open(callback._training_metadata_path, "w") as f:
        json.dump({"epoch": 2, "batch": 0}, f)
    callback.on_train_begin()
    with pytest.raises(FileNotFoundError, match="seed_states-2.npz"):
        callback.on_epoch_begin(2)


def test_a_fit_that_starts_at_a_later_epoch_without_a_backup_trains(tmp_path):
    # Any first epoch above 0 was taken for a restore, and refused for its
    # missing seed states, though no backup existed.
    setup, _ = _setup()
    seen = []
    history = setup.model.fit(
        setup.batches, epochs=3, initial_epoch=2, shuffle=False, verbose=0,
        callbacks=[ResumableTraining(tmp_path / "backup", setup.batches),
                   keras.callbacks.LambdaCallback(on_epoch_begin=lambda e, logs: seen.append(e))],
    )
    assert seen == [2] and len(history.history["loss"]) == 1
    assert not (tmp_path / "backup").exists()  # deleted as the fit ended normally


@pytest.mark.parametrize("kwargs, match", [
    ({"backup_dir": None}, "`backup_dir`=None"),  # was backed up into ./None
    ({"backup_dir": ""}, "`backup_dir`=''"),
    ({"delete_checkpoint": "no"}, "`delete_checkpoint`='no'"),  # truthy: deleted
])
def test_bad_arguments_are_named(tmp_path, kwargs, match):
    arguments = {"backup_dir": tmp_path, "batches": _setup()[0].batches, **kwargs}
    with pytest.raises(ValueError, match=re.escape(match)):
        ResumableTraining(**arguments)


def test_one_stateful_callback_given_bare_is_named(tmp_path):
    from keras_cosent.callbacks import CollapseGuard

    with pytest.raises(TypeError, match=re.escape("`stateful=[guard]`. Received: `stateful` "
                                                  "of type CollapseGuard")):
        ResumableTraining(tmp_path, _setup()[0].batches, stateful=CollapseGuard())


def test_batches_without_set_epoch_are_refused(tmp_path):
    with pytest.raises(TypeError, match="set_epoch"):
        ResumableTraining(tmp_path, [1, 2, 3])


def test_set_epoch_rejects_a_negative_epoch():
    setup, _ = _setup()
    with pytest.raises(ValueError, match="epoch`=-1"):
        setup.batches.set_epoch(-1)


@pytest.mark.heavy
def test_docstring_example_runs():
    import doctest

    from keras_cosent.callbacks import resumable_training

    result = doctest.testmod(resumable_training, verbose=False)
    assert result.attempted > 0 and result.failed == 0
