"""`fit` that serves epoch k the batches planned for epoch k.

`PairBatches` and `MultiBatches` plan each epoch from the seed and the epoch
number, and count epochs by the `on_epoch_end` calls Keras makes. Keras' `fit`
also makes one before the first epoch (it reads a batch to build the step, then
resets its iterator), so a plain `fit` trained epoch k on the plan of epoch
k + 1, where `keras-cosent train` (whose `ResumableTraining` sets the epoch)
trained it on plan k: the same script and command, seed for seed, differed. The
keras-cosent training models' `fit` adds `ServeEpochBatches` for such batches,
which sets the epoch as each one begins.
"""

import inspect

import keras


class ServeEpochBatches(keras.callbacks.Callback):
    """Sets `batches.set_epoch(epoch)` at the start of every epoch of `fit`."""

    def __init__(self, batches):
        super().__init__()
        self.batches = batches

    def on_epoch_begin(self, epoch, logs=None):
        self.batches.set_epoch(epoch)


def with_epoch_batches(fit, args, kwargs):
    """`fit`'s `(args, kwargs)`, its callbacks joined by a `ServeEpochBatches` when
    `x` has a `set_epoch(epoch)` method."""
    bound = inspect.signature(fit).bind(*args, **kwargs)
    x = bound.arguments.get("x")
    if callable(getattr(x, "set_epoch", None)):
        callbacks = bound.arguments.get("callbacks")
        if isinstance(callbacks, keras.callbacks.CallbackList):
            callbacks.append(ServeEpochBatches(x))
        else:
            callbacks = [*(callbacks or []), ServeEpochBatches(x)]
        bound.arguments["callbacks"] = callbacks
    return bound.args, bound.kwargs
