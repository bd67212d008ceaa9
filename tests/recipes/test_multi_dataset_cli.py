"""`train` with several --train files: interleaved (--sampling) and staged (--recipe).

Tiny runs of the tiny checkpoint on demo pairs and an NLI file written from them.
"""

import csv
import json
import shlex

import numpy as np
import pytest

from recipes.commands.train import train as train_command
from recipes.multi_dataset import resolve_per_train_options
from tests.recipes.conftest import demo_rows
from tests.recipes.conftest import write_pair_tsv
from tests.recipes.test_cli import assert_one_line_error

SMALL = ["--epochs", 1, "--batch-size", 4, "--max-length", 16]


def write_nli(path, rows):
    """Each pair as an entailment, the next row's hypothesis as a contradiction."""
    with open(path, "w", encoding="utf-8") as f:
        for i, (first, second, _) in enumerate(rows):
            other = rows[(i + 1) % len(rows)][1]
            for hypothesis, label in ((second, "entailment"), (other, "contradiction")):
                f.write(json.dumps({"sentence1": first, "sentence2": hypothesis,
                                    "label": label}) + "\n")
    return path


@pytest.fixture
def two_files(tmp_path):
    rows = demo_rows("train")
    return (write_pair_tsv(tmp_path / "sts.tsv", rows[:16]),
            write_nli(tmp_path / "nli.jsonl", rows[16:24]))


def replayed_options(command):
    """The options the stored command gives `train`, resolved as `train` resolves them."""
    words = shlex.split(command)
    with train_command.make_context("train", words[words.index("train") + 1:]) as ctx:
        options = dict(ctx.params)
        resolve_per_train_options(ctx, options)
    return options


def test_two_datasets_train_together_log_each_loss_and_replay(cli, tiny_checkpoint, two_files,
                                                              small_dev, tmp_path):
    sts, nli = two_files
    output = tmp_path / "run"
    result = cli("train", "--backbone", tiny_checkpoint, "--train", sts, "--train", nli,
                 "--format", "pair-tsv", "--format", "nli-jsonl", "--loss", "cosent",
                 "--loss", "infonce", "--sampling", "round-robin", "--dev", small_dev,
                 "--eval-format", "pair-tsv",
                 *SMALL, "--output", output)
    assert result.exit_code == 0, result.output
    rows = json.loads((output / "metrics.json").read_text())
    assert {"loss", "loss_cosent", "loss_infonce", "dev_spearman"} <= set(rows[0])
    assert np.isfinite(rows[0]["loss_cosent"]) and np.isfinite(rows[0]["loss_infonce"])
    tasks = json.loads((output / "results.json").read_text())["train_tasks"]
    # 16 pairs and 8 (premise, entailment, contradiction) triplets in batches of 4;
    # round-robin stops when the smaller is used up.
    assert [(t["loss"], t["rows"], t["batches_per_epoch"]) for t in tasks] == [
        ("cosent", 16, 2), ("infonce", 8, 2)]
    record = json.loads((output / "config.json").read_text())
    config = record["config"]
    assert config["sampling"] == "round-robin"
    assert config["train"] == [str(sts), str(nli)] and config["loss"] == ["cosent", "infonce"]
    assert len(config["data_sha256"]["train"]) == 2
    replayed = replayed_options(record["command"])
    for key in ("train", "format", "loss", "sampling"):
        assert replayed[key] == config[key], key
    # The same command again finds the same run.
    again = cli(*shlex.split(record["command"])[1:])
    assert again.exit_code == 0 and "already holds this run" in again.output


def test_a_single_train_keeps_its_old_configuration(trained_run):
    config = json.loads((trained_run["output"] / "config.json").read_text())["config"]
    assert isinstance(config["train"], str) and config["loss"] == "cosent"
    assert config["format"] == "pair-tsv"
    assert not {"sampling", "staged", "stage_epochs"} & set(config)


