"""`train --loss batch-hard-triplet`, and `--dev` read as scored pairs whatever --train holds.

Batch-hard triplet trains from the CLI on class-labelled texts as `supcon` does;
its first step's loss is checked against a NumPy batch-hard reference on the
starting encoder's embeddings (a checkpoint without dropout, so that the
training step embeds as `encode` does). SupCon on labelled texts with an STS
dev file logs a dev Spearman per epoch that equals SciPy's on the saved
encoder's cosines, with `--keep-best` choosing the epoch.
"""

import csv
import json
import shlex

import keras
import numpy as np
import pytest
from scipy import stats

from recipes.model_loading import load_encoder
from tests.recipes.conftest import demo_rows
from tests.recipes.test_cli import assert_one_line_error


def _topic(score):
    return "low" if score < 1.7 else ("mid" if score < 3.4 else "high")


def _labelled_jsonl(path, rows):
    """One text per row, classed by its pair's score; returns (texts, topics)."""
    texts, topics = [first for first, _, _ in rows], [_topic(score) for _, _, score in rows]
    with open(path, "w", encoding="utf-8") as f:
        for text, topic in zip(texts, topics):
            f.write(json.dumps({"text": text, "topic": topic}) + "\n")
    return texts, topics


LABELLED = ["--format", "jsonl", "--text-columns", "text", "--label-column", "topic"]


def batch_hard_reference(x, labels, margin):
    """Hermans et al.'s batch-hard triplet loss with euclidean distance, in NumPy."""
    x = np.asarray(x, "float64")
    labels = np.asarray(labels)
    d = np.linalg.norm(x[:, None, :] - x[None, :, :], axis=-1)
    per = []
    for a in range(len(x)):
        pos = (labels == labels[a]) & (np.arange(len(x)) != a)
        neg = labels != labels[a]
        if pos.any() and neg.any():
            per.append(max(0.0, d[a, pos].max() - d[a, neg].min() + margin))
    return float(np.mean(per))


def test_batch_hard_triplet_first_step_matches_numpy_and_is_recorded(
        cli, no_dropout_checkpoint, tmp_path):
    rows = demo_rows("train")[:16]
    texts, topics = _labelled_jsonl(tmp_path / "train.jsonl", rows)
    assert len(set(topics)) == 3
    output = tmp_path / "run"
    # One batch of all 16 rows: the epoch's logged loss is the first step's, and
    # batch-hard does not depend on the order the batch holds the rows in.
    result = cli("train", "--loss", "batch-hard-triplet", "--backbone", no_dropout_checkpoint,
                 "--train", tmp_path / "train.jsonl", *LABELLED, "--margin", 0.3,
                 "--distance", "euclidean", "--epochs", 1, "--batch-size", 16,
                 "--max-length", 16, "--output", output)
    assert result.exit_code == 0, result.output

    encoder = load_encoder(str(no_dropout_checkpoint), None, 16)
    expected = batch_hard_reference(encoder.encode(texts), topics, 0.3)
    logged = json.loads((output / "metrics.json").read_text())[0]["loss"]
    assert expected > 0
    assert logged == pytest.approx(expected, rel=1e-4)

    record = json.loads((output / "config.json").read_text())
    config = record["config"]
    assert (config["loss"], config["margin"], config["distance"]) == (
        "batch-hard-triplet", 0.3, "euclidean")
    words = shlex.split(record["command"])
    assert [words[words.index(flag) + 1] for flag in ("--loss", "--margin", "--distance")] == [
        "batch-hard-triplet", "0.3", "euclidean"]


@pytest.mark.parametrize("args, fragments", [
    # Scored pairs have no classes: refused as supcon refuses them.
    (["--loss", "batch-hard-triplet"], ["'batch-hard-triplet' needs class-labelled text"]),
    (["--loss", "cosent", "--distance", "euclidean"], ["--distance", "--loss cosent has none"]),
])
def test_batch_hard_triplet_refusals_are_one_line(cli, tiny_checkpoint, small_train, tmp_path,
                                                  args, fragments):
    result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train, *args,
                 "--epochs", 1, "--batch-size", 8, "--max-length", 16,
                 "--output", tmp_path / "run")
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "run").exists()


