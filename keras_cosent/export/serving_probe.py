"""Loads an exported SavedModel as a server would and runs each signature once.

`audit_saved_model` reads only `saved_model.pb`: a version directory whose
variables are missing or unreadable passes it. `probe_saved_model` loads the
whole SavedModel in a fresh interpreter (TensorFlow, and TensorFlow Text when
installed, no Keras) and calls every signature on a small probe batch: sentences
(one of them empty) where it takes strings, token ids `[CLS]`-like small ids
where it takes ids. An embedding output must be finite and of unit length, a
similarity finite and within [-1, 1].
"""

import json
import os
import subprocess
import sys

# The probe batch: two rows, the second shorter (padded) for token ids.
_PROBE_SCRIPT = r"""
import glob, importlib.util, json, os, sys
import numpy as np
# A server's process: TensorFlow and TensorFlow Text's kernels, no Keras (TF >= 2.16
# imports an installed keras eagerly, and importing tensorflow_text pulls it in).
for name in ("keras", "keras_hub", "keras_cosent", "tf_keras", "tensorflow_text"):
    sys.modules[name] = None
import tensorflow as tf
sys.modules.pop("tensorflow_text")
spec = importlib.util.find_spec("tensorflow_text")
if spec is not None:
    root = list(spec.submodule_search_locations)[0]
    for path in sorted(glob.glob(os.path.join(root, "python", "*", "_*.so"))):
        tf.load_op_library(path)
export_dir = sys.argv[1]
try:
    loaded = tf.saved_model.load(export_dir)
except Exception as error:  # what a server reports when it cannot load the model
    json.dump({"loaded": False, "error": f"{type(error).__name__}: {error}"[:600]}, sys.stdout)
    sys.exit(0)
sentences = ["A probe sentence for the server.", ""]
ids = {"token_ids": [[2, 5, 6, 3], [2, 5, 3, 0]],
       "padding_mask": [[1, 1, 1, 1], [1, 1, 1, 0]],
       "segment_ids": [[0, 0, 0, 0], [0, 0, 0, 0]]}
results = {}
for name, function in sorted(loaded.signatures.items()):
    _, specs = function.structured_input_signature
    inputs = {}
    for key, spec in specs.items():
        if spec.dtype == tf.string:
            value = sentences
        elif key in ids:
            value = ids[key]
        else:
            value = [[0, 0, 0, 0], [0, 0, 0, 0]]
        inputs[key] = tf.constant(value, dtype=spec.dtype)
    try:
        outputs = {k: v.numpy() for k, v in function(**inputs).items()}
    except Exception as error:
        results[name] = {"ok": False, "problem": f"{type(error).__name__}: {error}"[:600]}
        continue
    problems = []
    for key, value in outputs.items():
        value = np.asarray(value, dtype="float64")
        if not np.all(np.isfinite(value)):
            problems.append(f"{key} is not finite")
        elif value.ndim == 2:
            norms = np.linalg.norm(value, axis=1)
            if value.shape[0] != 2 or not np.allclose(norms, 1.0, atol=1e-3):
                problems.append(f"{key} has shape {list(value.shape)} and row lengths "
                                f"{np.round(norms, 4).tolist()}, not 2 unit-length rows")
        elif value.ndim == 1 and np.any(np.abs(value) > 1.0 + 1e-4):
            problems.append(f"{key} {np.round(value, 4).tolist()} is not within [-1, 1]")
    results[name] = {"ok": not problems, "problem": "; ".join(problems) or None,
                     "outputs": {k: list(np.shape(v)) for k, v in outputs.items()}}
json.dump({"loaded": True, "signatures": results}, sys.stdout)
"""


def probe_saved_model(export_dir):
    """Loads the SavedModel in `export_dir` in a fresh interpreter and runs every
    signature on a probe batch.

    Args:
        export_dir: a SavedModel directory (one version, e.g. `base/1`).

    Returns:
        A dict with `loaded` (bool). A model that loaded has `signatures`:
        `{name: {"ok": bool, "problem": str or None, "outputs": {key:
        shape}}}`; one that did not has `error` (why) and no `signatures`.

    Example:

    >>> probe = keras_cosent.export.probe_saved_model("models/sts/1")  # doctest: +SKIP
    >>> probe["loaded"] and probe["signatures"]["serving_default"]["ok"]  # doctest: +SKIP
    True
    """
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", _PROBE_SCRIPT, os.fspath(export_dir)],
        capture_output=True, text=True, env=env,
    )
    if result.returncode != 0 or not result.stdout.strip():
        raise RuntimeError(
            f"The SavedModel probe of {export_dir} failed in its subprocess (exit code "
            f"{result.returncode}):\n{result.stderr.strip()[-2000:]}"
        )
    return json.loads(result.stdout.strip().splitlines()[-1])


def probe_problems(probe):
    """The probe's failures as lines, empty when the model loaded and every signature
    answered as it should."""
    if not probe["loaded"]:
        return [f"the SavedModel does not load: {probe['error']}"]
    return [f"signature {name}: {info['problem']}"
            for name, info in probe["signatures"].items() if not info["ok"]]