@pytest.mark.parametrize("options, fragments", [
    (["--loss", "cosent", "--loss", "infonce", "--loss", "cosent"],
     ["--loss", "given 3 times for 2 --train file(s)"]),
    (["--format", "pair-tsv", "--format", "nli-jsonl", "--format", "tsv"], ["--format"]),
    (["--stage-epochs", "1,2"], ["--stage-epochs", "--staged runs only"]),
    (["--staged", "--stage-epochs", "1"], ["--stage-epochs", "gives 1 stage(s) for 2"]),
    # "²".isdigit() is True but int() refuses it: a usage error, not a traceback.
    (["--staged", "--stage-epochs", "1,\u00b2"], ["--stage-epochs", "'1,²' should be positive "
                                                                 "integers"]),
    (["--staged", "--sampling", "round-robin"], ["--sampling"]),
    # Recorded and ignored before: the stages trained --stage-epochs' counts.
    (["--staged", "--stage-epochs", "1,2", "--epochs", "3"],
     ["--epochs", "each stage's epochs from --stage-epochs (1,2)"]),
])
def test_mismatched_per_train_options_are_one_line_errors(cli, two_files, tmp_path, options,
                                                          fragments):
    sts, nli = two_files
    result = cli("train", "--train", sts, "--train", nli, *options, "--output", tmp_path / "r")
    assert_one_line_error(result, *fragments)


def test_the_staged_recipe_without_train_files_asks_for_them(cli, tmp_path):
    # Not "--format: given 2 times for 0 --train file(s)": the recipe's two formats
    # would be counted against files never given.
    result = cli("train", "--recipe", "nli-infonce-then-sts-cosent", "--output", tmp_path / "r")
    assert_one_line_error(result, "--recipe nli-infonce-then-sts-cosent needs --train")


def test_the_staged_recipe_refuses_an_epochs_it_would_ignore(cli, two_files, tmp_path):
    sts, nli = two_files
    result = cli("train", "--recipe", "nli-infonce-then-sts-cosent", "--train", nli,
                 "--train", sts, "--epochs", 2, "--output", tmp_path / "r")
    assert_one_line_error(result, "--epochs", "--stage-epochs (1,4)")
    assert not (tmp_path / "r").exists()


def test_the_staged_recipe_counts_its_train_files(cli, two_files, tmp_path):
    # Not "--format: given 2 times for 1 --train file(s)": the user gave no --format.
    sts, nli = two_files
    for files in ([nli], [nli, sts, sts]):
        options = [word for path in files for word in ("--train", path)]
        result = cli("train", "--recipe", "nli-infonce-then-sts-cosent", *options,
                     "--output", tmp_path / "r")
        assert_one_line_error(result, "--train", "trains 2 files, one per stage",
                              f"got {len(files)}")


def test_sampling_needs_several_files(cli, small_train, tmp_path):
    result = cli("train", "--train", small_train, "--sampling", "proportional",
                 "--output", tmp_path / "r")
    assert_one_line_error(result, "--sampling", "needs several --train files")


