"""Option types and decorators that several commands share.

The choices are spelled out here rather than read from keras_cosent, because
importing the library would import keras before `--backend` is applied;
tests/recipes check that they match the library's.
"""

import click

FORMATS = ("sts-benchmark", "pair-tsv", "csv", "tsv", "jsonl", "nli-jsonl", "text-lines")
LOSSES = ("cosent", "infonce", "simcse", "angle", "cosine-mse", "sbert-softmax")
POOLINGS = ("mean", "cls", "max", "mean_sqrt_len", "weighted_mean", "first_last_avg")

INPUT_FILE = click.Path(exists=True, dir_okay=False)
POSITIVE_FLOAT = click.FloatRange(min=0, min_open=True)


def text_column_options(function):
    """`--text-columns` and `--label-column`, for the csv/tsv/jsonl formats."""
    function = click.option(
        "--label-column",
        default="score",
        show_default=True,
        help="Label column of csv/tsv/jsonl files (header name or JSON key).",
    )(function)
    return click.option(
        "--text-columns",
        default="sentence1,sentence2",
        show_default=True,
        callback=_check_text_columns,
        help="Comma-separated text columns of csv/tsv/jsonl files, e.g. "
        "anchor,positive,negative for InfoNCE.",
    )(function)


def _check_text_columns(ctx, param, value):
    if not all(name.strip() for name in value.split(",")):
        raise click.BadParameter(
            f"{value!r} has an empty column name; expected names separated by commas"
        )
    return ",".join(name.strip() for name in value.split(","))


def parse_text_columns(value):
    """'a,b' -> ('a', 'b')."""
    return tuple(value.split(","))


def batch_size_option(default=32):
    return click.option(
        "--batch-size",
        type=click.IntRange(min=1),
        default=default,
        show_default=True,
        help="Sentences per forward pass.",
    )


def max_length_option(function):
    return click.option(
        "--max-length",
        type=click.IntRange(min=3),
        default=None,
        show_default="the model's",
        help="Tokens per sentence, [CLS] and [SEP] included; longer ones are cut.",
    )(function)
