"""`evaluate --task retrieval/clustering`, `keras-cosent mine` and `train --dev-retrieval`.

Retrieval metrics are checked against an independent computation: a full NumPy
cosine matrix, its top 100 per query, scored by `pytrec_eval` (trec_eval
itself). The default run uses small BEIR folders cut from the real STS-B
retrieval splits; the whole test split, against the published
sentence-transformers numbers, is marked slow.
"""

import csv
import json
import shutil
import sys

import numpy as np
import pytest

from tests.recipes.conftest import demo_rows
from tests.recipes.test_cli import assert_error_after_notes
from tests.recipes.test_cli import assert_one_line_error

# all-MiniLM-L6-v2, sentence-transformers' InformationRetrievalEvaluator on
# stsb-en-test (the folder's README), x 100.
README_STSB_TEST = {"ndcg@10": 94.43, "mrr@10": 93.05, "recall@10": 99.16, "map@100": 92.56}


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_beir(folder, split, queries, corpus, qrels):
    """Writes `{id: text}` queries and corpus and `{qid: {did: score}}` qrels as BEIR."""
    (folder / "qrels").mkdir(parents=True)
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
        for qid, text in queries.items():
            f.write(json.dumps({"_id": qid, "text": text}) + "\n")
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as f:
        for did, text in corpus.items():
            f.write(json.dumps({"_id": did, "title": "", "text": text}) + "\n")
    with open(folder / "qrels" / f"{split}.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for qid, judged in qrels.items():
            for did, score in judged.items():
                f.write(f"{qid}\t{did}\t{score}\n")
    return folder


def read_beir_folder(folder, split):
    queries = {r["_id"]: r["text"] for r in read_jsonl(folder / "queries.jsonl")}
    corpus = {r["_id"]: r["text"] for r in read_jsonl(folder / "corpus.jsonl")}
    qrels = {}
    with open(folder / "qrels" / f"{split}.tsv", encoding="utf-8") as f:
        for qid, did, score in list(csv.reader(f, delimiter="\t"))[1:]:
            qrels.setdefault(qid, {})[did] = int(score)
    return queries, corpus, qrels


def subset_beir(source, split, destination, num_queries, num_docs, include=()):
    """The first `num_queries` judged queries of a real BEIR folder (and those in
    `include`), their relevant documents and the first other documents up to
    `num_docs`."""
    queries, corpus, qrels = read_beir_folder(source, split)
    kept = list(dict.fromkeys(list(qrels)[:num_queries] + list(include)))
    sub_qrels = {q: qrels[q] for q in kept}
    relevant = {d for judged in sub_qrels.values() for d in judged}
    docs = list(relevant) + [d for d in corpus if d not in relevant]
    sub_corpus = {d: corpus[d] for d in docs[: max(num_docs, len(relevant))]}
    return write_beir(destination, split, {q: queries[q] for q in kept}, sub_corpus, sub_qrels)


def reference_metrics(encoder, folder, split, depth=100, ignore_identical_ids=False):
    """nDCG@10, MRR@10, Recall@10, MAP@100 from a full NumPy cosine matrix and pytrec_eval
    (with `ignore_identical_ids`, each query's ranking leaves out the document of its id)."""
    import pytrec_eval

    queries, corpus, qrels = read_beir_folder(folder, split)
    query_ids = list(qrels)
    doc_ids = list(corpus)
    q = np.asarray(encoder.encode([queries[i] for i in query_ids], batch_size=64), "float64")
    c = np.asarray(encoder.encode(list(corpus.values()), batch_size=64), "float64")
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    cosines = q @ c.T
    order = np.argsort(-cosines, axis=1, kind="stable")

    def run(k):
        return {
            qid: {doc_ids[j]: float(cosines[i, j]) for j in [
                j for j in order[i] if not (ignore_identical_ids and doc_ids[j] == qid)][:k]}
            for i, qid in enumerate(query_ids)
        }

    def mean(measures, k, key):
        per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run(k))
        return 100 * np.mean([values[key] for values in per_query.values()])

    return {
        "ndcg@10": mean({"ndcg_cut.10"}, depth, "ndcg_cut_10"),
        # trec_eval's reciprocal rank has no cutoff: on a run cut at 10 it is MRR@10.
        "mrr@10": mean({"recip_rank"}, 10, "recip_rank"),
        "recall@10": mean({"recall.10"}, depth, "recall_10"),
        "map@100": mean({"map_cut.100"}, depth, "map_cut_100"),
    }


@pytest.fixture(scope="module")
def minilm():
    from recipes.model_loading import load_encoder

    return load_encoder("all-MiniLM-L6-v2", max_length=64)


def evaluate_retrieval_cli(cli, folder, tmp_path, *options):
    # A file per call: evaluate keeps an existing --json file.
    out = tmp_path / f"retrieval-{len(list(tmp_path.glob('retrieval-*.json')))}.json"
    result = cli("evaluate", "all-MiniLM-L6-v2", folder, "--task", "retrieval",
                 "--max-length", 64, "--json", out, *options)
    assert result.exit_code == 0, result.output
    return result, json.loads(out.read_text())


def test_evaluate_retrieval_equals_numpy_and_pytrec_eval(cli, minilm, shared_data, tmp_path):
    folder = subset_beir(shared_data / "retrieval" / "stsb-en-test", "test", tmp_path / "sub",
                         num_queries=40, num_docs=150)
    # A second split beside test, as BEIR's folders have: evaluate reads test, and says so.
    qrels = folder / "qrels"
    (qrels / "dev.tsv").write_text((qrels / "test.tsv").read_text().splitlines()[0] + "\n")
    result, record = evaluate_retrieval_cli(cli, folder, tmp_path)
    assert (f"DATA {folder}: reading qrels/test.tsv of its splits dev, test (--split picks "
            "another)") in result.stderr

    assert record["task"] == "retrieval" and record["split"] == "test"
    assert record["queries"] == 40 and record["documents"] == 150 and record["top_k"] == 100
    assert "share their id" not in result.output  # q.../d... ids: no identical-ids note
    expected = reference_metrics(minilm, folder, "test")
    for key, value in expected.items():
        assert record[key] == pytest.approx(value, abs=1e-4), key  # x 100: 1e-6 unscaled
    # The table shows the same numbers.
    table = result.stdout.splitlines()
    assert table[0].split() == ["split", "queries", "docs", "ndcg@10", "mrr@10", "recall@10",
                                "map@100"]
    assert table[1].split()[-4:] == [f"{record[k]:.2f}" for k in README_STSB_TEST]
    assert len(table) == 2
    # The encodings are announced, with a progress bar, on stderr.
    assert "encoding 40 queries" in result.stderr and "encoding 150 documents" in result.stderr
    assert "150/150" in result.stderr and "/sentence" not in result.stdout


