"""Tests for the readers: real shared files, malformed rows, skip mode, dispatch."""

import json
import os
import warnings

import numpy as np
import pytest

from keras_cosent.data import DataFormatError
from keras_cosent.data import PairDataset
from keras_cosent.data import READ_FORMATS
from keras_cosent.data import read_columns
from keras_cosent.data import read_dataset
from keras_cosent.data import read_nli_jsonl
from keras_cosent.data import read_pair_tsv
from keras_cosent.data import read_sts_benchmark
from keras_cosent.data import read_text_lines


def _raw_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def _write(tmp_path, name, text):
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


# --- real shared data -------------------------------------------------------

@pytest.mark.parametrize("split,rows", [("train", 5749), ("dev", 1500), ("test", 1379)])
def test_sts_benchmark_real_files(shared_data, split, rows):
    path = shared_data / "stsbenchmark" / f"sts-{split}.csv"
    ds = read_sts_benchmark(path)
    assert len(ds) == rows and ds.skipped == 0
    assert ds.labels.dtype == np.float32
    assert ds.labels.min() == 0.0 and ds.labels.max() == 5.0
    raw = _raw_lines(path)
    for row, line in ((0, raw[0]), (-1, raw[-1])):
        fields = line.split("\t")
        assert ds.pairs[row] == (fields[5].strip(), fields[6].strip())
        assert ds.labels[row] == np.float32(fields[4])
    # Lines with quotes and with extra trailing columns read like any other.
    quoted = next(i for i, line in enumerate(raw) if '"' in line)
    assert '"' in "".join(ds.pairs[quoted])
    ragged = next(i for i, line in enumerate(raw) if len(line.split("\t")) > 7)
    assert ds.pairs[ragged] == tuple(t.strip() for t in raw[ragged].split("\t")[5:7])


@pytest.mark.parametrize("split,rows", [("train", 5231), ("valid", 1458), ("test", 1361)])
def test_pair_tsv_real_files(shared_data, split, rows):
    path = shared_data / "sts-b-zh" / f"STS-B.{split}.data"
    ds = read_pair_tsv(path)
    assert len(ds) == rows
    assert set(np.unique(ds.labels).tolist()) <= {0, 1, 2, 3, 4, 5}
    raw = _raw_lines(path)
    for row, line in ((0, raw[0]), (-1, raw[-1])):
        first, second, label = line.split("\t")
        assert ds.pairs[row] == (first, second) and ds.labels[row] == int(label)


def test_pair_tsv_label_histogram(shared_data):
    labels = read_pair_tsv(shared_data / "sts-b-zh" / "STS-B.train.data").labels
    # Histogram published in sts-b-zh/README.txt.
    assert np.bincount(labels.astype(int)).tolist() == [836, 807, 887, 1416, 1033, 252]


@pytest.mark.parametrize("split,rows,no_gold", [("train.3k", 3000, 6), ("dev", 3000, 50)])
def test_nli_real_files(shared_data, split, rows, no_gold):
    path = shared_data / "ocnli" / f"{split}.json"
    records = [json.loads(line) for line in _raw_lines(path)]
    assert len(records) == rows
    ds = read_nli_jsonl(path)
    assert len(ds) == rows - no_gold and ds.dropped == no_gold
    gold = [r for r in records if r["label"] != "-"]
    expected = [{"entailment": 2, "neutral": 1, "contradiction": 0}[r["label"]] for r in gold]
    np.testing.assert_array_equal(ds.labels, expected)
    assert ds.pairs[-1] == (gold[-1]["sentence1"], gold[-1]["sentence2"])

    triplets = read_nli_jsonl(path, mode="triplets")
    by_premise = {}
    for r in gold:
        by_premise.setdefault(r["sentence1"], []).append((r["sentence2"], r["label"]))
    expected_rows = sum(
        sum(label == "entailment" for _, label in hyps)
        for hyps in by_premise.values()
        if any(label == "contradiction" for _, label in hyps)
    )
    assert len(triplets) == expected_rows > 0 and triplets.labels is None
    for anchor, positive, negative in zip(*triplets.columns):
        assert (positive, "entailment") in by_premise[anchor]
        assert (negative, "contradiction") in by_premise[anchor]


# --- formats on small files ---------------------------------------------------

def test_sts_benchmark_quotes_ragged_crlf_bom(tmp_path):
    path = _write(tmp_path, "sts.csv", (
        "\ufeffnews\tf\t2012\t1\t4.5\tHe said \"hi.\tShe's \"ok\"\tsrc1\tsrc2\r\n"
        "\n"
        "news\tf\t2012\t2\t0\t a \tb\r\n"
    ))
    ds = read_sts_benchmark(path)
    assert ds.pairs == [('He said "hi.', 'She\'s "ok"'), ("a", "b")]
    np.testing.assert_array_equal(ds.labels, [4.5, 0.0])
    assert ds.source == str(path)


