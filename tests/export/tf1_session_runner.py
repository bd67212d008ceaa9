"""Runs SavedModel signatures the way TF Serving does, in a process without Keras.

TF Serving loads a model with the C++ `SavedModelBundle` loader: it restores the
`serve` MetaGraphDef into a TF1 session, looks up each signature's input and
output *tensor names* in `signature_def`, and feeds/fetches those tensors. This
script does the same through `tf.compat.v1.saved_model.loader.load`, the Python
face of that loader. It is run as a fresh subprocess by the tests:

    python tf1_session_runner.py REQUESTS_JSON RESULTS_JSON

REQUESTS_JSON: `[{"model": export_dir, "signature": name, "inputs": {input_key:
nested list}, "tf_text": bool (default true: the model needs TF Text ops)}, ...]`. RESULTS_JSON receives `{"results": [{output_key: nested
list}, ...], "signatures": {export_dir: {name: {"inputs": {key: [tensor_name,
dtype, shape]}, "outputs": {...}}}}, "keras_modules": [...], "keras_in_sys_modules": bool}`.

Keras (and everything built on it) is blocked before TensorFlow is imported:
TensorFlow >= 2.16 eagerly imports an installed `keras` for `tf.keras`, and a
model server has no Python at all, so the test must prove that nothing from
Keras is needed to load and run the export.
"""

import json
import sys

_BLOCKED = ("keras", "keras_hub", "keras_cosent", "tf_keras")
for _name in _BLOCKED:
    # A None entry makes `import keras` raise ImportError, which TensorFlow's
    # optional tf.keras hook catches, exactly as if Keras were not installed.
    sys.modules[_name] = None


def _dtype_name(enum):
    # The DataType enum name, as saved_model_cli prints it (DT_STRING, ...).
    from tensorflow.core.framework import types_pb2

    return types_pb2.DataType.Name(enum)


def _shape(proto):
    if proto.unknown_rank:
        return None
    return [d.size for d in proto.dim]


_TEXT_LOADED = []


def _load_tensorflow_text_ops(tf):
    """Registers TensorFlow Text's kernels without its Python package.

    TF Serving links these kernels into its binary. `import tensorflow_text`
    would also pull in `tf.keras` (for tf-text's Keras layers), so the op
    libraries are loaded directly, the way that package does it internally.
    """
    import glob
    import importlib.util
    import os

    if _TEXT_LOADED:
        return
    _TEXT_LOADED.append(True)
    spec = importlib.util.find_spec("tensorflow_text")
    if spec is None:
        raise ImportError("tensorflow_text is needed to run the string signatures")
    root = list(spec.submodule_search_locations)[0]
    for path in sorted(glob.glob(os.path.join(root, "python", "*", "_*.so"))):
        tf.load_op_library(path)


def _run(sess, sig, inputs, tf, np):
    """Feeds and fetches by the tensor names in the SignatureDef, like TF Serving."""
    feed = {}
    for key, value in inputs.items():
        info = sig.inputs[key]
        dtype = tf.dtypes.as_dtype(info.dtype)
        if dtype == tf.string:
            value = np.array([v.encode("utf-8") for v in value], dtype=object)
        else:
            value = np.asarray(value, dtype=dtype.as_numpy_dtype)
        feed[info.name] = value
    keys = sorted(sig.outputs)
    fetched = sess.run([sig.outputs[k].name for k in keys], feed_dict=feed)
    return {k: np.asarray(v).tolist() for k, v in zip(keys, fetched)}


def main(requests_path, results_path):
    import numpy as np
    import tensorflow as tf

    with open(requests_path) as f:
        requests = json.load(f)

    results = [None] * len(requests)
    signatures = {}
    # Requests that declare `"tf_text": false` run before TF Text's ops are
    # registered: a model that loads then would load in a server without them.
    groups = sorted({(r["model"], bool(r.get("tf_text", True))) for r in requests},
                    key=lambda group: group[1])
    for model_dir, with_text in groups:
        if with_text:
            _load_tensorflow_text_ops(tf)
        # One TF1 session per SavedModel, as a model server holds one per version.
        with tf.compat.v1.Session(graph=tf.Graph()) as sess:
            mine = [i for i, r in enumerate(requests)
                    if (r["model"], bool(r.get("tf_text", True))) == (model_dir, with_text)]
            try:
                meta_graph = tf.compat.v1.saved_model.loader.load(sess, ["serve"], model_dir)
            except Exception as error:  # reported, for the tests that expect it
                for index in mine:
                    results[index] = {"load_error": f"{type(error).__name__}: {error}"}
                continue
            signatures[model_dir] = {
                name: {
                    side: {
                        key: [info.name, _dtype_name(info.dtype), _shape(info.tensor_shape)]
                        for key, info in getattr(sig, side).items()
                    }
                    for side in ("inputs", "outputs")
                }
                for name, sig in meta_graph.signature_def.items()
            }
            for index in mine:
                request = requests[index]
                results[index] = _run(sess, meta_graph.signature_def[request["signature"]],
                                      request["inputs"], tf, np)

    loaded = [m for m in sys.modules if m.split(".")[0] in _BLOCKED and sys.modules[m] is not None]
    for name in _BLOCKED:
        sys.modules.pop(name)
    with open(results_path, "w") as f:
        json.dump(
            {
                "results": results,
                "signatures": signatures,
                "keras_modules": loaded,
                "keras_in_sys_modules": "keras" in sys.modules,
            },
            f,
        )


if __name__ == "__main__":
    main(*sys.argv[1:3])
