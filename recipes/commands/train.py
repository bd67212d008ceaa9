"""`keras-cosent train`: fine-tune a sentence encoder and leave a complete run directory.

The command checks its options, records the run's configuration, refuses an
`--output` that holds a different run, and hands the work to
`recipes.training.train_encoder` inside a staging directory that is renamed into
place only when everything is written.
"""

import contextlib
import hashlib
import json
import os
import shlex

import click

from recipes import interrupts
from recipes.context import pass_environment
from recipes.errors import CliError
from recipes.errors import one_line
from recipes.multi_dataset import SAMPLINGS
from recipes.multi_dataset import _check_stage_epochs
from recipes.multi_dataset import per_train
from recipes.multi_dataset import resolve_per_train_options
from recipes.options import COLUMN_FORMATS
from recipes.options import FORMATS
from recipes.options import FiniteFloatRange
from recipes.options import FractionOrOff
from recipes.options import INPUT_FILE
from recipes.options import KEEP_BEST_METRICS
from recipes.options import MARGIN_FORMS
from recipes.options import MIXED_PRECISION_POLICIES
from recipes.options import OBJECTIVE
from recipes.options import POOLINGS
from recipes.options import POSITIVE_FLOAT
from recipes.options import SEED
from recipes.options import TRIPLET_DISTANCES
from recipes.options import _check_text_columns
from recipes.options import backend_option
from recipes.options import faiss_option
from recipes.options import identical_ids_option
from recipes.options import parse_sizes
from recipes.options import text_column_options
from recipes.options import unknown_ids_option
from recipes.output_files import refuse_inputs_inside
from recipes.output_files import refuse_unwritable
from recipes.presets import RECIPES
from recipes.presets import apply_recipe
from recipes.reporting import RESULTS_FILE
from recipes.retrieval_folders import retrieval_split
from recipes.run_directory import CONFIG_FILE
from recipes.run_directory import RunDirectory

# Options that say what to do with an existing run, not what the run is.
NOT_CONFIG = ("overwrite", "resume")
# --collapse-guard and its settings, with the values they default to when it is on.
GUARD_DEFAULTS = {"guard_min_delta": 0.01, "guard_factor": 0.5, "guard_patience": 2}
# ESimCSE's options: recorded in config.json only when set, so that runs made
# before they existed keep their configuration (and identity).
ESIMCSE_OPTIONS = ("queue_size", "momentum", "word_repetition")
# The objectives whose loss (InfoNCE) takes the momentum queue's negatives.
QUEUE_LOSSES = ("infonce", "simcse")
# Options recorded in config.json only when set, so that runs made before they
# existed keep their configuration (and identity).
OPTIONAL_OPTIONS = ("distance", "margin_form", "eval_text_columns", "eval_label_column",
                    "max_grad_norm")

_RECIPE_WIDTH = max(len(name) for name in RECIPES)
_RECIPE_LIST = "\n".join(
    f"  {name:<{_RECIPE_WIDTH}} {recipe.summary}" for name, recipe in RECIPES.items()
)


def _check_eval_text_columns(ctx, param, value):
    return None if value is None else _check_text_columns(ctx, param, value)


def _check_matryoshka_dims(ctx, param, value):
    """'384, 256' -> '384,256': positive, distinct integers (the model's size is checked later)."""
    return None if value is None else ",".join(map(str, parse_sizes(value)))


@click.command(
    short_help="Fine-tune a sentence encoder.",
    epilog=f"""\b
Recipes (--recipe NAME fills the options you leave at their defaults):
{_RECIPE_LIST}

Without --train or --train-retrieval, trains on the packaged demo set
(recipes/data, 320 pairs) and evaluates on its 80 dev pairs."""
)
@click.option(
    "--recipe",
    type=click.Choice(tuple(RECIPES)),
    default=None,
    show_default="none",
    help="Preset of the options below from a published set-up (see the list below); "
    "options given explicitly win.",
)
@click.option(
    "--loss",
    type=OBJECTIVE,
    multiple=True,
    default=("cosent",),
    show_default=True,
    help="Training objective, from keras_cosent.training.OBJECTIVES (listed below). "
    "cosent/angle/cosine-mse/sbert-softmax need scored pairs; infonce takes (anchor, "
    "positive[, negatives]) rows (scored pairs: those above 2.5), ntxent (anchor, positive) "
    "pairs (NLI: the entailments); triplet (anchor, positive, negative) and margin-ranking "
    "(query, positive, negatives...) rows (NLI: premise, entailment, contradiction); supcon "
    "and batch-hard-triplet csv/tsv/jsonl texts with a class --label-column; simcse takes "
    "any sentences. Joint: "
    "'infonce:1.0,cosent:0.5' trains the weighted sum on each batch (over scored pairs, "
    "infonce/ntxent count the pairs above 2.5), logging each term as loss_<name> (a weight "
    "of 0 logs a term without training on it). With "
    "several --train files: once (for all) or once per --train, in order.",
)
@click.option("--train", type=INPUT_FILE, multiple=True, default=(),
              show_default="the packaged demo set",
              help="Training file. Repeat it to train on several datasets in one run: each "
              "batch comes from one file and trains with that file's --loss and --format "
              "(given once for all or once per --train, in order); see --sampling, and "
              "--staged to train them one after the other instead.")
@click.option("--sampling", type=click.Choice(SAMPLINGS), default=None,
              show_default="proportional",
              help="With several --train files: interleave their batches in proportion to "
              "their sizes (every batch once per epoch, seeded order) or round-robin (one "
              "batch of each in turn; the epoch ends when the smallest is used up).")
@click.option("--staged", is_flag=True, default=False, show_default=True,
              help="With several --train files: train on them one after the other (stage 1 "
              "= the first --train), each stage with its own --loss, optimizer and "
              "warm-up/decay, in one run directory (metrics.csv's stage column).")
@click.option("--stage-epochs", default=None, callback=_check_stage_epochs,
              show_default="--epochs for every stage",
              help="With --staged: epochs of each stage, comma-separated, e.g. 1,4.")
@click.option("--dev", type=INPUT_FILE, default=None,
              show_default="the demo dev set when --train is not given",
              help="Scored pairs evaluated after every epoch and at the end.")
