"""Corpus-level correlation metrics, as STS benchmarks report them.

`pearson_correlation` / `spearman_correlation` are pure keras.ops functions over
whole vectors; `PearsonCorrelation` / `SpearmanCorrelation` are stateful Keras
metrics that give the same value over an evaluation pass made of batches.
"""

from keras_cosent.metrics.pearson_correlation import PearsonCorrelation
from keras_cosent.metrics.pearson_correlation import pearson_correlation
from keras_cosent.metrics.spearman_correlation import SpearmanCorrelation
from keras_cosent.metrics.spearman_correlation import spearman_correlation

__all__ = [
    "PearsonCorrelation",
    "pearson_correlation",
    "SpearmanCorrelation",
    "spearman_correlation",
]
