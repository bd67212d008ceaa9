"""Training callbacks: corpus-level STS evaluation after every epoch."""

from keras_cosent.callbacks.spearman_evaluator import SpearmanEvaluator
from keras_cosent.callbacks.retrieval_evaluator import RetrievalEvaluator