@click.option("--test", type=INPUT_FILE, default=None, show_default="none",
              help="Scored pairs evaluated once at the end.")
@click.option("--dev-retrieval", type=click.Path(exists=True, file_okay=False), default=None,
              show_default="none",
              help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) scored after "
              "every epoch (ir_dev_ndcg@10, ir_dev_mrr@10, ... in metrics.csv) and at the end.")
@click.option("--dev-retrieval-split", default=None,
              show_default="the folder's only qrels file, else dev",
              help="The qrels/<split>.tsv of --dev-retrieval to score on.")
@click.option("--dev-retrieval-holdout", type=click.IntRange(min=1), default=None,
              show_default="none",
              help="Instead of --dev-retrieval, for a --train-retrieval set with no dev split: "
              "hold out this many of its queries (seed 0, the same every run) as the dev "
              "split, scored against their judged documents and 2,500 others; training "
              "never sees a document that only they judge.")
@click.option("--train-retrieval", type=click.Path(exists=True, file_okay=False), default=None,
              show_default="none",
              help="BEIR folder to train on instead of --train: hard negatives are mined for "
              "each (query, positive) with the starting encoder (--backbone) into the run "
              "directory (mined.jsonl, as `keras-cosent mine` writes), and the (query, "
              "positive, negatives...) rows train the --loss, which must take them as they are "
              "(infonce, as --recipe retrieval-infonce sets; checked before the mining).")
@click.option("--train-retrieval-split", default=None,
              show_default="the folder's only qrels file, else train",
              help="The qrels/<split>.tsv of --train-retrieval to train on.")
@click.option("--mine-negatives", type=click.IntRange(min=0), default=3, show_default=True,
              help="Hard negatives mined per row for --train-retrieval, from each query's 50 "
              "nearest non-positive documents (0: in-batch negatives only). Rows that get "
              "fewer are counted, and completed or left out as --mine-fill says.")
@click.option("--mine-fill", type=click.Choice(("random", "none")), default="random",
              show_default=True,
              help="Rows the margin leaves short of --mine-negatives: 'random' completes them "
              "with random corpus documents the margin accepts (seeded by --seed), so every "
              "row trains; 'none' leaves them out.")
@click.option("--mine-relative-margin", type=FractionOrOff(), default=None,
              show_default="none",
              help="When mining, drop candidates whose cosine exceeds the positive's minus this "
              "fraction of its magnitude (times 1 - this, for a positive cosine): the nearest "
              "neighbours are often unlabelled positives. 'off' keeps them even under a recipe "
              "that sets a margin.")
@identical_ids_option("the --dev-retrieval ranking and the negatives mined for --train-retrieval")
@unknown_ids_option
@faiss_option
@click.option("--keep-best", type=click.Choice(KEEP_BEST_METRICS), default=None,
              show_default="the last epoch",
              help="Save the weights of the epoch with the highest value of this dev metric "
              "(dev_spearman needs --dev, ir_dev_* --dev-retrieval) instead of the last "
              "epoch's; metrics.json marks that epoch \"kept\".")
@click.option("--format", type=click.Choice(FORMATS), multiple=True, default=("pair-tsv",),
              show_default=True,
              help="Format of --train (pair-tsv: sentence1 TAB sentence2 TAB score; "
              "triplets-jsonl: the output of `keras-cosent mine`). With several --train "
              "files: once (for all) or once per --train, in order.")
@click.option("--eval-format", type=click.Choice(FORMATS), default=None,
              show_default="same as (the last) --format", help="Format of --dev and --test.")
@click.option("--eval-text-columns", default=None, callback=_check_eval_text_columns,
              show_default="--text-columns when they name two different columns, else "
              "sentence1,sentence2",
              help="The two text columns of csv/tsv/jsonl --dev and --test files, which are "
              "always scored pairs whatever --train holds (e.g. class-labelled texts for "
              "supcon).")
@click.option("--eval-label-column", default=None,
              show_default="--label-column where --eval-text-columns defaults to "
              "--text-columns, else score",
              help="The score column of csv/tsv/jsonl --dev and --test files.")
@text_column_options("as many as the loss's rows, e.g. anchor,positive,negative for InfoNCE")
@click.option("--backbone", default="all-MiniLM-L6-v2", show_default=True,
              help="Model to fine-tune: the packaged all-MiniLM-L6-v2, a local Hugging Face "
              "or keras-hub checkpoint directory, a keras-hub preset name, or a train output "
              "directory.")
@click.option("--pooling", type=click.Choice(POOLINGS), default=None,
              show_default="the checkpoint's (a sentence-transformers folder's), else mean",
              help="How token states become one sentence vector (a saved run keeps its own: "
              "another one is refused).")
@click.option("--epochs", type=click.IntRange(min=1), default=4, show_default=True,
              help="Passes over the training set.")
@click.option("--batch-size", type=click.IntRange(min=1), default=16, show_default=True,
              help="Rows per training batch (InfoNCE, SimCSE, NT-Xent, SupCon, batch-hard-triplet: "
              "at least 2, the other rows are the negatives).")
@click.option("--lr", type=POSITIVE_FLOAT, default=2e-5, show_default=True,
              help="Peak learning rate of AdamW.")
@click.option("--warmup", type=FiniteFloatRange(min=0, max=1, max_open=True), default=0.1,
              show_default=True,
              help="Fraction of the training steps with linear warm-up; the rate then "
              "decays linearly to 0.")
@click.option("--weight-decay", type=FiniteFloatRange(min=0), default=0.01, show_default=True,
              help="AdamW weight decay (not applied to biases and LayerNorm).")
@click.option("--max-grad-norm", type=POSITIVE_FLOAT, default=None,
              show_default="none (no clipping)",
              help="Scale each step's gradients together to at most this global L2 norm, as "
              "torch.nn.utils.clip_grad_norm_ does; sentence-transformers' trainer clips at "
              "1.0 by default. Not with --devices above 1 on TensorFlow.")
@click.option("--max-length", type=click.IntRange(min=3), default=64, show_default=True,
              help="Tokens per sentence, [CLS] and [SEP] included; longer ones are cut.")
@click.option("--scale", type=POSITIVE_FLOAT, default=20.0, show_default=True,
              help="Scale of CoSENT, AnglE and the logistic margin ranking (1 / temperature).")
