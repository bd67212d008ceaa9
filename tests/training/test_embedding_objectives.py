"""The objectives wired in for issue 20 (ntxent, triplet, margin-ranking, supcon) and
Matryoshka training: `build` + one `fit` step against the loss class called directly.

Each test writes a tiny file in the format a user would give, reads it through the
objective (`Objective.read`, as the CLI does), builds, and compares the loss `fit`
reports for its single batch with the loss class applied to embeddings of the rows
the test lists itself, so the builder's shaping is checked, not reused.
"""

import json
import math
import warnings


import numpy as np
import pytest

import keras_cosent
from keras_cosent.data import DataFormatError
from keras_cosent.data import PairDataset
from keras_cosent.training import OBJECTIVES
from keras_cosent.training import build
from tests.losses.test_cosent_loss import reference_cosent
from tests.losses.test_triplet_loss import reference_batch_hard
from tests.training.test_builder import FIRST
from tests.training.test_builder import SCORES
from tests.training.test_builder import pairs
from tests.training.test_builder import tiny_encoder

# premise, entailment, neutral, contradiction: 4 premises, so one batch of 4.
NLI = [
    ("a cat sat on the mat", "the cat sat", "a red cat sat", "the dog ran"),
    ("the dog ran fast", "a dog ran", "the slow dog ran", "a dog sat"),
    ("a red mat", "the mat", "the red mat on a cat", "a fast cat"),
    ("the slow cat", "a cat", "the slow red cat", "the fast dog"),
]
TOPICS = [("a cat sat", "cat"), ("the dog ran", "dog"), ("the cat ran fast", "cat"),
          ("a fast dog", "dog"), ("a red mat", "mat"), ("the mat", "mat")]


def write_nli(path):
    with open(path, "w", encoding="utf-8") as f:
        for premise, entailed, neutral, contradiction in NLI:
            for hypothesis, label in ((entailed, "entailment"), (neutral, "neutral"),
                                      (contradiction, "contradiction")):
                f.write(json.dumps({"sentence1": premise, "sentence2": hypothesis,
                                    "label": label}) + "\n")
    return path


def fit_once(name, dataset, data_format, **options):
    """Builds one batch of all rows; returns (setup, reported loss, the setup's encoder)."""
    setup = build(tiny_encoder(), dataset, name, batch_size=len(NLI) + 4, epochs=1,
                  learning_rate=1e-3, data_format=data_format, **options)
    assert len(setup.batches) == 1
    embed = setup.encoder.encode  # before fit changes the weights
    columns = [embed(list(column)) for column in _expected_columns(name)]
    history = setup.model.fit(setup.batches, epochs=1, verbose=0)
    return setup, history.history["loss"][0], np.stack(columns, axis=1)


def _expected_columns(name):
    if name == "ntxent":
        return [[row[0] for row in NLI], [row[1] for row in NLI]]
    if name in ("triplet", "margin-ranking"):
        return [[row[0] for row in NLI], [row[1] for row in NLI], [row[3] for row in NLI]]
    return [[text for text, _ in TOPICS]]


@pytest.mark.heavy
def test_ntxent_trains_on_the_entailment_pairs_of_an_nli_file(tmp_path):
    path = write_nli(tmp_path / "nli.jsonl")
    rows = OBJECTIVES["ntxent"].read(path, "nli-jsonl")
    setup, reported, embeddings = fit_once("ntxent", rows, "nli-jsonl", temperature=0.1)
    assert sorted(setup.dataset.pairs) == sorted((row[0], row[1]) for row in NLI)
    expected = keras_cosent.losses.NTXentLoss(temperature=0.1)(np.zeros(4), embeddings)
    np.testing.assert_allclose(reported, float(expected), rtol=1e-4)


def test_ntxent_keeps_scored_pairs_above_2_5():
    setup = build(tiny_encoder(), pairs(), "ntxent", batch_size=4, epochs=1)
    assert sorted(setup.dataset.columns[0]) == sorted(
        f for f, s in zip(FIRST, SCORES) if s > 2.5)


@pytest.mark.parametrize("name", ["triplet", "margin-ranking"])
@pytest.mark.heavy
def test_triplet_losses_train_on_nli_triplets(tmp_path, name):
    path = write_nli(tmp_path / "nli.jsonl")
    rows = OBJECTIVES[name].read(path, "nli-jsonl")
    setup, reported, embeddings = fit_once(name, rows, "nli-jsonl", margin=0.3)
    assert sorted(zip(*setup.dataset.columns)) == sorted((r[0], r[1], r[3]) for r in NLI)
    loss = OBJECTIVES[name].loss(margin=0.3)
    np.testing.assert_allclose(reported, float(loss(np.zeros(4), embeddings)), rtol=1e-4)


@pytest.mark.heavy
def test_margin_ranking_takes_several_negative_columns(tmp_path):
    path = tmp_path / "ranked.csv"
    path.write_text("query,positive,neg1,neg2\n"
                    + "".join(f"{r[0]},{r[1]},{r[3]},{r[2]}\n" for r in NLI))
    rows = OBJECTIVES["margin-ranking"].read(path, "csv", ("query", "positive", "neg1", "neg2"))
    setup = build(tiny_encoder(), rows, "margin-ranking", batch_size=4, epochs=1, data_format="csv")
    x, _ = setup.batches[0]
    assert tuple(setup.model(x).shape) == (4, 4, 8)


