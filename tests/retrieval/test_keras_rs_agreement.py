"""Where keras-rs' ranking metrics fit, they agree with ours.

keras-rs scores fixed-size lists: every document of a query scored and labelled.
On such lists (here 20 documents per query, no tied scores) its NDCG, MRR,
Recall, Precision and MAP at k equal `retrieval_metrics`, which follows trec_eval;
graded nDCG agrees once keras-rs is given trec_eval's linear gain (its default
gain is 2^rel - 1). What keras-rs cannot take, a run over a corpus that leaves
judged documents unretrieved, is why the library computes them itself
(`keras_cosent.retrieval.metrics`).
"""

import keras
import keras_rs  # in the test extra
import numpy as np
import pytest

from keras_cosent.retrieval import retrieval_metrics

K = 10


def _lists(graded, seed=0, queries=6, documents=20):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(queries, documents)).astype("float32")
    labels = (rng.random((queries, documents)) < 0.15).astype("float32")
    if graded:
        labels *= rng.integers(1, 4, size=labels.shape)
    labels[:, 0] = np.maximum(labels[:, 0], 1)  # every query has a relevant document
    run = {f"q{i}": {f"d{j:02d}": float(scores[i, j]) for j in range(documents)}
           for i in range(queries)}
    qrels = {f"q{i}": {f"d{j:02d}": int(labels[i, j]) for j in range(documents) if labels[i, j]}
             for i in range(queries)}
    return scores, labels, run, qrels


def _keras_rs_value(metric, labels, scores):
    metric.update_state(labels, scores)
    return float(keras.ops.convert_to_numpy(metric.result()))


@pytest.mark.parametrize("graded", [False, True], ids=["binary", "graded"])
def test_ranking_metrics_agree_on_fully_scored_lists(graded):
    scores, labels, run, qrels = _lists(graded)
    ours = retrieval_metrics(run, qrels, k_values=[K])
    theirs = {
        "ndcg": keras_rs.metrics.NDCG(k=K, gain_fn=lambda y: y),
        "mrr": keras_rs.metrics.MeanReciprocalRank(k=K),
        "recall": keras_rs.metrics.RecallAtK(k=K),
        "precision": keras_rs.metrics.PrecisionAtK(k=K),
        "map": keras_rs.metrics.MeanAveragePrecision(k=K),
    }
    for name, metric in theirs.items():
        np.testing.assert_allclose(
            ours[f"{name}@{K}"], _keras_rs_value(metric, labels, scores), rtol=1e-5, err_msg=name
        )