@click.option("--temperature", type=POSITIVE_FLOAT, default=0.05, show_default=True,
              help="Temperature of InfoNCE, SimCSE, NT-Xent and SupCon.")
@click.option("--symmetric", is_flag=True, default=False, show_default=True,
              help="InfoNCE and SimCSE: also make each positive pick its own anchor among "
              "the batch's anchors, and average the two directions (sentence-transformers' "
              "MultipleNegativesSymmetricRankingLoss).")
@click.option("--margin", type=FiniteFloatRange(min=0), default=None,
              show_default="the loss's: triplet and batch-hard-triplet 0.5, margin-ranking 0.2",
              help="Margin of the triplet, batch-hard-triplet and margin-ranking losses.")
@click.option("--margin-form", type=click.Choice(MARGIN_FORMS), default=None,
              show_default="the loss's: hinge",
              help="Form of the margin-ranking loss: hinge, max(0, margin - (s(q,p) - "
              "s(q,n))), which ignores rows already ranked by more than --margin; or "
              "logistic, log(1 + exp(-scale (s(q,p) - s(q,n)))) with --scale, which keeps "
              "learning from every row.")
@click.option("--distance", type=click.Choice(TRIPLET_DISTANCES), default=None,
              show_default="the loss's: cosine",
              help="Distance of the triplet and batch-hard-triplet losses: cosine (1 - cos) "
              "or euclidean (the L2 distance; the encoder's embeddings have unit length, so "
              "it is sqrt(2 - 2 cos)).")
@click.option("--matryoshka-dims", default=None, callback=_check_matryoshka_dims,
              show_default="none (the loss on the full embeddings only)",
              help="Comma-separated embedding sizes, e.g. 384,256,128,64: train the loss on "
              "the first d coordinates (re-normalised) for each d, summed (Matryoshka), so "
              "that encode/export --truncate-dim d keep quality. Each at most the model's "
              "embedding dimension.")
@click.option("--mini-batch-size", type=click.IntRange(min=1), default=None,
              show_default="none (each batch in one pass)",
              help="Embed each --batch-size batch this many rows at a time, caching the "
              "loss's gradient with respect to the embeddings (GradCache): the loss and "
              "gradients of the whole batch, with the activation memory of this many rows, "
              "for a second forward pass. Batches are padded, not packed. With --devices, "
              "each device caches its slice and the loss sees the whole batch. Not for "
              "sbert-softmax.")
@click.option("--queue-size", type=click.IntRange(min=1), default=None, show_default="none",
              help="Momentum-queue negatives (MoCo, ESimCSE): InfoNCE (--loss infonce or "
              "simcse) also contrasts each anchor with the last N positives, embedded by a "
              "momentum encoder (an EMA of the weights); ESimCSE uses 2.5 batches (160 at "
              "batch 64).")
@click.option("--momentum", type=FiniteFloatRange(min=0, max=1, max_open=True), default=None,
              show_default="0.995 (ESimCSE's) with --queue-size",
              help="EMA coefficient of the momentum encoder: theta_m <- momentum * theta_m + "
              "(1 - momentum) * theta every step (with --queue-size).")
@click.option("--word-repetition", type=FiniteFloatRange(min=0, max=1), default=None,
              show_default="none",
              help="ESimCSE's word repetition: duplicate a random subset of the tokens of each "
              "positive (the second text column) in place, at most max(2, rate x length) "
              "of them, so that "
              "with --loss simcse the two views differ in length; the paper's rate is 0.32.")
@click.option("--collapse-guard", is_flag=True, default=False, show_default=True,
              help="When the dev Spearman falls more than --guard-min-delta below the best so "
              "far (the score before training included), restore the best weights and multiply "
              "the learning rate by --guard-factor, at most --guard-patience times; the epochs "
              "it fires are 1 in metrics.csv's collapse_guard column and marked on "
              "training.png. Needs --dev.")
@click.option("--guard-min-delta", type=FiniteFloatRange(min=0), default=None,
              show_default=str(GUARD_DEFAULTS["guard_min_delta"]),
              help="The drop of dev Spearman (-1..1 scale) that counts as a collapse "
              "(with --collapse-guard).")
@click.option("--guard-factor", type=FiniteFloatRange(min=0, max=1, min_open=True, max_open=True),
              default=None, show_default=str(GUARD_DEFAULTS["guard_factor"]),
              help="Learning-rate multiplier each time the guard fires (with --collapse-guard).")
@click.option("--guard-patience", type=click.IntRange(min=1), default=None,
              show_default=str(GUARD_DEFAULTS["guard_patience"]),
              help="How many times the guard may fire (with --collapse-guard).")
@click.option("--seed", type=SEED, default=42, show_default=True,
              help="Seed of weight initialisation, dropout and shuffling.")
@click.option("--mixed-precision", type=click.Choice(MIXED_PRECISION_POLICIES),
              is_flag=False, flag_value="mixed_float16", default=None, show_default="off",
              help="Train under this Keras dtype policy: layers compute in bfloat16 or "
              "float16 (float16 with loss scaling), weights, losses and scores stay "
              "float32, and the saved encoder computes in float32. Alone, the flag means "
              "mixed_float16. For GPUs (bfloat16 on recent ones); slower on most CPUs, where "
              "TensorFlow and JAX refuse mixed_float16.")
@click.option("--packing/--no-packing", default=True, show_default=True,
              help="Pack each batch's sentences into shared rows instead of padding them "
                   "(the same function and gradients on less work, but other dropout "
                   "masks than padded batches; keras-hub BERT backbones, others pad, as "
                   "--devices above 1 and --mini-batch-size do).")
@click.option("--devices", type=click.IntRange(min=1), default=1, show_default=True,
              help="Train data-parallel on this many devices, with in-batch losses over the "
                   "global --batch-size (a multiple of it): JAX and TensorFlow take the first "
                   "N local devices; on PyTorch launch one process per device with "
                   "`torchrun --nproc_per_node N -m recipes train ...` (rank 0 writes "
                   "--output). Batches are padded, not packed.")
@click.option("--output", type=click.Path(file_okay=False), required=True, show_default=True,
              help="Run directory to create; an identical finished run there is reused.")
