"""The training loop behind `keras-cosent train`: read, build, fit, write the run.

`train_encoder(config, directory, env)` reads the data the options name, loads
the backbone into a `SentenceEncoder`, hands both to the library's one training
set-up, `keras_cosent.training.build` (the objective's loss and data layout,
packed batches, AdamW with warm-up and linear decay), fits with the dev
Spearman evaluated after every epoch (`SpearmanEvaluator`; with `--dev-retrieval`
also nDCG/MRR/Recall@10 and MAP@100, `RetrievalEvaluator`), and writes the
encoder, the per-epoch metrics, the plot and the final results into `directory`.

Imported lazily by the `train` command, after the Keras backend is chosen.
"""

import json
import time
import warnings

import keras

from keras_cosent.callbacks import CollapseGuard
from keras_cosent.callbacks import ResumableTraining
from keras_cosent.callbacks import RetrievalEvaluator
from keras_cosent.callbacks import SpearmanEvaluator
from keras_cosent.training import build
from keras_cosent.training import get_objective
from recipes import data_loading
from recipes import reporting
from recipes.errors import CliError
from recipes.evaluation import evaluate_retrieval
from recipes.evaluation import evaluate_sts
from recipes.model_loading import ENCODER_FILE
from recipes.model_loading import load_encoder
from recipes.options import parse_text_columns

DEV_NAME = "dev"
# Per-epoch logs kept in the backup directory, so that a resumed run's metrics
# hold the epochs trained before the interruption too.
EPOCH_LOG = "epochs.csv"
# `--dev-retrieval`: the callback's log prefix, the cutoffs it logs (and MAP@100).
IR_DEV_NAME = "ir_dev"
IR_DEV_CUTOFFS = (10,)


def read_datasets(config):
    """Reads the data the configuration names.

    Returns:
        `(train, train_format, dev, test)`: `PairDataset`s (dev and test may be
        None; `train` as the file has it, which `build` shapes for the objective)
        and the format `train` was read in.
    """
    columns = parse_text_columns(config["text_columns"])
    label_column = config["label_column"]
    if config["train"] is None:
        train_file, train_format = data_loading.DEMO_TRAIN, data_loading.DEMO_FORMAT
    else:
        train_file, train_format = config["train"], config["format"]
    train = get_objective(config["loss"]).read(train_file, train_format, columns, label_column)
    evaluation = {}
    for split in ("dev", "test"):
        path, data_format = config[split], config["eval_format"]
        if split == "dev" and path is None and config["train"] is None:
            path, data_format = data_loading.DEMO_DEV, data_loading.DEMO_FORMAT
        dataset = None
        if path is not None:
            dataset = data_loading.read_scored_pairs(
                path, data_format, columns, label_column, option=f"--{split}"
            )
        evaluation[split] = dataset
    return train, train_format, evaluation["dev"], evaluation["test"]


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


