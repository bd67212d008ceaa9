"""`keras-cosent mine`: hard negatives for (query, positive) pairs, as training JSON lines.

Reads queries and a corpus in BEIR's JSON-lines format (and, optionally, BEIR
qrels naming each query's positives), embeds both with MODEL (with a progress
bar on stderr, stdout keeping the report), and hands the embeddings to the
library's `mine_hard_negatives` (exact chunked search, rank window, margins,
seeded sampling). The rows are written with `write_retrieval_triplets` to a
temporary file renamed into place, so an error leaves no output.
`keras_cosent.data.read_retrieval_triplets` reads them back as (query,
positive, negative...) columns for InfoNCE.
"""

import os

import click

from recipes.context import pass_environment
from recipes.errors import CliError
from recipes.errors import one_line
from recipes.options import INPUT_FILE
from recipes.options import FiniteFloatRange
from recipes.options import SEED
from recipes.options import backend_option
from recipes.options import batch_size_option
from recipes.options import check_truncate_dim_option
from recipes.options import faiss_option
from recipes.options import identical_ids_option
from recipes.options import max_length_option
from recipes.options import truncate_dim_option
from recipes.options import unknown_ids_option
from recipes.output_files import refuse_existing
from recipes.output_files import refuse_input
from recipes.output_files import refuse_unwritable
from recipes.output_files import write_atomically


def blank_line_between_records(path):
    """The number of the first blank line of the JSON-lines file at `path` that a
    record follows (trailing blank lines shift nothing), or None."""
    blank = None
    # Lines as the reader splits them: at \n only, a BOM dropped (its file:line
    # errors came first, so the bytes are UTF-8).
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            line = raw.decode("utf-8-sig" if number == 1 else "utf-8", errors="replace")
            if not line.strip():
                blank = blank or number
            elif blank is not None:
                return blank
    return None


@click.command(short_help="Mine hard negatives into (query, positive, negatives) JSON lines.")
@click.argument("model")
@click.option("--queries", type=INPUT_FILE, required=True, show_default=True,
              help="Queries as BEIR JSON lines: {\"_id\", \"text\"} per line.")
@click.option("--corpus", type=INPUT_FILE, required=True, show_default=True,
              help="Documents as BEIR JSON lines: {\"_id\", \"title\", \"text\"} per line.")
@click.option("--qrels", type=INPUT_FILE, default=None,
              show_default="none: query on line i pairs with document on line i",
              help="BEIR qrels TSV (query-id, corpus-id, score); score >= 1 is a positive (a "
              "document judged 0 may be mined as a negative). "
              "Without it, the corpus' rows are the queries' positives, in order.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, show_default=True,
              help="JSON lines to write: {\"query\", \"positive\", \"negatives\": [...]} per "
              "(query, positive).")
@click.option("--num-negatives", type=click.IntRange(min=1), default=3, show_default=True,
              help="Negatives per row.")
@click.option("--range-min", type=click.IntRange(min=0), default=0, show_default=True,
              help="Skip this many best candidates (ranks counted with the positives removed).")
@click.option("--range-max", type=click.IntRange(min=1), default=50, show_default=True,
              help="Candidates come from ranks below this one.")
@click.option("--margin", type=FiniteFloatRange(min=0), default=None, show_default="none",
              help="Drop candidates whose cosine exceeds the positive's minus this margin.")
@click.option("--relative-margin", type=FiniteFloatRange(min=0, max=1, max_open=True),
              default=None, show_default="none",
              help="Drop candidates whose cosine exceeds the positive's minus this fraction of "
                   "its magnitude (times 1 - this, for a positive cosine).")
@click.option("--sampling", type=click.Choice(("top", "random")), default="top",
              show_default=True,
              help="top: the best surviving candidates; random: a seeded draw among them.")
@click.option("--fill", type=click.Choice(("none", "random")), default="none", show_default=True,
              help="Rows left short of --num-negatives by the window and margins: 'none' "
              "writes them short; 'random' completes them with random corpus documents "
              "that are not positives and that the margins accept.")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed of --sampling random and --fill random.")
@batch_size_option(default=64)
@max_length_option
@click.option("--overwrite", is_flag=True, default=False, show_default=True,
              help="Replace an existing --output.")