@click.option("--overwrite", is_flag=True, default=False, show_default=True,
              help="Replace a different keras-cosent run in --output (and discard an "
              "interrupted one).")
@click.option("--resume", is_flag=True, default=False, show_default=True,
              help="Continue an interrupted run of the same options from its last finished "
              "epoch (state is backed up after every epoch), to the weights an "
              "uninterrupted run ends with.")
@backend_option
@pass_environment
@click.pass_context
def train(ctx, env, **options):
    """Fine-tune a sentence encoder (SiameseEncoder over a SentenceEncoder).

    Leaves in --output: encoder.keras, config.json (with the command that repeats
    the run), metrics.csv and metrics.json (loss, dev Spearman/Pearson per epoch),
    training.png, and results.json with the final dev/test evaluation; with
    --train-retrieval also mined.jsonl, the rows it mined (those with fewer
    negatives than asked, under --mine-fill none, were left out of training).
    """
    options = apply_recipe(ctx, options)
    overwrite = options.pop("overwrite")
    resume = options.pop("resume")
    if resume and overwrite:
        # --overwrite would discard the very state --resume asks to continue.
        raise click.UsageError("--resume continues an interrupted run and --overwrite "
                               "discards it; pass one of them")
    # In the order --help lists them, not the order they were typed.
    options = {p.name: options[p.name] for p in ctx.command.params if p.name in options}
    # What the recipe needs first: its per-file options would otherwise be counted
    # against --train files that were never given.
    check_recipe_requires(options)
    # Repeatable --train/--format/--loss: one value as before, or a list per --train.
    resolve_per_train_options(ctx, options, resume=resume)
    # Before the checks of --batch-size against --devices, which a wrong count
    # of processes would otherwise send the user to mend first.
    _check_torchrun_processes(env.backend, options.get("devices") or 1)
    check_combinations(ctx, options)
    if (options.get("staged") and options.get("stage_epochs")
            and ctx.get_parameter_source("epochs") == click.core.ParameterSource.COMMANDLINE):
        # The default value typed (as the stored replay command spells it) passes the
        # check above; it is still not read, which a typed --epochs 4 would not expect.
        env.note(f"--epochs {options['epochs']} is not read by a --staged run: its stages "
                 f"train {options['stage_epochs']} epochs (--stage-epochs)")
    if resume and (options.get("devices") or 1) > 1 and env.backend == "torch":
        # Ranks above 0 train in a scratch folder: they would start from epoch 0
        # beside a rank 0 restored to its backup, pairing different steps.
        raise click.BadParameter(
            f"a PyTorch run on --devices {options['devices']} (torchrun's processes) cannot be "
            "resumed yet: only rank 0 keeps the backup, and an interrupted one keeps none; "
            "train without --resume (with --overwrite where --output holds the run)",
            param_hint="--resume",
        )
    devices = options.get("devices") or 1
    # As build refuses it, before the backend loads.
    if options.get("max_grad_norm") is not None and devices > 1 and env.backend == "tensorflow":
        raise click.BadParameter(
            f"cannot clip on --devices {devices} under TensorFlow: Keras clips each "
            "device's gradients before tf.distribute sums them, so the norm would not be "
            "the batch's; clip on one device, or train on several with --backend jax or torch",
            param_hint="--max-grad-norm",
        )
    refuse_unwritable(options["output"], "--output")
    # Before the backend loads, so that a wrong folder or split fails at once.
    resolve_retrieval_splits(options, env.note)
    env.activate_backend()
    check_saved_pooling(options["backbone"], options["pooling"])
    from keras_cosent.training import get_objective

    losses = options["loss"] if isinstance(options["loss"], list) else [options["loss"]]
    smallest = max(get_objective(loss).min_batch_size for loss in losses)
    if options["batch_size"] < smallest:
        raise click.BadParameter(
            f"{options['batch_size']} is too small for --loss {options['loss']}: it needs at "
            f"least {smallest} rows per batch (the loss compares a batch's rows with each "
            "other)",
            param_hint="--batch-size",
        )
    devices = options.get("devices") or 1
    if options["batch_size"] % devices:
        # The global batch is split evenly: checked here rather than by the
        # builder, with a traceback on every rank.
        raise click.BadParameter(
            f"{options['batch_size']} does not split over --devices {devices}; use a "
            f"multiple of {devices}", param_hint="--batch-size",
        )
    mini_batch_size = options.get("mini_batch_size")
    if mini_batch_size is not None and mini_batch_size > options["batch_size"] // devices:
        rows = (f"the {options['batch_size'] // devices} rows per device of --batch-size "
                f"{options['batch_size']} over --devices {devices}" if devices > 1
                else f"--batch-size {options['batch_size']}")
        raise click.BadParameter(
            f"{mini_batch_size} is larger than {rows}: every batch would be embedded in one "
            "pass, for a second forward pass; use a smaller value or leave it out",
            param_hint="--mini-batch-size",
        )
    check_head_objectives(options, losses, get_objective)
    if options.get("word_repetition") is not None:
        from keras_cosent.training.objectives import graded_terms

        graded = [name for loss in losses for name in graded_terms(get_objective(loss))]
        if graded:
            raise click.BadParameter(
                f"repeats words of each positive, and --loss {graded[0]} trains on scored "
                "pairs, whose second sentence is not a view of the first; use it with "
                "simcse, infonce or another loss of (anchor, positive) rows",
                param_hint="--word-repetition",
            )
    for name, what in (("scale", "the scale of CoSENT, AnglE and logistic margin ranking"),
                       ("temperature", "the temperature of InfoNCE, SimCSE, NT-Xent and "
                        "SupCon")):
        # Every run carries both: only another value, typed for a loss that takes
        # none, is refused.
        if (_typed_otherwise(ctx, options, name) and not any(
                _takes_option(get_objective(loss), name, options) for loss in losses)):
            raise click.BadParameter(f"sets {what}; {_has_none(options, name)}",
                                     param_hint="--" + name)
    for name, option, what in (
            ("margin", "margin", "the margin of the triplet and margin-ranking losses "
             "(--loss triplet, batch-hard-triplet or margin-ranking)"),
            ("distance", "distance", "the distance of the triplet losses (--loss triplet or "
             "batch-hard-triplet)"),
            ("margin_form", "form", "the form of the margin-ranking loss (--loss "
             "margin-ranking)"),
            ("symmetric", "symmetric", "the backward direction of InfoNCE (--loss infonce "
             "or simcse)")):
        if options.get(name) not in (None, False) and not any(
                _takes_option(get_objective(loss), option, options) for loss in losses):
            raise click.BadParameter(
                f"sets {what}; {_has_none(options, option)}",
                param_hint="--" + name.replace("_", "-"),
            )
    if options["train_retrieval"] is not None:
        _check_loss_takes_mined_rows(options)
    config = build_config(env.backend, options, tuning=env.tuning)
    refuse_inputs_inside(config["output"], "--output", {
        f"--{key.replace('_', '-')}": config.get(key)
        for key in ("backbone", "train", "dev", "test", "train_retrieval", "dev_retrieval")})
    run_directory = RunDirectory(config["output"], overwrite=overwrite)
    if resume:
        run_directory.continue_replacing(config)
    if run_directory.check(config) == "same":
        env.note(f"{options['output']} already holds this run (same configuration); "
                 "reusing it. Pass --overwrite to train again.")
        env.log(_stored_table(run_directory.path))
        return

    from recipes.training import train_encoder

    if _is_other_rank(config):
        # torchrun's other ranks train alongside rank 0 but write nothing of the run.
        import pathlib
        import tempfile

        # Quiet: rank 0 prints the run's progress and notes, which every rank
        # printed again, interleaved; an error still reaches stderr.
        with (tempfile.TemporaryDirectory() as scratch, open(os.devnull, "w") as sink,
              contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink)):
            scratch = pathlib.Path(scratch)
            (scratch / "backup").mkdir()
            train_encoder(config, scratch, env, scratch / "backup")
        return

    backup, resumed = run_directory.backup(config, resume=resume)
    if resumed:
        env.note(f"resuming the interrupted run from its state in {backup}")
    elif resume:
        env.note("--resume: no interrupted run of --output to continue; training from the start")
    try:
        with run_directory.staging() as staging:
            results = train_encoder(config, staging, env, backup)
            write_config(staging / CONFIG_FILE, config, command_line(ctx, config))
    except BaseException as error:
        # Kept only when there is something to resume: at least one saved epoch
        # of a run that is not --staged (whose stages are separate fits) nor
        # torchrun's on several processes (which --resume refuses).
        torchrun = env.backend == "torch" and config.get("devices", 1) > 1
        # A signal came, whatever the error it ended in: one that landed in
        # the end-of-epoch dev scoring on JAX reached here as another error,
        # and the run said only "Aborted!" beside the backup it kept (probe).
        stopped = isinstance(error, KeyboardInterrupt) or bool(interrupts.RECEIVED)
        if config.get("staged") or torchrun or not run_directory.has_saved_epoch():
            run_directory.remove_backup()
            if stopped:
                why = ("a --staged run keeps no state" if config.get("staged") else
                       "a run on several PyTorch processes keeps no state" if torchrun else
                       "before its first epoch ended")
                env.note(f"interrupted, {why}: nothing is kept, and the same command "
                         "trains from the start")
        elif stopped:
            env.note(f"interrupted; the last finished epoch is kept in {backup}: the same "
                     "command with --resume continues from it")
        raise
    run_directory.remove_backup()
    from recipes.reporting import results_table

    # `results` also records how the run trained (`train_tasks`, `stages`).
    table = results_table(results)
    if table:
        env.log(table)
    else:
        env.note("no --dev or --test given: nothing evaluated")
    env.note(f"run saved to {options['output']}")


