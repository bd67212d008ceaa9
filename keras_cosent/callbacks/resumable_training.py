"""`ResumableTraining`: Keras' `BackupAndRestore` that also restores the batch order.

`keras.callbacks.BackupAndRestore` saves the model's and the optimizer's
variables (the dropout seed generators and the step counter of the learning-rate
schedule included) at the end of every epoch and, when `fit` is started again
after an interruption, restores them and starts at the epoch after the last
saved one. Two things a restored run needs are not in that backup:

- the batch order: a `keras_cosent.data.PairBatches` reshuffles in
  `on_epoch_end`, which Keras does not call for the epochs it skips, so a
  restored run would see epoch 0's batches again;
- the dropout masks: the states of the layers' `keras.random.SeedGenerator`s
  are not weights, and restart from their initial values; on PyTorch, Keras
  draws the masks of unseeded dropout layers (keras-hub's) from torch's global
  generator, whose state is not saved either.

This callback sets the batches to the epoch being trained before each epoch,
and saves the seed generators' states beside Keras' backup (written before it,
one file per epoch, so that the states always match the epoch Keras restores).
A restored run then trains on the batches and draws the dropout masks of an
uninterrupted run, and ends with its weights.

With `keras_cosent.callbacks.CollapseGuard`, the learning-rate multiplier it
lowers is an optimizer variable and is restored with the rest; the guard's own
memory (best score and weights, firings) is backed up beside the seed states
when the guard is passed as `stateful=[guard]`.
"""

import contextlib
import json
import os
import shutil
import signal
import threading
import warnings

import keras
import numpy as np

from keras_cosent.utils.arguments import check_bool
from keras_cosent.utils.seed_states import seed_states

SEED_STATES = "seed_states-{epoch}.npz"
# The epoch a weights file of the backup was saved for, an attribute of the file:
# weights and metadata are two renames, and a kill between them pairs this epoch's
# weights with the previous epoch's metadata.
WEIGHTS_EPOCH = "keras_cosent_epoch"
TORCH_GENERATOR = "torch_generator"
TORCH_CUDA_GENERATORS = "torch_cuda_generators"


