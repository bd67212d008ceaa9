"""`adamw`: the AdamW set-up of BERT fine-tuning, on the fastest kernel of the backend."""

import keras

from keras_cosent.optimizers.adam_w import AdamW
from keras_cosent.optimizers.adam_w import check_name_patterns
from keras_cosent.optimizers.torch_fused_adamw import TorchFusedAdamW
from keras_cosent.utils.arguments import check_non_negative_float
from keras_cosent.utils.arguments import check_positive_float

# Biases and LayerNorm scales/offsets are not decayed, as in BERT and Sentence-BERT.
NO_WEIGHT_DECAY = ("^bias$", "^gamma$", "^beta$")


def adamw(learning_rate, weight_decay=0.01, exclude_from_weight_decay=NO_WEIGHT_DECAY,
          epsilon=1e-8, max_grad_norm=None):
    """`keras_cosent.optimizers.AdamW` for the current backend: `TorchFusedAdamW` on PyTorch.

    Args:
        learning_rate: a float or a `keras.optimizers.schedules.LearningRateSchedule`.
        weight_decay: decoupled weight decay (the decay per step is
            `learning_rate * weight_decay`, as in Keras and PyTorch).
        exclude_from_weight_decay: regular expressions; variables whose name
            matches one are not decayed. The default, `NO_WEIGHT_DECAY`, leaves
            biases and LayerNorm parameters alone.
        epsilon: added to the bias-corrected `sqrt(v)`, as PyTorch does
            (see `AdamW`).
        max_grad_norm: `None` (no clipping), or a positive float: the
            gradients of each step are scaled together so that their global
            L2 norm is at most this (Keras' `global_clipnorm`, which
            `torch.nn.utils.clip_grad_norm_` computes too; transformers'
            Trainer, and so sentence-transformers, clip at 1.0 by default).
            Under `tf.distribute` with several devices Keras clips each
            device's gradients before they are summed: `build` refuses that.

    Returns:
        A `keras_cosent.optimizers.AdamW` (a `TorchFusedAdamW` on the torch
        backend): the update rule of `torch.optim.AdamW` and Keras' optimizer
        state either way. A schedule's `multiplier` variable
        (`WarmupLinearDecay`) and the exclusions are kept as `AdamW` says.

    Example:

    >>> from keras_cosent.optimizers import adamw
    >>> optimizer = adamw(2e-5, weight_decay=0.01)
    >>> float(optimizer.weight_decay)
    0.01
    """
    if not isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
        check_positive_float("learning_rate", learning_rate)
    check_non_negative_float("weight_decay", weight_decay)
    if exclude_from_weight_decay is not None:
        exclude_from_weight_decay = check_name_patterns("exclude_from_weight_decay",
                                                        exclude_from_weight_decay)
    if max_grad_norm is not None:
        max_grad_norm = check_positive_float("max_grad_norm", max_grad_norm)
    cls = TorchFusedAdamW if keras.backend.backend() == "torch" else AdamW
    return cls(learning_rate=learning_rate, weight_decay=weight_decay, epsilon=epsilon,
               weight_decay_exclusions=exclude_from_weight_decay,
               global_clipnorm=max_grad_norm)
