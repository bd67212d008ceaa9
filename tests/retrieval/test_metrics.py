"""Retrieval metrics against pytrec_eval (trec_eval) on random runs with ties and graded qrels."""

import sys

import numpy as np
import pytest

from keras_cosent.retrieval import retrieval_metrics
from keras_cosent.retrieval import run_from_top_k
from keras_cosent.retrieval import top_k

import pytrec_eval  # noqa: E402  (installed by the test extra; a missing reference fails)

K_VALUES = (1, 3, 5, 10, 20)


def random_run_and_qrels(seed, num_queries=40, num_docs=60):
    rng = np.random.default_rng(seed)
    run, qrels = {}, {}
    for q in range(num_queries):
        qid = f"q{q}"
        retrieved = rng.choice(num_docs, size=rng.integers(1, 30), replace=False)
        # Few distinct scores: many ties.
        run[qid] = {f"d{d}": float(rng.integers(0, 5)) / 4 for d in retrieved}
        judged = rng.choice(num_docs, size=rng.integers(1, 12), replace=False)
        # Grades -2..3: TREC sets give spam or judged-bad documents negative grades,
        # which trec_eval treats as non-relevant with no gain.
        qrels[qid] = {f"d{d}": int(rng.integers(-2, 4)) for d in judged}
        if q == 0:
            qrels[qid] = {f"d{d}": 0 for d in judged}  # no relevant document
    qrels["q_missing_from_run"] = {"d1": 2}
    return run, qrels


def reference(run, qrels):
    # trec_eval counts a grade as relevant from 1 up and adds only positive gains
    # (m_ndcg.c), so a negative grade is a 0; pytrec_eval-terrier 0.5.11 crashes on
    # negative grades (it indexes a table by grade), so the reference gets 0 for them.
    qrels = {q: {d: max(grade, 0) for d, grade in judged.items()} for q, judged in qrels.items()}
    cuts = ",".join(str(k) for k in K_VALUES)
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {f"ndcg_cut.{cuts}", f"P.{cuts}", f"recall.{cuts}", f"map_cut.{cuts}",
                f"success.{cuts}"}
    )
    per_query = evaluator.evaluate(run)
    # MRR@k: trec_eval's recip_rank on the run cut to the first k in trec_eval order.
    for k in K_VALUES:
        cut = {
            q: dict(sorted(docs.items(), key=lambda i: (i[1], i[0]), reverse=True)[:k])
            for q, docs in run.items()
        }
        rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
        for q in per_query:
            per_query[q][f"mrr@{k}"] = rr.get(q, {}).get("recip_rank", 0.0)
    return per_query


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equal_to_pytrec_eval(seed):
    run, qrels = random_run_and_qrels(seed)
    ours, ours_per_query = retrieval_metrics(run, qrels, K_VALUES, per_query=True)
    ref = reference(run, qrels)
    # Queries with no relevant document: trec_eval scores them 0 but we leave them out,
    # as read_beir and the evaluator do; the missing-from-run query counts 0 in both.
    valid = [q for q in qrels if any(s >= 1 for s in qrels[q].values())]
    assert "q0" not in ours_per_query
    names = {"ndcg": "ndcg_cut_{}", "precision": "P_{}", "recall": "recall_{}",
             "map": "map_cut_{}", "accuracy": "success_{}", "mrr": "mrr@{}"}
    for metric, ref_name in names.items():
        for k in K_VALUES:
            expected = [ref.get(q, {}).get(ref_name.format(k), 0.0) for q in valid]
            got = [ours_per_query[q][f"{metric}@{k}"] for q in valid]
            np.testing.assert_allclose(got, expected, atol=1e-12, err_msg=f"{metric}@{k}")
            assert ours[f"{metric}@{k}"] == pytest.approx(np.mean(expected), abs=1e-12)


def test_trec_tie_order_is_doc_id_descending():
    # Equal scores: trec_eval ranks "b" before "a", so only b counts at k=1.
    run = {"q": {"a": 1.0, "b": 1.0}}
    ref = pytrec_eval.RelevanceEvaluator({"q": {"a": 1}}, {"P.1"}).evaluate(run)["q"]["P_1"]
    assert retrieval_metrics(run, {"q": {"a": 1}}, [1])["precision@1"] == ref == 0.0


