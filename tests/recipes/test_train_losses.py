"""`train --loss` for issue 20's objectives, `--matryoshka-dims`, and `--truncate-dim`.

Each objective trains one epoch of the tiny checkpoint on a small file in the
format a user would give it; `--matryoshka-dims` is recorded in config.json and in
the stored command; `encode`/`export --truncate-dim` check the size against the model.
"""

import json
import shlex

import numpy as np
import pytest

from tests.losses.test_infonce_loss import reference_infonce
from tests.recipes.conftest import demo_rows
from tests.recipes.test_cli import assert_one_line_error


def _nli(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for i, (first, second, _) in enumerate(rows):
            other = rows[(i + 1) % len(rows)][1]
            for hypothesis, label in ((second, "entailment"), (other, "contradiction")):
                f.write(json.dumps({"sentence1": first, "sentence2": hypothesis,
                                    "label": label}) + "\n")
    return path, ["--format", "nli-jsonl"]


def _ranked_csv(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        f.write("query\tpositive\tnegative\n")
        for i, (first, second, _) in enumerate(rows):
            f.write(f"{first}\t{second}\t{rows[(i + 3) % len(rows)][1]}\n")
    return path, ["--format", "tsv", "--text-columns", "query,positive,negative"]


def _labelled_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for first, _, score in rows:
            f.write(json.dumps({"text": first, "topic": "similar" if score > 2.5 else "apart"})
                    + "\n")
    return path, ["--format", "jsonl", "--text-columns", "text", "--label-column", "topic"]


def _scored_tsv(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{a}\t{b}\t{s}\n" for a, b, s in rows)
    return path, []


FILES = {"ntxent": _scored_tsv, "triplet": _nli, "margin-ranking": _ranked_csv,
         "supcon": _labelled_jsonl}


@pytest.mark.parametrize("loss", sorted(FILES))
def test_each_new_loss_trains_from_the_cli(cli, tiny_checkpoint, tmp_path, loss):
    train, options = FILES[loss](tmp_path / "train.data", demo_rows("train")[:16])
    result = cli("train", "--loss", loss, "--backbone", tiny_checkpoint, "--train", train,
                 *options, "--epochs", 1, "--batch-size", 8, "--max-length", 16,
                 "--output", tmp_path / "run")
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert np.isfinite(metrics[0]["loss"])
    assert json.loads((tmp_path / "run" / "config.json").read_text())["config"]["loss"] == loss


def _logistic_ranking_reference(query, positive, negative, scale):
    """MarginRankingLoss(form="logistic") in NumPy: mean of log(1 + exp(-scale (s_p - s_n)))."""
    def cos(a, b):
        return np.sum(a * b, -1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))

    gap = cos(query, positive) - cos(query, negative)
    return float(np.mean(np.logaddexp(0.0, -scale * gap)))


def test_margin_form_logistic_first_step_matches_numpy_and_is_replayed(
        cli, no_dropout_checkpoint, tmp_path):
    rows = demo_rows("train")[:16]
    train, options = _ranked_csv(tmp_path / "train.tsv", rows)
    output = tmp_path / "run"
    # One batch of all 16 rows: the epoch's logged loss is the first step's.
    result = cli("train", "--loss", "margin-ranking", "--margin-form", "logistic",
                 "--scale", 5, "--backbone", no_dropout_checkpoint, "--train", train,
                 *options, "--epochs", 1, "--batch-size", 16, "--max-length", 16,
                 "--output", output)
    assert result.exit_code == 0, result.output

    from recipes.model_loading import load_encoder

    encoder = load_encoder(str(no_dropout_checkpoint), None, 16)
    columns = [[first for first, _, _ in rows], [second for _, second, _ in rows],
               [rows[(i + 3) % len(rows)][1] for i in range(len(rows))]]
    expected = _logistic_ranking_reference(*(encoder.encode(c) for c in columns), scale=5.0)
    logged = json.loads((output / "metrics.json").read_text())[0]["loss"]
    assert logged == pytest.approx(expected, rel=1e-4)

    record = json.loads((output / "config.json").read_text())
    assert record["config"]["margin_form"] == "logistic"
    words = shlex.split(record["command"])
    assert words[words.index("--margin-form") + 1] == "logistic"


def test_symmetric_infonce_first_step_matches_numpy_and_is_replayed(
        cli, no_dropout_checkpoint, tmp_path):
    rows = demo_rows("train")[:32]
    # 16 rows in one batch; their negatives are texts no row of the batch has.
    columns = [[first for first, _, _ in rows[:16]], [second for _, second, _ in rows[:16]],
               [second for _, second, _ in rows[16:]]]
    train = tmp_path / "train.tsv"
    train.write_text("query\tpositive\tnegative\n"
                     + "".join("\t".join(row) + "\n" for row in zip(*columns)),
                     encoding="utf-8")
    output = tmp_path / "run"
    result = cli("train", "--loss", "infonce", "--symmetric", "--temperature", 0.1,
                 "--backbone", no_dropout_checkpoint, "--train", train, "--format", "tsv",
                 "--text-columns", "query,positive,negative", "--epochs", 1,
                 "--batch-size", 16, "--max-length", 16, "--output", output)
    assert result.exit_code == 0, result.output

    from recipes.model_loading import load_encoder

    encoder = load_encoder(str(no_dropout_checkpoint), None, 16)
    tuples = np.stack([encoder.encode(c) for c in columns], axis=1).astype("float64")
    groups = np.arange(len(tuples))
    expected = reference_infonce(groups, tuples, 0.1, symmetric=True, mask=False).mean()
    forward_only = reference_infonce(groups, tuples, 0.1, symmetric=False, mask=False).mean()
    logged = json.loads((output / "metrics.json").read_text())[0]["loss"]
    assert logged == pytest.approx(expected, rel=1e-4)
    assert abs(expected - forward_only) > 1e-2 * expected

    record = json.loads((output / "config.json").read_text())
    assert record["config"]["symmetric"] is True
    assert "--symmetric" in shlex.split(record["command"])


def test_symmetric_is_refused_where_the_loss_has_none(cli, tiny_checkpoint, small_train,
                                                      tmp_path):
    result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train,
                 "--loss", "cosent", "--symmetric", "--epochs", 1,
                 "--output", tmp_path / "run")
    assert_one_line_error(result, "--symmetric", "--loss cosent has none")
    assert not (tmp_path / "run").exists()


def test_margin_form_is_refused_where_the_loss_has_none(cli, tiny_checkpoint, small_train,
                                                        tmp_path):
    result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train,
                 "--loss", "cosent", "--margin-form", "logistic", "--epochs", 1,
                 "--output", tmp_path / "run")
    assert_one_line_error(result, "--margin-form", "--loss cosent has none")
    assert not (tmp_path / "run").exists()


