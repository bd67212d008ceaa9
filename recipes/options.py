"""Option types and decorators that several commands share.

The format and pooling choices are spelled out here rather than read from
keras_cosent, because importing the library would import keras before
`--backend` is applied; tests/recipes check that they match the library's. The
objective names come from the library's one table, `OBJECTIVE`, read only when
a value is checked or help is shown, after the backend is applied.
"""

import json
import math
import pathlib

import click

from recipes.context import BACKENDS
from recipes.context import Environment

FORMATS = ("sts-benchmark", "pair-tsv", "csv", "tsv", "jsonl", "nli-jsonl", "text-lines",
           "triplets-jsonl")
# The formats whose columns --text-columns and --label-column name (as
# keras_cosent.training.objectives.COLUMN_FORMATS, which imports keras).
COLUMN_FORMATS = ("csv", "tsv", "jsonl")
# What `train --keep-best` selects on: the dev metrics logged after every epoch.
KEEP_BEST_METRICS = ("dev_spearman", "ir_dev_ndcg@10", "ir_dev_mrr@10", "ir_dev_recall@10",
                     "ir_dev_map@100")
POOLINGS = ("mean", "cls", "max", "mean_sqrt_len", "weighted_mean", "first_last_avg")
# `train --distance`: the distances of keras_cosent.losses.TripletLoss.
TRIPLET_DISTANCES = ("cosine", "euclidean")
# `train --margin-form`: the forms of keras_cosent.losses.MarginRankingLoss.
MARGIN_FORMS = ("hinge", "logistic")
# `train --mixed-precision`: the Keras dtype policies it accepts.
MIXED_PRECISION_POLICIES = ("mixed_bfloat16", "mixed_float16")

INPUT_FILE = click.Path(exists=True, dir_okay=False)


def loss_options(config, loss):
    """A `train` run's loss options for objective `loss`, as `keras_cosent.training.build`
    takes them.

    Only the ones `loss` (or a term of a joint spec) takes: `--scale` and
    `--temperature` have defaults that every run carries, and `build` refuses
    options its objective does not take. Unset ones are None and leave the
    loss's own default.
    """
    from keras_cosent.training import get_objective

    options = {"scale": config["scale"], "temperature": config["temperature"],
               "margin": config.get("margin"), "distance": config.get("distance"),
               "form": config.get("margin_form"), "symmetric": config.get("symmetric")}
    taken = get_objective(loss).loss_option_names
    return {key: value for key, value in options.items() if key in taken}


class ObjectiveChoice(click.Choice):
    """`click.Choice` over `keras_cosent.training.OBJECTIVES`, read when first needed.

    The library imports keras, so the names are read only when a value is
    checked or the help is shown: by then the command line's `--backend` is
    known, and it is applied first (`Environment.activate_backend`). An
    objective registered before the command runs is a valid `--loss`.
    """

    name = "objective"

    def __init__(self):
        super().__init__((), case_sensitive=True)

    @property
    def choices(self):
        ctx = click.get_current_context(silent=True)
        environment = None if ctx is None else ctx.find_object(Environment)
        if environment is not None:
            environment.activate_backend()
        from keras_cosent.training import OBJECTIVES

        return tuple(OBJECTIVES)

    @choices.setter
    def choices(self, value):
        pass  # always read from the library

    def convert(self, value, param, ctx):
        if (ctx is not None and param is not None
                and ctx.get_parameter_source(param.name) == click.core.ParameterSource.DEFAULT):
            # The command's own default: loading the backend to check it would
            # delay every other option's error by the framework's start-up.
            return value
        # A joint objective, "infonce:1.0,cosent:0.5": checked by the library.
        if isinstance(value, str) and (":" in value or "," in value):
            self.choices  # the backend first
            from keras_cosent.training import get_objective

            try:
                get_objective(value)
            except ValueError as error:
                self.fail(str(error), param, ctx)
            return value
        return super().convert(value, param, ctx)


OBJECTIVE = ObjectiveChoice()


# float32's largest value, the smallest number it rounds to inf, and its smallest
# normal value (keras_cosent.utils.arguments' FLOAT32_MAX, FLOAT32_OVERFLOW and
# FLOAT32_TINY, which import NumPy): every float option ends up in a float32
# computation.
FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_OVERFLOW = 2.0**128 - 2.0**103
FLOAT32_TINY = 1.1754943508222875e-38


