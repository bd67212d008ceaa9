"""keras_cosent.retrieval: exact chunked search, TREC-equal metrics, hard-negative mining."""

from keras_cosent.retrieval.search import top_k
from keras_cosent.retrieval.metrics import retrieval_metrics
from keras_cosent.retrieval.metrics import run_from_top_k
from keras_cosent.retrieval.metrics import v_measure
from keras_cosent.retrieval.mining import mine_hard_negatives

__all__ = [
    "top_k",
    "retrieval_metrics",
    "run_from_top_k",
    "v_measure",
    "mine_hard_negatives",
]
