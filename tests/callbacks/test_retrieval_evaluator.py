"""RetrievalEvaluator with a tiny BertBackbone SentenceEncoder, against pytrec_eval."""

import keras
import keras_hub
import numpy as np
import pytest
import pytrec_eval

import keras_cosent
from keras_cosent.callbacks import RetrievalEvaluator
from keras_cosent.data import RetrievalDataset

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "dog", "ran",
         "a", "mat", "on", "red", "car"]
WORDS = VOCAB[5:]


def tiny_encoder():
    keras.utils.set_random_seed(0)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCAB), num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16)
    return keras_cosent.models.SentenceEncoder(backbone, tokenizer, max_length=16)


def data(seed=0):
    rng = np.random.default_rng(seed)
    corpus = {f"d{i}": " ".join(rng.choice(WORDS, size=4)) for i in range(30)}
    queries = {f"q{i}": " ".join(rng.choice(WORDS, size=3)) for i in range(8)}
    qrels = {q: {f"d{j}": int(rng.integers(1, 3)) for j in rng.choice(30, 2, replace=False)}
             for q in queries}
    return queries, corpus, qrels


class Holder(keras.Model):
    """A model with an `encoder` attribute, trained on a dummy task."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        self.dense = keras.layers.Dense(1)

    def call(self, x):
        return self.dense(x)


def reference(encoder, queries, corpus, qrels, ignore_identical_ids=False):
    q = np.asarray(encoder.encode(list(queries.values())))
    c = np.asarray(encoder.encode(list(corpus.values())))
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    c = c / np.linalg.norm(c, axis=1, keepdims=True)
    s = q @ c.T
    ids = list(corpus)
    run = {qid: {ids[j]: float(s[i, j]) for j in range(len(ids))
                 if not (ignore_identical_ids and ids[j] == qid)}
           for i, qid in enumerate(queries)}
    per = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg_cut.10", "recall.10", "map_cut.100"}).evaluate(run)
    mean = lambda key: float(np.mean([v[key] for v in per.values()]))  # noqa: E731
    return {"ndcg@10": mean("ndcg_cut_10"), "recall@10": mean("recall_10"),
            "map@100": mean("map_cut_100")}


def test_logs_keys_each_epoch_and_early_stopping():
    encoder = tiny_encoder()
    queries, corpus, qrels = data()
    evaluator = RetrievalEvaluator(queries, corpus, qrels, chunk_size=7)
    model = Holder(encoder)
    model.compile(optimizer="sgd", loss="mse")
    stop = keras.callbacks.EarlyStopping(monitor="ir_dev_ndcg@10", mode="max", patience=5)
    history = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, verbose=0,
                        callbacks=[evaluator, stop])
    for key in ("ir_dev_ndcg@10", "ir_dev_mrr@10", "ir_dev_recall@10", "ir_dev_map@100"):
        assert len(history.history[key]) == 2
    ref = reference(encoder, queries, corpus, qrels)
    # The encoder is not trained by this dummy task, so the last epoch's values are its.
    # (Ties in cosine are unlikely with random float weights; trec_eval ranks the full run.)
    for key, value in ref.items():
        assert history.history[f"ir_dev_{key}"][-1] == pytest.approx(value, abs=1e-5)


def test_from_dataset_with_explicit_encoder_and_errors():
    queries, corpus, qrels = data(1)
    encoder = tiny_encoder()
    evaluator = RetrievalEvaluator.from_dataset(
        RetrievalDataset(corpus, queries, qrels), name="ir_test", encoder=encoder)
    logs = {}
    evaluator.on_epoch_end(0, logs)
    ref = reference(encoder, queries, corpus, qrels)
    assert all(key.startswith("ir_test_") for key in logs), sorted(logs)
    for key, value in ref.items():
        assert logs[f"ir_test_{key}"] == pytest.approx(value, abs=1e-5), key
    with pytest.raises(ValueError, match="no encoder"):
        RetrievalEvaluator(queries, corpus, qrels).evaluate()
    with pytest.raises(ValueError, match="has a relevant document"):
        RetrievalEvaluator(queries, corpus, {"q0": {"d1": 0}})


def test_ignore_identical_ids_leaves_each_query_s_own_document_out():
    # ArguAna-like: every query is also a corpus document, with the same id and text.
    _, corpus, _ = data(2)
    rng = np.random.default_rng(2)
    queries = {d: corpus[d] for d in list(corpus)[:8]}
    qrels = {q: {f"d{j}": 1 for j in rng.choice(30, 2, replace=False) if f"d{j}" != q}
             for q in queries}
    encoder = tiny_encoder()
    with_self = RetrievalEvaluator(queries, corpus, qrels, encoder=encoder).evaluate()
    without = RetrievalEvaluator(queries, corpus, qrels, encoder=encoder,
                                 ignore_identical_ids=True).evaluate()
    for flag, values in ((False, with_self), (True, without)):
        for key, value in reference(encoder, queries, corpus, qrels, flag).items():
            assert values[key] == pytest.approx(value, abs=1e-5), (flag, key)
    # Each query ranks itself first, a document no qrel names: MRR@1 is 0 with it.
    assert with_self["mrr@1"] == 0.0 and without["ndcg@10"] > with_self["ndcg@10"]


class AngleEncoder:
    """Stand-in encoder: the text "a<degrees>" encodes as the unit vector at that angle."""

    def encode(self, texts, batch_size=32):
        angles = np.deg2rad([float(t[1:]) for t in texts])
        return np.stack([np.cos(angles), np.sin(angles)], axis=1)


def test_ignore_identical_ids_searches_one_deeper_than_the_deepest_cut():
    # 101 documents: the query's own (angle 0, ranked first), 99 distractors, and the
    # relevant one last (angle 180). Without its own document the query's ranking of
    # 100 reaches the relevant one at rank 100: Recall@100 = 1 and MAP@100 = 1/100 only
    # if the search went one deeper than the 100 the cut needs.
    corpus = {"q0": "a0", **{f"d{i}": f"a{1 + i}" for i in range(99)}, "rel": "a180"}
    qrels = {"q0": {"rel": 1}}
    out = RetrievalEvaluator({"q0": "a0"}, corpus, qrels, encoder=AngleEncoder(),
                             ignore_identical_ids=True, chunk_size=16).evaluate()
    assert out["recall@100"] == 1.0 and out["map@100"] == pytest.approx(0.01)
    out = RetrievalEvaluator({"q0": "a0"}, corpus, qrels, encoder=AngleEncoder()).evaluate()
    assert out["recall@100"] == 0.0  # ranked with itself, the relevant one is 101st
