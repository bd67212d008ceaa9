"""The training loop behind `keras-cosent train`: read, build, fit, write the run.

`train_encoder(config, directory, env, backup_dir)` reads the data the options name, loads
the backbone into a `SentenceEncoder`, hands both to the library's one training
set-up, `keras_cosent.training.build` (the objective's loss and data layout,
packed batches, AdamW with warm-up and linear decay), fits with the dev
Spearman evaluated after every epoch (`SpearmanEvaluator`; with `--dev-retrieval`
also nDCG/MRR/Recall@10 and MAP@100, `RetrievalEvaluator`), and writes the
encoder, the per-epoch metrics, the plot and the final results into `directory`.

Imported lazily by the `train` command, after the Keras backend is chosen.
"""

import contextlib
import math
import os
import time
import warnings

import keras
import numpy as np

from keras_cosent.callbacks import CollapseGuard
from keras_cosent.callbacks import ResumableTraining
from keras_cosent.callbacks import RetrievalEvaluator
from keras_cosent.data import DataFormatError
from keras_cosent.training import build
from keras_cosent.training import get_objective
from recipes import data_loading
from recipes import interrupts
from recipes import multi_dataset
from recipes import reporting
from recipes.errors import CliError
from recipes.errors import one_line
from recipes.evaluation import evaluate_retrieval
from recipes.evaluation import epoch_end_sts_evaluator
from recipes.evaluation import evaluate_sts
from recipes.evaluation import note_identical_ids
from recipes.model_loading import ENCODER_FILE
from recipes.model_loading import load_encoder
from recipes.options import fraction_or_none
from recipes.options import loss_options
from recipes.options import parse_text_columns
from recipes.progress import announced
from recipes.progress import prefixed
from recipes.progress import to_stderr

DEV_NAME = "dev"
# Per-epoch logs kept in the backup directory, so that a resumed run's metrics
# hold the epochs trained before the interruption too.
EPOCH_LOG = "epochs.csv"
# `--dev-retrieval`: the callback's log prefix, the cutoffs it logs (and MAP@100).
IR_DEV_NAME = "ir_dev"
IR_DEV_CUTOFFS = (10,)
# `--train-retrieval`: the mined rows, kept in the backup (a resumed run trains on
# the rows its first start mined) and copied into the run directory.
MINED_FILE = "mined.jsonl"
MINED_FORMAT = "triplets-jsonl"
MINE_RANGE_MAX = 50
# `--keep-best`: the best epoch's weights, in the backup so that a resumed run keeps them.
BEST_WEIGHTS = "best.weights.h5"
# The columns of csv/tsv/jsonl evaluation files when the training file's are no pair.
DEFAULT_EVAL_COLUMNS = ("sentence1", "sentence2")
DEFAULT_EVAL_LABEL = "score"


def read_datasets(config):
    """Reads the data the configuration names.

    Returns:
        `(train, train_format, dev, test)`: `PairDataset`s (dev and test may be
        None; `train` as the file has it, which `build` shapes for the objective,
        or None for `--train-retrieval`, whose rows are mined later) and the
        format `train` was read in.
    """
    columns = parse_text_columns(config["text_columns"])
    label_column = config["label_column"]
    demo = config["train"] is None and config.get("train_retrieval") is None
    if multi_dataset.is_multi(config):
        # [(dataset, format, loss), ...], one per --train; `build_setup` trains them.
        train, train_format = multi_dataset.read_training_files(config), None
    elif config.get("train_retrieval") is not None:
        # Mined with the starting encoder once it is loaded (`mine_training_rows`).
        train, train_format = None, MINED_FORMAT
    else:
        if demo:
            train_file, train_format = data_loading.DEMO_TRAIN, data_loading.DEMO_FORMAT
        else:
            train_file, train_format = config["train"], config["format"]
        train = data_loading.warn_dropped(get_objective(config["loss"]).read(
            train_file, train_format, columns, label_column))
    eval_columns, eval_label_column = evaluation_columns(config)
    evaluation = {}
    for split in ("dev", "test"):
        path, data_format = config[split], config["eval_format"]
        if split == "dev" and path is None and demo:
            path, data_format = data_loading.DEMO_DEV, data_loading.DEMO_FORMAT
        dataset = None
        if path is not None:
            try:
                dataset = data_loading.read_scored_pairs(
                    path, data_format, eval_columns, eval_label_column, option=f"--{split}"
                )
            except DataFormatError as error:
                if data_format not in data_loading.COLUMN_FORMATS:
                    raise
                # Read with --train's --format unless told otherwise: a pair-tsv dev
                # file beside a csv/tsv/jsonl training file fails on its "columns".
                if data_format != multi_dataset.per_train(config, "format", -1):
                    raise  # --eval-format was given, and its columns are the point
                raise CliError(
                    f"{one_line(error)} (--{split} is read as --eval-format {data_format}, "
                    "which defaults to --format; give --eval-format for its own format)"
                ) from error
        evaluation[split] = dataset
    return train, train_format, evaluation["dev"], evaluation["test"]