@pytest.mark.parametrize("name", ["triplet", "margin-ranking"])
def test_triplet_losses_refuse_pairs_naming_the_file(name):
    with pytest.raises(DataFormatError, match=rf"inline: objective '{name}' needs .*found 2"):
        build(tiny_encoder(), pairs(), name, batch_size=4)


@pytest.mark.heavy
def test_supcon_trains_on_a_csv_of_texts_and_class_names(tmp_path):
    path = tmp_path / "topics.csv"
    path.write_text("text,topic\n" + "".join(f"{t},{c}\n" for t, c in TOPICS))
    rows = OBJECTIVES["supcon"].read(path, "csv", ("text",), "topic")
    assert rows.classes == ["cat", "dog", "mat"]
    setup, reported, embeddings = fit_once("supcon", rows, "csv", temperature=0.1)
    ids = np.array([rows.classes.index(c) for _, c in TOPICS])
    x, y = setup.batches[0]
    assert y.dtype == np.int32
    expected = keras_cosent.losses.SupConLoss(temperature=0.1)(ids, embeddings)
    np.testing.assert_allclose(reported, float(expected), rtol=1e-4)


@pytest.mark.heavy
def test_batch_hard_triplet_trains_on_a_csv_of_texts_and_class_names(tmp_path):
    path = tmp_path / "topics.csv"
    path.write_text("text,topic\n" + "".join(f"{t},{c}\n" for t, c in TOPICS))
    rows = OBJECTIVES["batch-hard-triplet"].read(path, "csv", ("text",), "topic")
    setup, reported, embeddings = fit_once("batch-hard-triplet", rows, "csv", margin=0.3,
                                           distance="euclidean")
    assert (setup.loss.mining, setup.loss.margin, setup.loss.distance) == (
        "batch_hard", 0.3, "euclidean")
    ids = np.array([rows.classes.index(c) for _, c in TOPICS])
    expected = reference_batch_hard(ids, embeddings[:, 0].astype("float64"), 0.3, "euclidean")
    np.testing.assert_allclose(reported, expected, rtol=1e-4)


def test_supcon_warns_when_batches_rarely_pair_a_class():
    rows = PairDataset([[f"text {i}" for i in range(40)]], np.arange(40) % 20, "many.csv")
    with pytest.warns(UserWarning, match=r"many.csv.*20 classes and batch_size=4, only about "
                                         r"\d+% of the rows share a batch"):
        build(tiny_encoder(), rows, "supcon", batch_size=4)
    views = PairDataset([rows.columns[0]] * 2, rows.labels, "views.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # two views: every text has a positive
        build(tiny_encoder(), views, "supcon", batch_size=4)


def test_supcon_refuses_files_without_classes(tmp_path):
    path = write_nli(tmp_path / "nli.jsonl")
    rows = OBJECTIVES["supcon"].read(path, "nli-jsonl")
    with pytest.raises(DataFormatError, match=r"nli.jsonl: objective 'supcon' needs class-labelled"):
        OBJECTIVES["supcon"].prepare(rows, "nli-jsonl")


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.mark.heavy
def test_matryoshka_loss_is_the_sum_over_truncations():
    dims = (8, 4, 2)
    setup = build(tiny_encoder(), pairs(), "cosent", batch_size=8, epochs=1, scale=20.0,
                  matryoshka_dims=dims, learning_rate=1e-3)
    assert isinstance(setup.loss, keras_cosent.losses.MatryoshkaLoss)
    full = np.stack([setup.encoder.encode(c) for c in pairs().columns], axis=1).astype("float64")
    expected = 0.0
    for d in dims:
        z = _unit(full[..., :d])
        expected += reference_cosent(SCORES, np.sum(z[:, 0] * z[:, 1], axis=-1), 20.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reported = setup.model.fit(setup.batches, epochs=1, verbose=0).history["loss"][0]
    assert math.isclose(reported, expected, rel_tol=1e-4)


@pytest.mark.parametrize("dims, match", [
    ((16, 4), r"entry 16 is larger than the embedding dimension 8"),
    ((4, 0), r"0 is not one"),
    ((4, 2, 4), r"repeats \[4\]"),
    ((), r"is empty"),
    ("8,4", r"`matryoshka_dims`='8,4'"),
])
def test_bad_matryoshka_dims_name_the_value(dims, match):
    with pytest.raises(ValueError, match=match):
        build(tiny_encoder(), pairs(), "cosent", batch_size=4, matryoshka_dims=dims)


def test_matryoshka_refuses_an_objective_that_trains_a_head():
    with pytest.raises(ValueError, match=r"objective 'sbert-softmax' trains a head"):
        build(tiny_encoder(), pairs(), "sbert-softmax", batch_size=4, matryoshka_dims=(4,))

