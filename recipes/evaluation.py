"""STS evaluation shared by `train` and `evaluate`: Spearman and Pearson x 100 of pair cosines.

The numbers come from `keras_cosent.callbacks.SpearmanEvaluator.evaluate`, the
same code that scores the dev set after every training epoch, so the per-epoch
metrics, the final table and `keras-cosent evaluate` can never disagree.
"""


def evaluate_sts(encoder, dataset, batch_size=64):
    """Corpus-level Spearman and Pearson (x 100) of pair cosines against the labels.

    Args:
        encoder: a `keras_cosent.models.SentenceEncoder`.
        dataset: a 2-column `keras_cosent.data.PairDataset` with labels.
        batch_size: sentences per forward pass.

    Returns:
        `{"pairs": int, "spearman": float, "pearson": float}`.
    """
    from keras_cosent.callbacks import SpearmanEvaluator

    evaluator = SpearmanEvaluator.from_dataset(
        dataset, encoder=encoder, batch_size=batch_size, verbose=0
    )
    scores = evaluator.evaluate()
    return {
        "pairs": len(dataset),
        "spearman": 100.0 * scores["spearman"],
        "pearson": 100.0 * scores["pearson"],
    }