def evaluation_columns(config):
    """The text columns and score column of csv/tsv/jsonl --dev and --test files.

    Evaluation files are scored pairs whatever the training file holds:
    `--eval-text-columns`/`--eval-label-column` when given, else the training
    file's `--text-columns`/`--label-column` when those name a pair (two
    different text columns), else the defaults `sentence1,sentence2` and
    `score` (so that `--loss supcon --text-columns text --label-column label`
    still reads an STS dev file).
    """
    train_columns = parse_text_columns(config["text_columns"])
    is_pair = len(train_columns) == 2 and train_columns[0] != train_columns[1]
    if config.get("eval_text_columns") is not None:
        columns = parse_text_columns(config["eval_text_columns"])
    else:
        columns = train_columns if is_pair else DEFAULT_EVAL_COLUMNS
    label_column = config.get("eval_label_column")
    if label_column is None:
        use_train = is_pair and config.get("eval_text_columns") is None
        label_column = config["label_column"] if use_train else DEFAULT_EVAL_LABEL
    return columns, label_column


def parse_matryoshka_dims(value, encoder, backbone):
    """'384,256' -> (384, 256), each checked against the encoder's embedding dimension."""
    if value is None:
        return None
    dims = tuple(int(word) for word in value.split(","))
    too_large = [d for d in dims if d > encoder.embedding_dim]
    if too_large:
        raise CliError(
            f"--matryoshka-dims {value}: {too_large[0]} is larger than the embedding "
            f"dimension {encoder.embedding_dim} of {backbone}"
        )
    return dims


def read_retrieval_splits(config, env):
    """`(train, dev)` `RetrievalDataset`s of `--train-retrieval` and `--dev-retrieval`.

    Either may be None. With `--dev-retrieval-holdout N`, dev is `N` queries of
    the training folder held out by `keras_cosent.data.hold_out_queries` (seed
    0), and train is the rest.
    """
    from keras_cosent.data import hold_out_queries

    train = dev = None
    unknown_ids = config.get("unknown_ids", "error")
    if config.get("train_retrieval") is not None:
        train = data_loading.training_judgements(data_loading.read_retrieval_folder(
            config["train_retrieval"], config["train_retrieval_split"], "--train-retrieval",
            "--train-retrieval-split", unknown_ids=unknown_ids, env=env,
        ), env, "--train-retrieval")
    if config.get("dev_retrieval") is not None:
        dev = data_loading.read_retrieval_folder(
            config["dev_retrieval"], config["dev_retrieval_split"], "--dev-retrieval",
            unknown_ids=unknown_ids, env=env,
        )
    size = config.get("dev_retrieval_holdout")
    if size is not None:
        folder = config["train_retrieval"]
        if size >= len(train.qrels):  # said with the option, not hold_out_queries' `size`
            raise CliError(
                f"--dev-retrieval-holdout {size}: --train-retrieval {folder} has "
                f"{len(train.qrels)} queries with a relevant document; hold out at most "
                f"{len(train.qrels) - 1}, so that some are left to train on"
            )
        if (config["train_retrieval_split"] != "dev"
                and os.path.isfile(os.path.join(folder, "qrels", "dev.tsv"))):
            env.note(f"--dev-retrieval-holdout: --train-retrieval {folder} has a dev split "
                     f"of its own (qrels/dev.tsv), which --dev-retrieval {folder} would score "
                     "instead of held-out training queries")
        train, dev = hold_out_queries(train, size, seed=0)
        env.note(f"--dev-retrieval-holdout: {size} of {size + len(train.queries)} queries of "
                 f"--train-retrieval held out as the dev split ({len(dev.corpus)} documents); "
                 f"training on the other {len(train.queries)}")
    if train is not None:
        check_enough_pairs(train, config, size)
    dev_option = "--dev-retrieval-holdout" if size is not None else "--dev-retrieval"
    if dev is not None:
        data_loading.refuse_blank_queries(dev, dev_option)
    for data, option in ((train, "--train-retrieval"), (dev, dev_option)):
        if data is not None:
            note_identical_ids(env, data, option, config.get("ignore_identical_ids", False),
                               mining=option == "--train-retrieval")
    return train, dev