def test_evaluate_retrieval_at_a_truncated_size_equals_numpy(cli, minilm, shared_data, tmp_path):
    folder = subset_beir(shared_data / "retrieval" / "stsb-en-test", "test", tmp_path / "sub",
                         num_queries=20, num_docs=80)
    _, record = evaluate_retrieval_cli(cli, folder, tmp_path, "--truncate-dim", 8)
    assert record["truncate_dim"] == 8

    class FirstCoordinates:
        def encode(self, texts, **options):
            return np.asarray(minilm.encode(texts, **options))[:, :8]

    expected = reference_metrics(FirstCoordinates(), folder, "test")
    for key, value in expected.items():
        assert record[key] == pytest.approx(value, abs=1e-4), key
    assert expected != reference_metrics(minilm, folder, "test")


def count_faiss_searches(monkeypatch):
    """Makes faiss's exact index record each search's corpus size; returns the record."""
    import faiss  # in the test extras
    searches = []

    class CountingIndex(faiss.IndexFlatIP):
        def search(self, *args, **kwargs):
            searches.append(self.ntotal)
            return super().search(*args, **kwargs)

    monkeypatch.setattr(faiss, "IndexFlatIP", CountingIndex)
    return searches


def test_faiss_search_gives_the_numpy_search_figures(cli, shared_data, tmp_path, monkeypatch):
    searches = count_faiss_searches(monkeypatch)
    folder = subset_beir(shared_data / "retrieval" / "stsb-en-test", "test", tmp_path / "sub",
                         num_queries=20, num_docs=80)
    # --json into folders that do not exist yet: made when the results are written.
    _, numpy_record = evaluate_retrieval_cli(cli, folder, tmp_path / "numpy")
    assert searches == []
    _, faiss_record = evaluate_retrieval_cli(cli, folder, tmp_path / "faiss", "--faiss")
    assert searches == [80]
    assert numpy_record["search"] == "numpy" and faiss_record["search"] == "faiss"
    for key, value in numpy_record.items():
        if key not in ("search",):
            assert faiss_record[key] == pytest.approx(value, abs=1e-6), key

    # Mined with faiss: the same rows.
    numpy_rows, faiss_rows = tmp_path / "numpy.jsonl", tmp_path / "faiss.jsonl"
    for output, options in ((numpy_rows, ()), (faiss_rows, ("--faiss",))):
        result = cli("mine", "all-MiniLM-L6-v2", "--queries", folder / "queries.jsonl",
                     "--corpus", folder / "corpus.jsonl", "--qrels", folder / "qrels" / "test.tsv",
                     "-o", output, "--max-length", 64, "--margin", 0.02, *options)
        assert result.exit_code == 0, result.output
    assert searches == [80, 80]
    assert read_jsonl(faiss_rows) == read_jsonl(numpy_rows)

    # Not for another task; named when faiss does not import; nothing written.
    (tmp_path / "pairs.tsv").write_text("a man\ta dog\t1.0\n", encoding="utf-8")
    result = cli("evaluate", "all-MiniLM-L6-v2", tmp_path / "pairs.tsv", "--faiss")
    assert_one_line_error(result, "--faiss")
    monkeypatch.setitem(sys.modules, "faiss", None)
    missing = tmp_path / "missing.jsonl"
    result = cli("mine", "all-MiniLM-L6-v2", "--queries", folder / "queries.jsonl",
                 "--corpus", folder / "corpus.jsonl", "-o", missing, "--faiss")
    assert_one_line_error(result, "--faiss")
    assert "keras-cosent[faiss]" in result.output and not missing.exists()


def with_queries_in_corpus(source, split, destination):
    """The BEIR folder `source` with every query added to the corpus under its own id,
    as BEIR's ArguAna and Quora hold them."""
    queries, corpus, qrels = read_beir_folder(source, split)
    return write_beir(destination, split, queries, {**corpus, **queries}, qrels)


def test_evaluate_ignore_identical_ids_leaves_the_query_itself_out(cli, minilm, shared_data,
                                                                  tmp_path):
    plain = subset_beir(shared_data / "retrieval" / "stsb-en-test", "test", tmp_path / "sub",
                        num_queries=20, num_docs=60)
    folder = with_queries_in_corpus(plain, "test", tmp_path / "arguana-like")

    result, record = evaluate_retrieval_cli(cli, folder, tmp_path)
    assert record["ignore_identical_ids"] is False and record["documents"] == 80
    assert "20 of 20 queries of DATA share their id with a document, 20 of those documents " \
        "with the query's text too" in result.output
    assert "--ignore-identical-ids" in result.output
    for key, value in reference_metrics(minilm, folder, "test").items():
        assert record[key] == pytest.approx(value, abs=1e-4), key
    assert record["mrr@1"] == 0.0  # every query finds itself first, a document no qrel names

    result, ignored = evaluate_retrieval_cli(cli, folder, tmp_path, "--ignore-identical-ids")
    assert ignored["ignore_identical_ids"] is True
    assert "share their id" not in result.output
    for key, value in reference_metrics(minilm, folder, "test", ignore_identical_ids=True).items():
        assert ignored[key] == pytest.approx(value, abs=1e-4), key
    assert ignored["ndcg@10"] > record["ndcg@10"] + 10


def test_evaluate_retrieval_per_query_equals_pytrec_eval(cli, minilm, shared_data, tmp_path):
    """`--per-query`: each query's figures are trec_eval's for that query, and the
    reported means are their means."""
    import pytrec_eval

    folder = subset_beir(shared_data / "retrieval" / "stsb-en-test", "test", tmp_path / "sub",
                         num_queries=25, num_docs=120)
    _, record = evaluate_retrieval_cli(cli, folder, tmp_path, "--per-query")

    queries, corpus, qrels = read_beir_folder(folder, "test")
    doc_ids = list(corpus)
    q = np.asarray(minilm.encode([queries[i] for i in qrels], batch_size=64), "float64")
    c = np.asarray(minilm.encode(list(corpus.values()), batch_size=64), "float64")
    cosines = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (
        c / np.linalg.norm(c, axis=1, keepdims=True)).T
    run = {qid: {doc_ids[j]: float(cosines[i, j]) for j in np.argsort(-cosines[i])[:100]}
           for i, qid in enumerate(qrels)}
    expected = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "map_cut.100"}).evaluate(run)

    per_query = record["per_query"]
    assert sorted(per_query) == sorted(qrels)
    for qid, values in per_query.items():
        assert sorted(values) == ["map@100", "mrr@10", "ndcg@10", "recall@10"]
        assert values["ndcg@10"] == pytest.approx(100 * expected[qid]["ndcg_cut_10"], abs=1e-4)
        assert values["map@100"] == pytest.approx(100 * expected[qid]["map_cut_100"], abs=1e-4)
    for key in ("ndcg@10", "mrr@10", "recall@10", "map@100"):
        assert record[key] == pytest.approx(np.mean([v[key] for v in per_query.values()]),
                                            abs=1e-9), key

    result = cli("evaluate", "all-MiniLM-L6-v2", folder, "--task", "retrieval", "--per-query")
    assert_one_line_error(result, "--per-query", "--json")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a\tb\t1.0\nc\td\t2.0\n")
    result = cli("evaluate", "all-MiniLM-L6-v2", pairs, "--per-query", "--json", tmp_path / "x")
    assert_one_line_error(result, "--per-query", "--task retrieval only")


