"""Op audit of an exported SavedModel: which ops each signature needs, and from where.

A model server can only run ops registered in its binary. Stock TF Serving
links core TensorFlow plus TensorFlow Text's kernels at one pinned version, so
a graph that uses a tf-text op newer than that pin fails to load with
"Op type not registered". `audit_saved_model` reads `saved_model.pb`, walks
each signature's nodes and every function they call (recursively, through the
graph's function library), and sorts the op types into core TensorFlow ops and
the rest, using the op registry of a fresh TensorFlow process that has loaded
nothing else. `format_audit` renders the report for `keras-cosent check-serving`.
"""

import glob
import json
import os
import subprocess
import sys

# When each TensorFlow Text op our string signatures can use first shipped.
# FastWordpieceTokenizeWithOffsets arrived with FastWordpieceTokenizer in the
# 2.7 line (its docs describe it "as of 11/2021"); RegexSplitWithOffsets is in
# 2.0.x models (tensorflow/text#200); the UTF-8 normalisation ops predate 2.0.
TF_TEXT_OP_MIN_VERSION = {
    "CaseFoldUTF8": "2.0",
    "NormalizeUTF8": "2.0",
    "RegexSplitWithOffsets": "2.0",
    "WordpieceTokenizeWithOffsets": "2.0",
    "FastWordpieceTokenizeWithOffsets": "2.7",
    "FastBertNormalize": "2.9",
}

# The TensorFlow Text version stock TF Serving links into tensorflow_model_server
# (`org_tensorflow_text` in tensorflow_serving/workspace.bzl of the source we
# checked; earlier releases pinned 2.12.1). Check the release you deploy.
TF_SERVING_TF_TEXT_VERSION = "2.20.0"

_REGISTRY_SCRIPT = r"""
import glob, importlib.util, json, os, sys
# A registry of core TensorFlow only: no Keras (TF >= 2.16 imports an installed
# keras eagerly, and keras-hub would pull in TensorFlow Text).
for name in ("keras", "keras_hub", "keras_cosent", "tf_keras", "tensorflow_text"):
    sys.modules[name] = None
import tensorflow as tf
from tensorflow.python.framework import op_def_registry
ops = json.load(sys.stdin)
non_core = [op for op in ops if op_def_registry.get(op) is None]
providers = {}
sys.modules.pop("tensorflow_text")
spec = importlib.util.find_spec("tensorflow_text") if non_core else None
if spec is not None:
    root = list(spec.submodule_search_locations)[0]
    for path in sorted(glob.glob(os.path.join(root, "python", "*", "_*.so"))):
        tf.load_op_library(path)
    providers = {op: "tensorflow_text" for op in non_core if op_def_registry.get(op) is not None}
json.dump({"tensorflow": tf.__version__, "non_core": non_core, "providers": providers}, sys.stdout)
"""


def _function_names(node):
    """Functions a node calls: `f` of (Stateful)PartitionedCall, If/While branches..."""
    for attr in node.attr.values():
        if attr.HasField("func"):
            yield attr.func.name
        if attr.HasField("list"):
            for func in attr.list.func:
                yield func.name


def _signature_ops(graph_def, signature):
    """Op types reachable from the signature's outputs, inside called functions too."""
    nodes = {node.name: node for node in graph_def.node}
    library = {f.signature.name: f for f in graph_def.library.function}
    ops = set()
    visited_functions = set()

    def visit_function(name):
        if name in visited_functions or name not in library:
            return
        visited_functions.add(name)
        for node in library[name].node_def:
            ops.add(node.op)
            # An op type can itself name a library function (a direct call).
            visit_function(node.op)
            for called in _function_names(node):
                visit_function(called)

    stack = [info.name.split(":")[0] for info in signature.outputs.values()]
    seen = set()
    while stack:
        name = stack.pop()
        if name in seen or name not in nodes:
            continue
        seen.add(name)
        node = nodes[name]
        ops.add(node.op)
        visit_function(node.op)
        for called in _function_names(node):
            visit_function(called)
        stack.extend(i.lstrip("^").split(":")[0] for i in node.input)
    return ops


