"""The --output directory: refusing a different run, reusing an identical one, atomic writes."""

import json

import pytest

from recipes.errors import CliError
from recipes.run_directory import CONFIG_FILE
from recipes.run_directory import RunDirectory

CONFIG = {"loss": "cosent", "epochs": 1, "output": "/somewhere/run"}


def make_run(path, config):
    path.mkdir()
    (path / CONFIG_FILE).write_text(json.dumps({"command": "x", "config": config}))
    (path / "encoder.keras").write_text("weights")


def test_new_and_empty_directories_are_new(tmp_path):
    assert RunDirectory(tmp_path / "run").check(CONFIG) == "new"
    (tmp_path / "empty").mkdir()
    assert RunDirectory(tmp_path / "empty").check(CONFIG) == "new"


def test_identical_run_is_reused_even_if_moved(tmp_path):
    make_run(tmp_path / "run", dict(CONFIG, output="/elsewhere"))
    assert RunDirectory(tmp_path / "run").check(CONFIG) == "same"


def test_different_run_is_refused_naming_the_differences(tmp_path):
    make_run(tmp_path / "run", dict(CONFIG, epochs=3))
    with pytest.raises(CliError, match="different run .*epochs"):
        RunDirectory(tmp_path / "run").check(CONFIG)
    assert RunDirectory(tmp_path / "run", overwrite=True).check(CONFIG) == "new"


def test_directory_of_other_files_is_refused_even_with_overwrite(tmp_path):
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_text("meow")
    for overwrite in (False, True):
        with pytest.raises(CliError, match="holds no keras-cosent run"):
            RunDirectory(tmp_path / "photos", overwrite=overwrite).check(CONFIG)
    (tmp_path / "file").write_text("x")
    with pytest.raises(CliError, match="not a directory"):
        RunDirectory(tmp_path / "file").check(CONFIG)


def test_staging_publishes_on_success(tmp_path):
    run = RunDirectory(tmp_path / "runs" / "a")
    with run.staging() as staging:
        (staging / "config.json").write_text("{}")
        assert not run.path.exists()
    assert (run.path / "config.json").is_file()
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["a"]


def test_staging_leaves_nothing_on_failure(tmp_path):
    run = RunDirectory(tmp_path / "a")
    with pytest.raises(RuntimeError):
        with run.staging() as staging:
            (staging / "half.bin").write_text("x")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_overwrite_replaces_the_old_run(tmp_path):
    make_run(tmp_path / "run", dict(CONFIG, epochs=3))
    run = RunDirectory(tmp_path / "run", overwrite=True)
    with run.staging() as staging:
        (staging / "new.txt").write_text("new")
    assert sorted(p.name for p in run.path.iterdir()) == ["new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_a_failed_overwrite_keeps_the_old_run(tmp_path):
    make_run(tmp_path / "run", CONFIG)
    run = RunDirectory(tmp_path / "run", overwrite=True)
    with pytest.raises(KeyboardInterrupt):
        with run.staging():
            raise KeyboardInterrupt
    assert (tmp_path / "run" / "encoder.keras").read_text() == "weights"
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_an_interrupted_staged_run_is_not_offered_resume(tmp_path):
    # Each stage is a separate fit, so --resume is refused for it: the message
    # refusing to start over its backup asked for --resume all the same.
    staged = dict(CONFIG, staged=True, stage_epochs="1,4")
    RunDirectory(tmp_path / "run").backup(staged)
    with pytest.raises(CliError, match=r"interrupted --staged run .*cannot be resumed; pass "
                                       "--overwrite") as info:
        RunDirectory(tmp_path / "run").backup(staged)
    assert "--resume" not in str(info.value)
    path, resumed = RunDirectory(tmp_path / "run", overwrite=True).backup(staged)
    assert not resumed and path.is_dir()


@pytest.mark.parametrize("overwrite", [True, False])
def test_a_killed_runs_staging_folder_goes_with_its_discarded_backup(tmp_path, overwrite):
    # A killed run leaves its backup and its staging folder; --resume removed the
    # staging folder, --overwrite (or a backup without a readable config, started
    # again) kept it for good.
    RunDirectory(tmp_path / "run").backup(CONFIG)
    stale = tmp_path / ".run.partial-x1y2"
    stale.mkdir()
    (stale / "encoder.keras").write_text("half")
    if not overwrite:
        (tmp_path / ".run.resume" / CONFIG_FILE).unlink()
    path, resumed = RunDirectory(tmp_path / "run", overwrite=overwrite).backup(CONFIG)
    assert not resumed
    assert sorted(p.name for p in tmp_path.iterdir()) == [".run.resume"]