# Options a recipe's `requires` entry is also met by.
_STANDS_IN = {"dev_retrieval": ("dev_retrieval_holdout",)}


def _alternatives(name):
    return (name, *_STANDS_IN.get(name, ()))


def has_dev_retrieval(options):
    """Whether the run scores a retrieval dev split: a folder, or queries held out."""
    return any(options.get(n) is not None for n in _alternatives("dev_retrieval"))


def check_recipe_requires(options):
    """Refuses a --recipe run without the options the recipe cannot run without."""
    if options["recipe"] is None:
        return
    # Before the per-file options are resolved, an absent repeatable option is ().
    missing = [name for name in RECIPES[options["recipe"]].requires
               if all(options.get(n) in (None, ()) for n in _alternatives(name))]
    if missing:
        needs = []
        for name in missing:
            flags = ["--" + n.replace("_", "-") for n in _alternatives(name)]
            needs.append(flags[0] if len(flags) == 1 else "one of " + ", ".join(flags))
        raise click.BadParameter(
            f"--recipe {options['recipe']} needs {' and '.join(needs)}",
            param_hint=", ".join("--" + n.replace("_", "-") for n in missing),
        )
    # A recipe of stages (one --loss and --format per file) names how many files it
    # trains: another count would be reported against options the user never gave.
    trains = options.get("train") or ()
    for name, value in RECIPES[options["recipe"]].options.items():
        if (isinstance(value, tuple) and options.get(name) == value and trains
                and len(trains) != len(value)):
            raise click.BadParameter(
                f"--recipe {options['recipe']} trains {len(value)} files, one per stage "
                f"(its --{name.replace('_', '-')} {','.join(value)}); got {len(trains)}",
                param_hint="--train",
            )


def _takes_option(objective, option, options):
    """Whether a term of `objective` uses loss option `option` with these `options`.

    The margin-ranking loss takes both a margin and a scale but reads one, by
    its form: the margin when hinge (the default), the scale when logistic.
    """
    unused_by_margin_ranking = "margin" if options.get("margin_form") == "logistic" else "scale"
    return any(
        option in term.loss_option_names
        and not (term.name == "margin-ranking" and option == unused_by_margin_ranking)
        for term in (getattr(objective, "terms", ()) or (objective,))
    )


def _has_none(options, option):
    """Why no loss of this run reads `option`, for the refusal."""
    if option in ("margin", "scale") and "margin-ranking" in str(options["loss"]):
        form = "hinge" if option == "margin" else "logistic"
        return f"--loss {options['loss']} reads it only with --margin-form {form}"
    return f"--loss {options['loss']} has none"


