"""keras-cosent: CoSENT, InfoNCE and friends for training sentence encoders in Keras 3.

The package runs unchanged on the TensorFlow, JAX and PyTorch backends. Its parts:

- `keras_cosent.losses`: ranking and contrastive losses and the baselines.
- `keras_cosent.metrics`: corpus-level Pearson and Spearman correlation.
- `keras_cosent.layers`: pooling and normalisation layers.
- `keras_cosent.models`: the sentence encoder built on keras-hub backbones.
- `keras_cosent.data`: readers for STS, NLI and plain-text corpora, and batching.
- `keras_cosent.callbacks`: the Spearman evaluation callback.
- `keras_cosent.export`: SavedModel export for TF Serving (imports TensorFlow lazily).

Importing it sets `TF_CPU_ALLOCATOR_USE_BFC=true` unless already set: TensorFlow's
pooling CPU allocator, which makes XLA training steps on CPU faster
(`keras_cosent.utils.tf_cpu_allocator`).
"""

__version__ = "0.1.0"

from keras_cosent.utils.tf_cpu_allocator import default_tf_cpu_allocator

default_tf_cpu_allocator()

from keras_cosent import callbacks
from keras_cosent import data
from keras_cosent import export
from keras_cosent import layers
from keras_cosent import losses
from keras_cosent import metrics
from keras_cosent import models
from keras_cosent import utils
from keras_cosent import retrieval