def note_padding(config, setup, env):
    """Says why batches are padded when --packing (the default) asked for packed ones."""
    if not config["packing"] or getattr(setup.batches, "packing", True):
        return
    reasons = []
    if config.get("devices", 1) > 1:
        reasons.append(f"--devices {config['devices']} splits each batch by rows")
    if config.get("mini_batch_size") is not None:
        reasons.append("--mini-batch-size embeds each batch a few rows at a time")
    if not reasons:
        reasons.append(f"the --backbone is {type(setup.encoder.backbone).__name__}, "
                       "and only keras-hub BERT backbones pack")
    env.note(f"batches are padded, not packed: {'; '.join(reasons)}")


def check_enough_pairs(train, config, holdout):
    """Refuses, before the mining, a `--train-retrieval` set whose (query, positive)
    pairs cannot fill one batch that `--loss` learns from (each pair is a row); a
    config without one (a caller that reads the folders only) is not checked."""
    if config.get("loss") is None:
        return
    objective = get_objective(config["loss"])
    pairs = sum(score >= 1 for judged in train.qrels.values() for score in judged.values())
    if pairs >= objective.min_batch_size:
        return
    left = (f"--dev-retrieval-holdout {holdout} leaves --train-retrieval "
            if holdout is not None else "--train-retrieval ")
    raise CliError(
        f"{left}{config['train_retrieval']} {pairs} (query, positive) pair(s) to train on, "
        f"and --loss {objective.name} needs at least {objective.min_batch_size} rows in a "
        "batch to learn from" + ("; hold out fewer queries" if holdout is not None else "")
    )


def mine_training_rows(config, encoder, env, backup_dir, directory, data):
    """The (query, positive, negatives...) rows of `data` (`--train-retrieval`), mined with `encoder`.

    Every (query, positive) of the folder's qrels gets `--mine-negatives` hard
    negatives (`keras_cosent.retrieval.mine_hard_negatives`: known positives
    removed, ranks [0, 50), `--mine-relative-margin`), written as
    `keras-cosent mine` writes them to `MINED_FILE` in the backup and copied
    into the run directory; rows that got fewer negatives are left out.

    Returns:
        A `PairDataset` of columns query, positive, negative_1, ...
    """
    import shutil

    from keras_cosent.data import DataFormatError
    from keras_cosent.data import read_retrieval_triplets
    from keras_cosent.data import write_retrieval_triplets
    from keras_cosent.retrieval import mine_hard_negatives
    from recipes.output_files import write_atomically

    mined = backup_dir / MINED_FILE
    count = config["mine_negatives"]
    if not mined.is_file():
        if count == 0:
            pairs = [(data.queries[q], data.corpus[d])
                     for q, judged in data.qrels.items() for d, s in judged.items() if s >= 1]
            rows = [[q, d] for q, d in pairs if q.strip() and d.strip()]
            blank = len(pairs) - len(rows)
        else:
            env.note(f"mining {count} hard negative(s) per row for {len(data.queries)} queries "
                     f"over {len(data.corpus)} documents with the starting encoder")
            fill = config["mine_fill"]
            rows, report = mine_hard_negatives(
                data.queries, data.corpus, data.qrels,
                encoder=announced(encoder, env.note, "queries", "documents"), num_negatives=count,
                range_max=MINE_RANGE_MAX, relative_margin=fraction_or_none(config["mine_relative_margin"]),
                fill=None if fill == "none" else fill, seed=config["seed"], batch_size=64,
                ignore_identical_ids=config.get("ignore_identical_ids", False),
                use_faiss=config.get("use_faiss", False),
            )
            if report["filled_rows"]:
                env.note(f"{report['filled_rows']} of {report['rows']} rows had "
                         f"{_fewer_negatives(count)} past the margin and were completed with "
                         "random documents (--mine-fill random)")
            blank = report["blank_rows"]
            if report["blank_documents"]:
                env.note(f"{report['blank_documents']} blank documents of {data.source} were "
                         "never taken as negatives")
            if report["repeated_documents"]:
                env.note(f"{report['repeated_documents']} documents of {data.source} repeat "
                         "an earlier document's text; each text was one candidate, never two "
                         "negatives of a row")
        if blank:
            env.note(f"{blank} (query, positive) pairs of {data.source} have a blank query or "
                     "positive and make no training row")
        if not rows:
            raise CliError(f"{data.source}: the query or the positive of every (query, "
                           "positive) pair is blank: no training row")
        write_atomically(mined, lambda path: write_retrieval_triplets(rows, path))
    shutil.copyfile(mined, directory / MINED_FILE)
    try:
        train = read_retrieval_triplets(mined, num_negatives=count)
    except DataFormatError:
        # Not the staging file's name (it goes with the failed run) nor mine's options.
        raise CliError(
            f"--train-retrieval {config['train_retrieval']}: every mined row got "
            f"{_fewer_negatives(count)}, so none is left to train on; ask for fewer with "
            "--mine-negatives, or complete the rows with --mine-fill random"
        ) from None
    # Named where the run keeps it, not in the backup, which goes once the run is published.
    train.source = os.path.join(config["output"], MINED_FILE)
    if train.skipped:
        env.note(f"{train.skipped} of {train.skipped + len(train)} mined rows got "
                 f"{_fewer_negatives(count)} and are left out (see {MINED_FILE})")
    return train