@truncate_dim_option("Rank by the first D coordinates of each embedding, re-normalised")
@faiss_option
@identical_ids_option("its negatives")
@unknown_ids_option
@backend_option
@pass_environment
def mine(env, model, queries, corpus, qrels, output, num_negatives, range_min, range_max,
         margin, relative_margin, sampling, fill, seed, batch_size, max_length, overwrite,
         truncate_dim, use_faiss, ignore_identical_ids, unknown_ids):
    """Mine hard negatives for each (query, positive) with MODEL.

    For each query the corpus is ranked by cosine; its known positives are
    removed, ranks [--range-min, --range-max) kept, candidates too close to the
    positive dropped (--margin, --relative-margin: the nearest neighbours are
    often unlabelled positives), and --num-negatives taken. Reports how many
    queries got fewer negatives than asked (their rows are still written, or
    completed with random documents under --fill random).

    \b
    keras-cosent mine all-MiniLM-L6-v2 --queries train/queries.jsonl \\
        --corpus train/corpus.jsonl --qrels train/qrels/train.tsv -o triplets.jsonl
    """
    if range_min >= range_max:
        raise click.BadParameter(
            f"{range_min} should be below --range-max {range_max}",
            param_hint="--range-min",
        )
    if ignore_identical_ids and qrels is None:
        raise click.BadParameter(
            "matches query ids to document ids, which pair only through --qrels; give "
            "--qrels (without it, query line i pairs with document line i)",
            param_hint="--ignore-identical-ids",
        )
    # Even with --overwrite: replacing an input with the rows mined from it loses it.
    refuse_input(output, "--output", queries, corpus, qrels, model)
    refuse_existing(output, overwrite)
    refuse_unwritable(output, "--output")
    env.activate_backend()
    import numpy as np

    from keras_cosent.data import read_retrieval_files
    from keras_cosent.data import write_retrieval_triplets
    from keras_cosent.retrieval import mine_hard_negatives
    from recipes.data_loading import reader_notes
    from recipes.data_loading import training_judgements
    from recipes.data_loading import unknown_ids_hint
    from recipes.evaluation import note_identical_ids
    from recipes.model_loading import load_encoder
    from recipes.progress import announced

    from keras_cosent.data import DataFormatError

    try:
        with unknown_ids_hint(), reader_notes(env):
            data = read_retrieval_files(corpus, queries, qrels, unknown_ids=unknown_ids)
    except DataFormatError as error:
        # Which option the file was given to ("empty.jsonl: no rows" left it to
        # guess between --queries and --corpus).
        options = [o for o, p in (("--queries", queries), ("--corpus", corpus), ("--qrels", qrels))
                   if p is not None and os.path.abspath(p) == os.path.abspath(error.path)]
        if len(options) != 1:
            raise
        raise CliError(f"{options[0]} {one_line(error)}") from error
    if qrels is None:
        for option, path in (("--queries", queries), ("--corpus", corpus)):
            line = blank_line_between_records(path)
            if line is not None:
                raise CliError(
                    f"{option} {path}:{line}: blank line; without --qrels the query on line "
                    "i pairs with the document on line i, and the reader skips blank lines, "
                    "so every pair after it would shift: remove it, or give --qrels"
                )
        if len(data.corpus) < len(data.queries):
            raise CliError(
                f"--corpus {corpus} has {len(data.corpus)} documents, fewer than the "
                f"{len(data.queries)} queries of --queries {queries}; without --qrels the "
                "query on line i pairs with the document on line i"
            )
        queries_arg, corpus_arg = list(data.queries.values()), list(data.corpus.values())
        positives = [[i] for i in range(len(queries_arg))]
    else:
        data = training_judgements(data, env, "--qrels", name=qrels)
        queries_arg, corpus_arg, positives = data.queries, data.corpus, data.qrels
        note_identical_ids(env, data, "--queries", ignore_identical_ids, mining=True)
    query_texts = list(data.queries.values())
    loaded = load_encoder(model, max_length=max_length)
    check_truncate_dim_option(truncate_dim, loaded, model, env.note)
    encoder = announced(loaded, env.note, "queries", "documents")
    query_embeddings = encoder.encode(query_texts, batch_size=batch_size,
                                      truncate_dim=truncate_dim)
    corpus_embeddings = encoder.encode(list(data.corpus.values()), batch_size=batch_size,
                                       truncate_dim=truncate_dim)
    rows, report = mine_hard_negatives(
        queries_arg, corpus_arg, positives,
        query_embeddings=np.asarray(query_embeddings),
        corpus_embeddings=np.asarray(corpus_embeddings),
        num_negatives=num_negatives, range_min=range_min, range_max=range_max,
        margin=margin, relative_margin=relative_margin, sampling=sampling,
        fill=None if fill == "none" else fill, seed=seed, use_faiss=use_faiss,
        ignore_identical_ids=ignore_identical_ids,
    )
    if not rows:
        raise CliError(
            f"no row to write: the query or the positive of all {report['blank_rows']} "
            f"(query, positive) pairs is blank (--queries {queries}, --corpus {corpus})"
        )
    write_atomically(output, lambda path: write_retrieval_triplets(rows, path))
    env.log(
        f"wrote {report['rows']} rows ({report['queries']} queries) with up to "
        f"{num_negatives} negatives to {output}"
    )
    if report["blank_rows"]:
        env.log(
            f"{report['blank_rows']} (query, positive) pairs with a blank query or positive "
            "make no row and were left out"
        )
    if report["blank_documents"]:
        env.log(f"{report['blank_documents']} blank documents of {corpus} were never taken as "
                "negatives")
    if report["repeated_documents"]:
        env.log(f"{report['repeated_documents']} documents of {corpus} repeat an earlier "
                "document's text; each text was one candidate, never two negatives of a row")
    if report["filled_rows"]:
        env.log(
            f"{report['filled_rows']} of {report['short_rows']} short rows were completed "
            "with random documents (--fill random)"
        )
    if report["short_rows"] > report["filled_rows"]:
        still = report["short_rows"] - report["filled_rows"]
        # The query count is of the rows short before any fill: said as such
        # beside the rows still short, it read as queries still short.
        had_short = (f"{report['short_queries']} of {report['queries']} queries had short "
                     "rows" + (" before the fill" if report["filled_rows"] else ""))
        env.log(
            f"{still} rows ({had_short}) have fewer than {num_negatives} negatives; widen "
            "--range-max, loosen the margins"
            + ("" if fill == "random" else " or use --fill random")
        )
    else:
        env.log(f"every row has {num_negatives} negatives")
