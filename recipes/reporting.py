"""What `train` and `evaluate` show and leave behind: tables, per-epoch metrics, the plot."""

import csv
import math

from recipes.output_files import write_json

METRICS_CSV = "metrics.csv"
METRICS_JSON = "metrics.json"
PLOT_FILE = "training.png"
# The column `keras_cosent.callbacks.CollapseGuard` writes: 1 in the epochs it fired.
GUARD_COLUMN = "collapse_guard"
RESULTS_FILE = "results.json"


def _cell(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def format_table(headers, rows):
    """Plain aligned text: first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [row[0].ljust(widths[0])]
        parts += [cell.rjust(width) for cell, width in zip(row[1:], widths[1:])]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


RETRIEVAL_COLUMNS = ("ndcg@10", "mrr@10", "recall@10", "map@100")


def results_table(results):
    """The tables of evaluation results, `{split: result}`.

    STS results (`{"pairs", "spearman", "pearson"}`) make one table, retrieval
    results (`{"queries", "documents", "ndcg@10", ...}`) and clustering results
    (`{"texts", "clusters", "v_measure"}`) one each below it.
    """
    sts = [
        (split, result["pairs"], result["spearman"], result["pearson"])
        for split, result in results.items()
        if "spearman" in result
    ]
    retrieval = [
        (split, result["queries"], result["documents"])
        + tuple(result[key] for key in RETRIEVAL_COLUMNS)
        for split, result in results.items()
        if "ndcg@10" in result
    ]
    clustering = [
        (split, result["texts"], result["clusters"], result["v_measure"])
        for split, result in results.items()
        if "v_measure" in result
    ]
    tables = []
    if sts:
        tables.append(format_table(("split", "pairs", "spearman", "pearson"), sts))
    if retrieval:
        tables.append(format_table(("split", "queries", "docs") + RETRIEVAL_COLUMNS, retrieval))
    if clustering:
        tables.append(format_table(("data", "texts", "clusters", "v_measure"), clustering))
    kept = results.get("kept_epoch")
    if tables and kept:
        # A train --keep-best run: its scores after training are the kept epoch's,
        # which the rows' names alone do not say.
        tables.append(f"after training: epoch {kept['epoch']}'s weights, the best by "
                      f"{kept['metric']}")
    return "\n\n".join(tables)


def history_rows(history, percent_suffixes=()):
    """Turns a Keras `History.history` dict into one dict per epoch (epochs from 1).

    Keys ending in one of `percent_suffixes` (correlations) are multiplied by
    100, the scale STS results are reported in.
    """
    keys = list(history)
    epochs = max((len(values) for values in history.values()), default=0)
    rows = []
    for epoch in range(epochs):
        row = {"epoch": epoch + 1}
        for key in keys:
            values = history[key]
            value = values[epoch] if epoch < len(values) else None
            value = None if value is None else float(value)
            if value is not None and key.endswith(tuple(percent_suffixes)):
                value *= 100.0
            row[key] = value
        rows.append(row)
    return rows


def read_epoch_log(path):
    """Reads a `keras.callbacks.CSVLogger` file into a `History.history`-style dict.

    An epoch logged twice (a resumed run repeats the epoch it was killed in
    after logging it) keeps its last row.
    """
    by_epoch = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            by_epoch[int(row.pop("epoch"))] = row
    history = {}
    for epoch in sorted(by_epoch):
        for key, value in by_epoch[epoch].items():
            history.setdefault(key, []).append(float(value) if value not in ("", "NA", None) else None)
    # CSVLogger adds an empty val_ column for every key when fit has no validation data,
    # and sorts the columns: the loss (and its terms) come first again, as in `History`.
    kept = [key for key, values in history.items() if any(v is not None for v in values)]
    kept.sort(key=lambda key: (key != "loss", not key.startswith("loss_")))
    return {key: history[key] for key in kept}


def write_metrics(directory, rows):
    """Writes the per-epoch rows to `metrics.csv` and `metrics.json` in `directory`
    (a loss or score that is not finite is `nan` in the CSV and `null` in the JSON)."""
    columns = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    with open(directory / METRICS_CSV, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    write_json(directory / METRICS_JSON, rows)


def write_results(directory, results):
    """Writes the run's evaluations and record to `results.json` in `directory`; a
    score that is not finite (a diverged model's) is `null`, as JSON has no NaN."""
    write_json(directory / RESULTS_FILE, results)


IR_METRIC_NAMES = {"ndcg": "nDCG", "mrr": "MRR", "recall": "Recall", "map": "MAP"}


def _retrieval_axis(key):
    """The axis label of a retrieval log key: "nDCG@10 x 100" for `ir_dev_ndcg@10`."""
    name, cutoff = key.rsplit("_", 1)[-1].split("@")
    return f"{IR_METRIC_NAMES.get(name, name)}@{cutoff} x 100"


def plot_training(path, rows, spearman_key=None, initial_spearman=None, retrieval_key=None,
                  initial_retrieval=None, stage_starts=()):
    """Saves a PNG of training loss (and the dev curves, when present) per epoch.

    `initial_spearman` / `initial_retrieval`, the dev scores before training,
    are drawn at epoch 0. `retrieval_key` (e.g. `"ir_dev_ndcg@10"`) adds a panel
    for the retrieval dev metric, x 100 in `rows`. `stage_starts`: for a staged
    run, the first epoch of each stage after the first; a dotted grey line marks
    each boundary. The epochs at whose end the collapse guard fired
    (`collapse_guard` = 1 in the rows) get a dashed red line on every panel: the
    point drawn there is the collapsed score, and the next epoch starts from the
    restored weights. The epoch `--keep-best` saved (`kept` true in the rows) is
    ringed on every dev panel.
    """
    import matplotlib

    # No display on servers and in CI: draw to a file only.
    matplotlib.use("Agg")
    from matplotlib import pyplot

    epochs = [row["epoch"] for row in rows]
    curves = []
    for key, initial, title, color in (
        (spearman_key, initial_spearman, "dev Spearman x 100", "tab:green"),
        (retrieval_key, initial_retrieval, f"{retrieval_key} x 100", "tab:purple"),
    ):
        values = [row.get(key) for row in rows] if key else []
        if any(value is not None for value in values):
            # The axis names the metric ("Spearman x 100", "nDCG@10 x 100"); it said
            # "dev", the title's first word.
            metric = "Spearman x 100" if key == spearman_key else _retrieval_axis(key)
            curves.append((values, initial, title, metric, color))
    figure, axes = pyplot.subplots(1, 1 + len(curves), figsize=(4.5 * (1 + len(curves)), 3.2))
    axes = list(axes) if curves else [axes]
    # One line per stage of a staged run: each stage trains its own loss, on its
    # own scale, which a line across the boundary would join.
    starts = [epoch for epoch in stage_starts if epoch > min(epochs, default=0)]
    for first, end in zip([-math.inf, *starts], [*starts, math.inf]):
        stage = [(row["epoch"], row.get("loss")) for row in rows if first <= row["epoch"] < end]
        if stage:
            axes[0].plot(*zip(*stage), marker="o", color="tab:blue")
    axes[0].set(title="training loss" + (" (each stage its own)" if starts else ""),
                xlabel="epoch", ylabel="loss")
    axes[0].set_xticks(epochs)
    for axis, (values, initial, title, metric, color) in zip(axes[1:], curves):
        dev_epochs = ([0] if initial is not None else []) + epochs
        dev_values = ([initial] if initial is not None else []) + values
        axis.plot(dev_epochs, dev_values, marker="o", color=color)
        axis.set(title=title, xlabel="epoch (0: before training)", ylabel=metric)
        axis.set_xticks(dev_epochs)
        kept = [(epoch, value) for epoch, value, row in zip(epochs, values, rows)
                if row.get("kept") and value is not None]
        if kept:
            axis.plot(*zip(*kept), linestyle="none", marker="o", markersize=13,
                      markerfacecolor="none", markeredgecolor="black", label="kept")
    fired = [row["epoch"] for row in rows if row.get(GUARD_COLUMN)]
    for index, epoch in enumerate(fired):
        for axis in axes:
            axis.axvline(epoch, color="tab:red", linestyle="--", alpha=0.7,
                         label="collapse guard fired" if index == 0 else None)
    for index, epoch in enumerate(stage_starts):
        for axis in axes:
            axis.axvline(epoch - 0.5, color="tab:gray", linestyle=":",
                         label="next stage" if index == 0 else None)
    if fired or stage_starts or any(row.get("kept") for row in rows) and curves:
        axes[-1].legend(loc="best", fontsize="small")
    for axis in axes:
        axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
