"""The one place that turns a MODEL argument into a `keras_cosent.models.SentenceEncoder`.

MODEL may be, in the order tried:

1. a `keras-cosent train` output directory (it holds `encoder.keras`), or a
   `.keras` file saved from a `SentenceEncoder`;
2. `all-MiniLM-L6-v2` (or `sentence-transformers/all-MiniLM-L6-v2`): the
   checkpoint packaged with keras-cosent, read offline;
3. a local checkpoint directory, Hugging Face (`config.json`,
   `model.safetensors`, `vocab.txt`) or keras-hub preset;
4. any other name is taken as a keras-hub preset name (e.g.
   `bert_base_en_uncased`), which keras-hub may download.

Imported lazily by the commands (it imports keras).
"""

import os
import pathlib

from recipes.errors import CliError
from recipes.errors import one_line

ENCODER_FILE = "encoder.keras"
PACKAGED_MINILM = "all-MiniLM-L6-v2"
_PACKAGED_ALIASES = (PACKAGED_MINILM, "sentence-transformers/all-MiniLM-L6-v2")


def saved_encoder_path(model):
    """The `.keras` file MODEL names (a run directory or the file), or None."""
    path = pathlib.Path(model)
    if path.is_dir() and (path / ENCODER_FILE).is_file():
        return path / ENCODER_FILE
    if path.is_file() and path.suffix == ".keras":
        return path
    return None


def resolve_checkpoint(model):
    """The directory or keras-hub preset name `SentenceEncoder.from_checkpoint` should read."""
    if model in _PACKAGED_ALIASES:
        from keras_cosent.models import default_checkpoint

        return default_checkpoint()
    path = pathlib.Path(model)
    if path.is_dir():
        return str(path.resolve())
    if path.exists():
        raise CliError(
            f"MODEL {model!r} is a file; expected a train output directory, a .keras "
            "file, a checkpoint directory or a keras-hub preset name"
        )
    is_uri = model.startswith(("kaggle://", "hf://", "gs://"))
    if not is_uri and (os.sep in model or model.startswith(".")):
        raise CliError(f"MODEL {model!r}: no such directory")
    return model


def encoder_or_saved_path(model):
    """MODEL as the `.keras` file it names, or else as a freshly loaded encoder.

    For consumers that accept either (`keras_cosent.export.export_saved_model`):
    a saved encoder then need not be loaded in this process at all.
    """
    saved = saved_encoder_path(model)
    return str(saved) if saved is not None else load_encoder(model)


def load_encoder(model, pooling=None, max_length=None):
    """Loads MODEL as a `SentenceEncoder`.

    Args:
        model: what the user passed as MODEL or `--backbone` (see the module docstring).
        pooling: pooling for a checkpoint; a saved encoder keeps its own.
            `None` takes the checkpoint's (a sentence-transformers folder's
            Pooling module), else mean.
        max_length: token limit; `None` keeps a saved encoder's, or takes the
            checkpoint's (a sentence-transformers folder's `max_seq_length`,
            else 128).

    Returns:
        A `keras_cosent.models.SentenceEncoder`.
    """
    import keras

    from keras_cosent.models import SentenceEncoder

    saved = saved_encoder_path(model)
    try:
        if saved is not None:
            encoder = keras.saving.load_model(saved)
            if not isinstance(encoder, SentenceEncoder):
                raise CliError(
                    f"{saved} holds a {type(encoder).__name__}, not a keras-cosent SentenceEncoder"
                )
            if max_length is not None:
                encoder.max_length = int(max_length)
            return encoder
        checkpoint = resolve_checkpoint(model)
        return SentenceEncoder.from_checkpoint(
            checkpoint, pooling=pooling, max_length=None if max_length is None else int(max_length)
        )
    except (ValueError, OSError) as error:
        reason = one_line(error)
        if not os.path.exists(model):
            # keras-hub lists every kind of handle it accepts; its first
            # sentence is the part that concerns this MODEL.
            reason = reason.split(". ")[0]
            raise CliError(
                f"MODEL {model!r} is not a train output directory, a .keras file, a "
                f"checkpoint directory or a keras-hub preset ({reason})"
            ) from error
        raise CliError(f"cannot load MODEL {model!r}: {reason}") from error