def _fewer_negatives(count):
    return "no negative" if count == 1 else f"fewer than {count} negatives"


def _scored_epochs(values):
    """The indices of the logged values that are scores: not missing, not NaN (a
    diverged encoder's)."""
    return [i for i, v in enumerate(values) if v is not None and math.isfinite(v)]


def best_so_far(epoch_log, metric):
    """The best `metric` of the epochs logged before an interruption, or -inf when
    none scored yet: Keras' own start, None, saves the first epoch whatever it
    scored, and after a NaN nothing compares higher."""
    values = reporting.read_epoch_log(epoch_log).get(metric, []) if epoch_log.is_file() else []
    return max((values[i] for i in _scored_epochs(values)), default=-math.inf)


def compute_in_float32(encoder):
    """Sets every layer of `encoder` under a mixed policy to float32, in place.

    A model trained under a mixed policy keeps its weights in float32 already;
    only the computation changes (the tokenizer's integer policy stays). The saved encoder then encodes, evaluates
    and exports (`keras-cosent export`) in float32 on any device, as a model
    trained in float32 does; `SentenceEncoder.from_checkpoint(dtype=...)`
    chooses a reduced precision explicitly where one is wanted.
    """
    from keras_cosent.compat import flatten_layers

    for layer in flatten_layers(encoder, include_self=True):
        if layer.dtype_policy.name.startswith("mixed_"):
            layer.dtype_policy = "float32"


