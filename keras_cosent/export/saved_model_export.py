"""`export_saved_model`: a sentence encoder as a versioned SavedModel for TF Serving.

TF Serving watches `--model_base_path` for numeric sub-directories and serves
the highest; this module writes `<base_dir>/<version>/` with the signatures of
`keras_cosent.export.serving_graph`. The SavedModel is always traced by the
TensorFlow backend: from JAX or PyTorch the encoder is saved to a `.keras` file
and a `KERAS_BACKEND=tensorflow` subprocess (`keras_cosent.export._export_worker`)
rebuilds it from those weights and writes the export. Writing goes to a hidden
temporary directory under `base_dir` (non-numeric, so the server ignores it)
and is renamed into place, so the server never sees a half-written version.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import keras

from keras_cosent.export._export_worker import ERROR_MARKER
from keras_cosent.models.encoder_loading import ENCODER_FILENAME
from keras_cosent.models.encoder_loading import checked_keras_archive
from keras_cosent.models.encoder_loading import saved_encoder_config
from keras_cosent.models.encoder_loading import saved_encoder_file
from keras_cosent.models.sentence_preprocessing import check_max_length
from keras_cosent.utils.arguments import check_bool
from keras_cosent.utils.arguments import check_positive_int
from keras_cosent.utils.arguments import is_int
from keras_cosent.utils.truncation import check_truncate_dim


def _resolve_encoder_file(path):
    """`path` as a `.keras` file, by `keras_cosent.models.encoder_loading`'s rule
    (not yet checked to be a zip archive: `checked_keras_archive`)."""
    found = saved_encoder_file(path)
    if found is None:
        raise FileNotFoundError(f"No encoder `.keras` file or training output directory at {path}")
    return found


def _check_exportable(encoder_or_path, string_signatures):
    """Refuses, before any export, what is no `SentenceEncoder` (a `.keras` file's
    config is read without loading it) and string signatures without a tokenizer."""
    if isinstance(encoder_or_path, (str, os.PathLike)):
        given = os.fspath(encoder_or_path)
        if os.path.isfile(given) and not given.endswith(".keras"):
            # Said here, in this function's terms: the loaders' message offers
            # checkpoint folders and preset names, which are not exported as such.
            raise ValueError(
                f"`encoder_or_path` {given!r} is a file but not a `.keras` file saved with "
                "`encoder.save(...)`; expected a SentenceEncoder, a `.keras` file or a "
                "`keras-cosent train` output directory (holding `encoder.keras`)"
            )
        path = saved_encoder_file(encoder_or_path)
        if path is None:
            return  # no such file: `_write_export` says so, after the version's checks
        config = saved_encoder_config(path) or {}
        class_name = config.get("class_name")
        tokenizer = (config.get("config") or {}).get("tokenizer", False)
        where = f"{path} holds"
    else:
        from keras_cosent.models.sentence_encoder import SentenceEncoder

        class_name = ("SentenceEncoder" if isinstance(encoder_or_path, SentenceEncoder)
                      else type(encoder_or_path).__name__)
        tokenizer = getattr(encoder_or_path, "tokenizer", False)
        where = "Received:"
    if class_name not in (None, "SentenceEncoder"):
        # A SiameseEncoder (the training model) instead of its `.encoder`, say.
        raise ValueError(
            f"`encoder` should be a keras_cosent SentenceEncoder. {where} a {class_name}"
        )
    if string_signatures and tokenizer is None:
        from keras_cosent.export.serving_graph import NO_TOKENIZER

        raise ValueError(NO_TOKENIZER)


def _next_version(base_dir):
    # ASCII digits only: TF Serving reads no other version folder ("²" is isdigit()).
    versions = [int(name) for name in os.listdir(base_dir) if name.isascii() and name.isdigit()]
    return max(versions) + 1 if versions else 1


# TF Serving reads a version directory's name as an int64; a larger one is never served.
MAX_VERSION = 2**63 - 1


def _check_version(given):
    version = given
    if isinstance(version, str) and version.isascii() and version.isdigit():
        version = int(version)
    if not is_int(version) or not 0 <= version <= MAX_VERSION:
        raise ValueError(
            f"`version` should be an integer from 0 to {MAX_VERSION} (TF Serving reads "
            f"version directories as int64 numbers). Received: `version`={given!r}"
        )
    return int(version)


def _package_root():
    import keras_cosent

    return os.path.dirname(os.path.dirname(os.path.abspath(keras_cosent.__file__)))


def _export_in_subprocess(encoder_file, export_dir, max_length, string_signatures=True,
                          truncate_dim=None):
    """Runs `_export_worker` under the TensorFlow backend; raises with its stderr."""
    env = dict(os.environ, KERAS_BACKEND="tensorflow")
    # The worker must import this same keras_cosent, even from a source checkout.
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (_package_root(), env.get("PYTHONPATH")) if p
    )
    command = [
        sys.executable,
        "-m",
        "keras_cosent.export._export_worker",
        "--encoder",
        encoder_file,
        "--output",
        export_dir,
    ]
    if max_length is not None:
        command += ["--max-length", str(max_length)]
    if not string_signatures:
        command.append("--no-string-signatures")
    if truncate_dim is not None:
        command += ["--truncate-dim", str(truncate_dim)]
    # Run from the package root: `-m` puts the working directory first on
    # sys.path, where a folder named keras_cosent would shadow this one. The
    # paths passed are absolute.
    result = subprocess.run(command, env=env, capture_output=True, text=True,
                            cwd=_package_root())
    if result.returncode != 0:
        for line in reversed((result.stderr or "").splitlines()):
            if line.startswith(ERROR_MARKER):
                # An argument the model does not allow: the error TensorFlow
                # raises in process, not a RuntimeError around start-up logs.
                raise ValueError(json.loads(line[len(ERROR_MARKER):]))
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-25:])
        raise RuntimeError(
            f"Exporting {encoder_file} through the TensorFlow backend failed "
            f"(exit code {result.returncode}; command: {' '.join(command)}).\n"
            f"Worker output (last lines):\n{tail}"
        )


def _write_export(encoder_or_path, export_dir, max_length, string_signatures, truncate_dim=None):
    is_path = isinstance(encoder_or_path, (str, os.PathLike))
    if is_path:
        encoder_file = checked_keras_archive(_resolve_encoder_file(encoder_or_path))
    if keras.backend.backend() == "tensorflow":
        from keras_cosent.export.serving_graph import write_serving_saved_model

        encoder = keras.saving.load_model(encoder_file) if is_path else encoder_or_path
        write_serving_saved_model(
            encoder, export_dir, max_length=max_length, string_signatures=string_signatures,
            truncate_dim=truncate_dim,
        )
        return
    if is_path:
        _export_in_subprocess(encoder_file, export_dir, max_length, string_signatures,
                              truncate_dim)
        return
    # Validate here so that a bad `max_length` or `truncate_dim`, or string
    # signatures without a tokenizer, fail before the slow subprocess.
    from keras_cosent.export.serving_graph import check_tokenizer_for_strings
    from keras_cosent.export.serving_graph import resolve_max_length

    resolve_max_length(encoder_or_path, max_length)
    if string_signatures:
        check_tokenizer_for_strings(encoder_or_path)
    if truncate_dim is not None:
        check_truncate_dim(truncate_dim, encoder_or_path.embedding_dim)
    with tempfile.TemporaryDirectory(prefix="keras-cosent-export-") as scratch:
        encoder_file = os.path.join(scratch, ENCODER_FILENAME)
        encoder_or_path.save(encoder_file)
        _export_in_subprocess(
            encoder_file, export_dir, max_length, string_signatures, truncate_dim
        )


def export_saved_model(
    encoder_or_path,
    base_dir,
    version=None,
    max_length=None,
    overwrite=False,
    string_signatures=True,
    truncate_dim=None,
):
    """Exports a sentence encoder as `<base_dir>/<version>/` for TF Serving.

    The SavedModel has three signatures (see README.md, "Serving with TensorFlow Serving"):
    `serving_default` (`sentences` tf.string `[None]` -> `embeddings` float32
    `[None, dim]`, tokenised in the graph), `encode_tokens` (`token_ids`,
    `padding_mask`, `segment_ids`, all int32 `[None, None]`, padding_mask 1 for
    tokens and 0 for padding -> `embeddings`; core TensorFlow ops only) and
    `similarity` (`sentences1`, `sentences2` -> `cosine` float32 `[None]`).
    Embeddings are L2-normalised (after truncation, with `truncate_dim`).
    Works from any Keras backend: off TensorFlow,
    the export runs in a `KERAS_BACKEND=tensorflow` subprocess.

    Args:
        encoder_or_path: a `keras_cosent.models.SentenceEncoder`, the path of
            one saved with `encoder.save("x.keras")`, or a `keras-cosent train`
            output directory (holding `encoder.keras`).
        base_dir: the model's base path (TF Serving's `--model_base_path`);
            created when missing.
        version: integer version directory; `None` takes the next integer
            after the existing numeric sub-directories (1 when there are none).
        max_length: tokens per sentence (with [CLS] and [SEP]) the string
            signatures truncate to; `None` keeps `encoder.max_length`, the
            training length. Batches are padded to their longest sentence only.
        overwrite: replace an existing `<base_dir>/<version>`; otherwise an
            existing version raises `FileExistsError`.
        string_signatures: include the signatures that tokenise in the graph
            (`serving_default` on sentences, `similarity`), which need
            TensorFlow Text ops in the server. `False` writes a core-ops-only
            model whose `serving_default` is `encode_tokens`, for servers built
            without (or with too old a) TensorFlow Text.
        truncate_dim: `None`, or an int in `[1, embedding dim]`: every
            signature serves the first `truncate_dim` coordinates,
            re-normalised (`similarity` their cosine), as
            `SentenceEncoder.encode(truncate_dim=...)` gives. A value above
            the model's dimension raises `ValueError`, as does a `max_length`
            above the backbone's length; for a path off TensorFlow, only once
            the export subprocess has loaded the model (the rest is checked
            before the export).

    Returns:
        The path of the written version directory, as a string.

    Example:

    >>> import tempfile
    >>> import keras_cosent
    >>> encoder = keras_cosent.models.SentenceEncoder.from_checkpoint(  # doctest: +SKIP
    ...     "path/to/all-MiniLM-L6-v2", max_length=128)
    >>> base = tempfile.mkdtemp()
    >>> keras_cosent.export.export_saved_model(encoder, base)  # doctest: +SKIP
    '/tmp/.../1'
    >>> keras_cosent.export.export_saved_model("runs/sts/encoder.keras", base)  # doctest: +SKIP
    '/tmp/.../2'
    """
    # Checked here, the same on every backend: off TensorFlow the export runs in
    # a subprocess, whose errors come back as a RuntimeError around its traceback.
    if truncate_dim is not None:
        truncate_dim = check_positive_int("truncate_dim", truncate_dim)
    if max_length is not None:
        max_length = check_max_length(max_length)
    overwrite = check_bool("overwrite", overwrite)  # "no" would replace a version
    string_signatures = check_bool("string_signatures", string_signatures)
    _check_exportable(encoder_or_path, string_signatures)
    base_dir = os.path.abspath(os.fspath(base_dir))
    if os.path.exists(base_dir) and not os.path.isdir(base_dir):
        raise NotADirectoryError(f"`base_dir` {base_dir} exists and is not a directory")
    made = []  # the folders this export creates, outermost first
    folder = base_dir
    while not os.path.exists(folder):
        made.insert(0, folder)
        folder = os.path.dirname(folder)
    os.makedirs(base_dir, exist_ok=True)
    try:
        return _export_version(encoder_or_path, base_dir, version, max_length, overwrite,
                               string_signatures, truncate_dim)
    except BaseException:
        # A failed export leaves no empty folder behind, its parents included.
        for folder in reversed(made):
            if os.listdir(folder):
                break
            os.rmdir(folder)
        raise


def _export_version(encoder_or_path, base_dir, version, max_length, overwrite,
                    string_signatures, truncate_dim):
    version = _next_version(base_dir) if version is None else _check_version(version)
    final_dir = os.path.join(base_dir, str(version))
    if os.path.exists(final_dir) and not overwrite:
        raise FileExistsError(
            f"Version {version} already exists at {final_dir}; pass `overwrite=True` "
            "to replace it, or another `version` (None picks the next free one)."
        )

    # Hidden and non-numeric, so TF Serving's version scan skips it; on the same
    # filesystem as final_dir, so the rename below is atomic.
    staging = tempfile.mkdtemp(prefix=f".tmp-export-{version}-", dir=base_dir)
    try:
        # tf.saved_model.save wants to create the directory's contents itself.
        export_dir = os.path.join(staging, "saved_model")
        _write_export(
            encoder_or_path, export_dir, max_length, string_signatures, truncate_dim=truncate_dim
        )
        if os.path.exists(final_dir):
            if not overwrite:  # another writer got there while we exported
                raise FileExistsError(
                    f"Version {version} appeared at {final_dir} during the export; "
                    "pass `overwrite=True` to replace it."
                )
            # Move the old version aside first: rename cannot replace a
            # non-empty directory.
            os.rename(final_dir, os.path.join(staging, "replaced"))
        os.rename(export_dir, final_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final_dir