def _typed_otherwise(ctx, options, name):
    """Whether option `name` was typed on the command line with a value other than its
    default: the stored replay command spells every option out, defaults included,
    and those are no choice of the user's."""
    default = next(p.default for p in ctx.command.params if p.name == name)
    return (ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
            and options.get(name) != default)


def check_saved_pooling(backbone, pooling):
    """Refuses a `--pooling` other than a saved encoder's own: a `--backbone` that is a
    train output directory or a `.keras` file keeps its pooling, and the run's
    config.json and repeat command recorded the one asked for as though it applied."""
    if pooling is None:
        return
    from keras_cosent.models import encoder_loading
    from recipes.model_loading import saved_encoder_path

    saved = saved_encoder_path(backbone)
    if saved is None:
        return
    config = (encoder_loading.saved_encoder_config(saved) or {}).get("config") or {}
    kept = config.get("pooling")
    if kept is not None and kept != pooling:
        raise click.BadParameter(
            f"{pooling}: --backbone {backbone} is a saved encoder, which keeps its own "
            f"pooling ({kept}); leave --pooling out, or fine-tune from a checkpoint to choose "
            "one", param_hint="--pooling")


def _flag(ctx, options, name):
    """`--name`, and where `--recipe` set it rather than the command line, which
    recipe: a refusal should not name an option the user never typed as theirs."""
    flag = "--" + name.replace("_", "-")
    recipe = options.get("recipe")
    if (recipe is not None and name in RECIPES[recipe].options
            and ctx.get_parameter_source(name) != click.core.ParameterSource.COMMANDLINE):
        return f"{flag} (set by --recipe {recipe})"
    return flag


def check_head_objectives(options, losses, get_objective):
    """Refuses, before any training, what an objective that trains a head on the pair
    embeddings (`wrap_model`: sbert-softmax) cannot run with: options that act on a
    loss of the embeddings themselves, and several --train files trained together."""
    heads = [loss for loss in dict.fromkeys(losses) if get_objective(loss).wrap_model is not None]
    if not heads:
        return
    for name, what in (("matryoshka_dims", "truncates the embeddings that a loss scores"),
                       ("mini_batch_size", "caches the gradient of a loss on the embeddings")):
        if options.get(name) is not None:
            raise click.BadParameter(
                f"{what}; --loss {heads[0]} trains a classifier head on them",
                param_hint="--" + name.replace("_", "-"),
            )
    if isinstance(options["train"], list) and not options.get("staged"):
        raise click.BadParameter(
            f"{heads[0]} trains a classifier head on the pair embeddings, which several "
            "--train files trained together (one loss on the embeddings per batch) do not "
            "support; train its file as a stage of its own (--staged)", param_hint="--loss",
        )