def train_encoder(config, directory, env, backup_dir):
    """Trains as `config` says and writes the run's files into `directory`.

    `backup_dir` holds the training state after every epoch
    (`keras_cosent.callbacks.ResumableTraining`, Keras' `BackupAndRestore`) and
    the per-epoch logs; when it holds an interrupted run's state, training
    continues from there. The caller removes it once the run is published.

    Returns:
        The final evaluation results, `{split: {"pairs", "spearman", "pearson"}}`,
        and `{"dev_retrieval": {"queries", "documents", "ndcg@10", ...}}` (x 100).
    """
    train, train_format, dev, test = read_datasets(config)
    dev_retrieval = None
    if config.get("dev_retrieval") is not None:
        dev_retrieval = data_loading.read_retrieval_folder(
            config["dev_retrieval"], config["dev_retrieval_split"], "--dev-retrieval"
        )
    keras.utils.set_random_seed(config["seed"])
    previous_policy = keras.mixed_precision.global_policy()
    if config["mixed_precision"]:
        keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        encoder = load_encoder(config["backbone"], config["pooling"], config["max_length"])
        matryoshka_dims = parse_matryoshka_dims(config.get("matryoshka_dims"), encoder,
                                                config["backbone"])
        setup = build(
            encoder,
            train,
            config["loss"],
            batch_size=config["batch_size"],
            epochs=config["epochs"],
            learning_rate=config["lr"],
            warmup=config["warmup"],
            weight_decay=config["weight_decay"],
            seed=config["seed"],
            packing=config["packing"],
            data_format=train_format,
            scale=config["scale"],
            temperature=config["temperature"],
            margin=config.get("margin"),
            matryoshka_dims=matryoshka_dims,
        )
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)
    model, batches = setup.model, setup.batches

    results = {}
    callbacks = []
    if dev is not None:
        results["dev_before_training"] = evaluate_sts(encoder, dev)
        callbacks.append(
            SpearmanEvaluator.from_dataset(dev, name=DEV_NAME, encoder=encoder, verbose=0)
        )
    if dev_retrieval is not None:
        callbacks.append(RetrievalEvaluator.from_dataset(
            dev_retrieval, name=IR_DEV_NAME, encoder=encoder, k_values=IR_DEV_CUTOFFS
        ))
    if config.get("collapse_guard"):
        # After the evaluators, so that they score the trained weights, not the
        # ones it restores; before ResumableTraining, so that the weights it pairs
        # with the score before training are those weights, not the ones a
        # resumed run's backup puts in their place.
        callbacks.append(CollapseGuard(
            monitor=f"{DEV_NAME}_spearman",
            min_delta=config["guard_min_delta"],
            factor=config["guard_factor"],
            patience=config["guard_patience"],
            # evaluate_sts reports x 100; the callback's scores are -1..1.
            baseline=results["dev_before_training"]["spearman"] / 100.0,
        ))
    callbacks += [
        keras.callbacks.CSVLogger(str(backup_dir / EPOCH_LOG), append=True),
        # Last, so that the state is saved after the epoch's logs are written: a
        # run killed in between repeats the epoch, and its logged row is replaced.
        ResumableTraining(backup_dir, batches, delete_checkpoint=False),
    ]
    env.note(
        f"training {config['loss']} on {len(setup.dataset)} rows ({train.source}): "
        f"{config['epochs']} epoch(s) x {len(batches)} steps, backend {config['backend']}"
    )
    start = time.time()
    with warnings.catch_warnings():
        # BERT backbones carry a pooler ("pooled_dense") that sentence pooling
        # does not use; Keras warns on every run that it gets no gradient. Any
        # other variable without a gradient is still reported.
        warnings.filterwarnings(
            "ignore", message=r"Gradients do not exist for variables \['pooled_dense/\w+', "
            r"'pooled_dense/\w+'\]"
        )
        # shuffle=False: the batches shuffle themselves from the seed and the
        # epoch number, which a resumed run restores; Keras' own shuffle of the
        # batch order draws from Python's global generator, which it would not.
        model.fit(batches, epochs=config["epochs"], callbacks=callbacks, verbose=1, shuffle=False)
    train_seconds = time.time() - start

    if dev is not None:
        results["dev"] = evaluate_sts(encoder, dev)
    if test is not None:
        results["test"] = evaluate_sts(encoder, test)
    if dev_retrieval is not None:
        results["dev_retrieval"] = evaluate_retrieval(encoder, dev_retrieval)

    encoder.save(directory / ENCODER_FILE)
    history = reporting.read_epoch_log(backup_dir / EPOCH_LOG)
    # Correlations and retrieval metrics (keys ending in @k) x 100, as in the tables.
    percent = ("_spearman", "_pearson") + tuple(f"@{k}" for k in IR_DEV_CUTOFFS + (100,))
    rows = reporting.history_rows(history, percent_suffixes=percent)
    reporting.write_metrics(directory, rows)
    if dev is None:
        reporting.plot_training(directory / reporting.PLOT_FILE, rows)
    else:
        reporting.plot_training(
            directory / reporting.PLOT_FILE, rows, f"{DEV_NAME}_spearman",
            initial_spearman=results["dev_before_training"]["spearman"],
        )
    with open(directory / reporting.RESULTS_FILE, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
    env.note(f"trained in {train_seconds:.0f} s")
    return results
