"""STS evaluation shared by `train` and `evaluate`: Spearman and Pearson x 100 of pair cosines."""

import numpy as np


def pair_cosines(encoder, dataset, batch_size=32, progress=False):
    """Cosine of the two sentences of each row of a 2-column `PairDataset`.

    Each distinct sentence is encoded once, whatever column it appears in.
    """
    first, second = dataset.columns[0], dataset.columns[1]
    sentences = list(dict.fromkeys(first + second))
    embeddings = encoder.encode(sentences, batch_size=batch_size, progress=progress)
    embeddings = np.asarray(embeddings, dtype="float32")
    index = {sentence: row for row, sentence in enumerate(sentences)}
    a = embeddings[[index[s] for s in first]]
    b = embeddings[[index[s] for s in second]]
    # The encoder's outputs are unit vectors; normalising again keeps this
    # correct for any encoder that is not.
    a /= np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b /= np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return np.sum(a * b, axis=1)


def evaluate_sts(encoder, dataset, batch_size=32, progress=False):
    """Corpus-level Spearman and Pearson (x 100) of pair cosines against the labels.

    Returns:
        `{"pairs": int, "spearman": float, "pearson": float}`.
    """
    from keras_cosent.metrics import pearson_correlation
    from keras_cosent.metrics import spearman_correlation

    cosines = pair_cosines(encoder, dataset, batch_size=batch_size, progress=progress)
    labels = np.asarray(dataset.labels, dtype="float32")
    return {
        "pairs": len(dataset),
        "spearman": 100.0 * float(spearman_correlation(labels, cosines)),
        "pearson": 100.0 * float(pearson_correlation(labels, cosines)),
    }
