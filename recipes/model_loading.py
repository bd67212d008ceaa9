"""Turns a MODEL argument into a `keras_cosent.models.SentenceEncoder` for the commands.

Which encoder MODEL names is decided by `keras_cosent.models.encoder_loading`
(the one rule, shared with `keras_cosent.export`); this module only turns its
errors into `CliError`s. Imported lazily by the commands (it imports keras).
"""

import os
import pathlib

from keras_cosent.models import encoder_loading
from recipes.errors import CliError
from recipes.errors import one_line

ENCODER_FILE = encoder_loading.ENCODER_FILENAME
PACKAGED_MINILM = encoder_loading.PACKAGED_MINILM


def saved_encoder_path(model):
    """The `.keras` file MODEL names (a run directory or the file), or None."""
    path = pathlib.Path(model)
    if path.is_file() and path.suffix != ".keras":
        return None  # resolve_checkpoint says why
    try:
        saved = encoder_loading.saved_encoder_file(model)
    except ValueError as error:
        raise CliError(one_line(error)) from error
    if saved is None:
        return None
    return path if path.is_file() else path / pathlib.Path(saved).name


def resolve_checkpoint(model, option="MODEL"):
    """The directory or keras-hub preset name `SentenceEncoder.from_checkpoint` should read."""
    if pathlib.Path(model).is_file():
        raise CliError(
            f"{option} {model!r} is a file; expected a train output directory, a .keras "
            "file, a checkpoint directory or a keras-hub preset name"
        )
    try:
        return encoder_loading.resolve_checkpoint(model)
    except FileNotFoundError as error:
        # The library names the argument MODEL, which `train` calls --backbone.
        raise CliError(f"{option} {model!r}: no such directory or .keras file") from error


def encoder_or_saved_path(model):
    """MODEL as the `.keras` file it names, or else as a freshly loaded encoder.

    For consumers that accept either (`keras_cosent.export.export_saved_model`):
    a saved encoder then need not be loaded in this process at all.
    """
    saved = saved_encoder_path(model)
    if saved is None:
        return load_encoder(model)
    try:
        path = encoder_loading.checked_keras_archive(str(saved))
    except ValueError as error:
        raise CliError(f"cannot load MODEL {model!r}: {one_line(error)}") from error
    config = encoder_loading.saved_encoder_config(path) or {}
    if config.get("class_name") != "SentenceEncoder":
        # Some other model (or a subclass): loading it says which, or takes it.
        return load_encoder(model)
    return path


def has_tokenizer(encoder_or_path):
    """Whether the encoder (or the `.keras` file of one) has a tokenizer."""
    if isinstance(encoder_or_path, str):
        config = encoder_loading.saved_encoder_config(encoder_or_path) or {}
        return (config.get("config") or {}).get("tokenizer") is not None
    return encoder_or_path.tokenizer is not None


def load_encoder(model, pooling=None, max_length=None, option="MODEL"):
    """Loads MODEL as a `SentenceEncoder` (`keras_cosent.models.load_encoder`).

    Args:
        model: what the user passed as MODEL or `--backbone`.
        pooling: pooling for a checkpoint; None reads the checkpoint's
            (sentence-transformers folders say theirs; else mean). A saved
            encoder keeps its own.
        max_length: token limit; None keeps a saved encoder's or reads the
            checkpoint's (`max_seq_length` of a sentence-transformers folder,
            else 128).
        option: how the command names `model` in its errors (`--backbone`).

    Returns:
        A `keras_cosent.models.SentenceEncoder`.
    """
    if saved_encoder_path(model) is None:
        resolve_checkpoint(model, option)  # CliError for a stray file or a missing directory
    try:
        return encoder_loading.load_encoder(model, pooling=pooling, max_length=max_length)
    except (ValueError, OSError) as error:
        reason = one_line(error)
        if max_length is not None and "max_length" in reason:
            # The model loads; the limit asked for is beyond its position table.
            reason = reason.removeprefix(f"max_length={max_length!r}: ")
            raise CliError(f"--max-length {max_length}: {reason}") from error
        if not os.path.exists(model):
            # keras-hub lists every kind of handle it accepts; its first
            # sentence is the part that concerns this MODEL.
            reason = reason.split(". ")[0]
            raise CliError(
                f"{option} {model!r} is not a train output directory, a .keras file, a "
                f"checkpoint directory or a keras-hub preset ({reason})"
            ) from error
        raise CliError(f"cannot load {option} {model!r}: {reason}") from error
