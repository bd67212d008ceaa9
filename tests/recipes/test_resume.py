"""`train --resume`: a run killed mid-training ends with the uninterrupted run's weights.

The interrupted run is a real `keras-cosent train` process, killed with SIGKILL
(no clean-up runs) as soon as Keras' backup records a finished epoch; the
reference is the same command left to finish. The weights and the per-epoch
metrics of the resumed run must equal the reference's.

The killed process costs a second start-up of Keras and its backend, so it runs
by default on PyTorch (the quickest to start) and on TensorFlow and JAX with
`-m slow`; `tests/callbacks/test_resumable_training.py` checks the same
equivalence in-process (by default on PyTorch, like this test), and the restore
of the dropout seed states without a fit on every backend.
"""

import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from tests.conftest import REPO_ROOT
from tests.recipes.conftest import demo_rows
from tests.recipes.conftest import write_pair_tsv

EPOCHS = 3


def _train_args(checkpoint, train, dev, output, *extra, epochs=EPOCHS):
    return [
        "train", "--backbone", checkpoint, "--train", train, "--dev", dev,
        "--epochs", epochs, "--batch-size", 8, "--max-length", 16, "--lr", 1e-3,
        "--output", output, *extra,
    ]


def _backup_epoch(backup):
    """Epochs Keras' backup in `backup` records as finished (0 when none yet)."""
    try:
        with open(backup / "training_metadata.json", encoding="utf-8") as f:
            return json.load(f)["epoch"]
    except (OSError, ValueError, KeyError):
        return 0


