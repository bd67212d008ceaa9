"""BEIR reader and triplet JSON lines: real data counts, title joining, errors with file:line."""

import json
import os

import pytest

from keras_cosent.data import DataFormatError
from keras_cosent.data import read_beir
from keras_cosent.data import read_retrieval_triplets
from keras_cosent.data import write_retrieval_triplets

SHARED = os.environ.get("KERAS_COSENT_SHARED_DATA", "/work/shared/data")
STSB_DEV = os.path.join(SHARED, "retrieval", "stsb-en-dev")


def make_folder(tmp_path, corpus=None, queries=None, qrels=None):
    corpus = corpus if corpus is not None else [
        json.dumps({"_id": "d1", "title": "Title", "text": "body one"}),
        json.dumps({"_id": "d2", "title": "", "text": "body two"}),
    ]
    queries = queries if queries is not None else [
        json.dumps({"_id": "q1", "text": "first"}),
        json.dumps({"_id": "q2", "text": "second"}),
    ]
    qrels = qrels if qrels is not None else ["query-id\tcorpus-id\tscore", "q1\td1\t2", "q2\td2\t0"]
    (tmp_path / "qrels").mkdir(exist_ok=True)
    (tmp_path / "corpus.jsonl").write_text("\n".join(corpus) + "\n", encoding="utf-8")
    (tmp_path / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (tmp_path / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    return tmp_path


@pytest.mark.skipif(not os.path.isdir(STSB_DEV), reason="shared retrieval data not present")
def test_real_stsb_dev_counts_match_readme():
    ds = read_beir(STSB_DEV, "dev")
    assert (len(ds.corpus), len(ds.queries)) == (1467, 262)
    assert sum(len(j) for j in ds.qrels.values()) == 263
    assert ds.skipped == []


def test_title_joined_and_unrelevant_query_skipped(tmp_path):
    with pytest.warns(UserWarning, match="1 judged queries have no relevant document"):
        ds = read_beir(make_folder(tmp_path), "test")
    assert ds.corpus == {"d1": "Title body one", "d2": "body two"}
    assert ds.queries == {"q1": "first"} and ds.qrels == {"q1": {"d1": 2}}
    assert ds.skipped == ["q2"]


@pytest.mark.parametrize(
    "kwargs,file,line,match",
    [
        ({"corpus": ['{"_id": "d1", "text": "a"}', '{"title": "", "text": "b"}']},
         "corpus.jsonl", 2, "missing or empty `_id`"),
        ({"corpus": ['{"_id": "d1", "text": "a"}', '{"_id": "d1", "text": "b"}']},
         "corpus.jsonl", 2, "duplicate `_id` 'd1'"),
        ({"queries": ['{"_id": "q1", "text": "a"}', '{"_id": "q2", "text": ']},
         "queries.jsonl", 2, "malformed JSON"),
        ({"qrels": ["query\tdoc\tscore", "q1\td1\t1"]}, "test.tsv", 1, "header"),
        ({"qrels": ["query-id\tcorpus-id\tscore", "q1\td1\t1", "q9\td1\t1"]},
         "test.tsv", 3, "unknown query id 'q9'"),
        ({"qrels": ["query-id\tcorpus-id\tscore", "q1\td7\t1"]},
         "test.tsv", 2, "unknown corpus id 'd7'"),
        ({"qrels": ["query-id\tcorpus-id\tscore", "q1\td1\t1.5"]},
         "test.tsv", 2, "score '1.5' is not an integer"),
    ],
)
def test_errors_name_file_and_line(tmp_path, kwargs, file, line, match):
    folder = make_folder(tmp_path, **kwargs)
    with pytest.raises(DataFormatError, match=match) as info:
        read_beir(folder, "test")
    assert os.path.basename(info.value.path) == file and info.value.line == line


def test_triplets_round_trip_and_errors(tmp_path):
    rows = [["q a", "p a", "n1", "n2"], ["q b", "p b", "n3", "n4"]]
    path = tmp_path / "t.jsonl"
    write_retrieval_triplets(rows, path)
    ds = read_retrieval_triplets(path)
    assert ds.columns == [["q a", "q b"], ["p a", "p b"], ["n1", "n3"], ["n2", "n4"]]
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"query": "q c", "positive": "p c", "negatives": ["n5"]}) + "\n")
    with pytest.raises(DataFormatError, match="1 negatives where earlier rows have 2") as info:
        read_retrieval_triplets(path)
    assert info.value.line == 3
    cut = read_retrieval_triplets(path, num_negatives=1)
    assert cut.columns[2] == ["n1", "n3", "n5"] and cut.skipped == 0
    assert read_retrieval_triplets(path, num_negatives=2).skipped == 1
    path.write_text('{"query": "q", "positive": 3}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="`positive` missing"):
        read_retrieval_triplets(path)
