"""The training loop behind `keras-cosent train`, assembled from keras_cosent's parts.

`train_encoder(config, directory, env)` reads the data, loads the backbone into a
`SentenceEncoder`, wraps it in a `SiameseEncoder` (plus a
`SoftmaxClassifierHead` for the Sentence-BERT baseline), trains it with AdamW
(`recipes.optimizers.adamw`: PyTorch's fused kernel on torch) on a
linear warm-up/decay schedule and the chosen loss on batches packed into
shared rows where the backbone allows (`PairBatches(packing=True)`), evaluates dev Spearman after
every epoch with `SpearmanEvaluator`, and writes the encoder, the per-epoch
metrics, the plot and the final results into `directory`.

Imported lazily by the `train` command, after the Keras backend is chosen.
"""

import json
import time
import warnings

import keras

from keras_cosent.callbacks import SpearmanEvaluator
from keras_cosent.data import PairBatches
from keras_cosent.data import PairDataset
from keras_cosent.layers import SoftmaxClassifierHead
from keras_cosent.losses import AnglELoss
from keras_cosent.losses import CoSENTLoss
from keras_cosent.losses import CosineMSELoss
from keras_cosent.losses import InfoNCELoss
from keras_cosent.losses import SoftmaxLoss
from keras_cosent.models import SiameseEncoder
from keras_cosent.models.sequence_packing import supports_packing
from recipes import data_loading
from recipes import reporting
from recipes.evaluation import evaluate_sts
from recipes.model_loading import ENCODER_FILE
from recipes.model_loading import load_encoder
from recipes.optimizers import adamw
from recipes.options import parse_text_columns
from recipes.schedules import WarmupLinearDecay

DEV_NAME = "dev"
# Biases and LayerNorm scales are not decayed, as in BERT and Sentence-BERT.
NO_WEIGHT_DECAY = ["^bias$", "^gamma$", "^beta$"]


class SoftmaxClassifierModel(keras.Model):
    """The Sentence-BERT classification set-up: a siamese encoder, then a softmax head.

    Only used while training `--loss sbert-softmax`; the run keeps the encoder.
    """

    def __init__(self, siamese, num_labels, **kwargs):
        super().__init__(**kwargs)
        self.siamese = siamese
        self.encoder = siamese.encoder
        self.head = SoftmaxClassifierHead(num_labels)

    def call(self, inputs, training=None):
        return self.head(self.siamese(inputs, training=training), training=training)


def read_datasets(config):
    """Reads the data the configuration names.

    Returns:
        `(train, train_format, dev, test)`: `PairDataset`s (dev and test may be
        None) and the format `train` was read in.
    """
    columns = parse_text_columns(config["text_columns"])
    label_column = config["label_column"]
    if config["train"] is None:
        train_file, train_format = data_loading.DEMO_TRAIN, data_loading.DEMO_FORMAT
    else:
        train_file, train_format = config["train"], config["format"]
    train = data_loading.read_training_set(
        train_file, train_format, config["loss"], columns, label_column
    )
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


def build_loss(config, train, train_format):
    """The loss object, the label mode for `PairBatches`, and the labels to train on."""
    loss = config["loss"]
    if loss == "cosent":
        return CoSENTLoss(scale=config["scale"]), "score", train
    if loss == "angle":
        return AnglELoss(scale=config["scale"]), "score", train
    if loss == "cosine-mse":
        low, high = data_loading.score_range(train, train_format)
        return CosineMSELoss(min_score=low, max_score=high), "score", train
    if loss in ("infonce", "simcse"):
        # Rows sharing a positive are duplicates, not negatives of each other.
        return (
            InfoNCELoss(temperature=config["temperature"], mask_false_negatives=True),
            "group",
            train,
        )
    if loss == "sbert-softmax":
        labels, num_labels = data_loading.classification_labels(train, train_format)
        train = PairDataset(train.columns, labels, train.source)
        return SoftmaxLoss(num_labels=num_labels), "score", train
    raise ValueError(f"Unknown loss {loss!r}")


def train_encoder(config, directory, env):
    """Trains as `config` says and writes the run's files into `directory`.

    Returns:
        The final evaluation results, `{split: {"pairs", "spearman", "pearson"}}`.
    """
    train, train_format, dev, test = read_datasets(config)
    keras.utils.set_random_seed(config["seed"])
    previous_policy = keras.mixed_precision.global_policy()
    if config["mixed_precision"]:
        keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        encoder = load_encoder(config["backbone"], config["pooling"], config["max_length"])
        loss, label_mode, train = build_loss(config, train, train_format)
        siamese = SiameseEncoder(encoder)
        model = siamese
        if config["loss"] == "sbert-softmax":
            model = SoftmaxClassifierModel(siamese, loss.num_labels)
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)

    batches = PairBatches(
        train,
        encoder.tokenize,
        batch_size=config["batch_size"],
        pad_id=encoder.pad_id,
        seed=config["seed"],
        label_mode=label_mode,
        unique_texts=label_mode == "group",
        packing=config["packing"] and supports_packing(encoder.backbone),
    )
    total_steps = len(batches) * config["epochs"]
    schedule = WarmupLinearDecay(
        config["lr"], total_steps, warmup_steps=round(config["warmup"] * total_steps)
    )
    optimizer = adamw(schedule, config["weight_decay"], exclude_from_weight_decay=NO_WEIGHT_DECAY)
    model.compile(optimizer=optimizer, loss=loss)

    results = {}
    callbacks = []
    if dev is not None:
        results["dev_before_training"] = evaluate_sts(encoder, dev)
        callbacks.append(
            SpearmanEvaluator.from_dataset(dev, name=DEV_NAME, encoder=encoder, verbose=0)
        )
    env.note(
        f"training {config['loss']} on {len(train)} rows ({train.source}): "
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
        history = model.fit(batches, epochs=config["epochs"], callbacks=callbacks, verbose=1)
    train_seconds = time.time() - start

    if dev is not None:
        results["dev"] = evaluate_sts(encoder, dev)
    if test is not None:
        results["test"] = evaluate_sts(encoder, test)

    encoder.save(directory / ENCODER_FILE)
    rows = reporting.history_rows(history.history, percent_suffixes=("_spearman", "_pearson"))
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
