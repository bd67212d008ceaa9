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
    # `history` holds the current fit's epochs, as SpearmanEvaluator's does.
    model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=1, verbose=0, callbacks=[evaluator])
    assert [row["epoch"] for row in evaluator.history] == [0]


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


Q, C, QR = {"q1": "a0"}, {"d1": "a10", "d2": "a90"}, {"q1": {"d1": 1}}


@pytest.mark.parametrize("args, kwargs, error, match", [
    ((["a0"], C, QR), {}, TypeError,
     r"`queries` should be a mapping \{id: text\} \(e.g. a dict\). Received: `queries` of "
     "type list"),
    ((Q, ["a10"], QR), {}, TypeError, "`corpus` should be a mapping.*of type list"),
    ((Q, C, [("q1", "d1", 1)]), {}, TypeError, "`qrels` should be a mapping"),
    ((Q, C, {"q1": {"d1": 1.5}}), {}, ValueError, "`qrels` should hold int relevance grades. "
                                                  "Received: 1.5 for query 'q1', document 'd1'"),
    (({"q1": 3}, C, QR), {}, ValueError, r"`queries` should map ids to texts \(str\). "
                                          r"Received: `queries`\['q1'\]=3"),
    (({1: "a0", "1": "a1"}, C, {1: {"d1": 1}}), {}, ValueError,
     "`queries` holds two ids that are equal as strings.*1 and '1'"),
    ((Q, {}, QR), {}, ValueError, "`corpus` should hold at least one document"),
    ((Q, C, {"q2": {"d1": 1}}), {}, ValueError,
     r"`qrels` name 1 queries that `queries` lacks.*\['q2'\]"),
    ((Q, C, {"q1": {"dX": 1, "d1": 1}}), {}, ValueError,
     r"`qrels` judge 1 document\(s\) that `corpus` lacks.*\('q1', 'dX'\).*"
     "unknown_documents='keep'"),
    ((Q, C, QR), {"unknown_documents": "report"}, ValueError,
     "`unknown_documents` should be 'error' or 'keep'"),
    ((Q, C, QR), {"batch_size": 0}, ValueError, "`batch_size` should be a positive int. "
                                                "Received: `batch_size`=0"),
    ((Q, C, QR), {"chunk_size": 0}, ValueError, "`chunk_size`=0"),
    ((Q, C, QR), {"chunk_size": 2.5}, ValueError, "`chunk_size`=2.5"),
    ((Q, C, QR), {"k_values": [0]}, ValueError, r"`k_values` should be a non-empty sequence of "
                                                r"positive ints.*\(0 is not one\)"),
    ((Q, C, QR), {"k_values": 10}, ValueError, "`k_values`=10"),
    ((Q, C, QR), {"verbose": 5}, ValueError, "`verbose` should be 0 or 1. Received: `verbose`=5"),
    ((Q, C, QR), {"use_faiss": "no"}, ValueError, "`use_faiss` should be a bool"),
    ((Q, C, QR), {"ignore_identical_ids": "no"}, ValueError, "`ignore_identical_ids` should be"),
    ((Q, C, QR), {"encoder": "all-MiniLM-L6-v2"}, ValueError,
     "`encoder` should be an object with an `encode.*not a string.*'all-MiniLM-L6-v2'"),
    # Scored, a blank query ranked the corpus by the embedding of no text.
    (({"q1": " \t", "q2": "b"}, C, {"q1": {"d1": 1}, "q2": {"d1": 1}}), {}, ValueError,
     r"1 scored query has a blank text in `queries` \(first: \['q1'\]\)"),
])
def test_arguments_are_refused_at_construction_not_after_an_epoch(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        RetrievalEvaluator(*args, **kwargs)


def test_a_blank_query_that_is_not_scored_is_no_error():
    # Unjudged, or judged with no relevant document: never searched with.
    evaluator = RetrievalEvaluator({"q1": "a0", "q2": " ", "q3": ""}, C,
                                   {"q1": {"d1": 1}, "q3": {"d1": 0}})
    assert evaluator.query_ids == ["q1"]


def test_int_ids_name_the_same_queries_and_documents_as_their_strings():
    as_str = RetrievalEvaluator({"1": "a0"}, {"10": "a10", "90": "a90"}, {"1": {"90": 1}},
                                encoder=AngleEncoder()).evaluate()
    as_int = RetrievalEvaluator({1: "a0"}, {10: "a10", 90: "a90"}, {1: {90: 1}},
                                encoder=AngleEncoder()).evaluate()
    assert as_int == as_str and as_int["mrr@10"] == 0.5  # the relevant one ranks second


def test_documents_the_corpus_lacks_count_relevant_and_never_retrieved_when_kept(tmp_path):
    # As BEIR scores ArguAna, whose qrels judge a document its corpus lacks: pytrec_eval on
    # the full run with the full qrels is the reference.
    corpus = {f"d{i}": f"a{10 * i}" for i in range(6)}
    queries = {"q0": "a0", "q1": "a50"}
    qrels = {"q0": {"d1": 1, "gone": 2}, "q1": {"d4": 1}}
    with pytest.raises(ValueError, match=r"\('q0', 'gone'\)"):
        RetrievalEvaluator(queries, corpus, qrels, encoder=AngleEncoder())
    evaluator = RetrievalEvaluator(queries, corpus, qrels, encoder=AngleEncoder(),
                                   unknown_documents="keep")
    assert evaluator.unknown_judgements == [("q0", "gone")]
    ours = evaluator.evaluate()
    encoder = AngleEncoder()
    q, c = encoder.encode(list(queries.values())), encoder.encode(list(corpus.values()))
    run = {qid: {d: float(s) for d, s in zip(corpus, row)}
           for qid, row in zip(queries, q @ c.T)}
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.10"}).evaluate(run)
    assert ours["recall@10"] == pytest.approx(np.mean([r["recall_10"] for r in ref.values()]))
    assert ours["ndcg@10"] == pytest.approx(np.mean([r["ndcg_cut_10"] for r in ref.values()]))
    assert ours["recall@10"] == 0.75  # q0 finds d1 of its two relevant documents

    # A split read with unknown_ids="report" (the reader warned) is scored so by from_dataset;
    # one built by hand, or read with "error", is refused.
    dataset = RetrievalDataset(corpus, queries, qrels, unknown_ids="report")
    assert RetrievalEvaluator.from_dataset(dataset, encoder=AngleEncoder()).evaluate() == ours
    with pytest.raises(ValueError, match="`corpus` lacks"):
        RetrievalEvaluator.from_dataset(RetrievalDataset(corpus, queries, qrels))
    with pytest.raises(ValueError, match="`corpus` lacks"):
        RetrievalEvaluator.from_dataset(dataset, unknown_documents="error")


class NanEncoder(AngleEncoder):
    def encode(self, texts, batch_size=32):
        out = super().encode(texts, batch_size)
        out[-1] = np.nan
        return out


def test_non_finite_embeddings_are_named_and_score_nan_not_a_ranking():
    # As the Spearman metrics do: a diverged model's figures are NaN, with a
    # warning naming the first bad text, so the run's own NaN-loss check stops it.
    evaluator = RetrievalEvaluator(Q, C, QR, encoder=NanEncoder())
    with pytest.warns(UserWarning, match=r"`encoder.encode` returned non-finite values \(NaN or "
                                         r"inf\) for 1 of the 1 texts of `queries` \(first: id "
                                         "'q1'\\)"):
        values, per = evaluator.evaluate(per_query=True)
    assert values and all(np.isnan(v) for v in values.values())
    assert all(np.isnan(v) for row in per.values() for v in row.values())
    # The same figures, by name, as a healthy model's.
    healthy, healthy_per = RetrievalEvaluator(Q, C, QR, encoder=AngleEncoder()).evaluate(
        per_query=True)
    assert values.keys() == healthy.keys()
    assert {q: row.keys() for q, row in per.items()} == {
        q: row.keys() for q, row in healthy_per.items()}
    logs = {}
    with pytest.warns(UserWarning):
        evaluator.on_epoch_end(0, logs)
    assert np.isnan(logs["ir_dev_ndcg@10"])


class NanCorpusEncoder(AngleEncoder):
    def encode(self, texts, batch_size=32):
        out = super().encode(texts, batch_size)
        if len(texts) == len(C):
            out[0] = np.inf
        return out


@pytest.mark.parametrize("encoder_class, what", [(NanEncoder, "queries"),
                                                 (NanCorpusEncoder, "corpus")])
def test_non_finite_embeddings_skip_the_search(monkeypatch, encoder_class, what):
    # NaN figures need no ranking: a diverged model's epoch end does not pay for a
    # search over the corpus, and bad queries do not pay for encoding it either.
    from keras_cosent.callbacks import retrieval_evaluator

    def no_search(*args, **kwargs):
        raise AssertionError("top_k ran on non-finite embeddings")

    monkeypatch.setattr(retrieval_evaluator, "top_k", no_search)
    encoder = encoder_class()
    calls = []
    encode = encoder.encode
    encoder.encode = lambda texts, batch_size=32: calls.append(len(texts)) or encode(
        texts, batch_size)
    with pytest.warns(UserWarning, match=f"texts of `{what}`"):
        values = RetrievalEvaluator(Q, C, QR, encoder=encoder).evaluate()
    assert all(np.isnan(v) for v in values.values())
    assert calls == ([len(Q)] if what == "queries" else [len(Q), len(C)])


class SameEncoder:
    """Every text embeds to the same vector (a collapsed model): every document ties."""

    def encode(self, texts, batch_size=32):
        return np.ones((len(texts), 4), "float32")


@pytest.mark.parametrize("relevant", ["d149", "d000", "d057"])
def test_a_tie_across_the_search_depth_keeps_the_documents_trec_eval_ranks_first(relevant):
    # The search kept the first of tied documents in corpus order, the metrics
    # rank ties by id descending: 150 tied documents with d149 relevant scored
    # ndcg@10 0 where trec_eval, given every document's score, gives 1.
    corpus = {f"d{i:03d}": "the same text" for i in range(150)}
    qrels = {"q": {relevant: 1}}
    got = RetrievalEvaluator({"q": "a query"}, corpus, qrels, encoder=SameEncoder()).evaluate()
    full_run = {"q": {d: 1.0 for d in corpus}}
    measures = {"ndcg_cut.10", "recip_rank", "recall.10", "recall.100"}
    want = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(full_run)["q"]
    # trec_eval's MRR has no cut; at rank 100 it is 0.01, which MRR@10 reads as 0.
    mrr10 = want["recip_rank"] if want["recip_rank"] >= 0.1 else 0.0
    np.testing.assert_allclose(
        [got["ndcg@10"], got["mrr@10"], got["recall@10"], got["recall@100"]],
        [want["ndcg_cut_10"], mrr10, want["recall_10"], want["recall_100"]], atol=1e-12)