def _core_registry_check(op_names):
    """Runs _REGISTRY_SCRIPT in a fresh interpreter; returns its JSON answer."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", _REGISTRY_SCRIPT],
        input=json.dumps(sorted(op_names)),
        capture_output=True,
        text=True,
        env=env,
    )
    if result.returncode != 0:
        raise RuntimeError(
            "Could not read core TensorFlow's op registry in a subprocess "
            f"(exit code {result.returncode}):\n{result.stderr.strip()[-2000:]}"
        )
    return json.loads(result.stdout.strip().splitlines()[-1])


def _version_tuple(version):
    return tuple(int(part) for part in version.split(".")[:2] if part.isdigit())


def audit_saved_model(export_dir):
    """Lists the op types each signature of a SavedModel needs, flagging non-core ones.

    Args:
        export_dir: a SavedModel directory (one version, e.g. `base/1`).

    Returns:
        A dict: `export_dir`; `tensorflow` (version of the registry checked);
        `signatures`: `{name: {"inputs": {key: {"dtype", "shape"}}, "outputs":
        {...}, "ops": [...], "non_core_ops": [...], "core_only": bool,
        "providers": {op: library}}}` (`providers` names the library each
        non-core op comes from: `"tensorflow_text"` or `"unknown custom op
        library"`);
        `tensorflow_text`: `{"installed", "ops": {op: first tf-text version},
        "minimum_version", "tf_serving_bundles"}` (`minimum_version` is None
        when no signature needs tf-text).

    Example:

    >>> report = keras_cosent.export.audit_saved_model("models/sts/1")  # doctest: +SKIP
    >>> report["signatures"]["encode_tokens"]["core_only"]  # doctest: +SKIP
    True
    >>> report["tensorflow_text"]["minimum_version"]  # doctest: +SKIP
    '2.7'
    """
    export_dir = os.fspath(export_dir)
    pb_path = os.path.join(export_dir, "saved_model.pb")
    if not os.path.isfile(pb_path):
        # Point at the SavedModels below, as `export` lays them out (BASE_DIR/1):
        # given a run directory, that is RUN/export/1, not RUN/1.
        found = sorted((os.path.dirname(p) for pattern in ("*", os.path.join("*", "*"))
                        for p in glob.glob(os.path.join(glob.escape(export_dir), pattern,
                                                        "saved_model.pb"))),
                       key=lambda d: (os.path.dirname(d), int(os.path.basename(d))
                                      if os.path.basename(d).isascii()
                                      and os.path.basename(d).isdigit() else -1))
        hint = (f"pass a version directory such as {found[-1]}" if found else
                "pass the version directory that `keras-cosent export` wrote (BASE_DIR/1)")
        raise FileNotFoundError(f"No saved_model.pb in {export_dir}; {hint}.")
    from google.protobuf.message import DecodeError
    from tensorflow.core.framework import types_pb2
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(pb_path, "rb") as f:
        try:
            saved_model.ParseFromString(f.read())
        except DecodeError as error:
            raise ValueError(f"{pb_path} is not a SavedModel ({error})") from None
    meta_graph = next(
        (m for m in saved_model.meta_graphs if "serve" in m.meta_info_def.tags), None
    )
    if meta_graph is None:
        raise ValueError(f"{pb_path} has no MetaGraphDef tagged 'serve' (TF Serving's tag)")

    def describe(infos):
        return {
            key: {
                "dtype": types_pb2.DataType.Name(info.dtype),
                "shape": None
                if info.tensor_shape.unknown_rank
                else [d.size for d in info.tensor_shape.dim],
            }
            for key, info in sorted(infos.items())
        }

    signatures = {}
    for name, signature in sorted(meta_graph.signature_def.items()):
        if name.startswith("__"):  # __saved_model_init_op: a NoOp, not servable
            continue
        signatures[name] = {
            "inputs": describe(signature.inputs),
            "outputs": describe(signature.outputs),
            "ops": sorted(_signature_ops(meta_graph.graph_def, signature)),
        }
    all_ops = set().union(*(s["ops"] for s in signatures.values())) if signatures else set()
    registry = _core_registry_check(all_ops)
    non_core = set(registry["non_core"])
    tf_text_ops = {}
    for info in signatures.values():
        info["non_core_ops"] = sorted(set(info["ops"]) & non_core)
        info["core_only"] = not info["non_core_ops"]
        info["providers"] = {
            op: registry["providers"].get(op, "unknown custom op library")
            for op in info["non_core_ops"]
        }
        for op in info["non_core_ops"]:
            if registry["providers"].get(op) == "tensorflow_text":
                tf_text_ops[op] = TF_TEXT_OP_MIN_VERSION.get(op)
    known = [v for v in tf_text_ops.values() if v is not None]
    minimum = max(known, key=_version_tuple) if known else None
    try:
        from importlib.metadata import version

        installed = version("tensorflow-text")
    except Exception:  # not installed: the report still lists the ops
        installed = None
    return {
        "export_dir": os.path.abspath(export_dir),
        "tensorflow": registry["tensorflow"],
        "signatures": signatures,
        "tensorflow_text": {
            "installed": installed,
            "ops": dict(sorted(tf_text_ops.items())),
            "minimum_version": minimum,
            "tf_serving_bundles": TF_SERVING_TF_TEXT_VERSION,
        },
    }


def format_audit(report):
    """Renders an `audit_saved_model` report as plain text for the CLI.

    Example:

    >>> print(keras_cosent.export.format_audit(report))  # doctest: +SKIP
    SavedModel: /abs/models/sts/1 (op registry of TensorFlow 2.21.0)
    ...
    """
    lines = [f"SavedModel: {report['export_dir']} (op registry of TensorFlow {report['tensorflow']})"]
    for name, info in report["signatures"].items():
        inputs = ", ".join(f"{k} {v['dtype']} {v['shape']}" for k, v in info["inputs"].items())
        outputs = ", ".join(f"{k} {v['dtype']} {v['shape']}" for k, v in info["outputs"].items())
        lines.append("")
        lines.append(f"signature {name}: ({inputs}) -> ({outputs})")
        lines.append(f"  {len(info['ops'])} op types: {', '.join(info['ops'])}")
        if info["core_only"]:
            lines.append("  core TensorFlow ops only: any TF Serving build can run it")
        else:
            flagged = ", ".join(f"{op} ({info['providers'][op]})" for op in info["non_core_ops"])
            lines.append(f"  NOT core TensorFlow: {flagged}")
    text = report["tensorflow_text"]
    lines.append("")
    if text["ops"]:
        per_op = ", ".join(f"{op} >= {v or '?'}" for op, v in text["ops"].items())
        lines.append(
            f"TensorFlow Text: needs >= {text['minimum_version']} ({per_op}); "
            # The auditing process's version: a SavedModel records none.
            + (f"tensorflow-text {text['installed']} is installed here." if text["installed"]
               else "tensorflow-text is not installed here.")
        )
        lines.append(
            "  Stock tensorflow_model_server links TensorFlow Text ops at one pinned "
            f"version ({text['tf_serving_bundles']} in the TF Serving source checked); a server "
            "whose bundled tf-text predates an op fails to load the model with "
            "\"Op type not registered\" (every signature, since the whole graph is "
            "refused); for such servers export with `string_signatures=False` "
            "(`keras-cosent export --no-string-signatures`)."
        )
    else:
        lines.append("TensorFlow Text: not needed.")
    return "\n".join(lines)