def check_combinations(ctx, options):
    """Refuses options that contradict each other or that a recipe cannot run without."""
    if options["train_retrieval"] is not None and options["train"] is not None:
        raise click.BadParameter(
            "give --train or --train-retrieval, not both", param_hint="--train-retrieval"
        )
    if (options["train"] is None and options["train_retrieval"] is None
            and _typed_otherwise(ctx, options, "format")):
        # The demo set would have been read in it.
        raise click.BadParameter(
            "describes --train files, and none is given (the packaged demo set is "
            "pair-tsv); for --dev and --test files use --eval-format",
            param_hint="--format",
        )
    if options["dev_retrieval_holdout"] is not None and options["train_retrieval"] is None:
        raise click.BadParameter(
            "holds out queries of --train-retrieval as the dev split; give one",
            param_hint="--dev-retrieval-holdout",
        )
    if options["dev_retrieval_holdout"] is not None and options["dev_retrieval"] is not None:
        raise click.BadParameter(
            "holds out a dev split of --train-retrieval; give it or --dev-retrieval, not both",
            param_hint="--dev-retrieval-holdout",
        )
    if options["train_retrieval"] is None:
        for name in ("train_retrieval_split", "mine_negatives", "mine_relative_margin",
                     "mine_fill"):
            if _typed_otherwise(ctx, options, name):
                flag = "--" + name.replace("_", "-")
                raise click.BadParameter(
                    "applies to --train-retrieval only (mining hard negatives for it)",
                    param_hint=flag,
                )
    formats = options["format"] if isinstance(options["format"], list) else [options["format"]]
    if options["train_retrieval"] is None and not any(
            f in COLUMN_FORMATS for f in formats + [options["eval_format"]]):
        for name in ("text_columns", "label_column", "eval_text_columns", "eval_label_column"):
            if _typed_otherwise(ctx, options, name):
                raise click.BadParameter(
                    f"names columns of --format {', '.join(COLUMN_FORMATS)}; --format "
                    f"{', '.join(dict.fromkeys(formats))} has fixed columns",
                    param_hint="--" + name.replace("_", "-"),
                )
    # The evaluation files' own columns: with a training file of columns, an
    # evaluation format of fixed columns read past a mistyped name silently.
    eval_format = options["eval_format"] or per_train(options, "format", -1)
    if eval_format not in COLUMN_FORMATS:
        for name in ("eval_text_columns", "eval_label_column"):
            if _typed_otherwise(ctx, options, name):
                raise click.BadParameter(
                    f"names columns of --eval-format {', '.join(COLUMN_FORMATS)}; "
                    f"--eval-format {eval_format} has fixed columns",
                    param_hint="--" + name.replace("_", "-"),
                )
    for flag, name, off in (("--ignore-identical-ids", "ignore_identical_ids", False),
                            ("--unknown-ids", "unknown_ids", "error"),
                            ("--faiss", "use_faiss", False)):
        if (options[name] != off and options["train_retrieval"] is None
                and options["dev_retrieval"] is None):
            raise click.BadParameter(
                "applies to retrieval data only; give --train-retrieval or --dev-retrieval",
                param_hint=flag,
            )
    check_recipe_requires(options)
    if (options.get("staged") and options.get("stage_epochs")
            and _typed_otherwise(ctx, options, "epochs")):
        # stage_epochs() reads --stage-epochs only: --epochs would be recorded and ignored.
        raise click.BadParameter(
            f"a --staged run takes each stage's epochs from --stage-epochs "
            f"({options['stage_epochs']}); give --stage-epochs instead",
            param_hint="--epochs",
        )
    # --dev, or the demo dev set that comes with the demo training set.
    has_dev = options["dev"] is not None or (
        options["train"] is None and options["train_retrieval"] is None)
    given = [name for name in GUARD_DEFAULTS if options.get(name) is not None]
    if given and not options["collapse_guard"]:
        raise click.BadParameter(
            f"--{given[0].replace('_', '-')} {options[given[0]]} sets the collapse guard, "
            "which is off; add --collapse-guard", param_hint="--collapse-guard",
        )
    if options.get("momentum") is not None and options.get("queue_size") is None:
        raise click.BadParameter(
            "sets the momentum encoder of the negative queue, which is off; add --queue-size",
            param_hint="--momentum",
        )
    if options.get("queue_size") is not None:
        if options["loss"] not in QUEUE_LOSSES:
            raise click.BadParameter(
                f"adds negatives to InfoNCE: --loss {' or '.join(QUEUE_LOSSES)}, not "
                f"{options['loss']}", param_hint=_flag(ctx, options, "queue_size"),
            )
        for other in ("matryoshka_dims", "mini_batch_size", "devices"):
            if options.get(other) not in (None, 1):
                raise click.BadParameter(
                    f"cannot be combined with --{other.replace('_', '-')} (yet)",
                    param_hint=_flag(ctx, options, "queue_size"),
                )
    if options["collapse_guard"] and not has_dev:
        raise click.BadParameter(
            "the guard watches the dev Spearman after every epoch; give --dev FILE",
            param_hint="--collapse-guard",
        )
    metric = options["keep_best"]
    if metric is not None:
        if metric.startswith("ir_dev_") and not has_dev_retrieval(options):
            raise click.BadParameter(f"{metric} is measured on --dev-retrieval (or "
                                     "--dev-retrieval-holdout); give one",
                                     param_hint="--keep-best")
        if metric.startswith("dev_") and not has_dev:
            raise click.BadParameter(f"{metric} is measured on --dev; give one",
                                     param_hint="--keep-best")


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_loss_takes_mined_rows(options):
    """Refuses, before the mining, a --loss that cannot train on what it mines.

    `--train-retrieval` trains on unlabelled (query, positive) rows with
    `--mine-negatives` negatives each; a pair loss such as the default cosent
    would otherwise fail only once the corpus is mined. The error names a
    `--mine-negatives` the loss takes, if one is.
    """
    from keras_cosent.data import DataFormatError
    from keras_cosent.data import PairDataset
    from keras_cosent.training import get_objective
    from recipes.training import MINED_FORMAT

    objective = get_objective(options["loss"])

    def problem(count):
        rows = PairDataset([["query"], ["positive"]] + [["negative"]] * count, None,
                           "--train-retrieval")
        try:
            shaped = objective.prepare(rows, MINED_FORMAT)
        except DataFormatError as error:
            return error.reason
        if len(shaped) != 1:  # simcse: every text alone, the pairing gone
            return (f"objective {objective.name!r} trains on each text alone, not on the "
                    "(query, positive) pairs")
        if shaped.num_columns < len(rows.columns):  # ntxent keeps two columns
            return (f"objective {objective.name!r} keeps the (query, positive) pairs and "
                    "would leave the mined negatives unused")
        return None

    count = options["mine_negatives"]
    reason = problem(count)
    if reason is None:
        return
    fits = next((n for n in (1, 0, 2, 3) if problem(n) is None), None)
    hint = ("--recipe retrieval-infonce trains --loss infonce on them" if fits is None
            else f"--mine-negatives {fits} makes rows it takes")
    raise click.BadParameter(
        f"{options['loss']} cannot train on the rows --train-retrieval mines, unlabelled "
        f"(query, positive, {count} negative{'s' if count != 1 else ''}): {reason} "
        f"({hint})",
        param_hint="--loss",
    )


def _check_torchrun_processes(backend, devices):
    """A `CliError` when torchrun started another number of processes than
    `--devices`, before any of them touches the run directory: with the default
    `--devices 1` every process took itself for the only one and they raced for
    the backup, one ending in a false "interrupted run" and leaving it behind."""
    world = os.environ.get("WORLD_SIZE", "")
    if backend == "torch" and world.isdigit() and int(world) != devices:
        raise CliError(f"--devices {devices}, but torchrun started {world} "
                       f"process{'es' if world != '1' else ''}; pass "
                       f"--devices {world} (one process per device)")


def _is_other_rank(config):
    """Whether this is a PyTorch process of rank > 0 of a `--devices N` run."""
    if config.get("devices", 1) == 1:
        return False
    from keras_cosent import distributed

    try:
        scope = distributed.data_parallel(config["devices"])  # checks the device count
    except ValueError as error:
        # The command line cannot split a CPU into TensorFlow devices (Python can).
        message = one_line(error).replace(
            distributed.TF_CPU_HINT,
            "(on a CPU, only the library splits it into several: see README.md, "
            '"Several devices"; JAX takes XLA_FLAGS=--xla_force_host_platform_device_count=N)')
        raise CliError(f"--devices {config['devices']}: {message}") from error
    with scope:
        return distributed.rank() != 0


def resolve_retrieval_splits(options, note=None):
    """Makes `--train-retrieval`/`--dev-retrieval` absolute and names their qrels split.

    With several qrels files and none asked for, `--train-retrieval` reads
    `train` and `--dev-retrieval` reads `dev` where the folder has them (said
    through `note`). A folder without qrels, or without the split asked for
    (or with several, none asked for and none of that name), is a one-line
    error naming the option.
    """
    for key, preferred in (("train_retrieval", "train"), ("dev_retrieval", "dev")):
        if options.get(key) is not None:
            option = "--" + key.replace("_", "-")
            folder = options[key] = os.path.abspath(options[key])
            options[f"{key}_split"] = retrieval_split(
                folder, options[f"{key}_split"], option, f"{option}-split", preferred, note
            )