@pytest.mark.slow
def test_evaluate_retrieval_on_whole_stsb_test(cli, minilm, shared_data, tmp_path):
    """The whole split: equal to pytrec_eval, and within 0.3 of sentence-transformers'
    numbers (keras-hub's GELU differs from PyTorch's by round-off)."""
    folder = shared_data / "retrieval" / "stsb-en-test"
    _, record = evaluate_retrieval_cli(cli, folder, tmp_path)
    assert record["queries"] == 309 and record["documents"] == 1337
    expected = reference_metrics(minilm, folder, "test")
    for key, published in README_STSB_TEST.items():
        assert record[key] == pytest.approx(expected[key], abs=1e-4), key
        assert record[key] == pytest.approx(published, abs=0.3), key


def test_evaluate_retrieval_input_errors(cli, tmp_path):
    folder = write_beir(tmp_path / "beir", "dev", {"q": "a man"}, {"d": "a man"}, {"q": {"d": 1}})
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\td\t1\n")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a\tb\t1.0\nc\td\t2.0\n")

    result = cli("evaluate", "all-MiniLM-L6-v2", pairs, "--task", "retrieval")
    assert_one_line_error(result, "pairs.tsv", "BEIR folder")
    result = cli("evaluate", "all-MiniLM-L6-v2", folder)
    assert_one_line_error(result, "is a directory", "--task retrieval")
    result = cli("evaluate", "all-MiniLM-L6-v2", pairs, "--split", "test")
    assert_one_line_error(result, "--split", "--task retrieval only")
    result = cli("evaluate", "all-MiniLM-L6-v2", folder, "--task", "retrieval", "--split", "train")
    assert_one_line_error(result, "no qrels/train.tsv", "dev, test")
    (folder / "qrels" / "test.tsv").rename(folder / "qrels" / "other.tsv")
    result = cli("evaluate", "all-MiniLM-L6-v2", folder, "--task", "retrieval")
    assert_one_line_error(result, "dev, other", "--split")
    result = cli("evaluate", "all-MiniLM-L6-v2", folder, "--task", "retrieval", "--top-k", 10)
    assert_one_line_error(result, "--top-k")


def test_a_blank_scored_query_is_refused_before_any_output(cli, tiny_checkpoint, small_train,
                                                          tmp_path):
    # It was searched with and scored (nDCG@10 81.55 where a real query scored 100).
    folder = write_beir(tmp_path / "beir", "dev", {"q1": "a man", "q2": " "},
                        {"d1": "a man rides", "d2": "a dog"}, {"q1": {"d1": 1}, "q2": {"d2": 1}})
    out = tmp_path / "out.json"
    result = cli("evaluate", tiny_checkpoint, folder, "--task", "retrieval", "--json", out)
    assert_one_line_error(result, f"DATA {folder}: 1 judged query has a blank text in "
                          "queries.jsonl (first: ['q2'])")
    assert not out.exists()
    result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train,
                 "--dev-retrieval", folder, "--epochs", 1, "--output", tmp_path / "run")
    assert_one_line_error(result, f"--dev-retrieval {folder}: 1 judged query has a blank text")
    assert not (tmp_path / "run").exists()


# --- clustering ---------------------------------------------------------------------


