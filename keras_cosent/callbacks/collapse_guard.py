"""`CollapseGuard`: rewinds a run whose dev score collapses, and lowers its learning rate.

Supervised fine-tuning can collapse: with Sentence-BERT's softmax objective on
Chinese STS-B the dev Spearman falls below the zero-shot score after one epoch.
The guard reads the score an evaluator callback (`SpearmanEvaluator`,
`RetrievalEvaluator`) wrote into the epoch logs; when it falls more than
`min_delta` below the best so far, it puts the best weights back and multiplies
the learning rate by `factor`, at most `patience` times.

The learning rate is changed through a `keras.Variable`, never a Python float:
compiled steps (JAX, TensorFlow) read a float once, when they are traced. With a
schedule, the variable is the schedule's `multiplier`
(`keras_cosent.optimizers.WarmupLinearDecay`), which
`keras_cosent.optimizers.adamw` makes one of the optimizer's variables; with a
constant rate, it is the optimizer's own `learning_rate` variable.
"""

import math

import keras
import numpy as np

from keras_cosent import compat
from keras_cosent.utils.scalars import scalar

GUARD_LOG_KEY = "collapse_guard"


class CollapseGuard(keras.callbacks.Callback):
    """Restores the best weights and lowers the learning rate when the dev score collapses.

    After every epoch the guard reads `logs[monitor]` (higher is better), written
    by an evaluator listed before it. While the score improves it keeps a host
    copy of the model's weights. When the score falls more than `min_delta`
    below the best so far, it sets the weights back to that copy, multiplies the
    learning rate by `factor` (the factors compound) and writes
    `logs["collapse_guard"] = 1.0` (0.0 on the other epochs, so that
    `keras.callbacks.CSVLogger` and `History` get one value per epoch). After
    `patience` firings it only watches: later drops are reported, not undone.
    A NaN score (what the evaluators log for a diverged model) is a collapse.
    The weights are the model's (`get_weights`); the optimizer's moment
    estimates are kept, as `ReduceLROnPlateau` keeps them.

    Resuming (`keras_cosent.callbacks.ResumableTraining`): the learning-rate
    multiplier is an optimizer variable, so the backup holds it and a resumed
    run goes on at the lowered rate. The guard's own memory (best score, its
    weights, the firings: `get_state`) goes into the backup when the guard is
    passed to `ResumableTraining(..., stateful=[guard])`, and a resumed run
    then guards as the uninterrupted one. Without it the memory starts again
    from `baseline` at the resume, and the run may end differently. List the
    guard before `ResumableTraining`, so that it sees each epoch's score before
    the backup is written.

    Args:
        monitor: the log key to watch, higher is better. Defaults to
            `"sts_dev_spearman"` (`SpearmanEvaluator`'s default name).
        min_delta: the drop below the best score that counts as a collapse
            (strictly more than this). Defaults to 0.01.
        factor: the learning rate is multiplied by this, in (0, 1), each time
            the guard fires. Defaults to 0.5.
        patience: how many times the guard may fire in one `fit`. Defaults to 2.
        baseline: optional score of the weights the model has when `fit`
            starts (e.g. the zero-shot dev Spearman). When given, those weights
            count as the best so far, so that a collapse in the very first
            epoch is undone too.
        verbose: 1 prints a line when the guard fires or lets a drop pass,
            0 is silent.

    Attributes:
        best_score: highest score so far (`baseline` before the first epoch).
        best_epoch: its 0-based epoch; -1 for `baseline`, None before any.
        fired_epochs: 0-based epochs at whose end the guard fired.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> import keras_cosent
    >>> class Scores(keras.callbacks.Callback):  # stands in for an evaluator
    ...     def on_epoch_end(self, epoch, logs=None):
    ...         logs["sts_dev_spearman"] = [0.5, 0.8, 0.3, 0.8][epoch]
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> schedule = keras_cosent.optimizers.WarmupLinearDecay(1e-2, total_steps=4)
    >>> model.compile(keras_cosent.optimizers.adamw(schedule), loss="mse")
    >>> guard = keras_cosent.callbacks.CollapseGuard(factor=0.5, patience=1, verbose=0)
    >>> history = model.fit(np.ones((2, 1)), np.zeros((2, 1)), batch_size=2, epochs=4,
    ...                     callbacks=[Scores(), guard], verbose=0)
    >>> history.history["collapse_guard"]
    [0.0, 0.0, 1.0, 0.0]
    >>> guard.fired_epochs, float(schedule.multiplier.numpy())
    ([2], 0.5)
    """

    def __init__(
        self,
        monitor="sts_dev_spearman",
        min_delta=0.01,
        factor=0.5,
        patience=2,
        baseline=None,
        verbose=1,
    ):
        super().__init__()
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(
                f"`monitor` should be a non-empty string. Received: `monitor`={monitor!r}"
            )
        if "loss" in monitor.lower():
            # Read as higher-is-better, a falling loss "collapsed": the guard
            # restored the first epoch's weights and cut the rate each epoch.
            raise ValueError(
                "`monitor` should name a score where higher is better, as an evaluator "
                "logs it (`sts_dev_spearman`, `ir_dev_ndcg@10`), not a loss. "
                f"Received: `monitor`={monitor!r}"
            )
        if not _is_real(min_delta) or not 0 <= min_delta < math.inf:
            raise ValueError(
                "`min_delta` should be a non-negative finite float. "
                f"Received: `min_delta`={min_delta!r}"
            )
        if not _is_real(factor) or not 0 < factor < 1:
            raise ValueError(
                f"`factor` should be a float in (0, 1). Received: `factor`={factor!r}"
            )
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ValueError(
                f"`patience` should be a positive int. Received: `patience`={patience!r}"
            )
        if baseline is not None and (not _is_real(baseline) or not math.isfinite(baseline)):
            raise ValueError(
                f"`baseline` should be None or a finite float. Received: `baseline`={baseline!r}"
            )
        if verbose not in (0, 1):
            raise ValueError(f"`verbose` should be 0 or 1. Received: `verbose`={verbose!r}")
        self.monitor = monitor
        self.min_delta = float(min_delta)
        self.factor = float(factor)
        self.patience = patience
        self.baseline = None if baseline is None else float(baseline)
        self.verbose = verbose
        self._reset_tracking()

    def _reset_tracking(self):
        self.best_score = -math.inf
        self.best_epoch = None
        self.fired_epochs = []
        self._best_weights = None

    def get_state(self):
        """The guard's memory as NumPy arrays, for `ResumableTraining` to back up."""
        state = {
            "best_score": np.float64(self.best_score),
            # -2: no best epoch yet (-1 is the start of training, from `baseline`).
            "best_epoch": np.int64(-2 if self.best_epoch is None else self.best_epoch),
            "fired_epochs": np.asarray(self.fired_epochs, dtype=np.int64),
        }
        for index, weights in enumerate(self._best_weights or []):
            state[f"weights_{index}"] = np.asarray(weights)
        return state

    def set_state(self, state):
        """Restores the memory `get_state` returned (a resumed run's)."""
        self.best_score = float(state["best_score"])
        best_epoch = int(state["best_epoch"])
        self.best_epoch = None if best_epoch == -2 else best_epoch
        self.fired_epochs = [int(epoch) for epoch in state["fired_epochs"]]
        count = sum(1 for key in state if key.startswith("weights_"))
        self._best_weights = [state[f"weights_{i}"] for i in range(count)] or None

    def _learning_rate_variable(self):
        """The variable that scales the optimizer's learning rate, checked."""
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is None:
            raise ValueError("CollapseGuard needs a compiled model: the model has no optimizer.")
        # Under float16 loss scaling Keras wraps the optimizer; the wrapper's own rate
        # is unused, the inner optimizer's drives the update.
        inner = optimizer
        while isinstance(inner, keras.optimizers.LossScaleOptimizer):
            inner = inner.inner_optimizer
        rate = compat.optimizer_learning_rate(inner)
        if isinstance(rate, keras.Variable):
            variable = rate
        elif isinstance(getattr(rate, "multiplier", None), keras.Variable):
            variable = rate.multiplier
        else:
            raise ValueError(
                "CollapseGuard lowers the learning rate through a variable: the optimizer's "
                "learning rate should be a float or a schedule with a `multiplier` variable "
                "(keras_cosent.optimizers.WarmupLinearDecay). Received: learning rate of "
                f"type {type(rate).__name__}"
            )
        if not any(variable is v for v in optimizer.variables):
            raise ValueError(
                f"The schedule's `multiplier` ({variable.path}) is not one of the "
                f"optimizer's variables, so a compiled step would not see it change; build "
                f"the optimizer with keras_cosent.optimizers.adamw. Received: optimizer "
                f"{type(optimizer).__name__}"
            )
        return variable

    def on_train_begin(self, logs=None):
        self._reset_tracking()
        self._rate = self._learning_rate_variable()
        if self.baseline is not None:
            self.best_score = self.baseline
            self.best_epoch = -1
            self._best_weights = self.model.get_weights()

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or self.monitor not in logs:
            known = sorted(logs) if logs else []
            raise ValueError(
                f"CollapseGuard watches `monitor`={self.monitor!r}, which is not in the epoch "
                f"logs (keys: {known}); list the evaluator that writes it before the guard."
            )
        score = float(logs[self.monitor])
        fired = False
        if score > self.best_score:
            self.best_score, self.best_epoch = score, epoch
            self._best_weights = self.model.get_weights()
        elif (self.best_score - score > self.min_delta
              # NaN compares false: a diverged model is the worst collapse.
              or (math.isnan(score) and self._best_weights is not None)):
            if len(self.fired_epochs) < self.patience:
                fired = True
                self._fire(epoch, score)
            elif self.verbose:
                print(
                    f"Epoch {epoch + 1}: {self.monitor}={score:.4f} is below the best "
                    f"{self.best_score:.4f}; the collapse guard has fired {self.patience} "
                    "time(s) (patience) and no longer intervenes."
                )
        if logs is not None:
            logs[GUARD_LOG_KEY] = 1.0 if fired else 0.0

    def _fire(self, epoch, score):
        model = self.model  # on JAX, reading it syncs the trainer's state first
        model.set_weights(self._best_weights)
        old = float(scalar(self._rate))
        self._rate.assign(old * self.factor)
        self.fired_epochs.append(epoch)
        if self.verbose:
            origin = ("the start of training" if self.best_epoch == -1
                      else f"epoch {self.best_epoch + 1}")
            rest = self.patience - len(self.fired_epochs)
            print(
                f"Epoch {epoch + 1}: collapse guard fired: {self.monitor}={score:.4f} fell "
                f"more than {self.min_delta} below the best {self.best_score:.4f}; restored "
                f"the weights of {origin} and multiplied the learning rate by {self.factor} "
                f"(now x{old * self.factor:.4g}); "
                + (f"{rest} firing(s) left." if rest else "no firings left: it now only watches.")
            )


def _is_real(value):
    return not isinstance(value, bool) and isinstance(value, (int, float, np.floating, np.integer))