def test_margin_is_refused_where_the_loss_has_none(cli, tiny_checkpoint, small_train, tmp_path):
    # cosent and infonce have no margin: the value would be recorded and replayed, and
    # change nothing.
    for loss in ("cosent", "infonce"):
        result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train,
                     "--loss", loss, "--margin", 0.3, "--epochs", 1,
                     "--output", tmp_path / "run")
        assert_one_line_error(result, "--margin", f"--loss {loss} has none")
    assert not (tmp_path / "run").exists()


def test_margin_ranking_refuses_the_option_its_form_does_not_read(cli, tiny_checkpoint,
                                                                  small_train, tmp_path):
    # The hinge form reads --margin, the logistic form --scale: the other was
    # recorded, replayed, and changed nothing.
    for extra, option, form in ((["--margin-form", "logistic", "--margin", 0.7], "--margin",
                                 "hinge"),
                                (["--scale", 5], "--scale", "logistic")):
        result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train,
                     "--loss", "margin-ranking", *extra, "--epochs", 1,
                     "--output", tmp_path / "run")
        assert_one_line_error(result, option,
                              f"--loss margin-ranking reads it only with --margin-form {form}")
    assert not (tmp_path / "run").exists()


def test_scale_or_temperature_for_a_loss_without_it_is_refused(cli, tiny_checkpoint,
                                                               small_train, tmp_path):
    # Their defaults are in every run's replay command; another value typed for a loss
    # that does not take it would be recorded and change nothing.
    for loss, option, value in (("cosent", "--temperature", 0.1), ("infonce", "--scale", 30),
                                ("cosine-mse", "--scale", 10)):
        result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train,
                     "--loss", loss, option, value, "--epochs", 1,
                     "--output", tmp_path / "run")
        assert_one_line_error(result, option, f"--loss {loss} has none")
    assert not (tmp_path / "run").exists()


def test_word_repetition_is_refused_for_a_loss_of_scored_pairs(cli, tiny_checkpoint,
                                                               small_train, tmp_path):
    # It repeats words of each positive; a scored pair's second sentence is none.
    for loss in ("cosent", "infonce:1.0,cosent:0.5"):
        result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train,
                     "--loss", loss, "--word-repetition", 0.32, "--epochs", 1,
                     "--output", tmp_path / "run")
        assert_one_line_error(result, "--word-repetition", "--loss cosent trains on scored pairs")
    assert not (tmp_path / "run").exists()