def test_pair_tsv_small(tmp_path):
    path = _write(tmp_path, "x.data", "一\t二\t3\n三\t四\t0\n")
    ds = read_pair_tsv(path)
    assert ds.pairs == [("一", "二"), ("三", "四")] and ds.labels.tolist() == [3.0, 0.0]


def test_read_columns_csv_quoting_and_multiline(tmp_path):
    path = _write(tmp_path, "x.csv", 'id,s1,s2,score\n1,"a, ""b""","multi\nline",2.5\n2,c,d,1\n')
    ds = read_columns(path, ["s1", "s2"], label_column="score")
    assert ds.pairs == [('a, "b"', "multi\nline"), ("c", "d")]
    assert ds.labels.tolist() == [2.5, 1.0]


def test_read_columns_csv_line_number_of_multiline_record(tmp_path):
    path = _write(tmp_path, "x.csv", 's1,s2,score\n"a\nb",c,1\nd,e,oops\n')
    with pytest.raises(DataFormatError, match=r"x\.csv:4: label 'score' 'oops' is not a number"):
        read_columns(path, ["s1", "s2"], label_column="score")


def test_an_unclosed_csv_quote_is_reported_where_it_opens(tmp_path):
    # The parser reads on to the end of the file (or a later quote): the error
    # named that line, 202 here, for a quote opened on line 2.
    good = "".join(f"s{i},t{i},1\n" for i in range(200))
    path = _write(tmp_path, "q.csv", 's1,s2,score\n"unclosed,b,1\n' + good)
    with pytest.raises(DataFormatError, match=r"q\.csv:2: malformed CSV: .* at line 202, in "
                                              r"the record that starts here .*not closed"):
        read_columns(path, ["s1", "s2"], label_column="score")
    path = _write(tmp_path, "r.csv", 's1,s2,score\na,b,1\nc,"d"x,1\n')
    with pytest.raises(DataFormatError, match=r"r\.csv:3: malformed CSV: ',' expected"):
        read_columns(path, ["s1", "s2"], label_column="score")


def test_read_columns_csv_field_over_the_csv_module_default_limit(tmp_path):
    # Valid CSV whose text field exceeds csv's default 131072-character limit;
    # the process-wide limit is as it was afterwards.
    import csv
    long_text = "word " * 30000 + "end"
    path = _write(tmp_path, "x.csv", f's1,s2,score\n"{long_text}",b,1\n')
    before = csv.field_size_limit()
    assert read_columns(path, ["s1", "s2"], label_column="score").pairs == [(long_text, "b")]
    assert csv.field_size_limit() == before


@pytest.mark.parametrize("line,reason", [
    # Parses, but half of a UTF-16 pair is no character: tokenizing it fails later.
    ('{"a": "x\\udc80", "b": "y", "s": 1}', r"lone surrogate '\\udc80' escaped in a string"),
    ('{"a": "x", "b": "y", "s": 1e39}', "label 's' 1e\\+39 is too large for a float32 label"),
    # As the file wrote them, not as Python's None, True and ['2'].
    ('{"a": "x", "b": "y", "s": null}', "label 's' null is not a number"),
    ('{"a": "x", "b": "y", "s": true}', "label 's' true is not a number"),
    ('{"a": "x", "b": "y", "s": ["2"]}', r"label 's' \[\"2\"\] is not a number"),
    # float() of this int overflows; json.loads refuses one of more than 4300 digits.
    ('{"a": "x", "b": "y", "s": 1' + "0" * 400 + "}", "label 's' 1000.* is too large"),
    ('{"a": "x", "b": "y", "s": 1' + "0" * 5000 + "}", "invalid JSON: Exceeds the limit"),
])
def test_read_columns_jsonl_values_json_accepts_but_a_label_or_text_cannot_be(
        tmp_path, line, reason):
    path = _write(tmp_path, "x.jsonl", '{"a": "p", "b": "q", "s": 2}\n' + line + "\n")
    with pytest.raises(DataFormatError, match=rf"x\.jsonl:2: {reason}"):
        read_columns(path, ["a", "b"], label_column="s")


