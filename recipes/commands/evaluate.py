"""`keras-cosent evaluate`: Spearman and Pearson (x 100) of a model's cosines on scored pairs."""

import json
import os

import click

from recipes.context import pass_environment
from recipes.options import FORMATS
from recipes.options import INPUT_FILE
from recipes.options import backend_option
from recipes.options import batch_size_option
from recipes.options import max_length_option
from recipes.options import parse_text_columns
from recipes.options import text_column_options


@click.command(short_help="Spearman/Pearson x 100 of a model on scored pairs.")
@click.argument("model")
@click.argument("data", type=INPUT_FILE)
@click.option("--format", type=click.Choice(FORMATS), default="pair-tsv", show_default=True,
              help="Format of DATA (pair-tsv: sentence1 TAB sentence2 TAB score).")
@text_column_options
@batch_size_option(default=64)
@max_length_option
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              show_default="none",
              help="Also write the results to this JSON file.")
@backend_option
@pass_environment
def evaluate(env, model, data, format, text_columns, label_column, batch_size, max_length,
             json_path):
    """Evaluate MODEL on the scored sentence pairs in DATA.

    Prints the corpus-level Spearman and Pearson correlations (x 100) between
    the cosine of each pair's embeddings and its score, as STS benchmarks report.
    """
    env.activate_backend()
    from recipes.data_loading import read_scored_pairs
    from recipes.evaluation import evaluate_sts
    from recipes.model_loading import load_encoder
    from recipes.reporting import results_table

    dataset = read_scored_pairs(
        data, format, parse_text_columns(text_columns), label_column, option="DATA"
    )
    encoder = load_encoder(model, max_length=max_length)
    result = evaluate_sts(encoder, dataset, batch_size=batch_size)
    env.log(results_table({os.path.basename(data): result}))
    if json_path is not None:
        record = {"model": model, "data": os.path.abspath(data), "format": format, **result}
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=2)
            f.write("\n")
        env.note(f"results written to {json_path}")