def test_matryoshka_dims_are_trained_recorded_and_replayed(cli, tiny_checkpoint, small_train,
                                                           tmp_path, monkeypatch):
    import keras_cosent.training.builder as builder

    losses = []
    real_build = builder.build

    def recording_build(*args, **kwargs):
        setup = real_build(*args, **kwargs)
        losses.append(setup.loss)
        return setup

    monkeypatch.setattr("recipes.training.build", recording_build)
    result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train, "--epochs", 1,
                 "--batch-size", 8, "--max-length", 16, "--matryoshka-dims", "16, 8,4",
                 "--output", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert losses[0].dims == (16, 8, 4) and type(losses[0].loss).__name__ == "CoSENTLoss"
    record = json.loads((tmp_path / "run" / "config.json").read_text())
    assert record["config"]["matryoshka_dims"] == "16,8,4"
    words = shlex.split(record["command"])
    assert words[words.index("--matryoshka-dims") + 1] == "16,8,4"
    # A size the run did not train is encoded, with a note; a trained one without.
    source = tmp_path / "s.txt"
    source.write_text("A cat sits.\n", encoding="utf-8")
    for dim, noted in ((6, True), (8, False)):
        result = cli("encode", tmp_path / "run", source, "-o", tmp_path / f"{dim}.npy",
                     "--truncate-dim", dim)
        assert result.exit_code == 0, result.output
        assert np.load(tmp_path / f"{dim}.npy").shape == (1, dim)
        note = (f"--truncate-dim {dim}: {tmp_path / 'run'} was trained with --matryoshka-dims "
                "16,8,4, not this size")
        assert (note in result.stderr) == noted, result.stderr


@pytest.mark.parametrize("dims, fragments", [
    ("32,8", ["--matryoshka-dims 32,8", "32 is larger than the embedding dimension 16"]),
    ("8,0", ["--matryoshka-dims", "'0' in '8,0' is not a positive integer"]),
    ("8,x", ["--matryoshka-dims", "'x' in '8,x'"]),
    ("8,\u00b2", ["--matryoshka-dims", "'²' in '8,²'"]),  # isdigit(), yet no int
    ("8,4,8", ["--matryoshka-dims", "repeats 8"]),
])
def test_bad_matryoshka_dims_are_one_line_errors(cli, tiny_checkpoint, small_train, tmp_path,
                                                 dims, fragments):
    result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train,
                 "--matryoshka-dims", dims, "--output", tmp_path / "run")
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "run").exists()


def test_encode_truncate_dim(cli, trained_run, tmp_path):
    source = tmp_path / "s.txt"
    source.write_text("A man plays a guitar.\nA cat sits.\nShort.\n", encoding="utf-8")
    assert cli("encode", trained_run["output"], source, "-o", tmp_path / "full.npy").exit_code == 0
    result = cli("encode", trained_run["output"], source, "-o", tmp_path / "cut.npy",
                 "--truncate-dim", 6)
    assert result.exit_code == 0, result.output
    assert (f"--truncate-dim 6: {trained_run['output']} was trained without --matryoshka-dims"
            in result.stderr)
    full = np.load(tmp_path / "full.npy").astype("float64")[:, :6]
    np.testing.assert_allclose(np.load(tmp_path / "cut.npy"),
                               full / np.linalg.norm(full, axis=1, keepdims=True), atol=1e-5)


@pytest.mark.parametrize("command", ["encode", "export"])
@pytest.mark.parametrize("dim, fragment", [(17, "17 is larger than the embedding dimension 16"),
                                           (0, "0 is not in the range")])