def test_read_columns_tsv_and_jsonl(tmp_path):
    tsv = _write(tmp_path, "x.tsv", 'a\tb\n"q"\tr\n')
    assert read_columns(tsv, ["b", "a"]).pairs == [("r", '"q"')]
    jsonl = _write(tmp_path, "x.jsonl", '{"q": "x", "p": "y", "n": "z", "s": 1}\n')
    ds = read_columns(jsonl, ["q", "p", "n"], label_column="s")
    assert ds.columns == [["x"], ["y"], ["z"]] and ds.labels.tolist() == [1.0]
    # .json is JSON lines too; format can also be given explicitly.
    json_path = _write(tmp_path, "x.json", '{"t": "x"}\n')
    assert read_columns(json_path, ["t", "t"]).pairs == [("x", "x")]
    assert read_columns(jsonl, ["q"], format="jsonl").columns == [["x"]]


def test_read_columns_class_names_become_sorted_ids(tmp_path):
    tsv = _write(tmp_path, "x.tsv", "text\tlabel\nGoal!\tsport\nVote\t politics\nOffside\tsport\n")
    ds = read_columns(tsv, ["text"], label_column="label", classes=True)
    assert ds.classes == ["politics", "sport"] and ds.labels.tolist() == [1, 0, 1]
    assert ds.labels.dtype == np.int32 and ds.select([2, 1]).classes == ds.classes
    jsonl = _write(tmp_path, "x.jsonl", '{"t": "a", "c": 3}\n{"t": "b", "c": "3"}\n{"t": "c", "c": 10}\n')
    ds = read_columns(jsonl, ["t"], label_column="c", classes=True)
    assert ds.classes == ["10", "3"] and ds.labels.tolist() == [1, 1, 0]


@pytest.mark.parametrize("name,text,match", [
    ("x.csv", "text,label\na,sport\nb, \n", r"x\.csv:3: label 'label' is empty"),
    ("x.jsonl", '{"t": "a", "c": "x"}\n{"t": "b", "c": 1.5}\n',
     r"x\.jsonl:2: label 'c' 1\.5 is not a class name"),
    # As the file wrote them: it said `true`, not Python's `True`.
    ("y.jsonl", '{"t": "a", "c": true}\n', r"y\.jsonl:1: label 'c' true is not a class name"),
    ("z.jsonl", '{"t": "a", "c": null}\n', r"z\.jsonl:1: label 'c' null is not a class name"),
])
def test_read_columns_bad_class_labels_name_file_and_line(tmp_path, name, text, match):
    path = _write(tmp_path, name, text)
    columns = ["text"] if name.endswith("csv") else ["t"]
    label = "label" if name.endswith("csv") else "c"
    with pytest.raises(DataFormatError, match=match):
        read_columns(path, columns, label_column=label, classes=True)


@pytest.mark.parametrize("name,text", [
    ("x.csv", "a,b\n1,2\n"), ("x.tsv", "a\tb\n1\t2\n"), ("x.jsonl", '{"a": "1", "b": "2"}\n'),
])
def test_read_columns_missing_column(tmp_path, name, text):
    path = _write(tmp_path, name, text)
    with pytest.raises(DataFormatError) as info:
        read_columns(path, ["a", "sentence2"])
    message = str(info.value)
    assert "'sentence2'" in message and name in message and "'a'" in message and "'b'" in message
    assert message.startswith(f"{path}:1: column 'sentence2' not found in the ")


def test_jsonl_a_key_the_first_object_lacks_is_named_with_its_line(tmp_path):
    # The first object stands for a header; the error said neither which line
    # nor that it came from that object, where later rows had the key.
    path = _write(tmp_path, "x.jsonl", '\n{"a": "x"}\n{"a": "x", "b": "y"}\n')
    for on_bad_rows in ("raise", "skip"):
        with pytest.raises(DataFormatError, match=r"x\.jsonl:2: column 'b' not found in the "
                                                  r"first object, whose keys name the columns; "
                                                  r"available columns: \['a'\]"):
            read_columns(path, ["a", "b"], on_bad_rows=on_bad_rows)


def test_read_columns_bad_format_args(tmp_path):
    path = _write(tmp_path, "x.txt", "a\n")
    with pytest.raises(ValueError, match="extension '.txt'"):
        read_columns(path, ["a"])
    with pytest.raises(ValueError, match="`format`"):
        read_columns(path, ["a"], format="xml")
    with pytest.raises(ValueError, match="`text_columns`"):
        read_columns(path, "a", format="tsv")


def test_read_text_lines(tmp_path):
    path = _write(tmp_path, "c.txt", "first\r\n\n  second  \nthird")
    ds = read_text_lines(path)
    assert ds.columns == [["first", "second", "third"]] * 2 and ds.labels is None
    assert ds.columns[0] is not ds.columns[1]