def test_tied_integer_doc_ids_are_ordered_as_strings():
    # trec_eval reads ids as strings: "9" ranks before "10" on a tie, whatever
    # type the caller used; int ids would otherwise sort by number.
    run, qrels = {"q": {"9": 1.0, "10": 1.0}}, {"q": {"9": 1}}
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"P.1"}).evaluate(run)["q"]["P_1"]
    assert ref == 1.0
    assert retrieval_metrics({"q": {9: 1.0, 10: 1.0}}, {"q": {9: 1}}, [1])["precision@1"] == ref


def test_from_top_k_equal_to_pytrec_eval_on_full_ranking():
    rng = np.random.default_rng(3)
    queries, corpus = rng.normal(size=(15, 6)), rng.normal(size=(50, 6))
    corpus_ids = [f"d{i:02d}" for i in range(50)]
    query_ids = [f"q{i}" for i in range(15)]
    qrels = {q: {corpus_ids[j]: int(rng.integers(1, 4)) for j in rng.choice(50, 3, replace=False)}
             for q in query_ids}
    scores, indices = top_k(queries, corpus, k=50)
    run = run_from_top_k(query_ids, corpus_ids, scores, indices)
    # The reference ranks NumPy's cosines of every (query, document) pair.
    cosines = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ (
        corpus / np.linalg.norm(corpus, axis=1, keepdims=True)).T
    full_run = {q: {d: float(cosines[i, j]) for j, d in enumerate(corpus_ids)}
                for i, q in enumerate(query_ids)}
    ref = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg_cut.10", "recall.10", "map_cut.100"}).evaluate(full_run)
    ours = retrieval_metrics(run, qrels, [10, 100])
    assert ours["ndcg@10"] == pytest.approx(np.mean([r["ndcg_cut_10"] for r in ref.values()]), abs=1e-12)
    assert ours["recall@10"] == pytest.approx(np.mean([r["recall_10"] for r in ref.values()]), abs=1e-12)
    assert ours["map@100"] == pytest.approx(np.mean([r["map_cut_100"] for r in ref.values()]), abs=1e-12)


@pytest.mark.parametrize("num_docs", [50, 8])
def test_ignore_identical_ids_equals_pytrec_eval_on_the_full_ranking_without_self(num_docs):
    """BEIR's ignore_identical_ids: each query's own document leaves its ranking.

    Half the queries are corpus documents (ids shared, embeddings equal, so they
    rank themselves first); the reference ranks every other document with a full
    NumPy sort. With 8 documents the search is clipped to the corpus.
    """
    rng = np.random.default_rng(4)
    corpus = rng.normal(size=(num_docs, 6))
    corpus_ids = [f"d{i}" for i in range(num_docs)]
    query_ids = [f"d{i}" for i in range(0, num_docs, 2)] + ["q_a", "q_b"]
    queries = np.concatenate([corpus[::2], rng.normal(size=(2, 6))])
    qrels = {q: {corpus_ids[j]: int(rng.integers(1, 4)) for j in rng.choice(num_docs, 3, replace=False)
                 if corpus_ids[j] != q} for q in query_ids}
    depth = 20
    cosines = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ (
        corpus / np.linalg.norm(corpus, axis=1, keepdims=True)).T
    expected_run = {}
    for i, qid in enumerate(query_ids):
        others = [j for j in np.argsort(-cosines[i], kind="stable") if corpus_ids[j] != qid]
        expected_run[qid] = {corpus_ids[j]: float(cosines[i, j]) for j in others[:depth]}
    scores, indices = top_k(queries, corpus, k=depth + 1)
    run = run_from_top_k(query_ids, corpus_ids, scores, indices, ignore_identical_ids=True,
                         depth=depth)
    assert {q: list(d) for q, d in run.items()} == {q: list(d) for q, d in expected_run.items()}
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.5"}).evaluate(expected_run)
    ours = retrieval_metrics(run, qrels, [5, 10])
    assert ours["ndcg@10"] == pytest.approx(np.mean([r["ndcg_cut_10"] for r in ref.values()]), abs=1e-6)
    assert ours["recall@5"] == pytest.approx(np.mean([r["recall_5"] for r in ref.values()]), abs=1e-6)
    # Without the option each shared-id query finds itself first.
    plain = run_from_top_k(query_ids, corpus_ids, scores, indices)
    assert all(next(iter(plain[q])) == q for q in query_ids if q.startswith("d"))