def build_config(backend, options, tuning=True):
    """The run's exact configuration: every option resolved, paths absolute, data hashed.

    `tuning` (the group's `--tuning/--no-tuning`) is part of it: on TensorFlow
    the runtime tuning changes which generator draws the dropout masks. The
    retrieval folders and splits come resolved (`resolve_retrieval_splits`,
    which `train` runs before the backend loads).
    """
    from recipes.data_loading import DEMO_DEV
    from recipes.data_loading import DEMO_TRAIN

    config = {"backend": backend, "tuning": tuning}
    config.update(options)
    # A run without the guard records no guard keys, so that it keeps the
    # configuration (and the identity, `RunDirectory.check`) of runs made
    # before the option existed; with it, every setting is resolved.
    if config.get("collapse_guard"):
        for name, default in GUARD_DEFAULTS.items():
            if config.get(name) is None:
                config[name] = default
    else:
        for name in ("collapse_guard", *GUARD_DEFAULTS):
            config.pop(name, None)
    # One device records no `devices`, keeping the identity of earlier runs.
    if config.get("devices") == 1:
        config.pop("devices")
    # Likewise a one-directional InfoNCE run records no `symmetric`.
    if not config.get("symmetric"):
        config.pop("symmetric", None)
    # Likewise a run without cached batches records no `mini_batch_size`.
    if config.get("mini_batch_size") is None:
        config.pop("mini_batch_size", None)
    if config.get("queue_size") is not None and config.get("momentum") is None:
        from keras_cosent.models.momentum_contrast_model import ESIMCSE_MOMENTUM

        config["momentum"] = ESIMCSE_MOMENTUM
    for name in ESIMCSE_OPTIONS + OPTIONAL_OPTIONS:
        if config.get(name) is None:
            config.pop(name, None)
    # Off is recorded as False, as when --mixed-precision was a plain flag, so
    # that runs without it keep the identity of runs made before; on, it is the
    # policy's name (a run made with the old flag, True, counts as different).
    if not config.get("mixed_precision"):
        config["mixed_precision"] = False
    for key in ("train", "dev", "test", "output"):
        if isinstance(config[key], list):
            config[key] = [os.path.abspath(path) for path in config[key]]
        elif config[key] is not None:
            config[key] = os.path.abspath(config[key])
    if config["eval_format"] is None:
        # The last --train's: a staged run's last stage trains on data like --dev's.
        config["eval_format"] = per_train(config, "format", -1)
    # A folder or a .keras file, as --output is, so that the recorded command
    # repeats the run from anywhere; a preset name stays a name.
    backbone_path = os.path.abspath(config["backbone"])
    if os.path.exists(backbone_path):
        config["backbone"] = backbone_path
    demo = config["train"] is None and config["train_retrieval"] is None
    files = {
        "train": DEMO_TRAIN if demo else config["train"],
        "dev": DEMO_DEV if demo and config["dev"] is None else config["dev"],
        "test": config["test"],
    }
    config["data_sha256"] = {
        split: [_sha256(p) for p in path] if isinstance(path, list) else _sha256(path)
        for split, path in files.items() if path is not None
    }
    for key in ("train_retrieval", "dev_retrieval"):
        if config.get(key) is not None:
            folder, split = config[key], config[f"{key}_split"]
            parts = ("corpus.jsonl", "queries.jsonl", os.path.join("qrels", f"{split}.tsv"))
            missing = [part for part in parts if not os.path.isfile(os.path.join(folder, part))]
            if missing:  # as the reader says it, with the option: hashed before it reads
                raise CliError(f"--{key.replace('_', '-')} {folder}: BEIR folder {folder!r} "
                               f"has no {missing[0]}")
            config["data_sha256"][key] = hashlib.sha256(
                "".join(_sha256(os.path.join(folder, part)) for part in parts).encode()
            ).hexdigest()
    return config


def command_line(ctx, config):
    """The one shell command that repeats the run, every option spelled out; a
    PyTorch run on several devices is launched by torchrun, one process each."""
    devices = config.get("devices") or 1
    if config["backend"] == "torch" and devices > 1:
        words = ["torchrun", "--nproc_per_node", str(devices), "-m", "recipes"]
    else:
        words = ["keras-cosent"]
    words += ["--backend", config["backend"]]
    if not config.get("tuning", True):
        words.append("--no-tuning")
    words.append(ctx.info_name)
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name in NOT_CONFIG:
            continue
        if param.name == "backend":  # written once, before the command
            continue
        value = config.get(param.name)
        if value is None:
            continue
        if isinstance(value, (list, tuple)):  # a repeated option, --train a --train b
            for item in value:
                words += [max(param.opts, key=len), str(item)]
            continue
        if param.is_flag:
            # Written out either way, so that the stored command does not depend
            # on a default that may change: `--packing/--no-packing` has a
            # secondary spelling for False, a plain flag is left out when False.
            flag = _flag_spelling(param, value)
            if flag is not None:
                words.append(flag)
            continue
        if value is False:  # --mixed-precision off, recorded as when it was a flag
            continue
        words += [max(param.opts, key=len), str(value)]
    return shlex.join(words)


def _flag_spelling(param, value):
    """The spelling of a boolean option that sets it to `value`, or None (plain flag, False)."""
    if value:
        return max(param.opts, key=len)
    if param.secondary_opts:
        return max(param.secondary_opts, key=len)
    if param.default:
        raise ValueError(f"{param.name} defaults to True and has no spelling for False")
    return None


def _versions(keras_cosent, keras, keras_hub):
    """The versions a run depends on: keras-cosent, Keras, keras-hub, the backend's
    framework, and TensorFlow with TensorFlow Text (the tokenisers, on every backend)."""
    import importlib

    versions = {"keras_cosent": keras_cosent.__version__, "keras": keras.__version__,
                "keras_hub": keras_hub.__version__}
    for name in dict.fromkeys([keras.backend.backend(), "tensorflow", "tensorflow_text"]):
        try:
            versions[name] = importlib.import_module(name).__version__
        except (ImportError, AttributeError):
            versions[name] = None
    return versions


def write_config(path, config, command):
    import keras
    import keras_hub

    import keras_cosent

    record = {
        "command": command,
        "config": config,
        # The process-wide tuning in effect (`keras-cosent --no-tuning` turns it off).
        "runtime": keras_cosent.runtime.active(),
        "environment": _versions(keras_cosent, keras, keras_hub),
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2)
        f.write("\n")


def _stored_table(directory):
    from recipes.reporting import results_table

    with open(directory / RESULTS_FILE, encoding="utf-8") as f:
        results = json.load(f)
    return results_table(results) or "(nothing was evaluated)"