def test_a_later_stages_bad_rows_fail_before_the_first_stage_trains(cli, tiny_checkpoint,
                                                                    small_dev, tmp_path):
    # cosine-mse's score range was checked only when its stage was built, after
    # stage 1 had trained (a staged run cannot be resumed).
    rows = demo_rows("train")[:16]
    good = write_pair_tsv(tmp_path / "good.tsv", rows)
    bad = write_pair_tsv(tmp_path / "bad.tsv", rows[:2] + [(rows[2][0], rows[2][1], 7.0)]
                         + rows[3:])
    result = cli("train", "--backbone", tiny_checkpoint, "--train", good, "--train", bad,
                 "--loss", "cosent", "--loss", "cosine-mse", "--staged", "--dev", small_dev,
                 *SMALL, "--output", tmp_path / "run")
    assert_one_line_error(result, "bad.tsv", "cosine-mse maps scores 0-5", "row 3: 7")
    assert "stage 1" not in result.stderr and "Epoch" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_staged_recipe_trains_both_stages_in_one_run(cli, tiny_checkpoint, two_files, small_dev,
                                                     tmp_path):
    sts, nli = two_files
    output = tmp_path / "staged"
    result = cli("train", "--recipe", "nli-infonce-then-sts-cosent", "--backbone",
                 tiny_checkpoint, "--train", nli, "--train", sts, "--dev", small_dev,
                 "--stage-epochs", "1,2", "--batch-size", 4, "--max-length", 16,
                 "--epochs", 4, "--output", output)
    assert result.exit_code == 0, result.output
    # The default --epochs typed (as a replay command spells it) passes, but is not
    # read: the stages train 1 and 2 epochs below, and the run says so.
    assert ("--epochs 4 is not read by a --staged run: its stages train 1,2 epochs "
            "(--stage-epochs)") in result.stderr
    with open(output / "metrics.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["epoch"], r["stage"], r["stage_loss"]) for r in rows] == [
        ("1", "1", "infonce"), ("2", "2", "cosent"), ("3", "2", "cosent")]
    assert all(r["dev_spearman"] not in ("", None) for r in rows)
    assert (output / "training.png").is_file()
    for when in ("dev before training", "dev"):  # announced, as a single run's
        assert f"{when}: encoding " in result.stderr
    # Stage 1's rows are NLI triplets, which leave pairs out, as a single run says.
    assert (f"stage 1: infonce on 8 (premise, entailment, contradiction) triplets ({nli}; "
            "neutral pairs and premises lacking") in result.stderr
    # Each stage's fit prints its epochs and bar on stderr; stdout holds the table
    # (Keras numbers epochs only when a fit has several: stage 2's.)
    assert "Epoch 2/2" in result.stderr and "Epoch" not in result.stdout
    assert result.stderr.count("/step") >= 2 and "/step" not in result.stdout
    results = json.loads((output / "results.json").read_text())
    assert [(s["loss"], s["format"], s["epochs"]) for s in results["stages"]] == [
        ("infonce", "nli-jsonl", 1), ("cosent", "pair-tsv", 2)]
    record = json.loads((output / "config.json").read_text())
    assert record["config"]["staged"] is True and record["config"]["eval_format"] == "pair-tsv"
    replayed = replayed_options(record["command"])
    assert replayed["staged"] is True and replayed["stage_epochs"] == "1,2"
    assert replayed["loss"] == ["infonce", "cosent"]


def test_files_trained_without_dev_say_nothing_was_evaluated(cli, tiny_checkpoint, two_files,
                                                              tmp_path):
    # results.json holds train_tasks, which printed an empty table and no note.
    sts, nli = two_files
    args = ["train", "--backbone", tiny_checkpoint, "--train", sts, "--train", nli,
            "--loss", "cosent", "--loss", "infonce", "--format", "pair-tsv",
            "--format", "nli-jsonl", "--batch-size", 4, "--max-length", 16,
            "--output", tmp_path / "r"]
    result = cli(*args)
    assert result.exit_code == 0, result.output
    assert "no --dev or --test given: nothing evaluated" in result.stderr
    assert result.stdout.strip() == ""
    reused = cli(*args)
    assert "already holds this run" in reused.stderr
    assert "(nothing was evaluated)" in reused.stdout


def test_staged_run_trains_under_the_named_policy_and_saves_in_float32(
    cli, tiny_checkpoint, two_files, small_dev, tmp_path, monkeypatch
):
    import keras

    from recipes import staged_training

    policies = []
    build = staged_training.build

    def recording_build(*args, **kwargs):
        policies.append(keras.mixed_precision.global_policy().name)
        return build(*args, **kwargs)

    monkeypatch.setattr(staged_training, "build", recording_build)
    sts, nli = two_files
    output = tmp_path / "staged-bf16"
    result = cli("train", "--recipe", "nli-infonce-then-sts-cosent", "--backbone",
                 tiny_checkpoint, "--train", nli, "--train", sts, "--dev", small_dev,
                 "--stage-epochs", "1,1", "--batch-size", 4, "--max-length", 16,
                 "--mixed-precision", "mixed_bfloat16", "--output", output)
    assert result.exit_code == 0, result.output
    assert "is not read by a --staged run" not in result.stderr  # --epochs not typed
    # Both stages build under bfloat16 (not float16, which does not train on CPU XLA).
    assert policies == ["mixed_bfloat16", "mixed_bfloat16"]
    assert keras.mixed_precision.global_policy().name == "float32"
    rows = json.loads((output / "metrics.json").read_text())
    assert len(rows) == 2 and all(np.isfinite(row["loss"]) for row in rows), rows
    encoder = keras.saving.load_model(output / "encoder.keras")
    assert encoder.backbone.dtype_policy.name == "float32"
    assert encoder.encode(["a cat", "the dog ran"]).dtype == np.float32


