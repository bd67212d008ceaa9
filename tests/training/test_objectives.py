"""The objective table: how files become each loss' rows, and one entry adds a loss."""

import numpy as np
import pytest

import keras_cosent
from keras_cosent.data import DataFormatError
from keras_cosent.data import PairDataset
from keras_cosent.training import OBJECTIVES
from keras_cosent.training import Objective
from keras_cosent.training import build
from keras_cosent.training import register_objective
from keras_cosent.training.objectives import scored_pairs
from tests.recipes.conftest import demo_rows
from tests.recipes.conftest import write_pair_tsv
from tests.training.test_builder import pairs
from tests.training.test_builder import tiny_encoder


def test_the_cli_and_the_library_share_one_table_of_names():
    from recipes.options import OBJECTIVE

    assert OBJECTIVE.choices == tuple(OBJECTIVES)
    assert keras_cosent.losses.NAMES == tuple(OBJECTIVES)
    for name, objective in OBJECTIVES.items():
        assert keras_cosent.losses.get(name) is objective.loss


def test_nli_files_are_read_as_ordered_pairs_or_triplets(shared_data):
    path = shared_data / "ocnli" / "dev.json"
    pairs_ = OBJECTIVES["cosent"].read(path, "nli-jsonl")
    assert pairs_.num_columns == 2 and set(np.unique(pairs_.labels)) == {0.0, 1.0, 2.0}
    triplets = OBJECTIVES["infonce"].prepare(OBJECTIVES["infonce"].read(path, "nli-jsonl"),
                                             "nli-jsonl")
    assert triplets.num_columns == 3 and triplets.labels is None


def test_scored_pairs_need_scores(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("one sentence\nanother one\n")
    rows = OBJECTIVES["cosent"].read(path, "text-lines")
    with pytest.raises(DataFormatError, match=rf"{path}: objective 'cosent' needs scored pairs"):
        OBJECTIVES["cosent"].prepare(rows, "text-lines")


def test_infonce_without_positive_pairs_names_the_file():
    low = PairDataset([["a", "b"], ["c", "d"]], np.array([1.0, 2.0], "float32"), "low.tsv")
    with pytest.raises(DataFormatError, match="low.tsv: no pair is scored above 2.5"):
        OBJECTIVES["infonce"].prepare(low, "pair-tsv")


@pytest.mark.parametrize("name", ["cosent:30", "cosent,angle", "", "my loss", 3])
def test_a_registered_name_must_be_usable_as_a_name(name):
    # "cosent:30" was registered, then read by get_objective as the joint spec
    # "cosent with weight 30", silently another loss.
    with pytest.raises(ValueError, match=r"An objective's `name` should be a non-empty string "
                                         r"of letters, digits, '_' or '-'"):
        register_objective(Objective(name=name, summary="x", loss=keras_cosent.losses.CoSENTLoss,
                                     shape=scored_pairs))
    assert name not in OBJECTIVES


@pytest.mark.heavy
def test_a_registered_objective_is_usable_from_build_and_from_the_cli(tmp_path):
    from click.testing import CliRunner

    from recipes.cli import main

    class HalfScaleCoSENT(keras_cosent.losses.CoSENTLoss):
        pass

    register_objective(Objective(
        name="cosent-test", summary="CoSENT with a test's own class", loss=HalfScaleCoSENT,
        options=("scale",), shape=scored_pairs))
    try:
        setup = build(tiny_encoder(), pairs(), "cosent-test", batch_size=4, epochs=1, scale=10.0)
        assert isinstance(setup.loss, HalfScaleCoSENT) and setup.loss.scale == 10.0


        checkpoint = tmp_path / "ckpt"
        checkpoint.mkdir()
        setup.encoder.backbone.save_to_preset(str(checkpoint))
        setup.encoder.tokenizer.save_to_preset(str(checkpoint))
        train = write_pair_tsv(tmp_path / "train.tsv", demo_rows("train")[:8])
        result = CliRunner().invoke(main, [
            "train", "--loss", "cosent-test", "--backbone", str(checkpoint), "--train", str(train),
            "--epochs", "1", "--batch-size", "4", "--max-length", "16",
            "--output", str(tmp_path / "run")])
        assert result.exit_code == 0, result.output
        help_text = CliRunner().invoke(main, ["train", "--help"]).output
        assert "cosent-test" in help_text
    finally:
        OBJECTIVES.pop("cosent-test")


def test_cosine_mse_maps_scores_0_to_5_or_0_to_1_and_refuses_others():
    from keras_cosent.training.objectives import score_range

    def data(labels):
        return PairDataset([["a"] * len(labels), ["b"] * len(labels)],
                           np.asarray(labels, "float32"), "scores.tsv")

    assert score_range(data([0.0, 0.5, 1.0]), "pair-tsv") == (0.0, 1.0)
    assert score_range(data([0.0, 2.5, 5.0]), "pair-tsv") == (0.0, 5.0)
    with pytest.raises(DataFormatError, match=r"scores.tsv: .*2 row\(s\) score outside 0-5 "
                                              r"\(row 2: 99\)"):
        score_range(data([1.0, 99.0, -7.0]), "pair-tsv")


@pytest.mark.parametrize("data_format", [None, "nli-jsonl"])
def test_nli_rows_keep_their_three_classes_with_or_without_data_format(tmp_path, data_format):
    # read_nli_jsonl names its classes, so build need not be told the format: left
    # out, the softmax head used to see two classes (labels > 2.5: all 0) and
    # cosine regression a 0-5 range.
    import json

    from keras_cosent.data import read_nli_jsonl

    rows = [("a cat sat", "the cat", "entailment"), ("a cat sat", "a dog ran", "contradiction"),
            ("the mat", "a red mat", "neutral"), ("the mat", "the mat", "entailment")]
    path = tmp_path / "nli.jsonl"
    path.write_text("\n".join(json.dumps({"sentence1": a, "sentence2": b, "label": label})
                              for a, b, label in rows))
    assert read_nli_jsonl(path).classes == ["contradiction", "neutral", "entailment"]
    setup = build(tiny_encoder(), read_nli_jsonl(path), "sbert-softmax", batch_size=2,
                  data_format=data_format)
    assert setup.dataset.labels.tolist() == [2, 0, 1, 2]
    assert setup.loss.get_config()["num_labels"] == 3
    setup = build(tiny_encoder(), read_nli_jsonl(path), "cosine-mse", batch_size=2,
                  data_format=data_format)
    assert (setup.loss.get_config()["min_score"], setup.loss.get_config()["max_score"]) == (0, 2)