def genre_texts(shared_data, per_genre=40):
    """First sentences of STS-B dev labelled with their genre (captions, news, forums)."""
    by_genre = {}
    with open(shared_data / "stsbenchmark" / "sts-dev.csv", encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            by_genre.setdefault(fields[0], []).append(fields[5])
    return [(text, genre) for genre, texts in by_genre.items() for text in texts[:per_genre]]


def test_evaluate_clustering_equals_sklearn(cli, minilm, shared_data, tmp_path):
    from sklearn.cluster import KMeans
    from sklearn.metrics import v_measure_score

    rows = genre_texts(shared_data)
    data = tmp_path / "genres.tsv"
    data.write_text("sentence\tgenre\n" + "".join(f"{t}\t{g}\n" for t, g in rows),
                    encoding="utf-8")
    out = tmp_path / "clustering.json"
    result = cli("evaluate", "all-MiniLM-L6-v2", data, "--task", "clustering",
                 "--text-columns", "sentence", "--label-column", "genre", "--max-length", 64,
                 "--json", out)
    assert result.exit_code == 0, result.output
    record = json.loads(out.read_text())
    assert record["texts"] == 120 and record["clusters"] == 3

    embeddings = minilm.encode([t for t, _ in rows], batch_size=64)
    clusters = KMeans(n_clusters=3, n_init=10, random_state=0).fit_predict(embeddings)
    expected = 100 * v_measure_score([g for _, g in rows], clusters)
    assert record["v_measure"] == pytest.approx(expected, abs=1e-6)
    assert f"{record['v_measure']:.2f}" in result.stdout
    assert "encoding 120 texts" in result.stderr and "120/120" in result.stderr
    assert "/sentence" not in result.stdout


def test_evaluate_clustering_input_errors(cli, tmp_path):
    data = tmp_path / "labelled.jsonl"
    data.write_text('{"text": "a man", "label": "x"}\n{"text": "a dog", "label": "x"}\n')
    result = cli("evaluate", "all-MiniLM-L6-v2", data, "--task", "clustering")
    assert_one_line_error(result, "labelled.jsonl", "at least 2 classes")
    result = cli("evaluate", "all-MiniLM-L6-v2", data, "--task", "clustering", "--top-k", 100)
    assert_one_line_error(result, "--top-k", "--task retrieval only")
    result = cli("evaluate", "all-MiniLM-L6-v2", data, "--task", "clustering",
                 "--text-columns", "text,label")
    assert_one_line_error(result, "--text-columns", "reads one")
    result = cli("evaluate", "all-MiniLM-L6-v2", data, "--task", "clustering",
                 "--format", "pair-tsv")
    assert_one_line_error(result, "--format", "csv, tsv, jsonl")
    result = cli("evaluate", "all-MiniLM-L6-v2", data, "--task", "clustering",
                 "--label-column", "topic")
    assert_one_line_error(result, "labelled.jsonl", "topic")
    # The text column as labels: every text its own class scored 100 (probe).
    for extra, option, said in (
            (["--label-column", "text"], "--label-column",
             "'text' is the text column and the label column at once"),
            (["--text-columns", "label"], "--text-columns",
             "'label' is the text column and the label column (the default) at once")):
        result = cli("evaluate", "all-MiniLM-L6-v2", data, "--task", "clustering", *extra)
        assert_one_line_error(result, option, said)
    # Integer labels are classes too (JSON's 1 and "1" are one class).
    data.write_text('{"text": "a man", "label": 1}\n{"text": "a dog", "label": "1"}\n')
    result = cli("evaluate", "all-MiniLM-L6-v2", data, "--task", "clustering")
    assert_one_line_error(result, "labelled.jsonl", "every row has the label '1'")
    # An extension that does not tell the format: --format is asked for, by name.
    other = tmp_path / "labelled.data"
    other.write_text("text,label\na man,x\na dog,y\n")
    result = cli("evaluate", "all-MiniLM-L6-v2", other, "--task", "clustering")
    assert_one_line_error(result, "--format", "'.data'", "csv, tsv, jsonl")


def test_evaluate_clustering_without_scikit_learn_says_what_to_install(cli, tmp_path,
                                                                      monkeypatch):
    data = tmp_path / "labelled.jsonl"
    data.write_text('{"text": "a man", "label": "x"}\n{"text": "a dog", "label": "y"}\n')
    monkeypatch.setitem(sys.modules, "sklearn", None)  # what a missing package does
    result = cli("evaluate", "all-MiniLM-L6-v2", data, "--task", "clustering")
    assert_one_line_error(result, "--task clustering", "scikit-learn",
                          'pip install "keras-cosent[clustering]"')


# --- mine ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mining_folder(shared_data, tmp_path_factory):
    """20 STS-B dev queries (and q77, which has two positives) over 100 documents."""
    return subset_beir(shared_data / "retrieval" / "stsb-en-dev", "dev",
                       tmp_path_factory.mktemp("mining") / "beir", num_queries=20,
                       num_docs=100, include=("q77",))


def mine_cli(cli, folder, output, *options, model="all-MiniLM-L6-v2"):
    return cli("mine", model, "--queries", folder / "queries.jsonl",
               "--corpus", folder / "corpus.jsonl", "--qrels", folder / "qrels" / "dev.tsv",
               "-o", output, "--max-length", 64, *options)


def ranked_candidates(minilm, queries, corpus, qrels):
    """Per query: its positives' cosines and the other documents by cosine, descending."""
    doc_ids = list(corpus)
    c = np.asarray(minilm.encode(list(corpus.values())), "float64")
    q = np.asarray(minilm.encode([queries[qid] for qid in qrels]), "float64")
    cosines = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (
        c / np.linalg.norm(c, axis=1, keepdims=True)).T
    out = {}
    for i, (qid, judged) in enumerate(qrels.items()):
        positives = {corpus[d]: cosines[i, doc_ids.index(d)] for d in judged}
        others = [(corpus[d], cosines[i, j]) for j, d in enumerate(doc_ids) if d not in judged]
        others.sort(key=lambda item: -item[1])
        out[queries[qid]] = (positives, others)
    return out


def test_mine_excludes_positives_and_keeps_window_and_margin(cli, minilm, mining_folder, tmp_path):
    queries, corpus, qrels = read_beir_folder(mining_folder, "dev")
    reference = ranked_candidates(minilm, queries, corpus, qrels)

    window = tmp_path / "window.jsonl"
    result = mine_cli(cli, mining_folder, window, "--range-min", 2, "--range-max", 8,
                      "--num-negatives", 3, "--sampling", "random", "--seed", 7)
    assert result.exit_code == 0, result.output
    assert "wrote 22 rows (21 queries)" in result.stdout
    # Both encodings announced, with their bars, on stderr; stdout holds the report.
    assert f"encoding {len(queries)} queries" in result.stderr
    assert f"encoding {len(corpus)} documents" in result.stderr
    assert f"{len(corpus)}/{len(corpus)}" in result.stderr and "/sentence" not in result.stdout
    rows = read_jsonl(window)
    assert len(rows) == 22  # one per (query, positive): q77 twice
    for row in rows:
        positives, others = reference[row["query"]]
        assert row["positive"] in positives
        assert len(row["negatives"]) == 3
        ranks = [[text for text, _ in others].index(n) for n in row["negatives"]]
        assert not set(row["negatives"]) & set(positives)
        # Ranks among the non-positives, in [2, 8), in rank order; a rank just outside
        # only where float32 round-off can swap it with the one inside (a near-tie).
        cos = [c for _, c in others]
        near_tie = lambda a, b: abs(cos[a] - cos[b]) < 1e-5  # noqa: E731
        assert all(2 <= r < 8 or (r == 1 and near_tie(1, 2)) or (r == 8 and near_tie(8, 7))
                   for r in ranks), ranks
        assert ranks == sorted(ranks), ranks

    margin = tmp_path / "margin.jsonl"
    result = mine_cli(cli, mining_folder, margin, "--margin", 0.1, "--num-negatives", 5)
    assert result.exit_code == 0, result.output
    rows = read_jsonl(margin)
    for row in rows:
        positives, others = reference[row["query"]]
        cosine = dict(others)
        limit = positives[row["positive"]] - 0.1
        assert all(cosine[n] <= limit + 1e-5 for n in row["negatives"])
        # "top": the best candidates of ranks [0, 50) under the margin, none skipped.
        assert row["negatives"] == [text for text, s in others[:50] if s <= limit][:5]
    # The margin did drop near-duplicates (unlabelled positives) the window held.
    assert any(row["negatives"] != [t for t, _ in reference[row["query"]][1][:5]] for row in rows)


def test_mine_at_a_truncated_size_ranks_by_the_first_coordinates(cli, minilm, mining_folder,
                                                                  tmp_path):
    queries, corpus, qrels = read_beir_folder(mining_folder, "dev")

    class FirstCoordinates:
        def encode(self, texts, **options):
            return np.asarray(minilm.encode(texts, **options))[:, :8]

    reference = ranked_candidates(FirstCoordinates(), queries, corpus, qrels)
    full = ranked_candidates(minilm, queries, corpus, qrels)
    output = tmp_path / "cut.jsonl"
    result = mine_cli(cli, mining_folder, output, "--truncate-dim", 8)
    assert result.exit_code == 0, result.output
    rows = read_jsonl(output)
    for row in rows:
        others = reference[row["query"]][1]
        cos = dict(others)
        # The best three at 8 coordinates; a swap only within float32 round-off.
        expected = [text for text, _ in others[:3]]
        assert (row["negatives"] == expected
                or sorted(cos[n] for n in row["negatives"]) == pytest.approx(
                    sorted(cos[n] for n in expected), abs=1e-5)), row
    assert any(row["negatives"] != [t for t, _ in full[row["query"]][1][:3]] for row in rows)


def test_mine_is_deterministic_and_reports_short_rows(cli, tiny_checkpoint, tmp_path):
    """With the tiny model on demo pairs: same seed, same file; a window too narrow
    for the count asked is reported."""
    rows = demo_rows("dev")[:20]
    folder = write_beir(
        tmp_path / "beir", "dev",
        {f"q{i}": first for i, (first, _, _) in enumerate(rows)},
        {f"d{i}": second for i, (_, second, _) in enumerate(rows)},
        {f"q{i}": {f"d{i}": 1} for i in range(len(rows))},
    )
    outputs = []
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        outputs.append(tmp_path / f"{name}.jsonl")
        result = mine_cli(cli, folder, outputs[-1], "--sampling", "random", "--seed", seed,
                          "--max-length", 16, model=tiny_checkpoint)
        assert result.exit_code == 0, result.output
        assert "every row has 3 negatives" in result.stdout
    assert outputs[0].read_bytes() == outputs[1].read_bytes()
    assert outputs[0].read_bytes() != outputs[2].read_bytes()

    short = tmp_path / "short.jsonl"
    result = mine_cli(cli, folder, short, "--range-max", 2, "--num-negatives", 3,
                      "--max-length", 16, model=tiny_checkpoint)
    assert result.exit_code == 0, result.output
    assert ("20 rows (20 of 20 queries had short rows) have fewer than 3 negatives"
            in result.stdout)
    short_rows = read_jsonl(short)
    assert all(len(r["negatives"]) == 2 for r in short_rows)
    filled = tmp_path / "filled.jsonl"
    result = mine_cli(cli, folder, filled, "--range-max", 2, "--num-negatives", 3,
                      "--fill", "random", "--max-length", 16, model=tiny_checkpoint)
    assert result.exit_code == 0, result.output
    assert "20 of 20 short rows were completed with random documents" in result.stdout
    # The two mined negatives are kept; the third is another row's document.
    for row, mined in zip(read_jsonl(filled), short_rows):
        assert row["negatives"][:2] == mined["negatives"]
        assert row["negatives"][2] not in (row["positive"], *mined["negatives"])

    # Without --qrels, the query on line i pairs with the document on line i.
    paired = tmp_path / "paired.jsonl"
    result = cli("mine", tiny_checkpoint, "--queries", folder / "queries.jsonl",
                 "--corpus", folder / "corpus.jsonl", "-o", paired, "--max-length", 16)
    assert result.exit_code == 0, result.output
    assert [r["positive"] for r in read_jsonl(paired)] == [second for _, second, _ in rows]


def test_mine_errors_name_the_input_and_leave_no_output(cli, tiny_checkpoint, tmp_path,
                                                        monkeypatch):
    folder = write_beir(tmp_path / "beir", "dev", {"q1": "a man", "q2": "a dog"},
                        {"d1": "a man", "d2": "a dog", "d3": "a cat"},
                        {"q1": {"d1": 1}, "q2": {"d2": 1}})
    output = tmp_path / "out" / "rows.jsonl"

    def leaves_nothing():
        assert not output.parent.exists() or list(output.parent.iterdir()) == []

    result = mine_cli(cli, folder, output, "--range-min", 5, "--range-max", 5,
                      model=tiny_checkpoint)
    # The option named once, by click's "Invalid value for --range-min:".
    assert_one_line_error(result, "Invalid value for --range-min: 5 should be below "
                          "--range-max 5")
    leaves_nothing()

    bad_queries = tmp_path / "bad_queries.jsonl"
    bad_queries.write_text('{"_id": "q1", "text": "a man"}\n\n{"_id": "q2", "text": 3}\n')
    result = cli("mine", tiny_checkpoint, "--queries", bad_queries,
                 "--corpus", folder / "corpus.jsonl", "-o", output)
    assert_one_line_error(result, "--queries", "bad_queries.jsonl:3",
                          "`text` should be a string")
    leaves_nothing()
    # Which option an empty file was given to: "empty.jsonl: no rows" left it to guess.
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for option, others in (("--corpus", ["--queries", folder / "queries.jsonl"]),
                           ("--queries", ["--corpus", folder / "corpus.jsonl"])):
        result = cli("mine", tiny_checkpoint, option, empty, *others, "-o", output)
        assert_one_line_error(result, f"Error: {option} {empty}: no rows")
        leaves_nothing()

    bad_qrels = tmp_path / "bad_qrels.tsv"
    bad_qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td9\t1\n")
    result = cli("mine", tiny_checkpoint, "--queries", folder / "queries.jsonl",
                 "--corpus", folder / "corpus.jsonl", "--qrels", bad_qrels, "-o", output)
    assert_one_line_error(result, "--qrels", "bad_qrels.tsv:3", "unknown corpus id 'd9'")
    leaves_nothing()

    result = cli("mine", tiny_checkpoint, "--queries", folder / "corpus.jsonl",
                 "--corpus", folder / "queries.jsonl", "-o", output)
    assert_one_line_error(result, "--corpus", "2 documents, fewer than the 3 queries")
    leaves_nothing()

    # A failure while writing leaves neither the file nor a partial one.
    import keras_cosent.data

    def fail_after_one_line(rows, path):
        with open(path, "w", encoding="utf-8") as f:
            f.write("{}\n")
        raise RuntimeError("disk full")

    monkeypatch.setattr(keras_cosent.data, "write_retrieval_triplets", fail_after_one_line)
    result = mine_cli(cli, folder, output, "--max-length", 16, model=tiny_checkpoint)
    assert result.exit_code != 0 and isinstance(result.exception, RuntimeError)
    leaves_nothing()
    monkeypatch.undo()

    # An existing output is kept unless --overwrite.
    output.parent.mkdir(exist_ok=True)
    output.write_text("keep me\n")
    result = mine_cli(cli, folder, output, "--max-length", 16, model=tiny_checkpoint)
    assert_one_line_error(result, str(output), "already exists", "--overwrite")
    assert output.read_text() == "keep me\n"
    result = mine_cli(cli, folder, output, "--max-length", 16, "--num-negatives", 1,
                      "--overwrite", model=tiny_checkpoint)
    assert result.exit_code == 0, result.output
    assert len(read_jsonl(output)) == 2
    assert [p.name for p in output.parent.iterdir()] == ["rows.jsonl"]

    # Never over an input, --overwrite or not: the queries would be lost.
    queries = folder / "queries.jsonl"
    before = queries.read_bytes()
    result = cli("mine", tiny_checkpoint, "--queries", queries, "--corpus",
                 folder / "corpus.jsonl", "-o", queries, "--overwrite")
    assert_one_line_error(result, f"--output {queries} is the input file")
    assert queries.read_bytes() == before


def test_mine_leaves_out_pairs_with_a_blank_query_and_says_so(cli, tiny_checkpoint, tmp_path):
    folder = write_beir(tmp_path / "beir", "dev", {"q1": "a man", "q2": " "},
                        {"d1": "a man rides", "d2": "a dog", "d3": "a cat"},
                        {"q1": {"d1": 1}, "q2": {"d2": 1}})
    output = tmp_path / "mined.jsonl"
    result = mine_cli(cli, folder, output, "--num-negatives", 1, "--max-length", 16,
                      model=tiny_checkpoint)
    assert result.exit_code == 0, result.output
    assert "1 (query, positive) pairs with a blank query or positive make no row" in result.stdout
    assert "blank documents" not in result.stdout
    assert [(r["query"], r["positive"]) for r in read_jsonl(output)] == [("a man", "a man rides")]

    with_blank = write_beir(tmp_path / "blank_doc", "dev", {"q1": "a man"},
                            {"d1": "a man rides", "d2": "", "d3": "a cat"}, {"q1": {"d1": 1}})
    result = mine_cli(cli, with_blank, tmp_path / "blank_doc.jsonl", "--num-negatives", 2,
                      "--max-length", 16, model=tiny_checkpoint)
    assert result.exit_code == 0, result.output
    assert f"1 blank documents of {with_blank / 'corpus.jsonl'} were never taken" in result.stdout
    assert read_jsonl(tmp_path / "blank_doc.jsonl")[0]["negatives"] == ["a cat"]

    # A text under two ids is one negative, not two.
    repeated = write_beir(tmp_path / "repeated", "dev", {"q1": "a man"},
                          {"d1": "a man rides", "d2": "a cat", "d3": "a cat"}, {"q1": {"d1": 1}})
    result = mine_cli(cli, repeated, tmp_path / "repeated.jsonl", "--num-negatives", 2,
                      "--max-length", 16, model=tiny_checkpoint)
    assert result.exit_code == 0, result.output
    assert (f"1 documents of {repeated / 'corpus.jsonl'} repeat an earlier document's text"
            in result.stdout)
    assert read_jsonl(tmp_path / "repeated.jsonl")[0]["negatives"] == ["a cat"]

    only_blank = write_beir(tmp_path / "blank", "dev", {"q2": " "}, {"d2": "a dog"},
                            {"q2": {"d2": 1}})
    result = mine_cli(cli, only_blank, tmp_path / "none.jsonl", "--num-negatives", 1,
                      "--max-length", 16, model=tiny_checkpoint)
    assert_error_after_notes(result, "no row to write", "is blank")
    assert not (tmp_path / "none.jsonl").exists()


def test_mine_without_qrels_refuses_a_blank_line_that_would_shift_the_pairs(cli, tiny_checkpoint,
                                                                            tmp_path):
    # Without --qrels the query on line i pairs with the document on line i; the reader
    # skips blank lines, so a blank line before a record would pair every later query
    # with the next one's document.
    queries, corpus = tmp_path / "q.jsonl", tmp_path / "c.jsonl"
    queries.write_text('{"_id": "q0", "text": "a man plays guitar"}\n\n'
                       '{"_id": "q1", "text": "a dog runs"}\n', encoding="utf-8")
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in
                              enumerate(["man with guitar", "dog running", "a cat sleeps"])),
                      encoding="utf-8")
    output = tmp_path / "rows.jsonl"
    result = cli("mine", tiny_checkpoint, "--queries", queries, "--corpus", corpus, "-o", output,
                 "--num-negatives", 1, "--max-length", 16)
    assert_one_line_error(result, f"--queries {queries}:2: blank line", "--qrels")
    assert not output.exists()
    # Trailing blank lines shift nothing: the rows pair line by line.
    queries.write_text('{"_id": "q0", "text": "a man plays guitar"}\n'
                       '{"_id": "q1", "text": "a dog runs"}\n\n  \n', encoding="utf-8")
    result = cli("mine", tiny_checkpoint, "--queries", queries, "--corpus", corpus, "-o", output,
                 "--num-negatives", 1, "--max-length", 16)
    assert result.exit_code == 0, result.output
    assert [(r["query"], r["positive"]) for r in read_jsonl(output)] == [
        ("a man plays guitar", "man with guitar"), ("a dog runs", "dog running")]
    assert "wrote 2 rows (2 queries)" in result.stdout


