"""BEIR reader and triplet JSON lines: real data counts, title joining, errors with file:line."""

import json
import os

import pytest

from keras_cosent.data import DataFormatError
from keras_cosent.data import RetrievalDataset
from keras_cosent.data import hold_out_queries
from keras_cosent.data import read_beir
from keras_cosent.data import read_retrieval_triplets
from keras_cosent.data import write_retrieval_triplets


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


def test_real_stsb_dev_counts_match_readme(shared_data):
    ds = read_beir(shared_data / "retrieval" / "stsb-en-dev", "dev")
    assert (len(ds.corpus), len(ds.queries)) == (1467, 262)
    assert sum(len(j) for j in ds.qrels.values()) == 263
    assert ds.skipped == []


def test_title_joined_and_unrelevant_query_skipped(tmp_path):
    with pytest.warns(UserWarning, match="1 judged query has no relevant document and is skipped"):
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
         "queries.jsonl", 2, r"invalid JSON: Expecting value \(column 23\)"),
        ({"qrels": ["query\tdoc\tscore", "q1\td1\t1"]}, "test.tsv", 1, "header"),
        ({"qrels": ["query-id\tcorpus-id\tscore", "q1\td1\t1", "q9\td1\t1"]},
         "test.tsv", 3, "unknown query id 'q9'"),
        ({"qrels": ["query-id\tcorpus-id\tscore", "q1\td7\t1"]},
         "test.tsv", 2, "unknown corpus id 'd7'"),
        ({"qrels": ["query-id\tcorpus-id\tscore", "q1\td1 \t1"]},
         "test.tsv", 2, r"unknown corpus id 'd1 ' \(corpus.jsonl has 'd1': ids are compared"),
        # The hint for spaces on the other side (it covered only the qrels' own).
        ({"queries": ['{"_id": "q1 ", "text": "a"}', '{"_id": "q2", "text": "b"}']},
         "test.tsv", 2, r"unknown query id 'q1' \(queries.jsonl has 'q1 ': ids are compared"),
        # The header as written: stripped, its trailing TAB looked like no mistake.
        ({"qrels": ["query-id\tcorpus-id\tscore\t", "q1\td1\t1"]},
         "test.tsv", 1, r"got 'query-id\\tcorpus-id\\tscore\\t'$"),
        ({"corpus": ['{"_id": "d1", "text": "a"}', '{"_id": "d2", "contents": "b"}']},
         "corpus.jsonl", 2, r"missing `text` \(keys: \['_id', 'contents'\]\)"),
        ({"queries": ['{"_id": "q1"}']}, "queries.jsonl", 1, "missing `text`"),
        ({"qrels": ["query-id\tcorpus-id\tscore", "q1\td1\t1.5"]},
         "test.tsv", 2, "score '1.5' is not an integer"),
        # int() reads it as 10.
        ({"qrels": ["query-id\tcorpus-id\tscore", "q1\td1\t1_0"]},
         "test.tsv", 2, "score '1_0' is not an integer"),
        # int() refuses more than 4300 digits with a bare ValueError.
        ({"qrels": ["query-id\tcorpus-id\tscore", "q1\td1\t" + "1" * 5000]},
         "test.tsv", 2, "score '1111.* is out of range for a relevance grade"),
        ({"queries": ['{"_id": "q1", "text": "a", "n": 1' + "0" * 5000 + "}"]},
         "queries.jsonl", 1, "invalid JSON: Exceeds the limit"),
        # str() made the ids 'None' and 'True' of them.
        ({"corpus": ['{"_id": "d1", "text": "a"}', '{"_id": null, "text": "b"}']},
         "corpus.jsonl", 2, "`_id` should be a string or an integer, got None"),
        ({"queries": ['{"_id": true, "text": "a"}']},
         "queries.jsonl", 1, "`_id` should be a string or an integer, got True"),
        ({"qrels": ["query-id\tcorpus-id\tscore", "q1\td1\t1", "q2\td2\t1", "q1\td1\t2"]},
         "test.tsv", 4, r"\('q1', 'd1'\) judged 2 here and 1 on line 2"),
    ],
)
def test_errors_name_file_and_line(tmp_path, kwargs, file, line, match):
    folder = make_folder(tmp_path, **kwargs)
    with pytest.raises(DataFormatError, match=match) as info:
        read_beir(folder, "test")
    assert os.path.basename(info.value.path) == file and info.value.line == line


