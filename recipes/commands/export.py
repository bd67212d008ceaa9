"""`keras-cosent export`: a model as a versioned SavedModel for TensorFlow Serving."""

import os

import click

from recipes.context import pass_environment
from recipes.options import backend_option
from recipes.options import truncate_dim_option
from recipes.errors import CliError
from recipes.output_files import refuse_unwritable


@click.command(short_help="Export a model as a SavedModel for TF Serving.")
@click.argument("model")
@click.argument("base_dir", type=click.Path(file_okay=False))
@click.option("--version", type=click.IntRange(min=0, max=2**63 - 1), default=None,
              show_default="the next free number", help="Version sub-directory to write.")
@click.option("--max-length", type=click.IntRange(min=3), default=None, show_default="the model's",
              help="Tokens per sentence the string signatures cut to, [CLS] and [SEP] "
              "included.")
@click.option("--string-signatures/--no-string-signatures", default=True, show_default=True,
              help="Include the signatures that take raw sentences (tokenised in the graph, "
              "so the server needs TensorFlow Text); --no-string-signatures writes a "
              "core-ops-only model whose serving_default takes token ids.")
@truncate_dim_option("Serve the first D coordinates of each embedding, re-normalised")
@click.option("--overwrite", is_flag=True, default=False, show_default=True,
              help="Replace an existing BASE_DIR/VERSION.")
@backend_option
@pass_environment
def export(env, model, base_dir, version, max_length, string_signatures, truncate_dim,
           overwrite):
    """Export MODEL to BASE_DIR/VERSION as a SavedModel for TF Serving.

    BASE_DIR is TF Serving's --model_base_path. The SavedModel takes raw
    sentences (serving_default), token ids (encode_tokens) or two lists of
    sentences (similarity) and returns L2-normalised embeddings or cosines;
    check-serving tells which TF Serving builds can load it.
    Works from every backend (off TensorFlow, a TensorFlow subprocess writes it).
    """
    target = os.path.join(base_dir, str(version)) if version is not None else None
    if target is not None and os.path.exists(target) and not overwrite:
        raise CliError(f"{target} already exists; pass --overwrite to replace it, "
                       "or leave out --version to write the next free version")
    refuse_unwritable(base_dir, "BASE_DIR", inside=True)
    env.activate_backend()
    from keras_cosent.export import export_saved_model
    from recipes.model_loading import encoder_or_saved_path
    from recipes.model_loading import has_tokenizer
    from recipes.model_loading import load_encoder
    from recipes.options import check_truncate_dim_option

    if truncate_dim is None and max_length is None:
        encoder = encoder_or_saved_path(model)
    else:
        # Loaded here even when saved, so that a --max-length beyond the model's
        # positions or a too large --truncate-dim is refused before the export starts.
        encoder = load_encoder(model, max_length=max_length)
    # Without --truncate-dim, only a note on a folder saved with truncate_dim.
    check_truncate_dim_option(truncate_dim, encoder, model, env.note)
    if string_signatures and not has_tokenizer(encoder):
        raise CliError(f"MODEL {model} has no tokenizer, so the signatures that take "
                       "sentences cannot be built; pass --no-string-signatures to export "
                       "the token-id signature only")
    # The user's mistakes are refused above; a failure past this point (the
    # TensorFlow worker's included, with its last lines) is a bug and keeps its
    # traceback.
    path = export_saved_model(
        encoder, base_dir, version=version, max_length=max_length,
        overwrite=overwrite, string_signatures=string_signatures, truncate_dim=truncate_dim,
    )
    env.log(path)
    env.note(f"exported; check what TF Serving needs with: keras-cosent check-serving {path}")