def test_mine_qrels_without_a_relevant_judgement_name_the_qrels(cli, tiny_checkpoint, tmp_path):
    folder = write_beir(tmp_path / "beir", "train", {"q1": "a man", "q2": "a dog"},
                        {"d1": "a man", "d2": "a dog"}, {"q1": {"d1": 0}, "q2": {"d2": 0}})
    qrels = folder / "qrels" / "train.tsv"
    result = cli("mine", tiny_checkpoint, "--queries", folder / "queries.jsonl", "--corpus",
                 folder / "corpus.jsonl", "--qrels", qrels, "-o", tmp_path / "rows.jsonl")
    assert_error_after_notes(result, f"--qrels {qrels}: no query has a relevant document")
    assert not (tmp_path / "rows.jsonl").exists()


def test_outputs_never_replace_a_file_of_an_input_folder(cli, tiny_checkpoint, tmp_path):
    # The model folder and a BEIR folder are inputs too: their files are never replaced,
    # --overwrite or not; a new file beside them is the user's to write.
    model = tmp_path / "model"
    shutil.copytree(tiny_checkpoint, model)
    before = {p.name: p.read_bytes() for p in model.iterdir() if p.is_file()}
    weights = next(p for p in model.iterdir() if p.is_file() and p.suffix != ".json")
    sentences = tmp_path / "s.txt"
    sentences.write_text("hello\nworld\n", encoding="utf-8")
    result = cli("encode", model, sentences, "-o", weights)
    assert_one_line_error(result, f"--output {weights} would replace a file of the input "
                          f"folder {model}")
    folder = write_beir(tmp_path / "beir", "test", {"q1": "a man", "q2": "a dog"},
                        {"d1": "a man rides", "d2": "a dog runs", "d3": "a cat"},
                        {"q1": {"d1": 1}, "q2": {"d2": 1}})
    qrels = folder / "qrels" / "test.tsv"
    qrels_before = qrels.read_bytes()
    result = cli("evaluate", model, folder, "--task", "retrieval", "--json", qrels)
    assert_one_line_error(result, f"--json {qrels} would replace a file of the input folder")
    result = cli("mine", model, "--queries", folder / "queries.jsonl", "--corpus",
                 folder / "corpus.jsonl", "--qrels", qrels, "-o", model / "config.json",
                 "--overwrite")
    assert_one_line_error(result, "would replace a file of the input folder")
    assert {p.name: p.read_bytes() for p in model.iterdir() if p.is_file()} == before
    assert qrels.read_bytes() == qrels_before
    result = cli("encode", model, sentences, "-o", model / "embeddings.npy", "--max-length", 16)
    assert result.exit_code == 0, result.output
    assert np.load(model / "embeddings.npy").shape[0] == 2