def test_an_empty_qrels_file_is_named(tmp_path):
    # Not even a header: it read as a split judging nothing, without an error.
    folder = make_folder(tmp_path)
    (folder / "qrels" / "test.tsv").write_bytes(b"")
    with pytest.raises(DataFormatError, match=r"test\.tsv: empty file; expected the header"):
        read_beir(folder, "test")
    # A header alone is a well-formed split that judges nothing.
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n")
    assert read_beir(folder, "test").qrels == {}


def test_ids_are_compared_exactly_as_beir_does(tmp_path):
    # BEIR's loader keeps `_id`s and qrels ids as written, spaces included.
    folder = make_folder(
        tmp_path, corpus=[json.dumps({"_id": "d 1 ", "text": "body"}),
                          json.dumps({"_id": "d 1", "text": "other"})],
        queries=[json.dumps({"_id": " q1", "text": "first"})],
        qrels=["query-id\tcorpus-id\tscore", " q1\td 1 \t 1 "])
    ds = read_beir(folder, "test")
    assert ds.qrels == {" q1": {"d 1 ": 1}}


def test_bom_and_crlf_read_as_plain_utf8_and_only_newline_ends_a_line(tmp_path):
    folder = make_folder(tmp_path)
    # Saved on Windows: a BOM before the first row and CRLF line ends in every file.
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        path = folder / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    with pytest.warns(UserWarning, match="1 judged query has"):
        ds = read_beir(folder, "test")
    assert ds.corpus == {"d1": "Title body one", "d2": "body two"}
    assert ds.queries == {"q1": "first"} and ds.qrels == {"q1": {"d1": 2}}
    # Only \n ends a line: \u2028 inside a string is text, and a lone \r (an old Mac
    # line end, or a raw one inside a string, which JSON forbids) is reported on the
    # line that `sed -n 4p` shows, not as a split row.
    with open(folder / "corpus.jsonl", "ab") as f:
        f.write('{"_id": "d3", "text": "a\u2028b"}\n{"_id": "d4", "text": "a\rb"}\n'.encode())
    with pytest.raises(DataFormatError, match="carriage return .* without \\\\n") as info:
        read_beir(folder, "test")
    assert info.value.line == 4
    with open(folder / "corpus.jsonl", "rb+") as f:
        f.truncate(len(f.read()) - len(b'{"_id": "d4", "text": "a\rb"}\n'))
    with pytest.warns(UserWarning, match="1 judged query has"):
        assert read_beir(folder, "test").corpus["d3"] == "a\u2028b"


def test_bytes_that_are_not_utf8_name_file_and_line(tmp_path):
    folder = make_folder(tmp_path)
    (folder / "queries.jsonl").write_bytes(
        '{"_id": "q1", "text": "first"}\n{"_id": "q2", "text": "飞机"}\n'.encode("gbk"))
    with pytest.raises(DataFormatError, match=r"invalid UTF-8 byte b'\\xb7'.*re-encode") as info:
        read_beir(folder, "test")
    assert os.path.basename(info.value.path) == "queries.jsonl" and info.value.line == 2


def test_utf16_without_a_bom_and_joined_files_name_file_and_line(tmp_path):
    folder = make_folder(tmp_path)
    # ASCII in UTF-16 without a BOM decodes as UTF-8, a NUL after every letter.
    (folder / "queries.jsonl").write_bytes('{"_id": "q1", "text": "first"}\n'.encode("utf-16-le"))
    with pytest.raises(DataFormatError, match=r"NUL .*UTF-16") as info:
        read_beir(folder, "test")
    assert os.path.basename(info.value.path) == "queries.jsonl" and info.value.line == 1
    # Two files saved with a BOM each, joined with `cat`: the second BOM is not text.
    (folder / "queries.jsonl").write_bytes(b"\xef\xbb\xbf" + b'{"_id": "q1", "text": "first"}\n'
                                           + b"\xef\xbb\xbf" + b'{"_id": "q2", "text": "x"}\n')
    with pytest.raises(DataFormatError, match=r"byte-order mark .*joined") as info:
        read_beir(folder, "test")
    assert info.value.line == 2