@pytest.mark.slow
def test_a_killed_multi_dataset_run_resumes_to_the_uninterrupted_weights(
    cli, tiny_checkpoint, tmp_path
):
    from tests.recipes.test_resume import EPOCHS
    from tests.recipes.test_resume import _kill_after_first_epoch
    from tests.recipes.test_resume import _metrics
    from tests.recipes.test_resume import _train_args
    from tests.recipes.test_resume import _weights

    rows = demo_rows("train")
    sts = write_pair_tsv(tmp_path / "sts.tsv", rows[:64])
    nli = write_nli(tmp_path / "nli.jsonl", rows[64:96])
    dev = write_pair_tsv(tmp_path / "dev.tsv", demo_rows("dev")[:24])
    extra = ["--train", nli, "--format", "pair-tsv", "--format", "nli-jsonl", "--loss", "cosent",
             "--loss", "infonce", "--eval-format", "pair-tsv"]
    reference = tmp_path / "reference"
    result = cli(*_train_args(tiny_checkpoint, sts, dev, reference, *extra))
    assert result.exit_code == 0, result.output
    output = tmp_path / "run"
    _, saved = _kill_after_first_epoch(_train_args(tiny_checkpoint, sts, dev, output, *extra),
                                       tmp_path / ".run.resume")
    assert 1 <= saved < EPOCHS
    resumed = cli(*_train_args(tiny_checkpoint, sts, dev, output, *extra, "--resume"))
    assert resumed.exit_code == 0, resumed.output
    assert "resuming the interrupted run" in resumed.output
    for e, g in zip(_weights(reference / "encoder.keras"), _weights(output / "encoder.keras")):
        np.testing.assert_allclose(g, e, atol=1e-6, rtol=0)
    for r, e in zip(_metrics(output), _metrics(reference)):
        np.testing.assert_allclose([r[k] for k in r], [e[k] for k in e], rtol=1e-5)


def test_a_head_objective_is_refused_before_training_where_it_cannot_run(cli, tiny_checkpoint,
                                                                         two_files, tmp_path):
    # sbert-softmax trains a classifier head on the pair embeddings: no Matryoshka
    # truncation or cached gradient of a loss on them, and no batch-by-batch mixing
    # with other files' losses. Each is one line, before any stage trains.
    sts, _ = two_files
    output = tmp_path / "run"
    for options, fragments in (
            (["--train", sts, "--loss", "sbert-softmax", "--matryoshka-dims", 8],
             ("--matryoshka-dims", "--loss sbert-softmax trains a classifier head")),
            (["--train", sts, "--loss", "sbert-softmax", "--mini-batch-size", 2],
             ("--mini-batch-size", "--loss sbert-softmax trains a classifier head")),
            (["--train", sts, "--train", sts, "--loss", "cosent", "--loss", "sbert-softmax",
              "--staged", "--matryoshka-dims", 8],
             ("--matryoshka-dims", "sbert-softmax trains a classifier head")),
            (["--train", sts, "--train", sts, "--loss", "sbert-softmax", "--loss", "cosent"],
             ("--loss", "sbert-softmax trains a classifier head", "--staged"))):
        result = cli("train", "--backbone", tiny_checkpoint, *options, *SMALL,
                     "--output", output)
        assert_one_line_error(result, *fragments)
        assert not output.exists()


def test_single_dataset_options_are_refused_with_several_files(cli, two_files, tmp_path):
    # Each names its option, in a sentence ("Invalid value for --keep-best: is not
    # supported ..." read as a fragment).
    sts, _ = two_files
    output = tmp_path / "run"
    for options, flag, staged in (
            (["--devices", 2, "--batch-size", 8], "--devices", ""),
            (["--queue-size", 8, "--loss", "infonce"], "--queue-size", ""),
            # Not "give --train-retrieval", which is then refused as well.
            (["--dev-retrieval-holdout", 5], "--dev-retrieval-holdout", ""),
            (["--staged", "--keep-best", "dev_spearman", "--dev", sts], "--keep-best",
             " and --staged")):
        result = cli("train", "--train", sts, "--train", sts, *options, "--output", output)
        assert_one_line_error(
            result, f"Invalid value for {flag}: not supported with several --train "
                    f"files{staged}; it needs a run of one --train file")
        assert not output.exists()


