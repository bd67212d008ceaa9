"""The one rule for "which encoder is this MODEL", shared by the CLI and export.

MODEL may be, in the order tried:

1. a `.keras` file saved from a `SentenceEncoder`, or a directory holding one
   (`encoder.keras`, as a `keras-cosent train` run directory does, or exactly
   one `.keras` file);
2. `all-MiniLM-L6-v2` (or `sentence-transformers/all-MiniLM-L6-v2`): the
   checkpoint packaged with keras-cosent, read offline;
3. a local checkpoint directory: Hugging Face (`config.json`,
   `model.safetensors`, `vocab.txt`), sentence-transformers (the same plus
   `modules.json`, read with its own pooling and `max_seq_length`) or keras-hub;
4. any other name or `hf://`/`kaggle://` handle, taken as a keras-hub preset,
   which keras-hub may download.
"""

import json
import os
import zipfile

ENCODER_FILENAME = "encoder.keras"
PACKAGED_MINILM = "all-MiniLM-L6-v2"
PACKAGED_ALIASES = (PACKAGED_MINILM, "sentence-transformers/all-MiniLM-L6-v2")


def saved_encoder_file(model):
    """The `.keras` file MODEL names, as an absolute path, or None.

    Args:
        model: str or path-like: a `.keras` file, or a directory holding
            `encoder.keras` or exactly one `.keras` file.

    Returns:
        The absolute path of the `.keras` file, or None when MODEL is not one
        (a checkpoint folder, a preset name).

    Raises:
        ValueError: for a file that is not `.keras`-suffixed and not a
            directory, a directory holding several `.keras` files and no
            `encoder.keras`, or a train run directory that lost its
            `encoder.keras`.
    """
    path = os.fspath(model)
    if os.path.isfile(path):
        if not path.endswith(".keras"):
            raise ValueError(
                f"MODEL {path!r} is a file but not a `.keras` file saved with "
                "`encoder.save(...)`; expected a `.keras` file, a directory holding "
                "`encoder.keras`, a checkpoint directory or a keras-hub preset name"
            )
        return os.path.abspath(path)
    if os.path.isdir(path):
        preferred = os.path.join(path, ENCODER_FILENAME)
        if os.path.isfile(preferred):
            return os.path.abspath(preferred)
        found = sorted(f for f in os.listdir(path) if f.endswith(".keras"))
        if len(found) == 1:
            return os.path.abspath(os.path.join(path, found[0]))
        if len(found) > 1:
            raise ValueError(
                f"Cannot tell which encoder to read from the directory {path}: expected "
                f"`{ENCODER_FILENAME}` or exactly one `.keras` file, found {found}."
            )
        if _is_run_directory(path):
            raise ValueError(
                f"{path} is a `keras-cosent train` run directory without "
                f"`{ENCODER_FILENAME}`: the run did not finish, or the file was removed."
            )
    return None


def checked_keras_archive(path):
    """`path`, once it is known to be a zip archive, as every `.keras` file is.

    Keras reports a `.keras` file that is not one as "File not found".

    Raises:
        ValueError: naming `path` when it is not a zip archive.
    """
    if not zipfile.is_zipfile(path):
        raise ValueError(
            f"{path} is not a `.keras` file (a zip archive written by `encoder.save`)."
        )
    return path


def saved_encoder_config(path):
    """The top-level config of the `.keras` archive at `path` (its `config.json`:
    `class_name`, `config` with `tokenizer`...), read without loading the model;
    None when the archive holds none that parses."""
    try:
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    return config if isinstance(config, dict) else None


def _is_run_directory(path):
    """Whether `path`'s config.json is a run's (`{"command": ..., "config": {...}}`),
    not a checkpoint's (Hugging Face's has no `config`; keras-hub's has a `class_name`)."""
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "config" in config and "class_name" not in config


def resolve_checkpoint(model):
    """The folder or keras-hub preset name `SentenceEncoder.from_checkpoint` should read."""
    model = os.fspath(model)
    if model in PACKAGED_ALIASES:
        from keras_cosent.models.checkpoints import default_checkpoint

        return default_checkpoint()
    if os.path.isdir(model):
        return os.path.abspath(model)
    from keras_cosent.models.checkpoints import is_missing_folder

    if is_missing_folder(model):
        raise FileNotFoundError(f"MODEL {model!r}: no such directory or `.keras` file")
    return model


def load_encoder(model, pooling=None, max_length=None):
    """Loads MODEL (see the module docstring) as a `SentenceEncoder`.

    Args:
        model: str or path-like, a `.keras` file, a run directory, a
            checkpoint folder, `"all-MiniLM-L6-v2"` or a keras-hub preset.
        pooling: pooling for a checkpoint; None reads the checkpoint's (see
            `SentenceEncoder.from_checkpoint`). A saved encoder keeps its own.
        max_length: token limit; None keeps a saved encoder's or reads the
            checkpoint's; an explicit value wins.

    Returns:
        A `keras_cosent.models.SentenceEncoder`.

    Example:

    >>> import keras_cosent
    >>> encoder = keras_cosent.models.load_encoder("all-MiniLM-L6-v2")  # doctest: +SKIP
    >>> encoder.max_length  # doctest: +SKIP
    256
    """
    import keras

    from keras_cosent.models import sentence_preprocessing
    from keras_cosent.models.sentence_encoder import SentenceEncoder

    saved = saved_encoder_file(model)
    if saved is not None:
        encoder = keras.saving.load_model(checked_keras_archive(saved))
        if not isinstance(encoder, SentenceEncoder):
            raise ValueError(
                f"{saved} holds a {type(encoder).__name__}, not a keras-cosent SentenceEncoder"
            )
        if max_length is not None:
            encoder.max_length = sentence_preprocessing.check_max_length(
                max_length, encoder.backbone)
        return encoder
    return SentenceEncoder.from_checkpoint(
        resolve_checkpoint(model), pooling=pooling, max_length=max_length
    )
