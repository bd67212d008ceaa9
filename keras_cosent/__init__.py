"""keras-cosent: CoSENT, InfoNCE and friends for training sentence encoders in Keras 3.

The package runs unchanged on the TensorFlow, JAX and PyTorch backends. Its parts:

- `keras_cosent.losses`: ranking and contrastive losses and the baselines.
- `keras_cosent.metrics`: corpus-level Pearson and Spearman correlation.
- `keras_cosent.layers`: pooling and normalisation layers.
- `keras_cosent.models`: the sentence encoder built on keras-hub backbones.
- `keras_cosent.data`: readers for STS, NLI and plain-text corpora, and batching.
- `keras_cosent.callbacks`: the Spearman evaluation callback.
- `keras_cosent.optimizers`: AdamW with BERT's no-decay list, the warm-up schedule.
- `keras_cosent.training`: `build`, the one training set-up, and the table of objectives.
- `keras_cosent.distributed`: data-parallel training on several devices, with
  in-batch losses over the global batch (JAX, TensorFlow and PyTorch engines).
- `keras_cosent.export`: SavedModel export for TF Serving (imports TensorFlow lazily).

- `keras_cosent.runtime`: process-wide tuning for CPU training (allocators,
  dropout masks under XLA), applied only when `runtime.enable()` is called.
- `keras_cosent.compat`: the private Keras/keras-hub/TensorFlow names used, in one place.

Importing it changes nothing global: no environment variable, no replaced
function (see `keras_cosent.runtime` for the tuning `keras-cosent` turns on).
"""

__version__ = "0.1.0"

from keras_cosent import callbacks
from keras_cosent import compat
from keras_cosent import data
from keras_cosent import distributed
from keras_cosent import export
from keras_cosent import layers
from keras_cosent import losses
from keras_cosent import metrics
from keras_cosent import models
from keras_cosent import optimizers
from keras_cosent import runtime
from keras_cosent import training
from keras_cosent import utils
from keras_cosent import retrieval

__all__ = [
    "callbacks",
    "compat",
    "data",
    "distributed",
    "export",
    "layers",
    "losses",
    "metrics",
    "models",
    "optimizers",
    "runtime",
    "training",
    "utils",
    "retrieval",
]
