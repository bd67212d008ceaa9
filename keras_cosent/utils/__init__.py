"""Small helpers shared across losses, metrics and models."""

from keras_cosent.utils.similarity import l2_normalize
from keras_cosent.utils.similarity import pair_cosine
from keras_cosent.utils.similarity import similarity_matrix
from keras_cosent.utils.truncation import truncate_embeddings

__all__ = [
    "l2_normalize",
    "pair_cosine",
    "similarity_matrix",
    "truncate_embeddings",
]