@pytest.mark.parametrize("read, text, line", [
    (read_text_lines, "first\rsecond\rthird\r", 1),
    # Line 2 ends with \r alone: STS-B's reader, which ignores trailing fields,
    # read lines 2 and 3 as one row, the second sentence "b\rnews".
    (read_sts_benchmark, "n\tf\t2012\t1\t4.5\ta\tb\r\nn\tf\t2012\t2\t1\ta\tb\r"
                         "n\tf\t2012\t3\t0\tc\td\n", 2),
])
def test_lines_ended_by_a_carriage_return_alone_are_refused(tmp_path, read, text, line):
    # Only \n ends a line: such a file was read as one row (one sentence here).
    path = _write(tmp_path, "mac.txt", text)
    with pytest.raises(DataFormatError, match=rf"mac\.txt:{line}: a carriage return \(\\r\) ends"):
        read(path)
    # One line ended by \r alone is a line, as "first\r\n" is.
    assert read_text_lines(_write(tmp_path, "one.txt", "only\r")).columns[0] == ["only"]


def test_nli_ordinal_and_triplets_small(tmp_path):
    rows = [
        ("p1", "e1", "entailment"), ("p1", "c1", "contradiction"), ("p1", "n1", "neutral"),
        ("p1", "e2", "entailment"), ("p2", "e3", "entailment"), ("p2", "x", "-"),
        ("p3", "c3", "contradiction"), ("p4", "e4", "entailment"), ("p4", "c4", "contradiction"),
    ]
    lines = [json.dumps({"sentence1": a, "sentence2": b, "label": c}) for a, b, c in rows]
    lines.append(json.dumps({"sentence1": "p5", "sentence2": "y", "label": None}))  # no gold
    path = _write(tmp_path, "nli.json", "\n".join(lines) + "\n")
    ds = read_nli_jsonl(path)
    assert ds.labels.tolist() == [2, 0, 1, 2, 2, 0, 2, 0] and ds.dropped == 2
    assert ds.labels.dtype == np.int32
    triplets = read_nli_jsonl(path, mode="triplets")
    assert triplets.columns == [["p1", "p1", "p4"], ["e1", "e2", "e4"], ["c1", "c1", "c4"]]
    with pytest.raises(ValueError, match="`mode`"):
        read_nli_jsonl(path, mode="pairs")