def test_bad_truncate_dim_is_a_one_line_error(cli, trained_run, tmp_path, command, dim, fragment):
    source = tmp_path / "s.txt"
    source.write_text("A cat sits.\n", encoding="utf-8")
    target = [source, "-o", tmp_path / "x.npy"] if command == "encode" else [tmp_path / "base"]
    result = cli(command, trained_run["output"], *target, "--truncate-dim", dim)
    assert_one_line_error(result, "--truncate-dim", fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.txt"]


def test_joint_loss_logs_each_term_and_replays(cli, tiny_checkpoint, small_train, tmp_path):
    output = tmp_path / "joint"
    result = cli(
        "train", "--backbone", tiny_checkpoint, "--train", small_train, "--loss",
        "infonce:1.0,cosent:0.5", "--epochs", 1, "--batch-size", 8, "--max-length", 16,
        "--output", output,
    )
    assert result.exit_code == 0, result.output
    rows = json.loads((output / "metrics.json").read_text())
    assert {"loss", "loss_infonce", "loss_cosent"} <= set(rows[0])
    np.testing.assert_allclose(
        rows[0]["loss"], rows[0]["loss_infonce"] + 0.5 * rows[0]["loss_cosent"], rtol=1e-5
    )
    command = json.loads((output / "config.json").read_text())["command"]
    assert shlex.split(command)[shlex.split(command).index("--loss") + 1] == "infonce:1.0,cosent:0.5"


def test_a_bad_joint_loss_is_one_line_naming_the_term(cli, small_train, tmp_path):
    result = cli("train", "--train", small_train, "--loss", "infonce:1,cosent:zero",
                 "--output", tmp_path / "run")
    assert_one_line_error(result, "'zero'")


@pytest.fixture
def built(monkeypatch):
    """The set-ups `train` builds, in order."""
    import keras_cosent.training.builder as builder

    setups = []
    real_build = builder.build

    def recording_build(*args, **kwargs):
        setups.append(real_build(*args, **kwargs))
        return setups[-1]

    monkeypatch.setattr("recipes.training.build", recording_build)
    return setups


def test_mini_batch_size_trains_cached_batches_recorded_and_replayed(
        cli, tiny_checkpoint, small_train, tmp_path, built):
    result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train, "--epochs", 1,
                 "--loss", "infonce", "--batch-size", 8, "--max-length", 16,
                 "--mini-batch-size", 3, "--output", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert type(built[0].model).__name__ == "CachedSiameseEncoder"
    assert built[0].model.mini_batch_size == 3
    record = json.loads((tmp_path / "run" / "config.json").read_text())
    assert record["config"]["mini_batch_size"] == 3
    words = shlex.split(record["command"])
    assert words[words.index("--mini-batch-size") + 1] == "3"
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert np.isfinite(metrics[0]["loss"])
    # --packing is the default, which the cached step cannot take: said, not silent.
    assert ("batches are padded, not packed: --mini-batch-size embeds each batch a few "
            "rows at a time") in result.stderr
    result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train, "--epochs", 1,
                 "--loss", "infonce", "--batch-size", 8, "--max-length", 16,
                 "--output", tmp_path / "packed")
    assert result.exit_code == 0, result.output
    assert "padded, not packed" not in result.stderr


@pytest.mark.parametrize("devices, message", [
    (1, "Invalid value for --mini-batch-size: 16 is larger than --batch-size 8: every batch "
        "would be embedded in one pass"),
    (2, "Invalid value for --mini-batch-size: 16 is larger than the 4 rows per device of "
        "--batch-size 8 over --devices 2: every batch"),
])
def test_a_mini_batch_larger_than_the_batch_is_refused_before_training(
        cli, tiny_checkpoint, small_train, tmp_path, devices, message):
    # The sizes swapped, most likely: refused in one line, nothing written.
    result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train, "--epochs", 1,
                 "--loss", "infonce", "--batch-size", 8, "--max-length", 16,
                 "--mini-batch-size", 16, "--devices", devices, "--output", tmp_path / "run")
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output and not (tmp_path / "run").exists()


def test_max_grad_norm_reaches_the_optimizer_and_is_recorded_and_replayed(
        cli, tiny_checkpoint, small_train, tmp_path, built):
    result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train, "--epochs", 1,
                 "--batch-size", 8, "--max-length", 16, "--max-grad-norm", 0.5,
                 "--output", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert built[0].optimizer.global_clipnorm == 0.5
    record = json.loads((tmp_path / "run" / "config.json").read_text())
    assert record["config"]["max_grad_norm"] == 0.5
    words = shlex.split(record["command"])
    assert words[words.index("--max-grad-norm") + 1] == "0.5"
    # Without it nothing is recorded (the configuration of runs made before the option).
    result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train, "--epochs", 1,
                 "--batch-size", 8, "--max-length", 16, "--output", tmp_path / "plain")
    assert result.exit_code == 0, result.output
    assert built[1].optimizer.global_clipnorm is None
    record = json.loads((tmp_path / "plain" / "config.json").read_text())
    assert "max_grad_norm" not in record["config"]
    assert "--max-grad-norm" not in record["command"]


def test_max_grad_norm_is_refused_on_several_tensorflow_devices(cli, small_train, tmp_path):
    # Checked before the backend loads: Keras would clip each device's share alone.
    result = cli("--backend", "tensorflow", "train", "--train", small_train, "--devices", 2,
                 "--batch-size", 8, "--max-grad-norm", 1, "--output", tmp_path / "run")
    assert_one_line_error(result, "Invalid value for --max-grad-norm: cannot clip on "
                          "--devices 2 under TensorFlow")
    assert not (tmp_path / "run").exists()