def test_mine_ignore_identical_ids_never_mines_the_query_itself(cli, tiny_checkpoint, tmp_path):
    rows = demo_rows("dev")[:12]
    queries = {f"q{i}": first for i, (first, _, _) in enumerate(rows)}
    # Each query is also a document (same id, same text), as in BEIR's ArguAna.
    corpus = {**{f"d{i}": second for i, (_, second, _) in enumerate(rows)}, **queries}
    folder = write_beir(tmp_path / "beir", "dev", queries, corpus,
                        {f"q{i}": {f"d{i}": 1} for i in range(len(rows))})
    plain, ignored = tmp_path / "plain.jsonl", tmp_path / "ignored.jsonl"
    result = mine_cli(cli, folder, plain, "--max-length", 16, model=tiny_checkpoint)
    assert result.exit_code == 0, result.output
    assert "12 of 12 queries of --queries share their id with a document" in result.output
    assert "mining may take such a document as its query's negative" in result.output
    # Without the option the query's own text, cosine 1, is its hardest "negative".
    assert all(row["negatives"][0] == row["query"] for row in read_jsonl(plain))

    result = mine_cli(cli, folder, ignored, "--max-length", 16, "--ignore-identical-ids",
                      model=tiny_checkpoint)
    assert result.exit_code == 0, result.output
    assert "share their id" not in result.output
    for row, before in zip(read_jsonl(ignored), read_jsonl(plain)):
        assert row["query"] not in row["negatives"] and len(row["negatives"]) == 3
        # The others keep their rank order: the next ones after the query itself.
        assert row["negatives"][:2] == before["negatives"][1:]

    result = cli("mine", tiny_checkpoint, "--queries", folder / "queries.jsonl",
                 "--corpus", folder / "corpus.jsonl", "-o", tmp_path / "x.jsonl",
                 "--ignore-identical-ids")
    assert_one_line_error(result, "--ignore-identical-ids", "--qrels")
    assert not (tmp_path / "x.jsonl").exists()


