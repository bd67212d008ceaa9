"""Version numbering, atomic replacement and argument checks of `export_saved_model`.

These tests swap the (slow) SavedModel writer for a stub that writes a marker
file, so they check the directory logic alone and run in milliseconds; the real
export is covered by test_saved_model_export.py.
"""

import os
import subprocess
import sys

import pytest

from keras_cosent.export import export_saved_model
from keras_cosent.export import saved_model_export
from tests.backends import once_in


@pytest.fixture
def stub_writer(monkeypatch):
    calls = []

    def write(encoder_or_path, export_dir, max_length, string_signatures, truncate_dim=None):
        calls.append((encoder_or_path, export_dir, max_length, string_signatures))
        # The writer runs while the final directory does not exist yet.
        assert os.path.basename(os.path.dirname(export_dir)).startswith(".tmp-export-")
        os.makedirs(os.path.join(export_dir, "variables"))
        with open(os.path.join(export_dir, "saved_model.pb"), "w") as f:
            f.write(str(encoder_or_path))

    monkeypatch.setattr(saved_model_export, "_write_export", write)
    return calls


def _marker(version_dir):
    with open(os.path.join(version_dir, "saved_model.pb")) as f:
        return f.read()


def test_versions_count_up_from_one_past_the_highest(tmp_path, stub_writer):
    base = str(tmp_path / "model")
    assert export_saved_model("a", base) == os.path.join(base, "1")
    assert export_saved_model("b", base) == os.path.join(base, "2")
    # Gaps and non-numeric entries: next is max + 1, the rest is ignored.
    os.makedirs(os.path.join(base, "7"))
    os.makedirs(os.path.join(base, "notes"))
    assert export_saved_model("c", base) == os.path.join(base, "8")
    assert sorted(os.listdir(base)) == ["1", "2", "7", "8", "notes"]
    assert _marker(os.path.join(base, "8")) == "c"


def test_explicit_version_and_overwrite(tmp_path, stub_writer):
    base = str(tmp_path)
    assert export_saved_model("old", base, version=3) == os.path.join(base, "3")
    with pytest.raises(FileExistsError, match=os.path.join(base, "3")):
        export_saved_model("new", base, version="3")
    assert _marker(os.path.join(base, "3")) == "old"
    assert len(stub_writer) == 1  # refused before any export work
    assert export_saved_model("new", base, version=3, overwrite=True) == os.path.join(base, "3")
    assert _marker(os.path.join(base, "3")) == "new"
    assert os.listdir(base) == ["3"]
    # A NumPy integer is an int, as everywhere in the API.
    import numpy as np

    assert export_saved_model("np", base, version=np.int64(5)) == os.path.join(base, "5")


def test_failed_export_leaves_nothing_behind(tmp_path, monkeypatch):
    def broken(encoder_or_path, export_dir, max_length, string_signatures, truncate_dim=None):
        os.makedirs(export_dir)
        raise RuntimeError("tracing failed")

    monkeypatch.setattr(saved_model_export, "_write_export", broken)
    with pytest.raises(RuntimeError, match="tracing failed"):
        export_saved_model("x", str(tmp_path))
    assert os.listdir(tmp_path) == []


# 2**63: TF Serving reads version names as int64, and would never serve it.
@pytest.mark.parametrize("bad", [-1, "v1", 1.5, True, 2**63, str(2**63)])
def test_bad_version(tmp_path, stub_writer, bad):
    with pytest.raises(ValueError, match=f"`version`={bad!r}"):
        export_saved_model("x", str(tmp_path), version=bad)


def test_base_dir_that_is_a_file(tmp_path, stub_writer):
    path = tmp_path / "file"
    path.write_text("")
    with pytest.raises(NotADirectoryError, match=str(path)):
        export_saved_model("x", str(path))


def test_encoder_path_resolution(tmp_path):
    resolve = saved_model_export._resolve_encoder_file
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(FileNotFoundError, match="No encoder `.keras` file or training output"):
        resolve(run)
    (run / "best.keras").write_text("")
    assert resolve(run) == str(run / "best.keras")
    (run / "last.keras").write_text("")
    with pytest.raises(ValueError, match=r"\['best.keras', 'last.keras'\]"):
        resolve(run)
    (run / "encoder.keras").write_text("")
    assert resolve(str(run)) == str(run / "encoder.keras")
    assert resolve(run / "last.keras") == str(run / "last.keras")
    (run / "weights.h5").write_text("")
    with pytest.raises(ValueError, match="weights.h5"):
        resolve(run / "weights.h5")
    with pytest.raises(FileNotFoundError, match="missing"):
        resolve(run / "missing")


@once_in("tensorflow", "the worker is a KERAS_BACKEND=tensorflow child process")
def test_worker_errors_are_passed_through(tmp_path):
    # A real worker process that fails (on its arguments, to stay fast: no
    # TensorFlow import); its exit code and stderr must reach the caller.
    encoder_file = str(tmp_path / "encoder.keras")
    with pytest.raises(RuntimeError) as info:
        saved_model_export._export_in_subprocess(encoder_file, str(tmp_path / "out"), "twelve")
    message = str(info.value)
    assert encoder_file in message and "TensorFlow backend failed" in message
    assert "exit code 2" in message and "invalid int value: 'twelve'" in message


def test_worker_command_carries_every_option(tmp_path, monkeypatch):
    seen = {}

    def fake_run(command, env, **kwargs):
        seen.update(command=command, env=env)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(saved_model_export.subprocess, "run", fake_run)
    saved_model_export._export_in_subprocess("/m/encoder.keras", "/out", 6, False, 4)
    command = seen["command"]
    assert command[1:3] == ["-m", "keras_cosent.export._export_worker"]
    assert command[3:] == ["--encoder", "/m/encoder.keras", "--output", "/out",
                           "--max-length", "6", "--no-string-signatures",
                           "--truncate-dim", "4"]  # fmt: skip
    assert seen["env"]["KERAS_BACKEND"] == "tensorflow"
    # The worker imports the same keras_cosent as the caller, even from a checkout.
    root = os.path.dirname(os.path.dirname(os.path.abspath(saved_model_export.__file__)))
    assert seen["env"]["PYTHONPATH"].split(os.pathsep)[0] == os.path.dirname(root)


@once_in("tensorflow", "a KERAS_BACKEND=jax child process")
def test_importing_export_does_not_need_tensorflow():
    # TensorFlow blocked outright: the package and this module must still import.
    code = (
        "import sys; sys.modules['tensorflow'] = None; sys.modules['tensorflow_text'] = None\n"
        "import keras_cosent.export as e\n"
        "assert callable(e.export_saved_model) and callable(e.audit_saved_model)\n"
    )
    env = dict(os.environ, KERAS_BACKEND="jax")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