def test_a_training_file_too_small_for_its_loss_is_a_one_line_error(cli, tiny_checkpoint,
                                                                   tmp_path):
    one = write_pair_tsv(tmp_path / "one.tsv", demo_rows("train")[:1])
    many = write_pair_tsv(tmp_path / "many.tsv", demo_rows("train")[:16])
    output = tmp_path / "run"
    # Staged too, before its first stage trains (a staged run cannot be resumed).
    for files, extra in (([one], []), ([many, one], []), ([many, one], ["--staged"])):
        options = [word for path in files for word in ("--train", path)]
        result = cli("train", "--backbone", tiny_checkpoint, *options, *extra, *SMALL,
                     "--output", output)
        assert_one_line_error(result, f"{one}: 1 row(s) for objective 'cosent'")
        assert "stage 1" not in result.output
        assert not output.exists()


@pytest.mark.parametrize("mode", [["--sampling", "proportional"], ["--staged"]])
def test_max_grad_norm_reaches_every_stage_and_interleaved_task(cli, tiny_checkpoint, two_files,
                                                                tmp_path, monkeypatch, mode):
    import keras_cosent.training.builder as builder
    import keras_cosent.training.multi_task as multi_task

    norms = []

    def recording(real):
        def build(*args, **kwargs):
            setup = real(*args, **kwargs)
            norms.append(setup.optimizer.global_clipnorm)
            return setup
        return build

    monkeypatch.setattr("recipes.staged_training.build", recording(builder.build))
    # recipes.multi_dataset imports it from the package when it builds.
    monkeypatch.setattr("keras_cosent.training.build_multi", recording(multi_task.build_multi))
    sts, nli = two_files
    result = cli("train", "--backbone", tiny_checkpoint, "--train", sts, "--train", nli,
                 "--format", "pair-tsv", "--format", "nli-jsonl", "--loss", "cosent",
                 "--loss", "infonce", *mode, *SMALL, "--max-grad-norm", 0.25,
                 "--output", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert norms == ([0.25, 0.25] if "--staged" in mode else [0.25])


def test_a_staged_run_trains_the_weights_of_plain_runs_chained(cli, tiny_checkpoint, two_files,
                                                                 tmp_path):
    # Stage 2 drew its dropout masks from where stage 1's ended (the global seed,
    # and on JAX and TensorFlow the layers' generator states), where a plain run of
    # it starts afresh: the tiny BERT has dropout, so the two differed.
    import keras

    import keras_cosent  # noqa: F401 (registers the encoder's classes for load_model)

    sts, nli = two_files
    common = ["--batch-size", 4, "--max-length", 16, "--lr", "1e-3", "--seed", 7]
    staged = tmp_path / "staged"
    result = cli("train", "--staged", "--backbone", tiny_checkpoint, "--train", nli,
                 "--train", sts, "--format", "nli-jsonl", "--format", "pair-tsv", "--loss",
                 "infonce", "--loss", "cosent", "--stage-epochs", "1,1", *common,
                 "--output", staged)
    assert result.exit_code == 0, result.output
    backbone = tiny_checkpoint
    for name, data, data_format, loss in (("one", nli, "nli-jsonl", "infonce"),
                                          ("two", sts, "pair-tsv", "cosent")):
        result = cli("train", "--backbone", backbone, "--train", data, "--format",
                     data_format, "--loss", loss, "--epochs", 1, *common,
                     "--output", tmp_path / name)
        assert result.exit_code == 0, result.output
        backbone = tmp_path / name
    weights = [keras.saving.load_model(str(path / "encoder.keras")).get_weights()
               for path in (staged, tmp_path / "two")]
    for ours, chained in zip(*weights):
        np.testing.assert_allclose(ours, chained, rtol=0, atol=1e-6)