# --- train --dev-retrieval ----------------------------------------------------------


def test_train_logs_retrieval_metrics(cli, tiny_checkpoint, small_train, tmp_path):
    rows = demo_rows("dev")[:24]
    folder = write_beir(
        tmp_path / "ir", "dev",
        {f"q{i}": first for i, (first, _, _) in enumerate(rows)},
        {f"d{i}": second for i, (_, second, _) in enumerate(rows)},
        {f"q{i}": {f"d{i}": 1} for i in range(len(rows))},
    )
    output = tmp_path / "run"
    result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train,
                 "--dev-retrieval", folder, "--epochs", 2, "--batch-size", 8,
                 "--max-length", 16, "--lr", 1e-3, "--output", output)
    assert result.exit_code == 0, result.output

    with open(output / "metrics.csv", encoding="utf-8") as f:
        metrics = list(csv.DictReader(f))
    assert len(metrics) == 2
    for key in ("ir_dev_ndcg@10", "ir_dev_mrr@10", "ir_dev_recall@10", "ir_dev_map@100"):
        assert all(0 <= float(row[key]) <= 100 for row in metrics), key
    results = json.loads((output / "results.json").read_text())
    final = results["dev_retrieval"]
    assert final["queries"] == 24 and final["documents"] == 24
    # The final numbers are the last epoch's (same weights) and what `evaluate` says.
    assert float(metrics[-1]["ir_dev_ndcg@10"]) == pytest.approx(final["ndcg@10"], abs=1e-4)
    evaluated = tmp_path / "evaluated.json"
    result_eval = cli("evaluate", output, folder, "--task", "retrieval", "--json", evaluated)
    assert result_eval.exit_code == 0, result_eval.output
    assert json.loads(evaluated.read_text())["ndcg@10"] == pytest.approx(final["ndcg@10"])
    assert "ndcg@10" in result.stdout  # the final table

    config = json.loads((output / "config.json").read_text())
    assert config["config"]["dev_retrieval"] == str(folder)
    assert config["config"]["dev_retrieval_split"] == "dev"
    assert "dev_retrieval" in config["config"]["data_sha256"]
    assert f"--dev-retrieval {folder}" in config["command"]


def test_train_ignore_identical_ids_scores_dev_as_evaluate_does(cli, tiny_checkpoint, small_train,
                                                               tmp_path):
    rows = demo_rows("dev")[:16]
    queries = {f"q{i}": first for i, (first, _, _) in enumerate(rows)}
    folder = write_beir(  # each query also a document of its own id, as in BEIR's ArguAna
        tmp_path / "ir", "dev", queries,
        {**{f"d{i}": second for i, (_, second, _) in enumerate(rows)}, **queries},
        {f"q{i}": {f"d{i}": 1} for i in range(len(rows))},
    )
    result = cli("train", "--train", small_train, "--ignore-identical-ids",
                 "--output", tmp_path / "refused")
    assert_one_line_error(result, "--ignore-identical-ids", "--train-retrieval",
                          "--dev-retrieval")

    output = tmp_path / "run"
    result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train,
                 "--dev-retrieval", folder, "--ignore-identical-ids", "--epochs", 1,
                 "--batch-size", 8, "--max-length", 16, "--output", output)
    assert result.exit_code == 0, result.output
    assert "share their id" not in result.output
    final = json.loads((output / "results.json").read_text())["dev_retrieval"]
    config = json.loads((output / "config.json").read_text())
    assert config["config"]["ignore_identical_ids"] is True
    assert "--ignore-identical-ids" in config["command"].split()
    scored = {}
    for flag in ((), ("--ignore-identical-ids",)):
        out = tmp_path / f"evaluated{len(flag)}.json"
        evaluated = cli("evaluate", output, folder, "--task", "retrieval", "--json", out, *flag)
        assert evaluated.exit_code == 0, evaluated.output
        scored[bool(flag)] = json.loads(out.read_text())
    assert final["ndcg@10"] == pytest.approx(scored[True]["ndcg@10"])
    assert final["mrr@1"] == pytest.approx(scored[True]["mrr@1"])
    assert scored[False]["mrr@1"] == 0.0 and final["ndcg@10"] > scored[False]["ndcg@10"]