def test_bad_arguments():
    with pytest.raises(ValueError, match="Unknown metric"):
        retrieval_metrics({}, {}, metrics=["bogus"])
    with pytest.raises(ValueError, match="positive"):
        retrieval_metrics({}, {}, k_values=[0])


def test_v_measure_equals_sklearn():
    import sklearn
    from sklearn.cluster import KMeans
    from sklearn.metrics import v_measure_score

    from keras_cosent.retrieval import v_measure

    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 20)
    x = rng.normal(size=(60, 4)) + labels[:, None] * 3.0
    expected = v_measure_score(labels, KMeans(3, n_init=10, random_state=0).fit_predict(x))
    assert v_measure(x, labels) == pytest.approx(expected)
    assert v_measure(x, labels) > 0.9
    del sklearn


def test_v_measure_of_a_diverged_encoder_is_nan_with_a_warning():
    # As the STS and retrieval scores of NaN embeddings; k-means raised its own
    # "Input X contains NaN", naming neither the model nor the rows.
    from keras_cosent.retrieval import v_measure

    x = np.ones((4, 3), "float32")
    x[2, 1] = np.nan
    with pytest.warns(UserWarning, match=r"1 of 4 embeddings are not finite \(row 2 first\)"):
        assert np.isnan(v_measure(x, ["a", "a", "b", "b"]))


def test_run_from_top_k_refuses_shapes_and_indices_that_do_not_fit():
    with pytest.raises(ValueError, match=r"shape \(len\(query_ids\), k\) = \(2, k\)"):
        run_from_top_k(["q1", "q2"], ["d1", "d2"], np.ones((3, 1)), np.zeros((3, 1), int))
    with pytest.raises(ValueError, match=r"index `corpus_ids` \(0 to 0\). Received values "
                                         r"from 5 to 5"):
        run_from_top_k(["q1"], ["d1"], np.ones((1, 1)), np.full((1, 1), 5))


def test_v_measure_without_scikit_learn_says_what_to_install(monkeypatch):
    from keras_cosent.retrieval import v_measure

    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.cluster", None)
    with pytest.raises(ImportError, match=r'pip install "keras-cosent\[clustering\]"'):
        v_measure(np.zeros((4, 2)), [0, 0, 1, 1])


def test_v_measure_needs_two_texts():
    from keras_cosent.retrieval import v_measure

    with pytest.raises(ValueError, match="at least 2 labelled texts. Received 0"):
        v_measure(np.zeros((0, 8)), [])


@pytest.mark.parametrize("k_values, shown", [
    (10, "`k_values`=10"), ([2.7], r"\[2.7\] \(2.7 is not one\)"), ([True], r"\(True is not one\)"),
    ([0], r"\(0 is not one\)"), ([], r"`k_values`=\[\]"), ("10", "`k_values`='10'"),
])
def test_k_values_must_be_positive_ints(k_values, shown):
    with pytest.raises(ValueError, match=rf"`k_values` should be a non-empty sequence of "
                                         rf"positive ints.*{shown}"):
        retrieval_metrics({"q": {"d": 1.0}}, {"q": {"d": 1}}, k_values=k_values)


