"""`train --collapse-guard`: recorded in config.json and the replay command, fired epochs
in metrics.csv and on the plot, and one-line errors for settings that cannot apply."""

import csv
import json
import shlex

import pytest

from keras_cosent.callbacks import SpearmanEvaluator
from recipes import reporting


@pytest.fixture
def scripted_dev_scores(monkeypatch):
    """Dev scores before training, after epochs 1-3 and at the end: the guard fires after 2."""
    scores = iter([0.2, 0.95, -0.9, 0.96, 0.96])

    def evaluate(self):  # evaluate_sts scores through it too
        return {"spearman": next(scores), "pearson": 0.0}

    monkeypatch.setattr(SpearmanEvaluator, "evaluate", evaluate)


def test_fired_epochs_are_in_metrics_and_the_command(cli, tiny_checkpoint, small_train,
                                                    small_dev, tmp_path, scripted_dev_scores):
    output = tmp_path / "run"
    result = cli(
        "train", "--backbone", tiny_checkpoint, "--train", small_train, "--dev", small_dev,
        "--epochs", 3, "--batch-size", 8, "--max-length", 16, "--collapse-guard",
        "--guard-factor", 0.25, "--output", output,
    )
    assert result.exit_code == 0, result.output
    assert "Epoch 2: collapse guard fired: dev_spearman=-0.9000" in result.output
    with open(output / reporting.METRICS_CSV, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [float(row["collapse_guard"]) for row in rows] == [0.0, 1.0, 0.0]
    assert [round(float(row["dev_spearman"])) for row in rows] == [95, -90, 96]
    assert (output / reporting.PLOT_FILE).stat().st_size > 0

    record = json.loads((output / "config.json").read_text())
    config = record["config"]
    assert (config["collapse_guard"], config["guard_min_delta"], config["guard_factor"],
            config["guard_patience"]) == (True, 0.01, 0.25, 2)
    words = shlex.split(record["command"])
    assert "--collapse-guard" in words
    assert words[words.index("--guard-factor") + 1] == "0.25"
    assert words[words.index("--guard-patience") + 1] == "2"


def test_a_run_without_the_guard_records_no_guard_settings(trained_run):
    record = json.loads((trained_run["output"] / "config.json").read_text())
    assert not {"collapse_guard", "guard_min_delta", "guard_factor", "guard_patience"} & set(
        record["config"])
    assert "guard" not in record["command"]


def test_guard_settings_without_the_guard_are_refused(cli, small_train, small_dev, tmp_path):
    result = cli("train", "--train", small_train, "--dev", small_dev, "--guard-factor", 0.3,
                 "--output", tmp_path / "run")
    assert result.exit_code == 2
    assert "--guard-factor 0.3 sets the collapse guard, which is off" in result.output
    assert not (tmp_path / "run").exists()


def test_the_guard_needs_a_dev_set(cli, small_train, tmp_path):
    result = cli("train", "--train", small_train, "--collapse-guard", "--output", tmp_path / "run")
    assert result.exit_code == 2
    assert "Invalid value for --collapse-guard" in result.output and "give --dev FILE" in result.output


def test_the_guard_needs_a_dev_set_with_train_retrieval_too(cli, tmp_path):
    # --train-retrieval has no demo dev set either; refused before anything is read.
    result = cli("train", "--train-retrieval", tmp_path, "--collapse-guard",
                 "--output", tmp_path / "run")
    assert result.exit_code == 2, result.output
    assert "give --dev FILE" in result.output
    assert not (tmp_path / "run").exists()


def test_plot_marks_the_fired_epochs(tmp_path, monkeypatch):
    import matplotlib.axes

    lines = []
    original = matplotlib.axes.Axes.axvline

    def axvline(self, x=0, *args, **kwargs):
        lines.append(x)
        return original(self, x, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "axvline", axvline)
    rows = [{"epoch": e, "loss": 1.0 / e, "dev_spearman": s, "collapse_guard": g}
            for e, s, g in [(1, 80.0, 0.0), (2, 20.0, 1.0), (3, 82.0, 0.0)]]
    reporting.plot_training(tmp_path / "plot.png", rows, "dev_spearman", initial_spearman=70.0)
    assert lines == [2, 2]  # one line on each panel
    assert (tmp_path / "plot.png").stat().st_size > 0


def test_the_kept_epoch_saves_its_own_weights_when_the_guard_fires(cli, tiny_checkpoint,
                                                                   small_train, small_dev,
                                                                   tmp_path, monkeypatch):
    # Before training 0.9, epoch 1 0.5: the guard fires after epoch 1 and restores the
    # weights from before training; --keep-best keeps epoch 1, the only one, and must
    # save the weights that scored 0.5 (trained ones), not those the guard put back.
    scores = iter([0.9, 0.5, 0.5, 0.5])
    monkeypatch.setattr(SpearmanEvaluator, "evaluate",
                        lambda self: {"spearman": next(scores), "pearson": 0.0})
    output = tmp_path / "run"
    result = cli(
        "train", "--backbone", tiny_checkpoint, "--train", small_train, "--dev", small_dev,
        "--epochs", 1, "--batch-size", 8, "--max-length", 16, "--lr", 1e-2,
        "--collapse-guard", "--keep-best", "dev_spearman", "--output", output,
    )
    assert result.exit_code == 0, result.output
    assert "collapse guard fired" in result.output
    import numpy as np

    from keras_cosent.models import load_encoder

    sentences = ["a man is playing a guitar", "the cat sleeps"]
    before = load_encoder(str(tiny_checkpoint), max_length=16).encode(sentences)
    kept = load_encoder(str(output), max_length=16).encode(sentences)
    assert not np.allclose(before, kept, atol=1e-4)
