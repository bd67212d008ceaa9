"""`keras-cosent evaluate`: STS correlations, retrieval metrics on a BEIR folder, or clustering.

`--task sts` (the default) gives Spearman and Pearson (x 100) of pair cosines;
`--task retrieval` gives nDCG@10, MRR@10, Recall@10 and MAP@100 (x 100,
trec_eval's definitions) of the cosine ranking of a BEIR folder's corpus for
each of its queries; `--task clustering` gives the V-measure (x 100) of k-means
clusters of labelled texts. All go through `recipes.evaluation`, the code
`train` scores its dev sets with.
"""

import os

import click
from click.core import ParameterSource

from recipes.context import pass_environment
from recipes.errors import CliError
from recipes.options import COLUMN_FORMATS
from recipes.options import FORMATS
from recipes.options import backend_option
from recipes.options import batch_size_option
from recipes.options import faiss_option
from recipes.options import identical_ids_option
from recipes.options import max_length_option
from recipes.options import parse_sizes
from recipes.options import parse_text_columns
from recipes.options import text_column_options
from recipes.options import unknown_ids_option
from recipes.output_files import refuse_existing
from recipes.output_files import refuse_input
from recipes.output_files import refuse_unwritable
from recipes.output_files import write_json
from recipes.retrieval_folders import retrieval_split

TASKS = ("sts", "retrieval", "clustering")
# The tasks that read each option: given explicitly with another task, it is an error.
OPTION_TASKS = {
    "format": ("sts", "clustering"),
    "text_columns": ("sts", "clustering"),
    "label_column": ("sts", "clustering"),
    "split": ("retrieval",),
    "top_k": ("retrieval",),
    "per_query": ("retrieval",),
    "use_faiss": ("retrieval",),
    "ignore_identical_ids": ("retrieval",),
    "unknown_ids": ("retrieval",),
}
CLUSTERING_FORMATS = COLUMN_FORMATS


@click.command(short_help="STS Spearman/Pearson, retrieval nDCG/MRR/Recall/MAP, or "
                           "clustering V-measure, x 100.")
@click.argument("model")
@click.argument("data", type=click.Path(exists=True))
@click.option("--task", type=click.Choice(TASKS), default="sts", show_default=True,
              help="sts: DATA is a file of scored pairs; retrieval: DATA is a BEIR folder "
              "(corpus.jsonl, queries.jsonl, qrels/<split>.tsv); clustering: DATA is a "
              "csv/tsv/jsonl file of labelled texts (columns text and label unless "
              "--text-columns/--label-column say otherwise).")
@click.option("--format", type=click.Choice(FORMATS), default="pair-tsv", show_default=True,
              help="Format of DATA for --task sts (pair-tsv: sentence1 TAB sentence2 TAB score); "
              "--task clustering reads csv, tsv or jsonl, by default as the file's extension "
              "(.csv, .tsv, .jsonl or .json) says.")
@text_column_options("the two sentences of a pair, or one text with --task clustering")
@click.option("--split", default=None, show_default="the folder's only qrels file, else test",
              help="Retrieval: the qrels/<split>.tsv of DATA to evaluate on.")
@click.option("--top-k", type=click.IntRange(min=100), default=100, show_default=True,
              help="Retrieval: documents retrieved per query (exact search); metrics are "
              "computed at 1, 3, 5, 10, 100 and this depth.")
@batch_size_option(default=64)
@max_length_option
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              show_default="none",
              help="Also write the results to this JSON file.")
@click.option("--per-query", is_flag=True, default=False, show_default=True,
              help="Retrieval: also write each query's nDCG@10, MRR@10, Recall@10 and "
              "MAP@100 into the --json file (\"per_query\"), to compare two models "
              "query by query.")
@click.option("--overwrite", is_flag=True, default=False, show_default=True,
              help="Replace an existing --json file.")
@click.option("--truncate-dim", "truncate_dims", default=None,
              callback=lambda ctx, param, value: None if value is None else parse_sizes(value),
              show_default="the full embedding",
              help="Evaluate the first D coordinates of each embedding, re-normalised (for "
              "models trained with --matryoshka-dims); several sizes separated by commas "
              "(384,128,64) give one row each, from one encoding.")
