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
import warnings

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
    warn_past_schedule(getattr(fit, "__self__", None), x, bound.arguments.get("epochs", 1),
                       bound.arguments.get("initial_epoch", 0))
    if callable(getattr(x, "set_epoch", None)):
        callbacks = bound.arguments.get("callbacks")
        if isinstance(callbacks, keras.callbacks.CallbackList):
            callbacks.append(ServeEpochBatches(x))
        else:
            callbacks = [*(callbacks or []), ServeEpochBatches(x)]
        bound.arguments["callbacks"] = callbacks
    return bound.args, bound.kwargs


def warn_past_schedule(model, batches, epochs, initial_epoch=0):
    """Warns when `fit` would step past the end of `model`'s `WarmupLinearDecay`.

    `keras_cosent.training.build(..., epochs=E)` plans the rate over E epochs'
    steps, to 0 at the last: a `fit(epochs=...)` beyond them (or a second `fit`)
    trained on at rate 0, without a word.
    """
    from keras_cosent.compat import optimizer_learning_rate
    from keras_cosent.optimizers.warmup_linear_decay import WarmupLinearDecay
    from keras_cosent.utils.scalars import scalar

    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or not hasattr(batches, "__len__"):
        return
    schedule = optimizer_learning_rate(optimizer)
    if not isinstance(schedule, WarmupLinearDecay):
        return
    # With gradient accumulation `iterations` is a computed tensor, not a variable.
    done = int(scalar(optimizer.iterations))
    steps = max(int(epochs) - int(initial_epoch), 0) * len(batches)
    if done + steps > schedule.total_steps:
        warnings.warn(
            f"fit(epochs={epochs}) takes {steps} steps of {len(batches)} batches from step "
            f"{done}, past the {schedule.total_steps} steps over which the learning-rate "
            f"schedule decays to 0: the steps beyond it train at rate 0. Give `build` the "
            f"epochs `fit` trains (build(..., epochs=...)).", stacklevel=4)