class FiniteFloatRange(click.FloatRange):
    """`click.FloatRange` that also refuses `nan`, `inf` and values beyond float32's
    range: nan passes its bounds (every comparison with nan is false), and each would
    fail deep inside training, a value above float32's maximum as inf."""

    def convert(self, value, param, ctx):
        value = super().convert(value, param, ctx)
        if not math.isfinite(value):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        if abs(value) >= FLOAT32_OVERFLOW:
            self.fail(f"{value!r} is beyond float32's largest value {FLOAT32_MAX:.8g} "
                      "(it is computed in float32).", param, ctx)
        return value


class PositiveFloat(FiniteFloatRange):
    """A float > 0 that float32 holds as a normal number: a learning rate of 1e-40 is
    0 or subnormal in float32, and a temperature that small divides into inf."""

    def __init__(self):
        super().__init__(min=0, min_open=True)

    def convert(self, value, param, ctx):
        value = super().convert(value, param, ctx)
        if value < FLOAT32_TINY:
            self.fail(f"{value!r} is below float32's smallest normal value {FLOAT32_TINY:.8g} "
                      "(it is computed in float32).", param, ctx)
        return value


class FractionOrOff(FiniteFloatRange):
    """A fraction in [0, 1), or `off`: the option turned off even where a recipe sets it.

    `off` stays the string "off" (not None) in the run's config, so that the
    stored replay command spells it out instead of leaving the recipe's value
    to fill the gap.
    """

    name = "fraction|off"

    def __init__(self):
        super().__init__(min=0, max=1, max_open=True)

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower() == "off":
            return "off"
        return super().convert(value, param, ctx)


def fraction_or_none(value):
    """The float of a `FractionOrOff` option's value; None for `off` or unset."""
    return None if value in (None, "off") else float(value)

POSITIVE_FLOAT = PositiveFloat()
# NumPy's and Keras' seeders take unsigned 32-bit seeds.
SEED = click.IntRange(min=0, max=2**32 - 1)


def backend_option(function):
    """`--backend` on a command: `keras-cosent train --backend jax` as well as
    `keras-cosent --backend jax train`. It wins over the group's option and
    `KERAS_BACKEND`; Keras is imported only inside the command's body, after it.
    """
    return click.option(
        "--backend",
        type=click.Choice(BACKENDS),
        default=None,
        expose_value=False,
        is_eager=True,
        callback=_set_backend,
        show_default="the group's --backend, else KERAS_BACKEND, else tensorflow",
        help="Keras backend to run on; chosen before Keras is imported.",
    )(function)


def _set_backend(ctx, param, value):
    if value is not None:
        ctx.ensure_object(Environment).backend = value
    return value


def text_column_options(columns):
    """`--text-columns` and `--label-column`, for the csv/tsv/jsonl formats; `columns`
    says in the help which text columns the command reads."""

    def decorate(function):
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
            help=f"Comma-separated text columns of csv/tsv/jsonl files: {columns}.",
        )(function)

    return decorate


def _check_text_columns(ctx, param, value):
    if not all(name.strip() for name in value.split(",")):
        raise click.BadParameter(
            f"{value!r} has an empty column name; expected names separated by commas"
        )
    return ",".join(name.strip() for name in value.split(","))


def parse_text_columns(value):
    """'a,b' -> ('a', 'b')."""
    return tuple(value.split(","))


def check_truncate_dim_option(truncate_dim, encoder, model, note=None):
    """`--truncate-dim` must not exceed the model's embedding size (click checked it is >= 1).

    With `note`, a size that a keras-cosent run directory MODEL was not trained to
    keep (not among its `--matryoshka-dims`, or none given) is noted: it is
    allowed, but nothing trained it. So is, without `--truncate-dim`, the
    `truncate_dim` of a sentence-transformers folder (`export-st --truncate-dim`),
    which sentence-transformers applies and keras-cosent does not.
    """
    if truncate_dim is None:
        saved = _saved_truncate_dim(model)
        if note is not None and saved is not None:
            note(f"{model} was saved with truncate_dim {saved} (its "
                 "config_sentence_transformers.json), which keras-cosent does not apply: "
                 f"these are the full embeddings; pass --truncate-dim {saved} for their "
                 f"first {saved} coordinates")
        return
    if truncate_dim > encoder.embedding_dim:
        raise click.BadParameter(
            f"{truncate_dim} is larger than the embedding dimension "
            f"{encoder.embedding_dim} of {model}",
            param_hint="--truncate-dim",
        )
    trained = _trained_matryoshka_dims(model)
    if note is None or trained is False or truncate_dim == encoder.embedding_dim:
        return
    if trained is None:
        note(f"--truncate-dim {truncate_dim}: {model} was trained without --matryoshka-dims, "
             "so nothing trained its first coordinates to stand alone")
    elif truncate_dim not in trained:
        note(f"--truncate-dim {truncate_dim}: {model} was trained with --matryoshka-dims "
             f"{','.join(map(str, trained))}, not this size")


