"""The command group itself: help texts, backend selection, error reporting."""

import os
import subprocess
import sys

import click
import keras
import numpy as np
import pytest

from recipes.cli import main
from recipes.context import BACKENDS
from recipes.errors import CliError

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMANDS = ("train", "evaluate", "encode", "mine", "export", "export-st", "check-serving")


def assert_one_line_error(result, *fragments):
    """Exit code 2, a single `Error:` line naming the problem, and no traceback."""
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), lines[0]
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def assert_error_after_notes(result, *fragments):
    """As `assert_one_line_error`, for a command that printed notes before it failed."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("Error: "), result.stderr
    assert sum(line.startswith("Error: ") for line in lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[-1], lines[-1]
    return lines[-1]


def test_importing_the_cli_does_not_import_keras():
    code = (
        "import sys, recipes.cli; "
        "loaded = [m for m in ('keras', 'keras_cosent', 'tensorflow', 'jax', 'torch') "
        "if m in sys.modules]; print(loaded)"
    )
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_commands_are_registered():
    assert set(main.commands) == set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_every_option_with_its_default(cli, command):
    result = cli(command, "--help")
    assert result.exit_code == 0, result.output
    assert "Usage: keras-cosent " + command in result.output
    for param in main.commands[command].params:
        if not isinstance(param, click.Option) or param.name == "help":
            continue
        assert param.help, f"{command} {param.opts} has no help"
        assert param.show_default, f"{command} {param.opts} does not show its default"
        assert max(param.opts, key=len) in result.output
        if param.default not in (None, False) and not param.required:
            assert "[default: " in result.output


def test_train_help_shows_the_documented_defaults(cli):
    output = " ".join(cli("train", "--help").output.split())
    for default in ("[default: cosent", "[default: 16", "[default: 2e-05", "[default: 0.1",
                    "[default: 0.01", "[default: 64", "[default: 20.0", "[default: 0.05",
                    "[default: (the checkpoint's", "[default: all-MiniLM-L6-v2", "[default: pair-tsv"):
        assert default in output


def test_group_help_lists_commands(cli):
    result = cli("--help")
    assert result.exit_code == 0
    for command in COMMANDS:
        assert command in result.output
    assert "KERAS_BACKEND" in result.output


def test_no_arguments_shows_help(cli):
    result = cli()
    assert result.exit_code == 0
    assert "Commands:" in result.output


def test_unknown_backend_is_a_one_line_error(cli):
    result = cli("--backend", "numpy", "train", "--output", "x")
    assert_one_line_error(result, "--backend", "numpy")


@pytest.mark.parametrize("command", ["train", "evaluate", "encode", "mine", "export", "check-serving"])
def test_backend_is_also_an_option_of_every_command(cli, command):
    result = cli(command, "--backend", "numpy")
    assert_one_line_error(result, "--backend", "numpy")
    assert "--backend [tensorflow|jax|torch]" in cli(command, "--help").output


def test_command_backend_wins_over_the_group_and_is_applied(cli, tmp_path):
    current = keras.backend.backend()
    other = next(b for b in BACKENDS if b != current)
    sentences = tmp_path / "s.txt"
    sentences.write_text("a sentence\n")
    # The command's --backend overrides the group's (here: the imported one).
    result = cli("--backend", current, "encode", "--backend", other, "all-MiniLM-L6-v2",
                 str(sentences), "-o", str(tmp_path / "e.npy"))
    assert_one_line_error(result, "already imported", other)
    assert not (tmp_path / "e.npy").exists()


def test_unknown_backend_from_the_environment(cli, monkeypatch, tmp_path):
    # A Keras backend keras-cosent does not run on (numpy) is refused when the
    # backend starts; --help and an explicit --backend do not depend on it.
    monkeypatch.setenv("KERAS_BACKEND", "numpy")
    assert cli("encode", "--help").exit_code == 0
    sentences = tmp_path / "s.txt"
    sentences.write_text("a sentence\n")
    result = cli("encode", "all-MiniLM-L6-v2", str(sentences), "-o", str(tmp_path / "e.npy"))
    assert_one_line_error(result, "KERAS_BACKEND is 'numpy'", "pass --backend")
    assert not (tmp_path / "e.npy").exists()
    current = keras.backend.backend()
    for args in (["--backend", current, "encode"], ["encode", "--backend", current]):
        result = cli(*args, "all-MiniLM-L6-v2", str(sentences), "-o", str(tmp_path / "e.npy"))
        assert result.exit_code == 0, result.output
        assert np.load(tmp_path / "e.npy").shape == (1, 384)
        (tmp_path / "e.npy").unlink()


def test_backend_other_than_the_imported_one_is_refused(cli, tmp_path):
    current = keras.backend.backend()
    other = next(b for b in BACKENDS if b != current)
    sentences = tmp_path / "s.txt"
    sentences.write_text("a sentence\n")
    result = cli("--backend", other, "encode", "all-MiniLM-L6-v2", sentences,
                 "-o", tmp_path / "e.npy")
    line = assert_one_line_error(result, current, other)
    assert "already imported" in line
    assert not (tmp_path / "e.npy").exists()


def test_unknown_command_and_missing_argument(cli):
    assert_one_line_error(cli("fly"), "fly")
    assert_one_line_error(cli("evaluate"), "MODEL")


def test_missing_input_file_is_a_one_line_error(cli, tmp_path):
    result = cli("train", "--train", tmp_path / "nope.tsv", "--output", tmp_path / "run")
    assert_one_line_error(result, "--train", "nope.tsv", "does not exist")
    assert not (tmp_path / "run").exists()
    result = cli("evaluate", "all-MiniLM-L6-v2", tmp_path / "nope.tsv")
    assert_one_line_error(result, "DATA", "does not exist")


def test_model_errors_name_the_option_at_fault(cli, small_train, tmp_path):
    # train's model is --backbone, not an argument MODEL.
    result = cli("train", "--backbone", "no-such-preset", "--train", small_train,
                 "--output", tmp_path / "run")
    assert_one_line_error(result, "--backbone 'no-such-preset' is not a train output directory")
    assert not (tmp_path / "run").exists()
    # The model loads; the limit asked for is beyond its 512 positions.
    sentences = tmp_path / "s.txt"
    sentences.write_text("a sentence\n")
    result = cli("encode", "all-MiniLM-L6-v2", sentences, "-o", tmp_path / "e.npy",
                 "--max-length", 100000)
    assert_one_line_error(result, "--max-length 100000: max_length 100000 exceeds", "512")


def test_user_warnings_are_one_line_each_without_source(cli, tmp_path, monkeypatch):
    import warnings

    import recipes.commands.encode as encode_command

    def warn_then_fail(stream, name):
        warnings.warn("the data look odd\nin two ways", UserWarning)
        warnings.warn("an old spelling", DeprecationWarning)
        raise encode_command.CliError("stopped here")

    monkeypatch.setattr(encode_command, "read_sentences", warn_then_fail)
    sentences = tmp_path / "s.txt"
    sentences.write_text("a sentence\n")
    # Other categories go where they went before (here pytest's record of them).
    with pytest.warns(DeprecationWarning, match="an old spelling") as caught:
        result = cli("encode", "all-MiniLM-L6-v2", sentences, "-o", tmp_path / "e.npy")
    assert not any(issubclass(w.category, UserWarning) for w in caught)
    lines = result.stderr.splitlines()
    assert lines == ["Warning: the data look odd in two ways", "Error: stopped here"]


def test_column_options_with_a_format_of_fixed_columns_are_refused(cli, small_train, tmp_path):
    from keras_cosent.training.objectives import COLUMN_FORMATS
    from recipes.options import COLUMN_FORMATS as CLI_COLUMN_FORMATS

    assert CLI_COLUMN_FORMATS == COLUMN_FORMATS  # kept apart so the CLI need not import keras
    for option, value in (("--text-columns", "foo,bar"), ("--label-column", "baz"),
                          ("--eval-label-column", "baz")):
        result = cli("train", "--train", small_train, option, value, "--output", tmp_path / "r")
        assert_one_line_error(result, option, "--format pair-tsv has fixed columns")
    assert not (tmp_path / "r").exists()


def test_queue_refusals_say_when_the_recipe_set_the_queue(cli, small_train, tmp_path):
    # The refusal named --queue-size alone, which a user of --recipe esimcse-unsup
    # never typed.
    for recipe, extra, shown in (
            ([], ["--queue-size", "8", "--loss", "cosent"], "Invalid value for --queue-size:"),
            (["--recipe", "esimcse-unsup"], ["--loss", "cosent"],
             "--queue-size (set by --recipe esimcse-unsup): adds negatives to InfoNCE"),
            (["--recipe", "esimcse-unsup"], ["--mini-batch-size", "4"],
             "--queue-size (set by --recipe esimcse-unsup): cannot be combined with "
             "--mini-batch-size"),
            (["--recipe", "esimcse-unsup", "--queue-size", "160"], ["--devices", "2"],
             "Invalid value for --queue-size: cannot be combined with --devices")):
        result = cli("train", *recipe, "--train", small_train, *extra,
                     "--output", tmp_path / "r")
        assert_one_line_error(result, shown)
    assert not (tmp_path / "r").exists()


def test_the_cli_float32_bounds_are_numpys():
    from recipes import options

    # Spelt out in recipes.options, apart from keras_cosent.utils.arguments, so that the
    # CLI need not import keras.
    assert options.FLOAT32_MAX == float(np.finfo(np.float32).max)
    assert options.FLOAT32_TINY == float(np.finfo(np.float32).tiny)
    # The smallest number float32 rounds to inf; just below it, to its maximum.
    with np.errstate(over="ignore"):
        assert np.isinf(np.float32(options.FLOAT32_OVERFLOW))
    below = np.nextafter(options.FLOAT32_OVERFLOW, 0)
    assert np.float32(below) == np.finfo(np.float32).max
    # NumPy prints float32's maximum as 3.4028235e+38: a value the options take.
    assert options.PositiveFloat().convert("3.4028235e38", None, None) == 3.4028235e38
    from keras_cosent.utils import arguments

    assert arguments.FLOAT32_OVERFLOW == options.FLOAT32_OVERFLOW
    assert arguments.check_positive_float("lr", 3.4028235e38) == 3.4028235e38
    assert arguments.check_non_negative_float("decay", 3.4028235e38) == 3.4028235e38


def test_bad_option_values_are_one_line_errors(cli, tmp_path):
    out = tmp_path / "run"
    assert_one_line_error(cli("train", "--loss", "quadruplet", "--output", out), "--loss",
                          "quadruplet")
    assert_one_line_error(cli("train", "--lr", "0", "--output", out), "--lr")
    assert_one_line_error(cli("train", "--warmup", "1.5", "--output", out), "--warmup")
    assert_one_line_error(cli("train", "--text-columns", "a,,b", "--output", out),
                          "--text-columns")
    # nan and inf pass a plain range check (every comparison with nan is false).
    for option, value in (("--lr", "nan"), ("--temperature", "nan"), ("--scale", "inf"),
                          ("--warmup", "nan"), ("--margin", "nan")):
        assert_one_line_error(cli("train", option, value, "--output", out), option,
                              "not a finite number")
    assert_one_line_error(cli("mine", "all-MiniLM-L6-v2", "--queries", __file__, "--corpus",
                              __file__, "--margin", "nan", "-o", tmp_path / "m.jsonl"),
                          "--margin", "not a finite number")
    # Beyond float32's range they were inf or 0 there: a traceback naming
    # `learning_rate` once the model had loaded, or training stopped at a nan loss
    # blamed on --lr for --weight-decay 1e39.
    for option, value, shown in (("--lr", "1e-40", "below float32's smallest normal value"),
                                 ("--lr", "1e39", "beyond float32's largest value"),
                                 ("--max-grad-norm", "1e-40", "smallest normal"),
                                 ("--temperature", "1e-39", "smallest normal"),
                                 ("--weight-decay", "1e39", "beyond float32's largest value"),
                                 ("--margin", "4e38", "beyond float32's largest value")):
        assert_one_line_error(cli("train", option, value, "--output", out), option, shown)
    assert_one_line_error(cli("train", "--seed", "-1", "--output", out), "--seed",
                          "0<=x<=4294967295")
    # Without --train the demo set would have been read in it (and --dev too).
    assert_one_line_error(cli("train", "--format", "csv", "--output", out), "--format",
                          "describes --train files, and none is given", "--eval-format")
    assert not out.exists()


def _beir_folder(path, splits):
    (path / "qrels").mkdir(parents=True)
    for split in splits:
        (path / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\nq\td\t1\n")
    return path


@pytest.mark.parametrize("case", ["train-split", "train-folder", "dev-split", "evaluate"])
def test_a_wrong_beir_folder_or_split_fails_before_the_backend_loads(tmp_path, case):
    # In a fresh process, as a user runs it: the error comes from the option
    # checks, before keras (seconds of start-up) is imported.
    beir = _beir_folder(tmp_path / "beir", ("train", "dev"))
    not_beir = tmp_path / "plain"
    not_beir.mkdir()
    out = str(tmp_path / "run")
    argv, fragments = {
        "train-split": (["train", "--train-retrieval", beir, "--train-retrieval-split", "test",
                         "--output", out], ("--train-retrieval", "no qrels/test.tsv",
                                             "its splits are dev, train")),
        "train-folder": (["train", "--train-retrieval",
                          _beir_folder(tmp_path / "no-train", ("dev", "test")), "--output", out],
                         ("has the splits dev, test", "--train-retrieval-split")),
        "dev-split": (["train", "--dev-retrieval", not_beir, "--output", out],
                      ("--dev-retrieval", "not a BEIR folder")),
        "evaluate": (["evaluate", "some-model", beir, "--task", "retrieval", "--split", "test"],
                     ("DATA", "no qrels/test.tsv")),
    }[case]
    code = (
        "import sys, recipes.cli\n"
        "try:\n    recipes.cli.main(sys.argv[1:])\n"
        "except SystemExit as exit:\n    status = exit.code\n"
        "print([m for m in ('keras', 'tensorflow', 'jax', 'torch') if m in sys.modules], "
        "status)\n"
    )
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    result = subprocess.run([sys.executable, "-c", code, *map(str, argv)], env=env,
                            capture_output=True, text=True)
    assert result.stdout.strip() == "[] 2", result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert not os.path.exists(out)


def test_a_beir_folder_with_several_splits_is_read_by_their_names(tmp_path):
    # As BEIR's own folders hold them (qrels/train.tsv, dev.tsv, test.tsv): train
    # reads train, dev selects on dev, and each choice is said.
    from recipes.commands.train import resolve_retrieval_splits

    beir = _beir_folder(tmp_path / "beir", ("train", "dev", "test"))
    notes = []
    options = {"train_retrieval": beir, "train_retrieval_split": None,
               "dev_retrieval": beir, "dev_retrieval_split": None}
    resolve_retrieval_splits(options, notes.append)
    assert (options["train_retrieval_split"], options["dev_retrieval_split"]) == ("train", "dev")
    assert notes == [
        f"--train-retrieval {beir}: reading qrels/train.tsv of its splits dev, test, train "
        "(--train-retrieval-split picks another)",
        f"--dev-retrieval {beir}: reading qrels/dev.tsv of its splits dev, test, train "
        "(--dev-retrieval-split picks another)",
    ]
    # Asked for, a split is read without a word; with no dev split, dev must be named.
    notes.clear()
    options = {"train_retrieval": beir, "train_retrieval_split": "test",
               "dev_retrieval": _beir_folder(tmp_path / "two", ("train", "test")),
               "dev_retrieval_split": None}
    with pytest.raises(CliError, match="has the splits test, train; choose one with "
                                       "--dev-retrieval-split"):
        resolve_retrieval_splits(options, notes.append)
    assert options["train_retrieval_split"] == "test" and notes == []


@pytest.mark.parametrize("loss", ["infonce", "simcse"])
def test_batch_size_too_small_for_infonce(cli, tmp_path, loss):
    result = cli("train", "--loss", loss, "--batch-size", "1", "--output", tmp_path / "run")
    assert_one_line_error(result, "--batch-size", f"--loss {loss}", "at least 2 rows")
    assert not (tmp_path / "run").exists()


def test_version(cli):
    result = cli("--version")
    assert result.exit_code == 0
    assert result.output.startswith("keras-cosent ")


def test_a_command_that_runs_tensorflow_prints_no_start_up_logs(tiny_checkpoint, tmp_path):
    # TensorFlow logs to file descriptor 2 while it loads and when it first looks
    # for CUDA ("failed call to cuInit"); a subprocess sees what a user's terminal does.
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    out = subprocess.run(
        [sys.executable, "-m", "recipes", "--backend", keras.backend.backend(), "encode",
         str(tiny_checkpoint), "-", "-o", str(tmp_path / "out.npy"), "--max-length", "16"],
        input="a cat sat\nthe dog\n", env=env, capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr
    noise = [line for line in out.stderr.splitlines()
             if any(mark in line for mark in ("I0000", "E0000", "W0000", "absl", "cuda"))]
    assert noise == [], out.stderr