def _torch_generators():
    import torch

    states = {TORCH_GENERATOR: torch.random.get_rng_state().numpy()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states[TORCH_CUDA_GENERATORS] = np.stack(
            [state.numpy() for state in torch.cuda.get_rng_state_all()]
        )
    return states


def _set_torch_generators(saved):
    import torch

    torch.random.set_rng_state(torch.from_numpy(np.asarray(saved[TORCH_GENERATOR], np.uint8)))
    if TORCH_CUDA_GENERATORS in saved.files:
        torch.cuda.set_rng_state_all(
            [torch.from_numpy(state) for state in np.asarray(saved[TORCH_CUDA_GENERATORS], np.uint8)]
        )


@contextlib.contextmanager
def _signals_deferred():
    """Holds SIGINT and SIGTERM back until the block ends, then hands one that came
    to the handler it had (Ctrl-C's raises KeyboardInterrupt; a default action is
    taken, an ignored signal stays ignored): a backup is written whole, never cut
    short by Ctrl-C (outside the main thread, where no handler can be set, the
    block runs as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    handlers = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        handlers[signum] = signal.signal(signum, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    if received:
        signum = received[0]
        handler = handlers[signum]
        if callable(handler):
            handler(signum, None)  # the run's own: Ctrl-C's raises KeyboardInterrupt
        elif handler == signal.SIG_DFL:
            os.kill(os.getpid(), signum)  # its default action, now that it is back


def _weights_epoch(path):
    """The epoch stamped on a backup's weights file, or None (an older backup)."""
    import h5py

    with h5py.File(path, "r") as f:
        epoch = f.attrs.get(WEIGHTS_EPOCH)
    return None if epoch is None else int(epoch)


def _metadata_epoch(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)["epoch"]


def _write_replacing(path, write):
    """`write(temporary)` beside `path`, then renamed to it: `path` is the old file
    or the whole new one, never a part."""
    directory, name = os.path.split(path)
    # The name's own ending kept: Keras saves weights only to names ending in
    # ".weights.h5", np.savez appends ".npz" to others.
    temporary = os.path.join(directory, f".partial-{name}")
    write(temporary)
    os.replace(temporary, path)


class ResumableTraining(keras.callbacks.BackupAndRestore):
    """Backs up training after every epoch and resumes from the backup.

    The backup is Keras' own (`latest.weights.h5` and
    `training_metadata.json` in `backup_dir`, the previous epoch's copy kept
    too, so that a run killed while saving resumes from the epoch before);
    this class adds the batch order and the dropout seed states, so that a
    restored run continues exactly as the uninterrupted run would have. Call
    `fit` with `shuffle=False`: the batches shuffle themselves, and Keras'
    extra shuffle of their order draws from Python's global generator, which
    no backup restores.

    Args:
        backup_dir: directory for the backup; it must survive the interruption
            (not a temporary directory removed on failure).
        batches: the `keras_cosent.data.PairBatches` (or any object with a
            `set_epoch(epoch)` method) that `fit` iterates.
        delete_checkpoint: remove `backup_dir` when `fit` ends normally.
            Defaults to True, as in `BackupAndRestore`; pass False to remove it
            yourself once everything after `fit` is written.
        stateful: callbacks whose state the backup also holds, each with
            `get_state()` (a dict of NumPy arrays) and `set_state(state)`, such
            as `CollapseGuard`; list them before this callback in `fit`.

    Example:

    >>> import tempfile
    >>> import numpy as np
    >>> import keras_hub
    >>> import keras_cosent
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat"]
    >>> encoder = keras_cosent.models.SentenceEncoder(
    ...     keras_hub.models.BertBackbone(vocabulary_size=len(vocab), num_layers=1,
    ...         num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16),
    ...     keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True), max_length=16)
    >>> pairs = keras_cosent.data.PairDataset(
    ...     [["a cat sat", "a dog", "a cat", "dog sat"], ["a cat", "a dog sat", "cat", "a cat"]],
    ...     np.array([4.0, 3.0, 5.0, 0.5], "float32"), source="inline")
    >>> setup = keras_cosent.training.build(encoder, pairs, "cosent", batch_size=2, epochs=2)
    >>> backup = keras_cosent.callbacks.ResumableTraining(tempfile.mkdtemp(), setup.batches)
    >>> history = setup.model.fit(setup.batches, epochs=2, callbacks=[backup],
    ...                           shuffle=False, verbose=0)
    >>> len(history.history["loss"])
    2
    """

    def __init__(self, backup_dir, batches, delete_checkpoint=True, stateful=()):
        if not callable(getattr(batches, "set_epoch", None)):
            raise TypeError(
                "`batches` should have a `set_epoch(epoch)` method, like "
                "keras_cosent.data.PairBatches. Received: `batches` of type "
                f"{type(batches).__name__}"
            )
        if not isinstance(backup_dir, (str, os.PathLike)) or not str(backup_dir):
            # str(None) would back up into a folder named "None".
            raise ValueError(
                "`backup_dir` should be a directory path (str or os.PathLike). "
                f"Received: `backup_dir`={backup_dir!r}"
            )
        delete_checkpoint = check_bool("delete_checkpoint", delete_checkpoint)
        if isinstance(stateful, (str, bytes)) or not hasattr(stateful, "__iter__"):
            # One callback given bare would fail in `list` with "not iterable".
            raise TypeError(
                "`stateful` should be a list of callbacks, e.g. `stateful=[guard]`. "
                f"Received: `stateful` of type {type(stateful).__name__}"
            )
        stateful = list(stateful)
        for callback in stateful:
            if not (callable(getattr(callback, "get_state", None))
                    and callable(getattr(callback, "set_state", None))):
                raise TypeError(
                    "`stateful` should hold callbacks with `get_state()` and "
                    f"`set_state(state)`. Received: {type(callback).__name__}"
                )
        self.stateful = stateful
        super().__init__(
            str(backup_dir), save_freq="epoch", double_checkpoint=True,
            delete_checkpoint=delete_checkpoint,
        )
        self.batches = batches
        self._first_epoch = True
        self._restored = False

    def _seed_path(self, epoch):
        return os.path.join(self.backup_dir, SEED_STATES.format(epoch=epoch))

    def on_train_begin(self, logs=None):
        self._first_epoch = True
        self._restored = False
        if not self.model.built:
            # BackupAndRestore restores into built variables only; a forward pass
            # in inference mode builds the model without drawing dropout masks.
            self.model(self.batches[0][0], training=False)
        if (os.path.exists(self._weights_path)
                and not os.path.exists(self._training_metadata_path)
                and not os.path.exists(self._prev_weights_path)):
            # Weights without the metadata written after them, and no earlier
            # epoch: a first save cut short (a backup written before saves were
            # whole), which holds no finished epoch.
            self._discard_cut_short_backup()
            return
        self._roll_back_torn_save()
        try:
            super().on_train_begin(logs)
        except (OSError, ValueError):
            # Keras falls back to the previous epoch's copy on an OSError only; a
            # weights file cut short can also open and lack variables (ValueError).
            if not os.path.exists(self._prev_weights_path):
                if os.path.exists(self._training_metadata_path):
                    raise
                self._discard_cut_short_backup()
                return
            shutil.copyfile(self._prev_weights_path, self._weights_path)
            if os.path.exists(self._prev_training_metadata_path):
                shutil.copyfile(self._prev_training_metadata_path,
                                self._training_metadata_path)
            elif os.path.exists(self._training_metadata_path):
                os.remove(self._training_metadata_path)
            self._load_model()
        # An epoch was restored (Keras set the model's initial epoch from the
        # metadata); a `fit` started at `initial_epoch > 0` restores none.
        self._restored = os.path.exists(self._training_metadata_path)

    def _roll_back_torn_save(self):
        """Puts the previous epoch's weights back where a kill between the two renames
        of a save left this epoch's weights beside the previous epoch's metadata:
        resumed as they are, the epoch would be trained twice."""
        if not (os.path.exists(self._weights_path)
                and os.path.exists(self._training_metadata_path)):
            return
        try:
            weights_epoch = _weights_epoch(self._weights_path)
            metadata_epoch = _metadata_epoch(self._training_metadata_path)
        except (OSError, ValueError, KeyError):
            return  # a file cut short: on_train_begin's fallback handles it
        if weights_epoch is None or weights_epoch == metadata_epoch:
            return
        if (not os.path.exists(self._prev_weights_path)
                or _weights_epoch(self._prev_weights_path) != metadata_epoch):
            raise ValueError(
                f"The backup in {self.backup_dir} holds the weights of epoch {weights_epoch} "
                f"and the metadata of epoch {metadata_epoch}, and no copy of epoch "
                f"{metadata_epoch}'s weights to go with it; it cannot be resumed"
            )
        _write_replacing(self._weights_path,
                         lambda tmp: shutil.copyfile(self._prev_weights_path, tmp))
        warnings.warn(
            f"The backup in {self.backup_dir} was cut short between the weights and the "
            f"metadata of epoch {weights_epoch} (the run was killed while saving it); "
            f"training resumes after epoch {metadata_epoch}, from that epoch's weights",
            stacklevel=3,
        )

    def _discard_cut_short_backup(self):
        os.remove(self._weights_path)
        warnings.warn(
            f"The backup in {self.backup_dir} holds the weights of a save cut short "
            "(the run was stopped while writing its first epoch's backup) and no "
            "finished epoch; training starts from the first epoch",
            stacklevel=3,
        )

    def _save_model(self):
        # Keras' own save, each file written beside its name and renamed into
        # place: a file is the previous epoch's or this one's, never a part.
        os.makedirs(self.backup_dir, exist_ok=True)
        for path, previous in ((self._weights_path, self._prev_weights_path),
                               (self._training_metadata_path,
                                self._prev_training_metadata_path)):
            if self.double_checkpoint and os.path.exists(path):
                _write_replacing(previous, lambda tmp, path=path: shutil.copyfile(path, tmp))

        def write_weights(tmp):
            import h5py

            self.model.save_weights(tmp, overwrite=True)
            with h5py.File(tmp, "a") as f:
                f.attrs[WEIGHTS_EPOCH] = self._current_epoch

        _write_replacing(self._weights_path, write_weights)

        def write_metadata(tmp):
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"epoch": self._current_epoch, "batch": self._last_batch_seen}, f)

        _write_replacing(self._training_metadata_path, write_metadata)

    def on_epoch_begin(self, epoch, logs=None):
        if self._first_epoch and self._restored and epoch > 0:
            path = self._seed_path(epoch)
            if not os.path.exists(path):
                raise FileNotFoundError(
                    f"The backup in {self.backup_dir} restores epoch {epoch} but has no "
                    f"dropout seed states for it ({os.path.basename(path)}); it was not "
                    "written by ResumableTraining"
                )
            with np.load(path) as saved:
                states = seed_states(self.model)
                stored = [name for name in saved.files if name.startswith("s")]
                if len(stored) != len(states):
                    raise ValueError(
                        f"{path} holds {len(stored)} seed states; the model has "
                        f"{len(states)}"
                    )
                for index, variable in enumerate(states):
                    variable.assign(saved[f"s{index}"])
                if TORCH_GENERATOR in saved.files:
                    _set_torch_generators(saved)
                for index, callback in enumerate(self.stateful):
                    prefix = f"c{index}."
                    callback.set_state({name[len(prefix):]: saved[name]
                                        for name in saved.files if name.startswith(prefix)})
        self._first_epoch = False
        self.batches.set_epoch(epoch)

    def on_epoch_end(self, epoch, logs=None):
        # Ctrl-C (or SIGTERM) while the backup is written takes effect once it is
        # whole: the seed states, the weights and the metadata of one epoch.
        with _signals_deferred():
            self._back_up(epoch, logs)

    def _back_up(self, epoch, logs):
        os.makedirs(self.backup_dir, exist_ok=True)
        path = self._seed_path(epoch + 1)
        states = {
            f"s{index}": keras.ops.convert_to_numpy(variable.value)
            for index, variable in enumerate(seed_states(self.model))
        }
        if keras.backend.backend() == "torch":
            states.update(_torch_generators())
        for index, callback in enumerate(self.stateful):
            states.update({f"c{index}.{key}": value
                           for key, value in callback.get_state().items()})
        _write_replacing(path, lambda temporary: np.savez(temporary, **states))
        # The previous epoch's states stay for Keras' previous-epoch fallback.
        stale = self._seed_path(epoch - 1)
        if os.path.exists(stale):
            os.remove(stale)
        super().on_epoch_end(epoch, logs)