def _saved_truncate_dim(model):
    """The `truncate_dim` a sentence-transformers folder MODEL was saved with, or None."""
    try:
        path = pathlib.Path(model) / "config_sentence_transformers.json"
        with open(path, encoding="utf-8") as f:
            saved = json.load(f).get("truncate_dim")
    except (OSError, ValueError, AttributeError):
        return None
    return saved if isinstance(saved, int) and not isinstance(saved, bool) else None


def _trained_matryoshka_dims(model):
    """The `--matryoshka-dims` a keras-cosent run directory was trained with (a tuple),
    None for a run without them, False where MODEL is no readable run directory."""
    try:
        with open(pathlib.Path(model) / "config.json", encoding="utf-8") as f:
            config = json.load(f)["config"]
        dims = config["matryoshka_dims"]
        return None if dims is None else tuple(int(d) for d in str(dims).split(","))
    except (OSError, ValueError, KeyError, TypeError):
        return False


def parse_sizes(value):
    """'384, 256' -> (384, 256): positive, distinct integers separated by commas, or
    raises click's BadParameter naming the bad word (the model's size is checked later)."""
    sizes = []
    for word in value.split(","):
        word = word.strip()
        if not (word.isascii() and word.isdigit()) or int(word) <= 0:
            raise click.BadParameter(
                f"{word!r} in {value!r} is not a positive integer; expected sizes separated "
                "by commas, e.g. 384,256,128,64"
            )
        if int(word) in sizes:
            raise click.BadParameter(f"{value!r} repeats {int(word)}; give each size once")
        sizes.append(int(word))
    return tuple(sizes)


def truncate_dim_option(what):
    """`--truncate-dim D`: `what` the first D coordinates of each embedding (Matryoshka)."""
    return click.option(
        "--truncate-dim",
        type=click.IntRange(min=1),
        default=None,
        show_default="the full embedding",
        help=f"{what} (for models trained with --matryoshka-dims).",
    )


def batch_size_option(default=32):
    return click.option(
        "--batch-size",
        type=click.IntRange(min=1),
        default=default,
        show_default=True,
        help="Sentences per forward pass.",
    )


def faiss_option(function):
    """`--faiss`: the exact search through faiss instead of NumPy, when faiss imports."""
    return click.option(
        "--faiss",
        "use_faiss",
        is_flag=True,
        default=False,
        show_default=True,
        callback=_check_faiss,
        help="Search with an exact faiss index (IndexFlatIP) instead of NumPy's chunked "
        "products: the same documents, near-ties aside. Needs faiss "
        '(pip install "keras-cosent[faiss]").',
    )(function)


def identical_ids_option(what):
    """`--ignore-identical-ids`: leave each query's own document out of `what`."""
    return click.option(
        "--ignore-identical-ids",
        is_flag=True,
        default=False,
        show_default=True,
        help=f"Leave a query's own document (the corpus document with the query's id: in "
        f"BEIR's ArguAna and Quora every query is also a document) out of {what}, as "
        "BEIR's evaluation does.",
    )


def unknown_ids_option(function):
    """`--unknown-ids`: what a qrels row naming a missing query or document does."""
    return click.option(
        "--unknown-ids",
        type=click.Choice(("error", "report")),
        default="error",
        show_default=True,
        help="qrels rows naming a query or document that queries.jsonl or corpus.jsonl "
        "lacks: 'error' stops at the first, naming file and line; 'report' reads on and "
        "counts them (BEIR's ArguAna judges a document its corpus lacks): an unknown "
        "query's rows are left out; an unknown document, in scoring, stays relevant and is "
        "never retrieved, as BEIR's evaluation counts it, and makes no mined or training "
        "row.",
    )(function)


def _check_faiss(ctx, param, value):
    if value:
        try:
            import faiss  # noqa: F401
        except ImportError as error:
            raise click.BadParameter(
                f'faiss does not import ({error}); pip install "keras-cosent[faiss]", '
                "or leave --faiss out for the NumPy search",
                ctx=ctx, param=param,
            ) from None
    return value


def max_length_option(function):
    return click.option(
        "--max-length",
        type=click.IntRange(min=3),
        default=None,
        show_default="the model's",
        help="Tokens per sentence, [CLS] and [SEP] included; longer ones are cut.",
    )(function)
