"""Training callbacks: corpus-level STS and retrieval evaluation after every epoch, the collapse guard, resuming."""

from keras_cosent.callbacks.spearman_evaluator import SpearmanEvaluator
from keras_cosent.callbacks.retrieval_evaluator import RetrievalEvaluator
from keras_cosent.callbacks.resumable_training import ResumableTraining
from keras_cosent.callbacks.collapse_guard import CollapseGuard

__all__ = [
    "SpearmanEvaluator",
    "RetrievalEvaluator",
    "ResumableTraining",
    "CollapseGuard",
]
