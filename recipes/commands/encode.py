"""`keras-cosent encode`: sentences, one per line, to a float32 `.npy` of unit-length embeddings."""

import click

from recipes.context import pass_environment
from recipes.errors import CliError
from recipes.options import backend_option
from recipes.options import batch_size_option
from recipes.options import check_truncate_dim_option
from recipes.options import max_length_option
from recipes.options import truncate_dim_option
from recipes.output_files import refuse_existing
from recipes.output_files import refuse_input
from recipes.output_files import refuse_unwritable
from recipes.output_files import write_atomically


# Sentences tokenised and embedded at a time, their rows written straight into
# the output: memory follows this many sentences, not the input (all of a
# million lines' token ids took 0.7 GB, and the embeddings were held twice).
CHUNK_SENTENCES = 16384


def read_sentences(stream, name):
    """The lines of a UTF-8 byte stream; an empty line is an error (rows follow lines)."""
    from keras_cosent.data.text_decoding import decode_text

    text, problem = decode_text(stream.read())
    if problem:
        line, reason = problem
        raise CliError(f"{name}:{line}: {reason}")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    sentences = []
    for number, line in enumerate(lines, start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            raise CliError(
                f"{name}:{number}: empty line; give one sentence per line "
                "(row i of the output is line i)"
            )
        sentences.append(line)
    if not sentences:
        raise CliError(f"{name}: no sentences to encode")
    return sentences


@click.command(short_help="Embed sentences (one per line) into a .npy file.")
@click.argument("model")
@click.argument("input", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("-o", "--output", required=True, show_default=True, type=click.Path(dir_okay=False),
              help="The .npy file to write: float32, one L2-normalised row per input line.")
@batch_size_option()
@max_length_option
@truncate_dim_option("Keep the first D coordinates of each embedding, re-normalised")
@click.option("--overwrite", is_flag=True, default=False, show_default=True,
              help="Replace an existing --output.")
@backend_option
@pass_environment
def encode(env, model, input, output, batch_size, max_length, truncate_dim, overwrite):
    """Embed the sentences of INPUT (one per line; - reads stdin) with MODEL."""
    # Even with --overwrite: replacing an input with its embeddings loses it.
    refuse_input(output, "--output", input, model)
    refuse_existing(output, overwrite)
    refuse_unwritable(output, "--output")
    # First: read_sentences imports keras_cosent, whose TensorFlow would log while
    # loading unless activate_backend imports it quietly.
    env.activate_backend()
    with click.open_file(input, "rb") as stream:
        sentences = read_sentences(stream, "stdin" if input == "-" else input)
    import numpy as np

    from recipes.model_loading import load_encoder
    from recipes.progress import encoding_bar

    encoder = load_encoder(model, max_length=max_length)
    check_truncate_dim_option(truncate_dim, encoder, model, env.note)
    shape = (len(sentences), truncate_dim or encoder.embedding_dim)

    # Written beside the target and renamed, so a failure leaves no partial file.
    def save(path):
        rows = np.lib.format.open_memmap(path, mode="w+", dtype="float32", shape=shape)
        with encoding_bar(env.note, len(sentences), "sentences") as bar:
            for start in range(0, len(sentences), CHUNK_SENTENCES):
                rows[start:start + CHUNK_SENTENCES] = encoder.encode(
                    sentences[start:start + CHUNK_SENTENCES], batch_size=batch_size,
                    truncate_dim=truncate_dim, progress=bar)
        rows.flush()
        del rows  # closes the file before it is renamed

    write_atomically(output, save)
    env.note(f"wrote {shape[0]} x {shape[1]} float32 embeddings to {output}")
