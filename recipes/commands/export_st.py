"""`keras-cosent export-st`: a model as a sentence-transformers / Hugging Face folder."""

import os

import click

from recipes.context import pass_environment
from recipes.errors import CliError
from recipes.errors import one_line
from recipes.options import backend_option
from recipes.options import truncate_dim_option
from recipes.output_files import refuse_unwritable


def _refuse_overlap(model, source, directory):
    """Refuses a DIRECTORY that is, or holds, MODEL's files at `source`."""
    if os.path.exists(source):
        source, target = os.path.realpath(source), os.path.realpath(directory)
        if source == target or source.startswith(target + os.sep):
            raise CliError(f"DIRECTORY {directory} holds MODEL {model}, which writing the "
                           "folder would replace; choose another DIRECTORY")


@click.command("export-st", short_help="Write a model as a sentence-transformers folder.")
@click.argument("model")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--overwrite", is_flag=True, default=False, show_default=True,
              help="Replace DIRECTORY when it exists and is not empty.")
@truncate_dim_option("Save the folder with truncate_dim D: sentence-transformers returns the "
                     "first D coordinates, not re-normalised")
@backend_option
@pass_environment
def export_st(env, model, directory, overwrite, truncate_dim):
    """Write MODEL (a BERT encoder) to DIRECTORY as a sentence-transformers folder.

    SentenceTransformer(DIRECTORY) then embeds as MODEL does; transformers reads
    its BertModel, and every keras-cosent command reads it back as MODEL (at
    full width: --truncate-dim is not applied from the folder, and the commands
    note it).
    """
    _refuse_overlap(model, model, directory)
    if os.path.isdir(directory) and os.listdir(directory) and not overwrite:
        raise CliError(f"{directory} already exists and is not empty; pass --overwrite "
                       "to replace it")
    refuse_unwritable(directory, "DIRECTORY")
    env.activate_backend()
    from keras_cosent.export import export_sentence_transformers
    from keras_cosent.models.encoder_loading import PACKAGED_ALIASES
    from keras_cosent.models.encoder_loading import resolve_checkpoint
    from recipes.model_loading import load_encoder
    from recipes.options import check_truncate_dim_option

    if model in PACKAGED_ALIASES:
        # The name stands for the packaged folder, which --overwrite would replace.
        _refuse_overlap(model, resolve_checkpoint(model), directory)

    encoder = load_encoder(model)
    check_truncate_dim_option(truncate_dim, encoder, model, env.note)
    try:
        path = export_sentence_transformers(encoder, directory, overwrite=overwrite,
                                            truncate_dim=truncate_dim)
    except ValueError as error:  # an encoder the format cannot hold (pooling, backbone)
        raise CliError(f"cannot write MODEL {model!r} as a sentence-transformers folder: "
                       f"{one_line(error)}") from error
    env.log(path)
    env.note(f"written; load it with: SentenceTransformer({path!r})")
