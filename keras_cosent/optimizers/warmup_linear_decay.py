"""The learning-rate schedule the training builder uses: linear warm-up, then linear decay.

This is the schedule of BERT fine-tuning and of Sentence-BERT's and SimCSE's
training scripts (`get_linear_schedule_with_warmup` in Hugging Face transformers).
"""

import keras
from keras import ops

from keras_cosent.api_export import keras_cosent_export
from keras_cosent.utils.arguments import check_positive_float
from keras_cosent.utils.arguments import is_int
from keras_cosent.utils.scalars import scalar


@keras_cosent_export
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Rises linearly from 0 to `peak_learning_rate`, then falls linearly to 0.

    Args:
        peak_learning_rate: the learning rate reached at the end of warm-up.
        total_steps: number of optimiser steps in the whole run; the rate is 0
            from there on.
        warmup_steps: number of steps of linear warm-up (0 for none).
        multiplier: initial value of `multiplier`, a factor on every rate.
            Defaults to 1.0.

    Attributes:
        multiplier: a float32 `keras.Variable` that multiplies the rate. A
            Variable, not a Python float, so that changing it (`assign`) changes
            the rate inside compiled training steps (JAX, TensorFlow) without
            retracing; `keras_cosent.callbacks.CollapseGuard` lowers it.
            `keras_cosent.optimizers.adamw` makes it one of the optimizer's
            variables, which JAX's stateless training step needs and which
            saves it with the optimizer's state (`ResumableTraining` backups).

    Call arguments:
        step: the optimiser's iteration counter (0-based). Under an optimizer's
            `gradient_accumulation_steps`, Keras passes the count of batches, not
            of updates: give `total_steps` and `warmup_steps` in batches there
            (`keras-cosent train` and `training.build` accumulate none).

    Returns:
        The float32 learning rate for that step:
        `peak * step / warmup_steps` during warm-up, then
        `peak * (total_steps - step) / (total_steps - warmup_steps)`, floored at 0,
        times `multiplier`.

    Example:

    >>> from keras_cosent.optimizers import WarmupLinearDecay
    >>> schedule = WarmupLinearDecay(1.0, total_steps=10, warmup_steps=2)
    >>> [round(float(schedule(s)), 3) for s in (0, 1, 2, 6, 10)]
    [0.0, 0.5, 1.0, 0.5, 0.0]
    >>> _ = schedule.multiplier.assign(0.5)
    >>> round(float(schedule(6)), 3)
    0.25

    Reference:
        Devlin et al., BERT (2019), https://arxiv.org/abs/1810.04805, appendix A.3.
    """

    def __init__(self, peak_learning_rate, total_steps, warmup_steps=0, multiplier=1.0):
        check_positive_float("peak_learning_rate", peak_learning_rate)
        if not is_int(total_steps) or total_steps < 1:
            raise ValueError(
                f"`total_steps` should be a positive integer. Received: `total_steps`="
                f"{total_steps!r}"
            )
        if not is_int(warmup_steps) or not 0 <= warmup_steps <= total_steps:
            # A fraction (0.1, as `build`'s `warmup` takes) would silently be no warm-up.
            raise ValueError(
                "`warmup_steps` should be an integer in [0, total_steps="
                f"{total_steps}] (a step count, not a fraction). Received: "
                f"`warmup_steps`={warmup_steps!r}"
            )
        check_positive_float("multiplier", multiplier)
        self.peak_learning_rate = float(peak_learning_rate)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.multiplier = keras.Variable(
            float(multiplier), dtype="float32", trainable=False, name="learning_rate_multiplier"
        )

    def __call__(self, step):
        step = ops.cast(step, "float32")
        peak = self.peak_learning_rate
        # max(.., 1) keeps both branches finite; ops.where evaluates both.
        warmup = peak * step / max(self.warmup_steps, 1)
        decay_steps = max(self.total_steps - self.warmup_steps, 1)
        decay = peak * (self.total_steps - step) / decay_steps
        rate = ops.where(step < self.warmup_steps, warmup, decay)
        return ops.maximum(rate, 0.0) * ops.cast(self.multiplier, "float32")

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "multiplier": float(scalar(self.multiplier)),
        }


# Runs saved before the schedule moved into the library name it `keras_cosent_recipes>`.
keras.saving.get_custom_objects()["keras_cosent_recipes>WarmupLinearDecay"] = WarmupLinearDecay