@faiss_option
@identical_ids_option("its ranking (--task retrieval)")
@unknown_ids_option
@backend_option
@pass_environment
@click.pass_context
def evaluate(ctx, env, model, data, task, format, text_columns, label_column, split, top_k,
             batch_size, max_length, json_path, per_query, overwrite, truncate_dims, use_faiss,
             ignore_identical_ids, unknown_ids):
    """Evaluate MODEL on DATA.

    \b
    --task sts (default): the corpus-level Spearman and Pearson correlations
      (x 100) between the cosine of each pair's embeddings and its score, as
      STS benchmarks report.
    --task retrieval: DATA is a BEIR folder; every query's documents are ranked
      by cosine over the whole corpus and scored against the qrels: nDCG@10,
      MRR@10, Recall@10 and MAP@100 (x 100, as trec_eval computes them).
    --task clustering: the V-measure (x 100), the measure of MTEB's clustering
      tasks, of scikit-learn's KMeans (k = number of labels, n_init=10,
      random_state=0) on the embeddings of labelled texts (MTEB clusters with
      MiniBatchKMeans: a figure of the same kind, not the same digits).
    """
    _check_task_options(ctx, task)
    if json_path is not None:
        refuse_input(json_path, "--json", data, model)
        refuse_existing(json_path, overwrite, "--json")
        refuse_unwritable(json_path, "--json")
    if per_query and json_path is None:
        raise click.BadParameter(
            "writes each query's figures into the --json file; add --json FILE",
            param_hint="--per-query",
        )
    if overwrite and json_path is None:
        raise click.BadParameter("replaces an existing --json file; add --json FILE",
                                 param_hint="--overwrite")
    if task != "retrieval" and os.path.isdir(data):
        raise click.BadParameter(
            f"{data!r} is a directory; --task {task} evaluates a file "
            "(--task retrieval takes a BEIR folder)", param_hint="DATA"
        )
    if task == "retrieval" and not os.path.isdir(data):
        raise click.BadParameter(
            f"{data!r} is a file; --task retrieval takes a BEIR folder holding "
            "corpus.jsonl, queries.jsonl and qrels/<split>.tsv", param_hint="DATA"
        )
    if task == "retrieval":
        split = retrieval_split(data, split, option="DATA", preferred="test", note=env.note)
    if task == "sts":
        _check_column_options(ctx, format)
    if task == "clustering":
        format, text_column, label_column = _clustering_columns(
            ctx, data, format, text_columns, label_column
        )
        try:
            import sklearn  # noqa: F401  (k-means; an optional dependency)
        except ImportError as error:
            raise CliError(f"--task clustering runs scikit-learn's k-means, which does not "
                           f'import ({error}); pip install "keras-cosent[clustering]"') from None
    env.activate_backend()
    from recipes.model_loading import load_encoder
    from recipes.reporting import results_table

    # As `data`: a path absolute, so the JSON names it from anywhere; a preset name as given.
    model_record = os.path.abspath(model) if os.path.exists(model) else model
    if task == "sts":
        from recipes.data_loading import read_scored_pairs
        from recipes.evaluation import evaluate_sts

        dataset = read_scored_pairs(
            data, format, parse_text_columns(text_columns), label_column, option="DATA"
        )
        encoder = load_encoder(model, max_length=max_length)
        results = {dim: evaluate_sts(encoder_at, dataset, batch_size=batch_size, note=note)
                   for dim, encoder_at, note in _sizes(env, encoder, model, truncate_dims,
                                                       "distinct sentences")}
        name = os.path.basename(data)
        record = {"model": model_record, "data": os.path.abspath(data), "format": format}
    elif task == "clustering":
        from recipes.data_loading import read_labelled_texts
        from recipes.evaluation import evaluate_clustering

        texts, labels = read_labelled_texts(data, format, text_column, label_column)
        encoder = load_encoder(model, max_length=max_length)
        results = {dim: evaluate_clustering(encoder_at, texts, labels, batch_size=batch_size,
                                            note=note)
                   for dim, encoder_at, note in _sizes(env, encoder, model, truncate_dims,
                                                       "texts")}
        name = os.path.basename(data)
        record = {"model": model_record, "data": os.path.abspath(data), "task": task,
                  "text_column": text_column, "label_column": label_column}
    else:
        from recipes.data_loading import read_retrieval_folder
        from recipes.data_loading import refuse_blank_queries
        from recipes.evaluation import evaluate_retrieval
        from recipes.evaluation import note_identical_ids

        dataset = read_retrieval_folder(data, split, option="DATA", unknown_ids=unknown_ids,
                                        env=env)
        refuse_blank_queries(dataset, "DATA")
        note_identical_ids(env, dataset, "DATA", ignore_identical_ids)
        encoder = load_encoder(model, max_length=max_length)
        results = {dim: evaluate_retrieval(encoder_at, dataset, batch_size=batch_size,
                                           top_k=top_k, per_query=per_query,
                                           use_faiss=use_faiss,
                                           ignore_identical_ids=ignore_identical_ids, note=note)
                   for dim, encoder_at, note in _sizes(env, encoder, model, truncate_dims,
                                                       "queries", "documents")}
        name = f"{os.path.basename(os.path.normpath(data))} ({split})"
        record = {"model": model_record, "data": os.path.abspath(data), "task": task,
                  "split": split, "top_k": top_k, "search": "faiss" if use_faiss else "numpy",
                  "ignore_identical_ids": ignore_identical_ids}
    if truncate_dims is None:
        record.update(results[None])
        rows = {name: results[None]}
    elif len(truncate_dims) == 1:
        record.update(truncate_dim=truncate_dims[0], **results[truncate_dims[0]])
        rows = {f"{name}, dim {truncate_dims[0]}": results[truncate_dims[0]]}
    else:
        record.update(truncate_dims=list(truncate_dims),
                      by_dim={str(dim): result for dim, result in results.items()})
        rows = {f"{name}, dim {dim}": result for dim, result in results.items()}
    rows = {row: {key: value for key, value in result.items() if key != "per_query"}
            for row, result in rows.items()}
    env.log(results_table(rows))
    if json_path is not None:
        write_json(json_path, record)
        env.note(f"results written to {json_path}")