def test_supcon_with_an_sts_dev_file_logs_dev_spearman_and_keeps_the_best(
        cli, tiny_checkpoint, tmp_path):
    _labelled_jsonl(tmp_path / "train.jsonl", demo_rows("train")[:16])
    dev_rows = demo_rows("dev")[:24]
    # An STS csv in its own columns, none of which the training file has.
    with open(tmp_path / "dev.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["sentence1", "sentence2", "score"])
        writer.writerows(dev_rows)
    output = tmp_path / "run"
    result = cli("train", "--loss", "supcon", "--backbone", tiny_checkpoint,
                 "--train", tmp_path / "train.jsonl", *LABELLED, "--dev", tmp_path / "dev.csv",
                 "--eval-format", "csv", "--keep-best", "dev_spearman", "--epochs", 2,
                 "--batch-size", 8, "--max-length", 16, "--lr", 1e-3, "--output", output)
    assert result.exit_code == 0, result.output

    with open(output / "metrics.csv", newline="", encoding="utf-8") as f:
        logged = [float(row["dev_spearman"]) for row in csv.DictReader(f)]
    assert len(logged) == 2
    kept = json.loads((output / "results.json").read_text())["kept_epoch"]
    assert kept["epoch"] == 1 + int(np.argmax(logged))

    encoder = keras.saving.load_model(output / "encoder.keras")
    a = np.asarray(encoder.encode([r[0] for r in dev_rows]), "float64")
    b = np.asarray(encoder.encode([r[1] for r in dev_rows]), "float64")
    cosines = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    spearman = 100 * stats.spearmanr([r[2] for r in dev_rows], cosines)[0]
    assert logged[kept["epoch"] - 1] == pytest.approx(spearman, abs=1e-3)


@pytest.mark.parametrize("given, expected", [
    # The training file's columns where they name a pair (as before the eval options).
    ({"text_columns": "a,b", "label_column": "s"}, (("a", "b"), "s")),
    # Labelled texts, one view or two: an STS file's default columns.
    ({"text_columns": "text", "label_column": "topic"}, (("sentence1", "sentence2"), "score")),
    ({"text_columns": "text,text", "label_column": "topic"},
     (("sentence1", "sentence2"), "score")),
    ({"text_columns": "q,p,n", "label_column": "score", "eval_text_columns": "x,y"},
     (("x", "y"), "score")),
    ({"text_columns": "a,b", "label_column": "s", "eval_text_columns": "x,y",
      "eval_label_column": "gold"}, (("x", "y"), "gold")),
])
def test_evaluation_columns(given, expected):
    from recipes.training import evaluation_columns

    assert evaluation_columns(given) == expected


def test_keep_best_passes_over_an_epoch_that_scored_nan(cli, tiny_checkpoint, small_train,
                                                        small_dev, tmp_path, monkeypatch):
    # A diverged encoder's dev score is NaN. Keras' checkpoint saved the first epoch
    # whatever it scored, and nothing rises above a NaN: epoch 1 was kept for good.
    from keras_cosent.callbacks import SpearmanEvaluator

    on_epoch_end = SpearmanEvaluator.on_epoch_end

    def nan_in_the_first_epoch(self, epoch, logs=None):
        on_epoch_end(self, epoch, logs)
        if epoch == 0:
            logs["dev_spearman"] = float("nan")

    monkeypatch.setattr(SpearmanEvaluator, "on_epoch_end", nan_in_the_first_epoch)
    output = tmp_path / "run"
    result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train,
                 "--dev", small_dev, "--keep-best", "dev_spearman", "--epochs", 3,
                 "--batch-size", 8, "--max-length", 16, "--lr", 1e-3, "--output", output)
    assert result.exit_code == 0, result.output
    with open(output / "metrics.csv", newline="", encoding="utf-8") as f:
        logged = [float(row["dev_spearman"]) for row in csv.DictReader(f)]
    assert np.isnan(logged[0]) and np.isfinite(logged[1:]).all()
    results = json.loads((output / "results.json").read_text())
    best = 2 + int(np.argmax(logged[1:]))
    assert results["kept_epoch"]["epoch"] == best
    assert results["kept_epoch"]["value"] == pytest.approx(logged[best - 1])
    # The weights kept are that epoch's: the final dev score is its score.
    assert results["dev"]["spearman"] == pytest.approx(logged[best - 1], abs=1e-3)