@contextlib.contextmanager
def run_policy(config):
    """Keras' global dtype policy of the run, for the block that builds its model.

    `--mixed-precision`'s policy (`config["mixed_precision"]`; off: the policy
    stays as it is), then the previous policy again. Under mixed_float16 the
    training model's compile wraps the optimizer in Keras' LossScaleOptimizer
    (compile's auto_scale_loss). Warns when PyTorch's matmuls would crawl in
    the policy's precision here (`slow_bfloat16_reason`, `slow_float16_reason`).
    """
    previous = keras.mixed_precision.global_policy()
    if config["mixed_precision"] == "mixed_float16":
        problem = float16_on_cpu_problem()
        if problem:
            raise CliError(problem)
    if config["mixed_precision"]:
        reason = (slow_bfloat16_reason() if "bfloat16" in config["mixed_precision"]
                  else slow_float16_reason())
        if reason:
            warnings.warn(reason, stacklevel=2)
        keras.mixed_precision.set_global_policy(config["mixed_precision"])
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def interrupt_check():
    """A callback that stops `fit` at its next batch or epoch boundary once a signal
    came (`recipes.interrupts`): the KeyboardInterrupt raised where it landed may
    have been dropped by Keras' own code (a bare `except:` in `pythonify_logs`)."""

    class InterruptCheck(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            interrupts.raise_if_received()

        def on_train_batch_end(self, batch, logs=None):
            interrupts.raise_if_received()

        def on_epoch_end(self, epoch, logs=None):
            interrupts.raise_if_received()

        def on_test_batch_end(self, batch, logs=None):
            interrupts.raise_if_received()

    return InterruptCheck()


def non_finite_loss_error():
    """A callback that stops the run after an epoch whose loss is nan or inf.

    Nothing is saved: the weights are nan too, and an encoder of nan embeddings
    would otherwise be published as a finished run.
    """

    def on_epoch_end(epoch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            print()  # ends the progress bar's line, which Keras leaves open
            raise CliError(
                f"epoch {epoch + 1}: the training loss is {float(loss)}, so the weights are "
                "no longer numbers; nothing was saved. Lower --lr, or look for extreme "
                "scores in the training data.")

    return keras.callbacks.LambdaCallback(on_epoch_end=on_epoch_end)


def check_finite_embeddings(encoder, datasets):
    """Raises a `CliError` if the trained encoder embeds training texts as nan or inf.

    `non_finite_loss_error` reads an epoch's mean loss, computed before the
    last step's update: a last step that overflows leaves a finite loss and an
    encoder of nan embeddings, which would be published as a finished run.
    Eight texts of each training set's first column are embedded to check.
    """
    texts = [text for dataset in datasets for text in dataset.columns[0][:8]]
    embeddings = np.asarray(encoder.encode(texts, batch_size=len(texts)))
    if not np.isfinite(embeddings).all():
        raise CliError(
            "after the last training step the encoder embeds its training texts as nan or "
            "inf (the epochs' losses were finite: it was the last step); nothing was saved. "
            "Lower --lr, or look for extreme scores in the training data.")


def zero_loss_warning():
    """A callback that warns, once, after an epoch whose loss was 0 on every batch.

    Such an epoch moved the weights by weight decay alone: every row already
    met a hinge loss' margin (`triplet`, `margin-ranking` on easy negatives),
    or no SupCon/batch-hard batch held a positive.
    """
    warned = []

    def on_epoch_end(epoch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and float(loss) == 0.0 and not warned:
            warned.append(epoch)
            warnings.warn(
                f"epoch {epoch + 1}: the loss was 0 on every batch, so training learned "
                "nothing from these rows (only weight decay moved the weights): every row "
                "already meets the loss' margin, or no batch holds a positive. Raise "
                "--margin, train on harder negatives, or raise --batch-size.", stacklevel=2)

    return keras.callbacks.LambdaCallback(on_epoch_end=on_epoch_end)


BFLOAT16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def float16_on_cpu_problem(backend=None, devices=None):
    """Why `mixed_float16` cannot train here, or None.

    JAX and TensorFlow compile with XLA, which on a CPU has no float16 matrix
    product: JAX stops with "precision 'F16_F16_F32' is not supported by
    dot_general on CPU" (at the first evaluation when dropout is on) and
    TensorFlow's loss turns nan. The arguments default to this process's
    backend and `keras.distribution.list_devices()` (`"cpu:0"`, `"gpu:0"`...).
    """
    backend = backend or keras.backend.backend()
    if backend not in ("jax", "tensorflow"):
        return None
    devices = keras.distribution.list_devices() if devices is None else devices
    if any(not device.lower().startswith("cpu") for device in devices):
        return None
    return (f"--mixed-precision mixed_float16 on {backend} with no GPU: XLA on a CPU has no "
            "float16 matrix product, so the run would fail or its loss turn nan. Use "
            "--mixed-precision mixed_bfloat16 on a CPU, or train in float32.")


def cpu_flags(cpuinfo="/proc/cpuinfo"):
    """The CPU's feature flags from Linux' `cpuinfo`, or None where that file is unreadable."""
    try:
        with open(cpuinfo, encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


def slow_bfloat16_reason(backend=None, gpu=None, flags=None):
    """Why a bfloat16 run would be far slower than float32 here, or None.

    PyTorch on a CPU with no bfloat16 instructions (`avx512_bf16`, `amx_bf16`)
    runs bfloat16 matmuls on a slow fallback: on a 2-core AVX2 machine a matmul
    takes 134x float32's time and a MiniLM forward pass 54x, where JAX and
    TensorFlow run bfloat16 at 1.1x (BENCHMARKS.md, `bench tool precision-speed`). The arguments default to this process's backend, whether
    PyTorch sees a GPU, and this machine's flags (unknown flags: no warning).
    """
    backend = backend or keras.backend.backend()
    if backend != "torch":
        return None
    if gpu is None:
        import torch

        gpu = torch.cuda.is_available()
    flags = cpu_flags() if flags is None else flags
    if gpu or flags is None or flags & set(BFLOAT16_CPU_FLAGS):
        return None
    return ("--mixed-precision mixed_bfloat16 on PyTorch on this CPU (no "
            f"{' or '.join(BFLOAT16_CPU_FLAGS)}): PyTorch's bfloat16 matmuls run on a slow "
            "fallback here, tens of times float32's time. Train in float32 (drop "
            "--mixed-precision), on a GPU, or with --backend jax or tensorflow.")


def slow_float16_reason(backend=None, gpu=None):
    """Why a float16 run would be far slower than float32 here, or None.

    PyTorch runs float16 matmuls on a CPU on a slow path: a MiniLM forward pass
    of 8 x 64 tokens took 1.22 s in mixed_float16 against 0.091 s in float32
    (13x) on a 2-core Xeon with `avx512_bf16`. (JAX and TensorFlow refuse
    float16 on a CPU: `float16_on_cpu_problem`.) The arguments default to this
    process's backend and whether PyTorch sees a GPU.
    """
    backend = backend or keras.backend.backend()
    if backend != "torch":
        return None
    if gpu is None:
        import torch

        gpu = torch.cuda.is_available()
    if gpu:
        return None
    return ("--mixed-precision mixed_float16 on PyTorch with no GPU: PyTorch's float16 "
            "matmuls run on a slow path on a CPU, over ten times float32's time. Train in "
            "float32 (drop --mixed-precision), or on a GPU.")


def save_encoder(encoder, directory, config):
    """Writes the run's encoder file, computing in float32 if it trained under a mixed policy."""
    if config["mixed_precision"]:
        compute_in_float32(encoder)
    encoder.save(directory / ENCODER_FILE)


def float32_start(config):
    """The starting encoder for the scores before training: under
    `--mixed-precision`, loaded anew computing in float32 (call it outside
    `run_policy` and before the run's seed is set); else None, for the run's own.

    A run's table then compares the starting model and the saved one as
    `keras-cosent evaluate` scores them, in float32, where the scores of the
    models computing in bfloat16 differ from those in the second decimal.
    """
    if not config["mixed_precision"]:
        return None
    return load_encoder(config["backbone"], config["pooling"], config["max_length"],
                        option="--backbone")


def rows_made(rows, read, data_format):
    """The "N rows (file)" of a training note, saying how the objective's `rows` came from
    the file's `read` ones where they differ: InfoNCE keeps the pairs scored above its
    threshold, and supervised SimCSE's NLI triplets leave pairs out."""
    if data_format == "nli-jsonl" and len(read.columns) == 3:
        return (f"{len(rows)} (premise, entailment, contradiction) triplets ({read.source}; "
                "neutral pairs and premises lacking an entailment or a contradiction are "
                "left out)")
    if len(rows) != len(read):
        return f"{len(rows)} rows made of the {len(read)} of {read.source}"
    return f"{len(rows)} rows ({read.source})"


def saved_encoder(encoder, directory, config):
    """Saves the run's encoder (`save_encoder`) and returns the encoder its final
    scores are measured on: under `--mixed-precision` the saved file, loaded anew
    (the predict functions `encoder` traced at the end of each epoch compute in
    the mixed policy), else `encoder`."""
    save_encoder(encoder, directory, config)
    if not config["mixed_precision"]:
        return encoder
    return load_encoder(str(directory / ENCODER_FILE), option="--output")


def train_encoder(config, directory, env, backup_dir):
    """Trains as `config` says and writes the run's files into `directory`.

    With `devices` > 1 everything runs inside
    `keras_cosent.distributed.data_parallel(devices)`.

    `backup_dir` holds the training state after every epoch
    (`keras_cosent.callbacks.ResumableTraining`, Keras' `BackupAndRestore`) and
    the per-epoch logs; when it holds an interrupted run's state, training
    continues from there. The caller removes it once the run is published.

    Returns:
        The final evaluation results, `{split: {"pairs", "spearman", "pearson"}}`,
        and `{"dev_retrieval": {"queries", "documents", "ndcg@10", ...}}` (x 100).
    """
    if config.get("staged"):
        from recipes.staged_training import train_stages

        return train_stages(config, directory, env, backup_dir)
    from keras_cosent import distributed

    with distributed.data_parallel(config.get("devices", 1)):
        return _train_encoder(config, directory, env, backup_dir)


def check_full_batches(train, batch_size, devices, objective=None, data_format=None):
    """Raises a `CliError` if several devices, which drop the last partial batch,
    would be left no batch of `train` at all: of the rows `objective` (a name or
    an `Objective`) keeps, such as InfoNCE's pairs scored above its threshold."""
    if devices == 1:
        return
    rows, kept = len(train), ""
    if objective is not None:
        try:
            objective = get_objective(objective)
            rows = len(objective.prepare(train, data_format))
        except ValueError:
            return  # `build` reports the objective or the rows it cannot take
        if rows != len(train):
            kept = f" that {objective.name} keeps of the {len(train)}"
    if rows < batch_size:
        raise CliError(
            f"--batch-size {batch_size} is more than the {rows} training rows{kept} of "
            f"{train.source}: with --devices {devices} every batch is full (the last partial "
            "one is dropped), so none would be left; lower --batch-size"
        )


def _train_encoder(config, directory, env, backup_dir):
    train, train_format, dev, test = read_datasets(config)
    train_retrieval, dev_retrieval = read_retrieval_splits(config, env)
    start_scored = float32_start(config)
    keras.utils.set_random_seed(config["seed"])
    with run_policy(config):
        encoder = load_encoder(config["backbone"], config["pooling"], config["max_length"],
                               option="--backbone")
        if train is None:
            train = mine_training_rows(config, encoder, env, backup_dir, directory,
                                       train_retrieval)
        matryoshka_dims = parse_matryoshka_dims(config.get("matryoshka_dims"), encoder,
                                                config["backbone"])
        devices = config.get("devices", 1)
        check_full_batches(train, config["batch_size"], devices, config["loss"], train_format)
        if multi_dataset.is_multi(config):
            setup = multi_dataset.build_setup(config, encoder, train, matryoshka_dims)
        else:
            setup = build(
                encoder,
                train,
                config["loss"],
                batch_size=config["batch_size"],
                epochs=config["epochs"],
                learning_rate=config["lr"],
                warmup=config["warmup"],
                weight_decay=config["weight_decay"],
                max_grad_norm=config.get("max_grad_norm"),
                seed=config["seed"],
                packing=config["packing"],
                data_format=train_format,
                matryoshka_dims=matryoshka_dims,
                devices=devices,
                mini_batch_size=config.get("mini_batch_size"),
                queue_size=config.get("queue_size"),
                momentum=config.get("momentum"),
                word_repetition=config.get("word_repetition"),
                **loss_options(config, config["loss"]),
            )
    model, batches = setup.model, setup.batches
    note_padding(config, setup, env)

    results = {}
    callbacks = [interrupt_check()]  # first: nothing else runs at a boundary after a signal
    if dev is not None:
        results["dev_before_training"] = evaluate_sts(
            start_scored or encoder, dev, note=prefixed(env.note, "dev before training"))
        callbacks.append(epoch_end_sts_evaluator(encoder, dev, DEV_NAME, env.note))
    ignore_identical_ids = config.get("ignore_identical_ids", False)
    use_faiss = config.get("use_faiss", False)
    if dev_retrieval is not None:
        results["dev_retrieval_before_training"] = evaluate_retrieval(
            start_scored or encoder, dev_retrieval, ignore_identical_ids=ignore_identical_ids,
            use_faiss=use_faiss, note=prefixed(env.note, "dev retrieval before training"),
        )
        callbacks.append(RetrievalEvaluator.from_dataset(
            dev_retrieval, name=IR_DEV_NAME, k_values=IR_DEV_CUTOFFS,
            encoder=announced(encoder, prefixed(env.note, "dev retrieval, end of epoch"),
                              "queries", "documents"),
            ignore_identical_ids=ignore_identical_ids, use_faiss=use_faiss,
        ))
    del start_scored
    keep_best = config.get("keep_best")
    if keep_best is not None:
        # After the evaluators, which log the metric; before the collapse guard,
        # so that it saves the weights that earned the score, not those the guard
        # restores when it fires; and before the backup: a run killed in between
        # repeats the epoch and saves the same weights.
        callbacks.append(keras.callbacks.ModelCheckpoint(
            str(backup_dir / BEST_WEIGHTS), monitor=keep_best, mode="max",
            save_best_only=True, save_weights_only=True,
            initial_value_threshold=best_so_far(backup_dir / EPOCH_LOG, keep_best),
        ))
    if config.get("collapse_guard"):
        # After the evaluators, so that they score the trained weights, not the
        # ones it restores; before ResumableTraining, so that the weights it pairs
        # with the score before training are those weights, not the ones a
        # resumed run's backup puts in their place. The backup holds its memory.
        callbacks.append(CollapseGuard(
            monitor=f"{DEV_NAME}_spearman",
            min_delta=config["guard_min_delta"],
            factor=config["guard_factor"],
            patience=config["guard_patience"],
            # evaluate_sts reports x 100; the callback's scores are -1..1.
            baseline=results["dev_before_training"]["spearman"] / 100.0,
        ))
    callbacks += [
        zero_loss_warning(),
        non_finite_loss_error(),
        keras.callbacks.CSVLogger(str(backup_dir / EPOCH_LOG), append=True),
        # Last, so that the state is saved after the epoch's logs are written: a
        # run killed in between repeats the epoch, and its logged row is replaced.
        ResumableTraining(backup_dir, batches, delete_checkpoint=False,
                          stateful=[c for c in callbacks if isinstance(c, CollapseGuard)]),
    ]
    if multi_dataset.is_multi(config):
        results["train_tasks"] = multi_dataset.task_records(setup)
        for task in results["train_tasks"]:
            env.note(f"task {task['name']}: {task['loss']} on {task['rows']} rows "
                     f"({task['train']}), {task['batches_per_epoch']} batches per epoch")
        env.note(f"training {len(setup.tasks)} datasets ({config['sampling']}): "
                 f"{config['epochs']} epoch(s) x {len(batches)} steps, backend {config['backend']}")
    else:
        dropped = len(setup.dataset) % config["batch_size"] if devices > 1 else 0
        env.note(
            f"training {config['loss']} on {rows_made(setup.dataset, train, train_format)}: "
            f"{config['epochs']} epoch(s) x {len(batches)} steps, backend {config['backend']}"
            + (f" ({dropped} rows left out of each epoch's batches: with --devices {devices} "
               "every batch is full)" if dropped else "")
        )
    start = time.time()
    with to_stderr():
        # shuffle=False: the batches shuffle themselves from the seed and the
        # epoch number, which a resumed run restores; Keras' own shuffle of the
        # batch order draws from Python's global generator, which it would not.
        model.fit(batches, epochs=config["epochs"], callbacks=callbacks, verbose=1, shuffle=False)
    train_seconds = time.time() - start
    history = reporting.read_epoch_log(backup_dir / EPOCH_LOG)
    # Correlations and retrieval metrics (keys ending in @k) x 100, as in the tables.
    percent = ("_spearman", "_pearson") + tuple(f"@{k}" for k in IR_DEV_CUTOFFS + (100,))
    kept_epoch = None
    if keep_best is not None:
        values = history[keep_best]
        scored = _scored_epochs(values)
        if scored:
            # The first epoch with the highest value: the checkpoint saves on a strict
            # rise, and never on NaN (a diverged encoder's score).
            kept_epoch = 1 + max(scored, key=lambda i: (values[i], -i))
            model.load_weights(backup_dir / BEST_WEIGHTS)
            shown = values[kept_epoch - 1] * (100.0 if keep_best.endswith(percent) else 1.0)
            env.note(f"kept epoch {kept_epoch} of {len(values)}, the best by {keep_best} "
                     f"({shown:.4f}, as in metrics.csv)")
        else:
            env.note(f"--keep-best {keep_best}: no epoch scored a finite value; the last "
                     "epoch's weights are kept")

    # Scored as saved: a --mixed-precision run's encoder computes in float32.
    encoder = saved_encoder(encoder, directory, config)
    check_finite_embeddings(encoder, [task.dataset for task in setup.tasks]
                            if hasattr(setup, "tasks") else [setup.dataset])
    if dev is not None:
        results["dev"] = evaluate_sts(encoder, dev, note=prefixed(env.note, "dev"))
    if test is not None:
        results["test"] = evaluate_sts(encoder, test, note=prefixed(env.note, "test"))
    if dev_retrieval is not None:
        results["dev_retrieval"] = evaluate_retrieval(
            encoder, dev_retrieval, ignore_identical_ids=ignore_identical_ids, use_faiss=use_faiss,
            note=prefixed(env.note, "dev retrieval"),
        )

    rows = reporting.history_rows(history, percent_suffixes=percent)
    if kept_epoch is not None:
        for row in rows:
            row["kept"] = row["epoch"] == kept_epoch
        results["kept_epoch"] = {"metric": keep_best, "epoch": kept_epoch,
                                 "value": rows[kept_epoch - 1][keep_best]}
    reporting.write_metrics(directory, rows)
    reporting.plot_training(
        directory / reporting.PLOT_FILE, rows,
        f"{DEV_NAME}_spearman" if dev is not None else None,
        initial_spearman=results["dev_before_training"]["spearman"] if dev is not None else None,
        retrieval_key=f"{IR_DEV_NAME}_ndcg@10" if dev_retrieval is not None else None,
        initial_retrieval=(results["dev_retrieval_before_training"]["ndcg@10"]
                           if dev_retrieval is not None else None),
    )
    reporting.write_results(directory, results)
    env.note(f"trained in {train_seconds:.0f} s")
    return results
