"""Optimizers and learning-rate schedules the training builder uses.

`adamw` gives `AdamW` (Keras' AdamW with PyTorch's placement of epsilon) with
BERT's no-decay list, run by PyTorch's fused kernel on the torch backend
(`TorchFusedAdamW`); `WarmupLinearDecay` is the linear warm-up then linear
decay of BERT and Sentence-BERT fine-tuning.
"""

from keras_cosent.optimizers.adam_w import AdamW
from keras_cosent.optimizers.adamw import NO_WEIGHT_DECAY
from keras_cosent.optimizers.adamw import adamw
from keras_cosent.optimizers.torch_fused_adamw import TorchFusedAdamW
from keras_cosent.optimizers.warmup_linear_decay import WarmupLinearDecay

__all__ = [
    "AdamW",
    "NO_WEIGHT_DECAY",
    "adamw",
    "TorchFusedAdamW",
    "WarmupLinearDecay",
]