def _sizes(env, encoder, model, truncate_dims, *what):
    """`(dim, encoder, note)` for each size --truncate-dim asks for (`(None, encoder,
    env.note)`: the full embedding, without it). The sizes' encoders share one
    encoding of each text set, announced once with a progress bar (`what` names
    the sets in turn), and evaluate it without announcing it again."""
    from recipes.evaluation import Truncating
    from recipes.options import check_truncate_dim_option
    from recipes.progress import announced

    if truncate_dims is None:
        check_truncate_dim_option(None, encoder, model, env.note)
        return [(None, encoder, env.note)]
    for dim in truncate_dims:  # every size checked before any is noted
        check_truncate_dim_option(dim, encoder, model)
    for dim in truncate_dims:
        check_truncate_dim_option(dim, encoder, model, env.note)
    shared, cache = announced(encoder, env.note, *what), {}
    return [(dim, Truncating(shared, dim, cache), None) for dim in truncate_dims]


def _check_task_options(ctx, task):
    """Refuses an option given on the command line that `task` does not read."""
    for param in ctx.command.params:
        tasks = OPTION_TASKS.get(param.name, TASKS)
        given = ctx.get_parameter_source(param.name) == ParameterSource.COMMANDLINE
        if task not in tasks and given:
            raise click.BadParameter(
                f"applies to --task {' or '.join(tasks)} only, not --task {task}",
                param_hint=max(param.opts, key=len),
            )


def _given(ctx, name):
    return ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE


def _check_column_options(ctx, format):
    """Refuses --text-columns or --label-column with an STS format that has fixed columns."""
    if format in CLUSTERING_FORMATS:
        return
    for name, option in (("text_columns", "--text-columns"), ("label_column", "--label-column")):
        if _given(ctx, name):
            raise click.BadParameter(
                f"names columns of --format {', '.join(CLUSTERING_FORMATS)}; --format "
                f"{format} has fixed columns", param_hint=option
            )


def _clustering_columns(ctx, data, format, text_columns, label_column):
    """--format, the text column and the label column of `--task clustering`.

    Their defaults are the STS ones (pair-tsv, sentence1,sentence2, score); left
    at them, clustering infers the format from DATA's extension and reads the
    columns `text` and `label`.
    """
    def given(name):
        return _given(ctx, name)

    if not given("format"):
        extension = os.path.splitext(data)[1].lower()
        if extension not in (".csv", ".tsv", ".jsonl", ".json"):
            raise click.BadParameter(
                f"cannot tell the format of {data!r} from its extension {extension!r}; pass "
                f"--format {', '.join(CLUSTERING_FORMATS)}", param_hint="--format"
            )
        format = None
    elif format not in CLUSTERING_FORMATS:
        raise click.BadParameter(
            f"{format} has no label column; --task clustering reads "
            f"{', '.join(CLUSTERING_FORMATS)}", param_hint="--format"
        )
    text_column = "text"
    if given("text_columns"):
        names = text_columns.split(",")
        if len(names) != 1:
            raise click.BadParameter(
                f"{text_columns!r} names {len(names)} columns; --task clustering reads one",
                param_hint="--text-columns",
            )
        text_column = names[0]
    label_column = label_column if given("label_column") else "label"
    if label_column == text_column:
        # Every text its own class: k-means of n clusters scores a V-measure of 100
        # whatever the model. Named by the option the user typed.
        typed = given("label_column")
        raise click.BadParameter(
            f"{label_column!r} is the text column and the label column"
            f"{'' if typed else ' (the default)'} at once; --task clustering reads the "
            "class labels from a column apart from the texts",
            param_hint="--label-column" if typed else "--text-columns",
        )
    return format, text_column, label_column
