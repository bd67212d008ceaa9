"""Tables, per-epoch metric files and the training plot."""

import csv
import json

import pytest

from recipes.reporting import format_table
from recipes.reporting import history_rows
from recipes.reporting import plot_training
from recipes.reporting import results_table
from recipes.reporting import write_metrics
from recipes.reporting import write_results


def test_table_is_aligned_plain_text():
    text = format_table(("split", "pairs", "spearman"), [("dev", 80, 91.234), ("test", 7, None)])
    lines = text.splitlines()
    assert lines == [
        "split  pairs  spearman",
        "dev       80     91.23",
        "test       7         -",
    ]


def test_results_table_rows_follow_the_results():
    text = results_table({"dev": {"pairs": 3, "spearman": 50.0, "pearson": 40.0}})
    assert text.splitlines()[1].split() == ["dev", "3", "50.00", "40.00"]


def test_a_keep_best_runs_table_says_which_epoch_its_scores_are():
    # The dev row was the kept epoch 1's score, and only stderr said so (probe).
    results = {"dev_before_training": {"pairs": 3, "spearman": 50.0, "pearson": 40.0},
               "dev": {"pairs": 3, "spearman": 60.0, "pearson": 45.0},
               "kept_epoch": {"metric": "dev_spearman", "epoch": 1, "value": 60.0}}
    assert results_table(results).splitlines()[-1] == (
        "after training: epoch 1's weights, the best by dev_spearman")
    del results["kept_epoch"]
    assert results_table(results).splitlines()[-1].split()[0] == "dev"


def test_metrics_files_hold_one_row_per_epoch(tmp_path):
    rows = history_rows({"loss": [2.0, 1.5], "dev_spearman": [70.0, 80.0]})
    write_metrics(tmp_path, rows)
    with open(tmp_path / "metrics.csv") as f:
        read = list(csv.DictReader(f))
    assert [r["epoch"] for r in read] == ["1", "2"]
    assert [float(r["loss"]) for r in read] == [2.0, 1.5]
    assert json.loads((tmp_path / "metrics.json").read_text()) == rows


def test_a_score_that_is_not_finite_is_null_in_the_json_files(tmp_path):
    # A constant dev set or a collapsed encoder gives a NaN Spearman; Python's json
    # wrote it as a bare NaN token, which strict parsers (jq, browsers) refuse.
    nan = float("nan")
    write_metrics(tmp_path, [{"epoch": 1, "loss": 2.0, "dev_spearman": nan}])
    write_results(tmp_path, {"dev": {"pairs": 3, "spearman": nan, "pearson": float("inf")}})
    strict = {"parse_constant": lambda token: pytest.fail(f"non-JSON token {token}")}
    assert json.loads((tmp_path / "metrics.json").read_text(), **strict) == [
        {"epoch": 1, "loss": 2.0, "dev_spearman": None}]
    results = json.loads((tmp_path / "results.json").read_text(), **strict)
    assert results == {"dev": {"pairs": 3, "spearman": None, "pearson": None}}
    assert results_table(results).splitlines()[1].split() == ["dev", "3", "-", "-"]
    with open(tmp_path / "metrics.csv") as f:
        assert next(csv.DictReader(f))["dev_spearman"] == "nan"


def test_correlations_are_reported_times_100():
    rows = history_rows({"loss": [2.0], "dev_spearman": [0.5]}, percent_suffixes=("_spearman",))
    assert rows == [{"epoch": 1, "loss": 2.0, "dev_spearman": 50.0}]