@pytest.mark.parametrize("run, qrels, match", [
    # Ids compared exactly: an int key never meets a str one, and nothing would be scored.
    ({"1": {"d1": 0.9}}, {1: {"d1": 1}},
     r"No query id of `qrels` is in `run`.*\[1\] \(int\); `run` has \['1'\] \(str\)"),
    ({}, {"q": {"d": 1}}, r"No query id of `qrels` is in `run`.*`run` has none"),
    # Document ids too: int run keys never meet str qrels keys, and every query scores 0.
    ({"q": {1: 0.9, 2: 0.5}}, {"q": {"1": 1}},
     r"No document id of `run` is judged in `qrels`.*\['1'\] \(str\); `run` has \[1, 2\] "
     r"\(int\)"),
    ({"q": {"d": 1.0}}, {}, r"`qrels` should judge at least one query. Received: `qrels`=\{\}"),
    ({"q": {"d": 1.0}}, {"q": {"d": 0}}, "No query of `qrels` has a relevant document"),
    ({"q": {"d": 1.0}}, {"q": {"d": "1"}}, "`qrels` should hold int relevance grades. "
                                            "Received: '1' for query 'q', document 'd'"),
    ({"q": {"d": float("nan"), "e": 0.5}}, {"q": {"d": 1}},
     "`run` should hold finite scores. Received: nan for query 'q', document 'd'"),
    ({"q": {"d": 0.5, "e": float("inf")}}, {"q": {"d": 1}}, "inf for query 'q', document 'e'"),
    ({"q": {"d": 0.5, "e": None}}, {"q": {"d": 1}}, "None for query 'q', document 'e'"),
    (["q"], {"q": {"d": 1}}, "`run` should be a mapping"),
    ({"q": ["d"]}, {"q": {"d": 1}}, r"`run`\['q'\] of type list"),
])
def test_runs_and_qrels_that_would_score_silently_wrong_are_refused(run, qrels, match):
    with pytest.raises((ValueError, TypeError), match=match):
        retrieval_metrics(run, qrels, k_values=[1])


def test_a_run_lacking_some_judged_queries_scores_them_zero_as_trec_eval():
    # pytrec_eval leaves a query missing from the run out; trec_eval -c (and we) count it 0.
    run, qrels = {"a": {"d": 1.0}}, {"a": {"d": 1}, "b": {"d": 1}}
    assert pytrec_eval.RelevanceEvaluator(qrels, {"P.1"}).evaluate(run)["a"]["P_1"] == 1.0
    assert retrieval_metrics(run, qrels, k_values=[1])["precision@1"] == 0.5


@pytest.mark.parametrize("kwargs, match", [
    ({"depth": -1}, "`depth` should be a positive int. Received: `depth`=-1"),
    ({"depth": 1.5}, "`depth`=1.5"),
    ({"depth": 0}, "`depth`=0"),
    ({"indices": [[0.0, 1.0]]}, "`indices` should be integer positions.*float64"),
    ({"ignore_identical_ids": "no"}, "`ignore_identical_ids` should be a bool"),
])
def test_run_from_top_k_refuses_bad_depth_and_indices(kwargs, match):
    arguments = {"query_ids": ["q"], "corpus_ids": ["a", "b"], "scores": [[1.0, 0.5]],
                 "indices": [[0, 1]], **kwargs}
    with pytest.raises(ValueError, match=match):
        run_from_top_k(**arguments)


@pytest.mark.parametrize("labels, kwargs, match", [
    (["a"] * 4, {}, "`labels` should hold at least 2 distinct labels: clustering needs at "
                    "least 2 classes. Received: every label is 'a'"),
    (["a", "a", "b", "b"], {"num_clusters": 0}, "`num_clusters` should be a positive int, "
                                                 "at most the 4 texts. Received: `num_clusters`=0"),
    (["a", "a", "b", "b"], {"num_clusters": 2.0}, "`num_clusters`=2.0"),
    (["a", "a", "b", "b"], {"num_clusters": 5}, "`num_clusters`=5"),
])
def test_v_measure_refuses_one_class_and_bad_cluster_counts(labels, kwargs, match):
    from keras_cosent.retrieval import v_measure

    with pytest.raises(ValueError, match=match):
        v_measure(np.eye(4), labels, **kwargs)


def test_metrics_as_one_string_is_refused_not_split_into_letters():
    with pytest.raises(ValueError, match=r"`metrics` should be a sequence.*\['ndcg'\] for one"):
        retrieval_metrics({"q": {"d": 1.0}}, {"q": {"d": 1}}, k_values=[1], metrics="ndcg")


def test_a_run_missing_every_judged_document_of_the_same_id_type_scores_zero():
    # Only ids of other types are refused: a run of str ids that retrieves none of the
    # relevant documents is a real (bad) ranking, scored 0 as pytrec_eval scores it.
    means = retrieval_metrics({"q": {"d2": 0.9, "d3": 0.5}}, {"q": {"d1": 1}}, k_values=[1, 2])
    assert means["ndcg@2"] == means["recall@2"] == means["mrr@1"] == 0.0