def test_an_id_given_twice_in_one_row_names_its_line(tmp_path):
    # Read as the last one ("d2"), the row failed later at the qrels: "unknown corpus id 'd1'".
    folder = make_folder(tmp_path, corpus=['{"_id": "d1", "text": "x", "_id": "d2"}'])
    with pytest.raises(DataFormatError, match="duplicate key '_id'") as info:
        read_beir(folder, "test")
    assert os.path.basename(info.value.path) == "corpus.jsonl" and info.value.line == 1


def test_an_escaped_lone_surrogate_names_file_and_line(tmp_path):
    folder = make_folder(tmp_path)
    # A pair of escapes is one character (an emoji); half of one is none, and no
    # UTF-8 writer (the mined rows') could write it.
    (folder / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "first \\ud83d\\ude00"}\n{"_id": "q2", "text": "bad \\udc80"}\n')
    with pytest.raises(DataFormatError, match=r"lone surrogate '\\udc80'") as info:
        read_beir(folder, "test")
    assert os.path.basename(info.value.path) == "queries.jsonl" and info.value.line == 2
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "first \\ud83d\\ude00"}\n')
    with pytest.warns(UserWarning):  # queries of the qrels now missing: reported
        assert read_beir(folder, "test", unknown_ids="report").queries["q1"] == "first \U0001f600"


def test_unknown_ids_report_reads_past_rows_naming_missing_ids(tmp_path):
    # As BEIR's ArguAna: a judged document the corpus lacks; and a query queries.jsonl lacks.
    folder = make_folder(tmp_path, qrels=[
        "query-id\tcorpus-id\tscore", "q1\td1\t1", "q1\td404\t1", "q9\td2\t1",
        "q2\td404\t2", "q9\td1\t1"])
    with pytest.raises(DataFormatError, match="unknown corpus id 'd404'") as info:
        read_beir(folder, "test")
    assert info.value.line == 3
    with pytest.warns(UserWarning) as caught:
        ds = read_beir(folder, "test", unknown_ids="report")
    message = str(caught[0].message)
    assert "2 row(s) name a query missing from queries.jsonl (first: line 4, 'q9'), left out" in message
    assert "2 row(s) name a document missing from corpus.jsonl (first: line 3, 'd404')" in message
    # Unknown documents stay judged (relevant, never retrieved), as trec_eval counts them.
    assert ds.qrels == {"q1": {"d1": 1, "d404": 1}, "q2": {"d404": 2}}
    assert ds.queries == {"q1": "first", "q2": "second"} and ds.skipped == []
    trainable = ds.judged_in_corpus()
    assert trainable.qrels == {"q1": {"d1": 1}} and trainable.queries == {"q1": "first"}
    assert trainable.skipped == ["q2"] and trainable.corpus is ds.corpus
    with pytest.raises(ValueError, match="unknown_ids"):
        read_beir(folder, "test", unknown_ids="skip")