def test_plot_is_a_png(tmp_path):
    rows = history_rows({"loss": [2.0, 1.5], "dev_spearman": [70.0, 80.0]})
    plot_training(tmp_path / "with_dev.png", rows, "dev_spearman", initial_spearman=60.0)
    plot_training(tmp_path / "loss_only.png", rows, None)
    for name in ("with_dev.png", "loss_only.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_staged_runs_loss_is_one_line_per_stage(tmp_path, monkeypatch):
    # Stage 1's InfoNCE and stage 2's CoSENT were joined in one line, as one loss.
    from matplotlib import pyplot

    figures = []
    monkeypatch.setattr(pyplot, "close", figures.append)
    rows = history_rows({"loss": [3.0, 2.5, 6.0, 5.5, 5.0]})
    plot_training(tmp_path / "staged.png", rows, None, stage_starts=[3])
    plot_training(tmp_path / "plain.png", rows, None)
    staged, plain = (figure.axes[0] for figure in figures)

    def curves(axis):  # the loss lines, not the stage boundary's vertical line
        return [(list(line.get_xdata()), list(line.get_ydata()))
                for line in axis.get_lines() if line.get_marker() == "o"]

    assert curves(staged) == [([1, 2], [3.0, 2.5]), ([3, 4, 5], [6.0, 5.5, 5.0])]
    assert staged.get_title() == "training loss (each stage its own)"
    assert curves(plain) == [([1, 2, 3, 4, 5], [3.0, 2.5, 6.0, 5.5, 5.0])]
    assert plain.get_title() == "training loss"


def test_plot_has_one_panel_per_dev_curve(tmp_path):
    """Loss, then dev Spearman and retrieval nDCG@10 when logged: one panel each."""
    import matplotlib.image

    rows = history_rows({"loss": [2.0, 1.5], "dev_spearman": [70.0, 80.0],
                         "ir_dev_ndcg@10": [40.0, 45.0]})
    widths = {}
    for name, keys in {"loss": {}, "sts": {"spearman_key": "dev_spearman"},
                       "both": {"spearman_key": "dev_spearman",
                                "retrieval_key": "ir_dev_ndcg@10", "initial_retrieval": 30.0}
                       }.items():
        plot_training(tmp_path / f"{name}.png", rows, **keys)
        widths[name] = matplotlib.image.imread(tmp_path / f"{name}.png").shape[1]
    assert widths["sts"] == 2 * widths["loss"] and widths["both"] == 3 * widths["loss"]
    # A key with no values adds no empty panel.
    plot_training(tmp_path / "missing.png", rows, "dev_spearman", retrieval_key="ir_dev_mrr@10")
    assert matplotlib.image.imread(tmp_path / "missing.png").shape[1] == widths["sts"]


def test_each_dev_panel_names_its_metric_on_the_axis(tmp_path, monkeypatch):
    # The axis said "dev" and "ir_dev_ndcg@10" (probe).
    from matplotlib import pyplot

    figures = []
    monkeypatch.setattr(pyplot, "close", figures.append)
    rows = history_rows({"loss": [2.0, 1.5], "dev_spearman": [70.0, 80.0],
                         "ir_dev_mrr@10": [40.0, 45.0]})
    plot_training(tmp_path / "p.png", rows, "dev_spearman", retrieval_key="ir_dev_mrr@10")
    (figure,) = figures
    assert [axis.get_ylabel() for axis in figure.axes] == ["loss", "Spearman x 100",
                                                           "MRR@10 x 100"]
    assert [axis.get_title() for axis in figure.axes][1:] == ["dev Spearman x 100",
                                                              "ir_dev_mrr@10 x 100"]


def test_the_kept_epoch_is_ringed_on_every_dev_panel(tmp_path, monkeypatch):
    # --keep-best saved epoch 2, not the last: the plot says which point the encoder is.
    from matplotlib import pyplot

    figures = []
    monkeypatch.setattr(pyplot, "close", figures.append)
    rows = history_rows({"loss": [2.0, 1.5, 1.2], "dev_spearman": [70.0, 80.0, 78.0],
                         "ir_dev_ndcg@10": [40.0, 45.0, 44.0]})
    for row in rows:
        row["kept"] = row["epoch"] == 2
    plot_training(tmp_path / "kept.png", rows, "dev_spearman", initial_spearman=60.0,
                  retrieval_key="ir_dev_ndcg@10", initial_retrieval=30.0)
    plot_training(tmp_path / "plain.png", [{k: v for k, v in row.items() if k != "kept"}
                                           for row in rows], "dev_spearman")

    def rings(axis):
        return [(list(line.get_xdata()), list(line.get_ydata()))
                for line in axis.get_lines() if line.get_label() == "kept"]

    kept, plain = figures
    assert rings(kept.axes[0]) == []  # the loss panel
    assert rings(kept.axes[1]) == [([2], [80.0])]
    assert rings(kept.axes[2]) == [([2], [45.0])]
    assert all(rings(axis) == [] for axis in plain.axes)