def _kill_after_first_epoch(args, backup, sig=signal.SIGKILL, stderr_path=None):
    """Runs `keras-cosent ARGS` in a child process and sends it `sig` (SIGKILL) after an
    epoch is saved; its stderr goes to `stderr_path`, if given."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    command = [sys.executable, "-m", "recipes", "--backend", keras.backend.backend()]
    stderr = subprocess.DEVNULL if stderr_path is None else open(stderr_path, "wb")
    process = subprocess.Popen(
        command + [str(a) for a in args], env=env, cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL, stderr=stderr,
    )
    if stderr_path is not None:
        stderr.close()  # the child holds its own copy
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        if _backup_epoch(backup) >= 1:
            process.send_signal(sig)
            break
        time.sleep(0.01)
    process.wait()
    return process.returncode, _backup_epoch(backup)


def _weights(path):
    from keras_cosent.models import SentenceEncoder  # noqa: F401 (registers the class)

    model = keras.saving.load_model(path)
    return [keras.ops.convert_to_numpy(w) for w in model.weights]


def _metrics(run):
    with open(run / "metrics.json", encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture
def data(tmp_path):
    # 96 pairs, 12 steps per epoch: the kill lands well before the last epoch.
    return (
        write_pair_tsv(tmp_path / "train.tsv", demo_rows("train")[:96]),
        write_pair_tsv(tmp_path / "dev.tsv", demo_rows("dev")[:24]),
    )


@(pytest.mark.slow if keras.backend.backend() != "torch" else lambda test: test)
def test_a_killed_run_resumes_to_the_weights_of_an_uninterrupted_run(
    cli, tiny_checkpoint, data, tmp_path
):
    train, dev = data
    reference = tmp_path / "reference"
    result = cli(*_train_args(tiny_checkpoint, train, dev, reference))
    assert result.exit_code == 0, result.output

    output = tmp_path / "run"
    backup = tmp_path / ".run.resume"
    returncode, saved_epochs = _kill_after_first_epoch(
        _train_args(tiny_checkpoint, train, dev, output), backup
    )
    assert returncode == -signal.SIGKILL, "the run finished before it could be interrupted"
    assert 1 <= saved_epochs < EPOCHS
    assert not output.exists()

    # Starting over it without --resume is refused; the state is kept.
    refused = cli(*_train_args(tiny_checkpoint, train, dev, output))
    assert refused.exit_code != 0
    assert "--resume" in refused.output and "--overwrite" in refused.output
    # Resuming with different options is refused, naming what differs.
    different = cli(*_train_args(tiny_checkpoint, train, dev, output, "--resume", "--seed", 7))
    assert different.exit_code != 0
    assert "differs in seed" in different.output
    # --overwrite would discard what --resume asks to continue: the pair is refused.
    both = cli(*_train_args(tiny_checkpoint, train, dev, output, "--resume", "--overwrite"))
    assert both.exit_code == 2 and "pass one of them" in both.output
    assert _backup_epoch(backup) == saved_epochs and not output.exists()

    resumed = cli(*_train_args(tiny_checkpoint, train, dev, output, "--resume"))
    assert resumed.exit_code == 0, resumed.output
    assert "resuming the interrupted run" in resumed.output

    expected, got = _weights(reference / "encoder.keras"), _weights(output / "encoder.keras")
    assert len(expected) == len(got)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, atol=1e-6, rtol=0)
    # Every epoch's row is there, those before the interruption included.
    reference_rows, rows = _metrics(reference), _metrics(output)
    assert [r["epoch"] for r in rows] == list(range(1, EPOCHS + 1))
    for r, e in zip(rows, reference_rows):
        assert r.keys() == e.keys()
        np.testing.assert_allclose([r[k] for k in r], [e[k] for k in e], rtol=1e-5)
    # The backup and the killed run's staging directory are gone.
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    # The stored command does not carry --resume: replaying it is a plain run.
    with open(output / "config.json", encoding="utf-8") as f:
        assert "--resume" not in json.load(f)["command"]


def test_a_run_interrupted_before_its_first_epoch_ended_says_that_nothing_is_kept(
        cli, tiny_checkpoint, small_train, tmp_path, monkeypatch):
    # It said only "Aborted!", where README promises that a stopped run says so.
    import recipes.training

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(recipes.training, "train_encoder", interrupted)
    result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train,
                 "--epochs", 1, "--batch-size", 8, "--output", tmp_path / "run")
    assert result.exit_code != 0
    said = ("interrupted, before its first epoch ended: nothing is kept, and the same "
            "command trains from the start")
    assert said in result.output
    assert not (tmp_path / "run").exists() and not (tmp_path / ".run.resume").exists()

    # A signal that came and ended the run in another error (one that landed in
    # the end-of-epoch scoring on JAX) says so too: it said only "Aborted!".
    from recipes import interrupts

    def signalled(*args, **kwargs):
        interrupts.RECEIVED.append(15)
        raise RuntimeError("stopped while waiting for a computation")

    monkeypatch.setattr(recipes.training, "train_encoder", signalled)
    try:
        result = cli("train", "--backbone", tiny_checkpoint, "--train", small_train,
                     "--epochs", 1, "--batch-size", 8, "--output", tmp_path / "run")
    finally:
        interrupts.RECEIVED.clear()
    assert result.exit_code != 0 and said in result.output


def test_resume_without_an_interrupted_run_trains_from_the_start(
    cli, tiny_checkpoint, small_train, small_dev, tmp_path
):
    output = tmp_path / "run"
    result = cli(
        "train", "--backbone", tiny_checkpoint, "--train", small_train, "--dev", small_dev,
        "--epochs", 1, "--batch-size", 8, "--max-length", 16, "--output", output, "--resume",
    )
    assert result.exit_code == 0, result.output
    assert "no interrupted run" in result.output
    assert (output / "encoder.keras").is_file()
    assert not (tmp_path / ".run.resume").exists()


def test_overwrite_discards_an_interrupted_run(cli, tiny_checkpoint, small_train, small_dev,
                                               tmp_path):
    stale = tmp_path / ".run.resume"
    stale.mkdir()
    (stale / "config.json").write_text(json.dumps({"config": {"seed": 0}}))
    (stale / "latest.weights.h5").write_text("from an older run")
    args = ["train", "--backbone", tiny_checkpoint, "--train", small_train, "--dev", small_dev,
            "--epochs", 1, "--batch-size", 8, "--max-length", 16, "--output", tmp_path / "run"]
    refused = cli(*args)
    assert refused.exit_code != 0 and "interrupted run" in refused.output
    assert (stale / "latest.weights.h5").is_file()
    result = cli(*args, "--overwrite")
    assert result.exit_code == 0, result.output
    assert not stale.exists()


@(pytest.mark.slow if keras.backend.backend() != "torch" else lambda test: test)
def test_a_terminated_run_cleans_up_as_an_interrupted_one(tiny_checkpoint, data, tmp_path):
    # SIGTERM (timeout, docker stop, a cancelled job) is Ctrl-C: the clean-up runs,
    # nothing half-written stays beside the output, the saved epoch stays resumable,
    # and the exit status says it was terminated (128 + 15).
    train, dev = data
    output = tmp_path / "run"
    backup = tmp_path / ".run.resume"
    # Many epochs, none compared with an uninterrupted run: with 3, a poll that lagged
    # under load signalled after the last epoch, once the finished fit had deleted
    # its backup, and the run ended as terminated with nothing left to resume.
    epochs = 20
    log = tmp_path / "stderr.log"
    returncode, saved_epochs = _kill_after_first_epoch(
        _train_args(tiny_checkpoint, train, dev, output, epochs=epochs), backup,
        sig=signal.SIGTERM, stderr_path=log)
    assert returncode == 128 + signal.SIGTERM, "the run finished before it could be stopped"
    assert 1 <= saved_epochs < epochs
    # It says how to continue, where before it said only "Aborted!".
    assert (f"interrupted; the last finished epoch is kept in {backup}: the same command "
            "with --resume continues from it") in log.read_text(encoding="utf-8")
    assert not output.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".run")) == [
        ".run.resume"]


@(pytest.mark.slow if keras.backend.backend() != "torch" else lambda test: test)
def test_an_interrupted_overwrite_resumes_with_the_same_command_plus_resume(
    cli, tiny_checkpoint, data, tmp_path
):
    # A finished run at --output, then another run with --overwrite, killed after an
    # epoch: the same command plus --resume (no --overwrite, which would discard the
    # state) continues it and replaces the first run, as the uninterrupted one would.
    train, dev = data
    output = tmp_path / "run"
    first = cli(*_train_args(tiny_checkpoint, train, dev, output, "--seed", 1))
    assert first.exit_code == 0, first.output
    args = _train_args(tiny_checkpoint, train, dev, output, "--seed", 2)
    returncode, saved_epochs = _kill_after_first_epoch([*args, "--overwrite"],
                                                       tmp_path / ".run.resume")
    assert returncode == -signal.SIGKILL and 1 <= saved_epochs < EPOCHS
    resumed = cli(*args, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "resuming the interrupted run" in resumed.output
    with open(output / "config.json", encoding="utf-8") as f:
        assert json.load(f)["config"]["seed"] == 2
    assert not (tmp_path / ".run.resume").exists()