def test_a_key_given_twice_names_its_line(tmp_path):
    # json.loads keeps the last value: the disagreement label "-" trained as entailment.
    lines = ['{"sentence1": "a", "sentence2": "b", "label": "neutral"}',
             '{"sentence1": "p", "sentence2": "h", "label": "-", "label": "entailment"}']
    path = _write(tmp_path, "dup.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(DataFormatError, match=r"dup\.jsonl:2: duplicate key 'label'"):
        read_nli_jsonl(path)
    with pytest.warns(UserWarning, match="skipped 1 malformed"):
        assert read_nli_jsonl(path, on_bad_rows="skip").labels.tolist() == [1]


def test_nli_reads_snli_gold_label(tmp_path):
    # SNLI/MultiNLI ship `gold_label` (with `-` where annotators disagreed) and no `label`.
    rows = [("a", "b", "entailment"), ("a", "c", "-"), ("d", "e", "contradiction")]
    lines = [json.dumps({"annotator_labels": [g], "gold_label": g, "pairID": str(i),
                         "sentence1": a, "sentence2": b})
             for i, (a, b, g) in enumerate(rows)]
    # `label` wins where a row has both.
    lines.append(json.dumps({"sentence1": "f", "sentence2": "g", "label": "neutral",
                             "gold_label": "entailment"}))
    ds = read_nli_jsonl(_write(tmp_path, "snli.jsonl", "\n".join(lines) + "\n"))
    assert ds.columns == [["a", "d", "f"], ["b", "e", "g"]]
    assert ds.labels.tolist() == [2, 0, 1] and ds.dropped == 1


def test_nli_triplets_from_rows_that_never_make_one_say_so(tmp_path):
    # Valid, labelled rows, but no premise with both an entailment and a
    # contradiction: the error says that, not that the file is empty.
    rows = [("p1", "e1", "entailment"), ("p1", "n1", "neutral"), ("p2", "c2", "contradiction"),
            ("p3", "x", "-")]
    path = _write(tmp_path, "nli.json", "\n".join(
        json.dumps({"sentence1": a, "sentence2": b, "label": c}) for a, b, c in rows) + "\n")
    assert len(read_nli_jsonl(path)) == 3
    with pytest.raises(DataFormatError) as info:
        read_nli_jsonl(path, mode="triplets")
    message = str(info.value)
    assert str(path) in message and "empty" not in message and "dropped" not in message
    assert "none of the 2 premise(s) of its 3 labelled row(s)" in message
    assert "both an entailment and a contradiction" in message

# --- dispatch -------------------------------------------------------------------

def test_read_dataset_dispatch(tmp_path):
    assert READ_FORMATS == (
        "sts-benchmark", "pair-tsv", "csv", "tsv", "jsonl", "nli-jsonl", "text-lines", "triplets-jsonl"
    )
    sts = _write(tmp_path, "s.csv", "g\tf\t1\t1\t3\ta\tb\n")
    assert read_dataset(sts, "sts-benchmark").pairs == [("a", "b")]
    assert read_dataset(_write(tmp_path, "p.data", "a\tb\t1\n"), "pair-tsv").labels.tolist() == [1]
    # The explicit format wins over the file's extension (.txt, .dat here).
    tsv = _write(tmp_path, "t.txt", "x\ty\na\tb\n")
    assert read_dataset(tsv, "tsv", text_columns=["x", "y"]).pairs == [("a", "b")]
    csv_path = _write(tmp_path, "c.dat", "x,y\na,b\n")
    assert read_dataset(csv_path, "csv", text_columns=["y"]).columns == [["b"]]
    jsonl = _write(tmp_path, "j.dat", '{"x": "a"}\n')
    assert read_dataset(jsonl, "jsonl", text_columns=["x"]).columns == [["a"]]
    nli = _write(tmp_path, "n.dat", '{"sentence1": "a", "sentence2": "b", "label": "neutral"}\n')
    assert read_dataset(nli, "nli-jsonl").labels.tolist() == [1]
    assert len(read_dataset(tsv, "text-lines")) == 2
    with pytest.raises(ValueError, match="'sts'"):
        read_dataset(sts, "sts")


# --- errors ---------------------------------------------------------------------

STS_OK = "g\tf\t2012\t1\t3.0\ta\tb\n"


@pytest.mark.parametrize("reader,bad_line,reason", [
    (read_sts_benchmark, "g\tf\t2012\t2\tabc\ta\tb", "score 'abc' is not a number"),
    (read_sts_benchmark, "g\tf\t2012\t2\tnan\ta\tb", "score 'nan' is not a finite number"),
    (read_sts_benchmark, "g\tf\t2012\t2\tinf\ta\tb", "score 'inf' is not a finite number"),
    # float() reads these as 45 and 1.
    (read_sts_benchmark, "g\tf\t2012\t2\t4_5\ta\tb", "score '4_5' is not a number"),
    (read_sts_benchmark, "g\tf\t2012\t2\t\u0661\ta\tb", "score '\u0661' is not a number"),
    (read_sts_benchmark, "g\tf\t2012\t2\t7.5\ta\tb",
     r"score '7.5' is outside the STS Benchmark's range [0, 5]"),
    (read_sts_benchmark, "g\tf\t2012\t2\t-1\ta\tb", "score '-1' is outside"),
    (read_sts_benchmark, "g\tf\t2012\t2\t1\t  \tb", "sentence1 is empty"),
    (read_sts_benchmark, "g\tf\t2012\t2\t1\ta", "expected at least 7 TAB-separated fields"),
    (read_pair_tsv, "a\tb", "expected 3 TAB-separated fields"),
    (read_pair_tsv, "a\t\t1", "sentence2 is empty"),
    (read_pair_tsv, "a\tb\tfive", "label 'five' is not a number"),
    (read_pair_tsv, "a\tb\t0x10", "label '0x10' is not a number"),
    # Finite as a Python float, inf once stored as the float32 label.
    (read_pair_tsv, "a\tb\t1e39", "label '1e39' is too large for a float32 label"),
    (read_pair_tsv, "a\tb\t-3.5e38", "label '-3.5e38' is too large for a float32 label"),
])
def test_bad_row_names_file_and_line(tmp_path, reader, bad_line, reason):
    good = STS_OK if reader is read_sts_benchmark else "a\tb\t1\n"
    path = _write(tmp_path, "bad.txt", good + "\n" + bad_line + "\n" + good)
    with pytest.raises(DataFormatError) as info:
        reader(path)
    assert str(info.value).startswith(f"{path}:3: {reason}")
    assert isinstance(info.value, ValueError) and info.value.line == 3


@pytest.mark.parametrize("reader, header, good", [
    (read_sts_benchmark, "genre\tfile\tyear\tid\tscore\tsentence1\tsentence2", STS_OK),
    (read_pair_tsv, "sentence1\tsentence2\tlabel", "a\tb\t1\n"),
])
def test_a_header_line_is_named_as_one(tmp_path, reader, header, good):
    # "score 'score' is not a number" left the user to guess that the format has no header.
    path = _write(tmp_path, "with_header.txt", header + "\n" + good)
    with pytest.raises(DataFormatError, match=r"with_header.txt:1: .* is not a number; this "
                       "format has no header line: leave it out, or read the file as 'tsv'"):
        reader(path)
    # On another line, a word is just a bad label (test_bad_row_names_file_and_line).
    path = _write(tmp_path, "late.txt", good + header + "\n")
    with pytest.raises(DataFormatError, match=r"late.txt:2: .* is not a number$"):
        reader(path)


@pytest.mark.parametrize("line,reason", [
    ("{not json", "invalid JSON"),
    ('["a", "b"]', "expected a JSON object"),
    ('{"sentence1": "a", "sentence2": "b", "label": "entail"}', "unknown NLI label 'entail'"),
    ('{"sentence1": "a", "sentence2": "b", "label": ["x"]}', r"unknown NLI label \['x'\]"),
    ('{"sentence1": "a", "sentence2": "b", "label": {"x": 1}}', r"unknown NLI label \{'x': 1\}"),
    ('{"sentence1": "a", "sentence2": 3, "label": "neutral"}', "sentence2 should be a string"),
    ('{"sentence1": "", "sentence2": "b", "label": "neutral"}', "sentence1 is empty"),
    ('{"sentence1": "a", "label": "neutral"}', r"missing key\(s\) \['sentence2'\]"),
    # A misspelt label key drops nothing silently: the row is malformed.
    ('{"sentence1": "a", "sentence2": "b", "lable": "neutral"}',
     r"no 'label' \(or 'gold_label'\) key; keys: \['lable', 'sentence1', 'sentence2'\]"),
])
def test_nli_bad_rows(tmp_path, line, reason):
    good = '{"sentence1": "a", "sentence2": "b", "label": "neutral"}\n'
    path = _write(tmp_path, "nli.json", good + line + "\n")
    with pytest.raises(DataFormatError, match=rf"nli\.json:2: {reason}"):
        read_nli_jsonl(path)
    with pytest.warns(UserWarning, match=r"skipped 1 malformed row.*nli\.json:2"):
        ds = read_nli_jsonl(path, on_bad_rows="skip")
    assert len(ds) == 1 and ds.skipped == 1


def test_skip_mode_counts_and_warns_once(tmp_path):
    lines = [STS_OK, "x\n", STS_OK, "g\tf\t1\t1\tbad\ta\tb\n", "g\tf\t1\t1\t2\ta\t\n"]
    path = _write(tmp_path, "sts-train.csv", "".join(lines))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = read_sts_benchmark(path, on_bad_rows="skip")
    assert len(caught) == 1
    assert "skipped 3 malformed row(s)" in str(caught[0].message)
    assert "sts-train.csv:2:" in str(caught[0].message)
    assert len(ds) == 2 and ds.skipped == 3
    with pytest.raises(ValueError, match="`on_bad_rows`"):
        read_sts_benchmark(path, on_bad_rows="ignore")


def test_read_columns_short_row_and_bad_label_skip(tmp_path):
    path = _write(tmp_path, "x.tsv", "a\tb\tl\nx\ty\t1\nshort\nx\ty\tnan\n")
    with pytest.raises(DataFormatError, match=r"x\.tsv:3: expected 3 fields"):
        read_columns(path, ["a", "b"], label_column="l")
    with pytest.warns(UserWarning, match="skipped 2"):
        ds = read_columns(path, ["a", "b"], label_column="l", on_bad_rows="skip")
    assert ds.pairs == [("x", "y")] and ds.skipped == 2


def test_read_columns_extra_fields_and_repeated_header_columns(tmp_path):
    # Empty fields past the header's (a trailing delimiter) are fine; text there is not.
    path = _write(tmp_path, "x.csv", "a,b,l\nx,y,1,\nx,y,2,surplus\n")
    with pytest.raises(DataFormatError, match=r"x\.csv:3: expected 3 fields as in the header, "
                                              r"found 4"):
        read_columns(path, ["a", "b"], label_column="l")
    with pytest.warns(UserWarning, match="skipped 1"):
        ds = read_columns(path, ["a", "b"], label_column="l", on_bad_rows="skip")
    assert ds.pairs == [("x", "y")] and ds.labels.tolist() == [1.0]
    # So does a trailing delimiter in the header: rows without it were refused
    # as one field short of an unnamed column.
    for name, text in (("h.csv", "a,b,l,\nx,y,1\nx,y,2,\n"), ("h.tsv", "a\tb\tl\t\nx\ty\t1\n")):
        ds = read_columns(_write(tmp_path, name, text), ["a", "b"], label_column="l")
        assert ds.pairs[0] == ("x", "y") and ds.labels[0] == 1.0
    path = _write(tmp_path, "y.csv", "a,a,l\nx,y,1\n")
    with pytest.raises(DataFormatError, match=r"y\.csv:1: column 'a' appears 2 times"):
        read_columns(path, ["a"], label_column="l")


def test_jsonl_missing_key_later_row(tmp_path):
    path = _write(tmp_path, "x.jsonl", '{"a": "x", "b": "y"}\n{"a": "x"}\n')
    with pytest.raises(DataFormatError, match=r"x\.jsonl:2: missing key\(s\) \['b'\]"):
        read_columns(path, ["a", "b"])


def test_json_array_is_rejected_clearly(tmp_path):
    path = _write(tmp_path, "x.json", '[{"a": "x"}]\n')
    with pytest.raises(DataFormatError, match=r"x\.json:1: looks like a JSON array"):
        read_columns(path, ["a"])


@pytest.mark.parametrize("reader", [read_sts_benchmark, read_pair_tsv, read_text_lines,
                                    read_nli_jsonl])
def test_empty_file(tmp_path, reader):
    path = _write(tmp_path, "empty.txt", "\n\n")
    with pytest.raises(DataFormatError, match=r"empty\.txt: no rows: the file is empty"):
        reader(path)


def test_no_valid_rows(tmp_path):
    path = _write(tmp_path, "allbad.data", "a\tb\tx\nc\td\ty\n")
    with pytest.raises(DataFormatError, match=r"allbad\.data: no valid rows: all 2 rows"):
        read_pair_tsv(path, on_bad_rows="skip")
    header_only = _write(tmp_path, "h.csv", "a,b\n")
    with pytest.raises(DataFormatError, match=r"h\.csv: no rows: no data rows \(the file is empty"):
        read_columns(header_only, ["a", "b"])
    nli = _write(tmp_path, "n.json", '{"sentence1": "a", "sentence2": "b", "label": "-"}\n')
    with pytest.raises(DataFormatError, match=r"n\.json: no usable rows: all 1 rows were dropped"):
        read_nli_jsonl(nli)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.csv"
    for reader in (read_sts_benchmark, read_pair_tsv, read_text_lines, read_nli_jsonl):
        with pytest.raises(FileNotFoundError, match="nope.csv"):
            reader(path)
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        read_columns(path, ["a"])
    # A folder exists: "not found" misled.
    with pytest.raises(IsADirectoryError, match=f"{tmp_path.name}' is a directory"):
        read_pair_tsv(tmp_path)


def test_invalid_utf8_names_line(tmp_path):
    path = _write(tmp_path, "gbk.data", "a\tb\t1\n".encode() + "中文\t好\t2\n".encode("gbk"))
    with pytest.raises(DataFormatError, match=r"gbk\.data:2: invalid UTF-8"):
        read_pair_tsv(path)
    # Behind a BOM the byte and line are the same: the offset counted from
    # after the BOM was read against the bytes before it (line 1, b'\t').
    path = _write(tmp_path, "bom.data", b"\xef\xbb\xbfa\tb\t1\n\xe9t\xe9\tc\t2\n")
    with pytest.raises(DataFormatError, match=r"bom\.data:2: invalid UTF-8 byte b'\\xe9'"):
        read_pair_tsv(path)


def test_utf16_without_a_bom_names_file_and_line(tmp_path):
    # It decodes as UTF-8 with a NUL after every ASCII letter: read_text_lines gave
    # sentences of NULs and one row more than the file has lines.
    path = _write(tmp_path, "u16.txt", "the ferry leaves\nthe boat departs\n".encode("utf-16-le"))
    with pytest.raises(DataFormatError, match=r"u16\.txt:1: a NUL character .*UTF-16"):
        read_text_lines(path)
    path = _write(tmp_path, "nul.tsv", b"a\tb\t1\nc\x00\td\t2\n")
    with pytest.raises(DataFormatError, match=r"nul\.tsv:2: a NUL character"):
        read_pair_tsv(path, on_bad_rows="skip")
    path = _write(tmp_path, "cat.txt", b"\xef\xbb\xbfa\n\xef\xbb\xbfb\n")
    with pytest.raises(DataFormatError, match=r"cat\.txt:2: a byte-order mark"):
        read_text_lines(path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX)")
def test_a_pipe_is_not_reported_missing(tmp_path):
    os.mkfifo(tmp_path / "pipe.tsv")
    with pytest.raises(DataFormatError, match=r"pipe\.tsv: not a regular file"):
        read_pair_tsv(tmp_path / "pipe.tsv")


def test_pair_dataset_container():
    ds = PairDataset([["a", "b", "c"], ["d", "e", "f"]], np.array([0.0, 1.0, 2.0]), "s")
    sub = ds.select([2, 0])
    assert sub.pairs == [("c", "f"), ("a", "d")] and sub.labels.tolist() == [2.0, 0.0]
    triplets = PairDataset([["a"], ["b"], ["c"]], None, "t")
    with pytest.raises(ValueError, match="exactly 2 columns"):
        triplets.pairs
    with pytest.raises(ValueError, match="same length"):
        PairDataset([["a"], []])
    with pytest.raises(ValueError, match="one label per row"):
        PairDataset([["a"], ["b"]], np.zeros(2))


@pytest.mark.parametrize("columns, labels, message", [
    # What a DataFrame hands over for a missing value, or a label column of names.
    ([["a", "b"], ["c", "d"]], np.array([1.0, np.nan]),
     r"`labels` should be finite. Received nan at row 1 \(1 non-finite"),
    ([["a", "b"], ["c", "d"]], np.array([np.inf, 2.0]), "Received inf at row 0"),
    ([["a", "b"], ["c", "d"]], np.array(["x", "y"]), r"should be numbers.*dtype <U1"),
    # Class ids a float32 loss would merge (2**24 + 1 reads as 2**24).
    ([["a", "b"], ["c", "d"]], np.array([2**24, 2**24 + 1], "int64"),
     r"cannot tell integers beyond 2\*\*24 = 16777216 apart\. Received 16777217 at row 1"),
    ([["a", None], ["c", "d"]], None, r"Column 0, row 1 should be a text \(str\). Received: "
                                      "None of type NoneType"),
    ([["a", "b"], ["c", float("nan")]], None, "Column 1, row 1 .* of type float"),
    # Readers refuse blank texts; trained, every one was the same "[CLS] [SEP]".
    ([["a", "  "], ["c", "d"]], None, r"Column 0, row 1 is blank\. Received: '  '"),
    ([["a", "b"], ["\t", "d"], ["e", "f"]], None, r"Column 1, row 0 is blank"),
    (["ab", "cd"], None, "Column 0 should be a list of texts, not one string. Received: 'ab'"),
    ("ab", None, "`columns` should be a non-empty list"),
    ({"s1": ["a"], "s2": ["b"]}, None,
     r"`columns` should be a list of text columns, not a dict .* Received keys \['s1', 's2'\]"),
])
def test_pair_dataset_refuses_rows_no_reader_would_return(columns, labels, message):
    # The readers refuse these with file and line; a dataset built in code gets the
    # same guard, naming the column and row, instead of failing in a tokenizer or
    # training on NaN.
    with pytest.raises(ValueError, match=message):
        PairDataset(columns, labels, source="inline")


# Characters that str.splitlines() treats as line breaks but that are plain text
# inside a field here: a reader that split on them would cut sentences and shift
# every later line number.
_INNER_BREAKS = ["\u2028", "\u2029", "\x85", "\v", "\f", "\x1c", "\x1d", "\x1e"]


@pytest.mark.parametrize("char", _INNER_BREAKS, ids=[f"U+{ord(c):04X}" for c in _INNER_BREAKS])
def test_unicode_line_breaks_inside_fields_keep_sentences_and_line_numbers(tmp_path, char):
    s1 = f"one{char}two"
    # sts-benchmark: the sentence survives whole and the bad row is still line 3.
    sts = _write(tmp_path, "sts.csv",
                 f"g\tf\t2012\t1\t3.0\t{s1}\tb\n" + f"g\tf\t2012\t2\t1\tx{char}y\tz\n"
                 + "g\tf\t2012\t3\tbad\ta\tb\n")
    with pytest.raises(DataFormatError) as info:
        read_sts_benchmark(sts)
    assert info.value.line == 3 and str(info.value).startswith(f"{sts}:3: score 'bad'")
    ok = _write(tmp_path, "ok.csv", f"g\tf\t2012\t1\t3.0\t{s1}\tb\n")
    assert read_sts_benchmark(ok).pairs == [(s1, "b")]
    # pair TSV.
    tsv = _write(tmp_path, "p.data", f"{s1}\tb\t1\nc\td{char}e\t2\na\tb\tfive\n")
    with pytest.raises(DataFormatError) as info:
        read_pair_tsv(tsv)
    assert info.value.line == 3
    # text lines: one sentence per line, the inner character included.
    lines = _write(tmp_path, "l.txt", f"{s1}\nthree\n")
    assert read_text_lines(lines).columns[0] == [s1, "three"]
    # TSV columns and JSON lines (a raw U+2028 etc. is legal inside a JSON string).
    cols = _write(tmp_path, "c.tsv", f"x\ty\n{s1}\tb\na\n")
    with pytest.raises(DataFormatError) as info:
        read_columns(cols, text_columns=["x", "y"])
    assert info.value.line == 3
    jsonl = _write(tmp_path, "j.jsonl", json.dumps({"x": s1}, ensure_ascii=False) + "\n{bad\n")
    with pytest.raises(DataFormatError) as info:
        read_columns(jsonl, text_columns=["x"])
    assert info.value.line == 2