def test_train_notes_queries_that_share_ids_with_documents(tmp_path):
    from recipes.context import Environment
    from recipes.training import read_retrieval_splits

    # "a" is also a document with its text (ArguAna-like); "c" shares its id by chance
    # with the document judged relevant to it.
    folder = write_beir(tmp_path / "ir", "dev", {"a": "x", "b": "y", "c": "v"},
                        {"a": "x", "c": "z", "d": "w"},
                        {"a": {"c": 1}, "b": {"d": 1}, "c": {"c": 1}})
    notes = []

    class Recording(Environment):
        def note(self, message):
            notes.append(message)

    config = {"dev_retrieval": str(folder), "dev_retrieval_split": "dev"}
    read_retrieval_splits(config, Recording())
    assert notes == ["2 of 3 queries of --dev-retrieval share their id with a document, 1 of "
                     "those documents with the query's text too (in BEIR's ArguAna and Quora "
                     "that document is the query itself); BEIR leaves such documents out of "
                     "the ranking: --ignore-identical-ids does the same"]
    notes.clear()
    read_retrieval_splits({**config, "ignore_identical_ids": True}, Recording())
    assert len(notes) == 1 and notes[0].startswith(
        "--ignore-identical-ids: for 1 queries of --dev-retrieval the document left out")

    # Mined from, the same folder: such a document may be a negative; with the option
    # on it never is, and "c", judged relevant, stays a positive, never "not retrieved".
    config = {"train_retrieval": str(folder), "train_retrieval_split": "dev"}
    notes.clear()
    read_retrieval_splits(config, Recording())
    assert len(notes) == 1 and notes[0].startswith(
        "2 of 3 queries of --train-retrieval share their id with a document, 1 of")
    assert notes[0].endswith("mining may take such a document as its query's negative: "
                             "--ignore-identical-ids keeps it out")
    notes.clear()
    read_retrieval_splits({**config, "ignore_identical_ids": True}, Recording())
    assert notes == []


# --- qrels naming ids the files lack (--unknown-ids) ----------------------------------


def without_documents(source, split, destination, count):
    """The BEIR folder `source` less the first relevant document of its first `count`
    queries, which the qrels still judge (as BEIR's ArguAna judges a missing document)."""
    queries, corpus, qrels = read_beir_folder(source, split)
    missing = {next(iter(judged)) for judged in list(qrels.values())[:count]}
    folder = write_beir(destination, split, queries,
                        {d: t for d, t in corpus.items() if d not in missing}, qrels)
    return folder, missing


def test_evaluate_unknown_ids_report_scores_missing_documents_as_trec_eval(cli, minilm,
                                                                          shared_data, tmp_path):
    plain = subset_beir(shared_data / "retrieval" / "stsb-en-test", "test", tmp_path / "sub",
                        num_queries=20, num_docs=60)
    folder, missing = without_documents(plain, "test", tmp_path / "missing", 3)
    out = tmp_path / "refused.json"
    result = cli("evaluate", "all-MiniLM-L6-v2", folder, "--task", "retrieval", "--json", out)
    assert_one_line_error(result, "test.tsv:", "unknown corpus id", "--unknown-ids report")
    assert not out.exists()

    result, record = evaluate_retrieval_cli(cli, folder, tmp_path, "--unknown-ids", "report")
    assert record["documents"] == 60 - len(missing) and record["queries"] == 20
    assert f"{len(missing)} row(s) name a document missing from corpus.jsonl" in result.output
    # pytrec_eval on the full qrels: a judged document that no run can hold still counts.
    for key, value in reference_metrics(minilm, folder, "test").items():
        assert record[key] == pytest.approx(value, abs=1e-4), key
    # All 57 documents are retrieved, so Recall@100 is the share of each query's judged
    # documents that the corpus still holds: the missing ones count against it.
    _, _, qrels = read_beir_folder(folder, "test")
    held = [sum(d not in missing for d in judged) / len(judged) for judged in qrels.values()]
    assert record["recall@100"] == pytest.approx(100 * np.mean(held), abs=1e-6)
    assert record["recall@100"] < 100


def test_mine_and_train_leave_out_judgements_of_missing_documents(cli, tiny_checkpoint,
                                                                  shared_data, tmp_path):
    plain = subset_beir(shared_data / "retrieval" / "stsb-en-dev", "dev", tmp_path / "sub",
                        num_queries=12, num_docs=40)
    folder, missing = without_documents(plain, "dev", tmp_path / "missing", 2)
    queries, corpus, qrels = read_beir_folder(folder, "dev")
    output = tmp_path / "rows.jsonl"
    result = mine_cli(cli, folder, output, "--max-length", 16, model=tiny_checkpoint)
    assert_one_line_error(result, "dev.tsv:", "unknown corpus id", "--unknown-ids report")
    assert not output.exists()
    result = mine_cli(cli, folder, output, "--max-length", 16, "--unknown-ids", "report",
                      model=tiny_checkpoint)
    assert result.exit_code == 0, result.output
    assert "--qrels: 2 judgement(s) name documents missing from the corpus" in result.output
    expected = [(queries[q], corpus[d]) for q, judged in qrels.items() for d, s in judged.items()
                if s >= 1 and d not in missing]
    assert [(r["query"], r["positive"]) for r in read_jsonl(output)] == expected

    from recipes.context import Environment
    from recipes.training import read_retrieval_splits

    config = {"train_retrieval": str(folder), "train_retrieval_split": "dev",
              "dev_retrieval": str(folder), "dev_retrieval_split": "dev",
              "unknown_ids": "report"}
    notes = []

    class Recording(Environment):
        def note(self, message):
            notes.append(message)

    train, dev = read_retrieval_splits(config, Recording())
    assert sum("2 row(s) name a document missing from corpus.jsonl" in n for n in notes) == 2
    assert "--train-retrieval: 2 judgement(s) name documents missing" in " ".join(notes)
    assert all(d in train.corpus for judged in train.qrels.values() for d in judged)
    assert sum(len(j) for j in train.qrels.values()) == len(expected)
    assert any(d in missing for judged in dev.qrels.values() for d in judged)  # scored as BEIR

    result = cli("train", "--unknown-ids", "report",
                 "--output", tmp_path / "refused")
    assert_one_line_error(result, "--unknown-ids", "--train-retrieval")


def test_a_split_with_no_relevant_judgement_names_its_qrels(cli, tiny_checkpoint, tmp_path):
    # Judged not relevant (score 0): the reader's note on the skipped query, then the error.
    folder = write_beir(tmp_path / "beir", "test", {"q1": "a query"},
                        {"d1": "a document", "d2": "another"}, {"q1": {"d1": 0}})
    result = cli("evaluate", tiny_checkpoint, folder, "--task", "retrieval")
    assert_error_after_notes(result, f"DATA {folder}: qrels/test.tsv judges no query")
    result = cli("train", "--backbone", tiny_checkpoint, "--train-retrieval", folder,
                 "--loss", "infonce", "--output", tmp_path / "run")
    assert_error_after_notes(result, f"--train-retrieval {folder}: qrels/test.tsv judges no "
                             "query")
    assert not (tmp_path / "run").exists()
    # A header and no judgement at all.
    empty = write_beir(tmp_path / "empty", "test", {"q1": "a query"}, {"d1": "a document"}, {})
    assert_one_line_error(cli("evaluate", tiny_checkpoint, empty, "--task", "retrieval"),
                          f"DATA {empty}: qrels/test.tsv judges no query")