def test_repeated_judgements_with_the_same_score_are_read_once(tmp_path):
    rows = ["q1\td1\t2", "q2\td2\t1", "q1\td1\t2", "q1\td2\t0", "q2\td2\t1"]
    folder = make_folder(tmp_path, qrels=["query-id\tcorpus-id\tscore", *rows])
    with pytest.warns(UserWarning) as caught:
        ds = read_beir(folder, "test")
    assert len(caught) == 1
    assert ("2 row(s) repeat an earlier judgement with the same score "
            "(first: line 4 repeats line 2), read once") in str(caught[0].message)
    # Reference: the rows as a nested dict, as BEIR's loader and pytrec_eval take them.
    reference = {}
    for row in rows:
        qid, did, score = row.split("\t")
        reference.setdefault(qid, {})[did] = int(score)
    assert ds.qrels == reference and ds.skipped == []


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
    path.write_text('{"query": "q", "positive": "p"}\n{"query": " ", "positive": "p"}\n',
                    encoding="utf-8")
    with pytest.raises(DataFormatError, match="`query` is empty") as info:
        read_retrieval_triplets(path)
    assert info.value.line == 2
    # Ids and scores beside the texts are ignored; negatives under another key were
    # read as plain (query, positive) pairs, and InfoNCE trained without them.
    path.write_text('{"query": "q", "positive": "p", "query_id": "7"}\n'
                    '{"query": "q2", "positive": "p2", "negative": "n"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="unknown key 'negative'.*`negatives`") as info:
        read_retrieval_triplets(path)
    assert info.value.line == 2
    path.write_text('{"query": "q", "positive": "p", "hard_negatives": ["n1", "n2"]}\n',
                    encoding="utf-8")
    with pytest.raises(DataFormatError, match="unknown key 'hard_negatives'"):
        read_retrieval_triplets(path)
    # Keys of numbers or flags that merely contain "neg" are other keys, ignored:
    # they were refused as misspelt negatives.
    path.write_text('{"query": "q", "positive": "p", "negatives": ["n"], "neg_scores": [0.3], '
                    '"is_negation": false, "num_negatives": 1}\n', encoding="utf-8")
    assert read_retrieval_triplets(path).columns == [["q"], ["p"], ["n"]]


def test_hold_out_queries_on_ocnli_train_keeps_dev_positives_out_of_training(shared_data):
    data = read_beir(shared_data / "retrieval" / "ocnli-zh-train", "train")
    train, dev = hold_out_queries(data, 300)
    assert len(dev.queries) == 300 and len(train.queries) == len(data.queries) - 300
    assert set(train.queries) | set(dev.queries) == set(data.queries)
    assert not set(train.queries) & set(dev.queries)
    assert all(dev.qrels[q] == data.qrels[q] for q in dev.queries)
    assert all(train.qrels[q] == data.qrels[q] for q in train.queries)
    dev_judged = {d for q in dev.queries for d in data.qrels[q]}
    train_judged = {d for q in train.queries for d in data.qrels[q]}
    # Dev: its judged documents plus 2,500 others; train: all but the dev-only ones.
    assert dev_judged <= set(dev.corpus)
    assert len(dev.corpus) == len(dev_judged) + 2500
    assert set(train.corpus) == set(data.corpus) - (dev_judged - train_judged)
    assert list(train.corpus) == [d for d in data.corpus if d in train.corpus]
    assert all(train.corpus[d] == data.corpus[d] for d in train.corpus)
    again_train, again_dev = hold_out_queries(data, 300)
    assert (again_dev.queries, again_dev.corpus) == (dev.queries, dev.corpus)
    assert again_train.corpus == train.corpus
    other = hold_out_queries(data, 300, seed=1)[1]
    assert set(other.queries) != set(dev.queries)


def test_hold_out_queries_keeps_documents_judged_by_both_sides():
    data = RetrievalDataset(
        corpus={d: d for d in ("shared", "dev-only", "train-only", "other")},
        queries={"a": "a", "b": "b"},
        qrels={"a": {"shared": 1, "dev-only": 1}, "b": {"shared": 1, "train-only": 1}},
    )
    for seed in range(8):
        train, dev = hold_out_queries(data, 1, seed=seed, distractors=0)
        held = next(iter(dev.queries))
        only_held = {"a": "dev-only", "b": "train-only"}[held]
        assert set(train.corpus) == set(data.corpus) - {only_held}
        assert set(dev.corpus) == set(data.qrels[held])
    assert set(hold_out_queries(data, 1, distractors=5)[1].corpus) == {
        "shared", "dev-only", "train-only", "other"}


@pytest.mark.parametrize("kwargs, match", [
    ({"size": 0}, "size=0"), ({"size": 2}, "has 2 queries"), ({"size": True}, "size=True"),
    ({"size": 1.0}, "size=1.0"), ({"size": 1, "distractors": -1}, "distractors=-1"),
])
def test_hold_out_queries_errors_name_the_argument(kwargs, match):
    data = RetrievalDataset(corpus={"d": "d"}, queries={"a": "a", "b": "b"},
                            qrels={"a": {"d": 1}, "b": {"d": 1}}, source="set")
    with pytest.raises(ValueError, match=match):
        hold_out_queries(data, **kwargs)


def test_triplets_all_shorter_than_asked_say_so(tmp_path):
    path = tmp_path / "t.jsonl"
    write_retrieval_triplets([["q", "p", "n1"], ["q2", "p2"]], path)
    with pytest.raises(DataFormatError, match=r"t\.jsonl: no rows: all 2 have fewer than 3 "
                                              r"negatives"):
        read_retrieval_triplets(path, num_negatives=3)


def test_the_reader_s_unknown_ids_mode_travels_with_the_dataset(tmp_path):
    # RetrievalEvaluator.from_dataset keeps judgements of missing documents only for "report".
    folder = make_folder(tmp_path, qrels=["query-id\tcorpus-id\tscore", "q1\td1\t1",
                                          "q2\td404\t1", "q2\td2\t1"])
    with pytest.warns(UserWarning, match="d404"):
        ds = read_beir(folder, "test", unknown_ids="report")
    assert ds.unknown_ids == "report"
    assert ds.judged_in_corpus().unknown_ids == "report"
    assert all(part.unknown_ids == "report" for part in hold_out_queries(ds, 1))
    (tmp_path / "plain").mkdir()
    plain = make_folder(tmp_path / "plain", qrels=["query-id\tcorpus-id\tscore", "q1\td1\t1"])
    assert read_beir(plain, "test").unknown_ids == "error"
    assert RetrievalDataset({}, {}, {}).unknown_ids == "error"  # built by hand


@pytest.mark.parametrize("rows, match", [
    ([["q", "p", "n"], ["q"]], r"`rows\[1\]` should be a list \[query, positive, negative...\] "
                               r"of at least a query and a positive. Received: \['q'\]"),
    ([["q", "p", None]], r"`rows\[0\]` should hold strings; its negative 1 is NoneType None"),
    ([["q", 3]], r"`rows\[0\]` should hold strings; its positive is int 3"),
    (["qpn"], r"`rows\[0\]` should be a list.*Received: 'qpn'"),
    ([("q", "p"), ["q", "  "]], r"`rows\[1\]` has an empty positive"),
    ([["", "p"]], r"`rows\[0\]` has an empty query"),
    # A lone surrogate is a str that UTF-8 cannot write: it failed mid-file.
    ([["q1", "p1", "n1"], ["q2", "p2\udc80", "n2"]],
     r"`rows\[1\]` has a positive that is not valid Unicode text \(surrogates not allowed "
     r"at character 2\)"),
    ("qpn", "`rows` should be a sequence of .* Received: `rows` of type str"),
])
def test_write_retrieval_triplets_checks_every_row_before_writing(tmp_path, rows, match):
    path = tmp_path / "t.jsonl"
    with pytest.raises(ValueError, match=match):
        write_retrieval_triplets(rows, path)
    assert not path.exists()  # no half-written file


def test_write_retrieval_triplets_takes_tuples_generators_and_empty_negatives(tmp_path):
    path = tmp_path / "t.jsonl"
    write_retrieval_triplets((tuple(r) for r in [["q", "p", ""], ["q2", "p2", "n"]]), path)
    assert read_retrieval_triplets(path).columns == [["q", "q2"], ["p", "p2"], ["", "n"]]


@pytest.mark.parametrize("num_negatives", [-1, 1.5, True, "1"])
def test_read_retrieval_triplets_num_negatives_is_none_or_an_int_from_zero(tmp_path,
                                                                           num_negatives):
    path = tmp_path / "t.jsonl"
    write_retrieval_triplets([["q", "p", "n1"], ["q2", "p2"]], path)
    with pytest.raises(ValueError, match=rf"`num_negatives` should be None or an int >= 0. "
                                         rf"Received: `num_negatives`={num_negatives!r}"):
        read_retrieval_triplets(path, num_negatives=num_negatives)
    # 0 (the training recipe's --mine-negatives 0) keeps every row as a (query, positive) pair.
    pairs = read_retrieval_triplets(path, num_negatives=0)
    assert pairs.columns == [["q", "q2"], ["p", "p2"]] and pairs.skipped == 0
