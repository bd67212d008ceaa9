"""`SentencePreprocessor`: raw sentences to the token arrays a `SentenceEncoder` takes.

The preprocessor half of the encoder, split along keras-hub's seam (backbone /
preprocessor / task): it owns the tokenizer call, the `[CLS] ... [SEP]`
framing, truncation to `max_length` and padding. `SentenceEncoder.tokenize` and
`preprocess` delegate to it, and the training batches (`PairBatches`) take its
`tokenize`. Packing into shared rows, the other host-side layout, lives in
`keras_cosent.data.packing`.

It is host-side Python, not a Keras layer: the encoder saves the tokenizer (its
vocabulary is an asset of the `.keras` file) and `max_length`, and rebuilds its
preprocessor from them.
"""

import collections.abc
import numpy as np

from keras_cosent.data.padding import pad_batch
from keras_cosent.models import sentence_preprocessing


class SentencePreprocessor:
    """Tokenises sentences into `[CLS] ... [SEP]` id arrays and pads them into batches.

    Args:
        tokenizer: a keras-hub tokenizer (e.g. `keras_hub.models.BertTokenizer`)
            with start/end token ids (`cls_token_id`/`sep_token_id` or
            `start_token_id`/`end_token_id`).
        max_length: int >= 3, the longest sequence, special tokens included;
            longer sentences lose their end (the closing token is kept).

    Example:

    >>> import keras_hub
    >>> from keras_cosent.models import SentencePreprocessor
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]
    >>> preprocessor = SentencePreprocessor(
    ...     keras_hub.models.BertTokenizer(vocabulary=vocab), max_length=4)
    >>> [ids.tolist() for ids in preprocessor.tokenize(["the cat sat", "cat"])]
    [[2, 5, 6, 3], [2, 6, 3]]
    >>> preprocessor(["the cat sat", "cat"])["padding_mask"].shape
    (2, 4)
    """

    def __init__(self, tokenizer, max_length=128):
        if tokenizer is None:
            raise ValueError(
                "`tokenizer` is None: a SentencePreprocessor needs a keras-hub tokenizer."
            )
        if getattr(tokenizer, "sequence_length", None) is not None:
            # Its output would come padded: pad ids inside [CLS] ... [SEP], marked
            # as tokens, and truncation at its length instead of `max_length`.
            raise ValueError(
                "`tokenizer` pads to its own sequence_length="
                f"{tokenizer.sequence_length!r}; SentencePreprocessor truncates and pads "
                "itself (to `max_length`). Build the tokenizer without sequence_length."
            )
        self.tokenizer = tokenizer
        self.max_length = sentence_preprocessing.check_max_length(max_length)
        self.start_id, self.end_id = sentence_preprocessing.special_token_ids(tokenizer)

    @property
    def pad_id(self):
        """The token id written into padded positions."""
        pad = getattr(self.tokenizer, "pad_token_id", None)
        return 0 if pad is None else int(pad)

    def tokenize(self, texts):
        """Token id arrays, one per sentence.

        Args:
            texts: list (or tuple / 1-D array) of str.

        Returns:
            A list of 1-D int32 numpy arrays, each `[start, ..., end]` and at
            most `max_length` long.
        """
        texts = check_texts(texts)
        if not texts:
            return []
        # One batched call: tf-text tokenises thousands of sentences at once.
        token_lists = _to_lists(self.tokenizer(texts))
        keep = self.max_length - 2
        return [
            np.asarray([self.start_id, *ids[:keep], self.end_id], dtype="int32")
            for ids in token_lists
        ]

    def __call__(self, texts):
        """Tokenises and pads `texts` into a model input dict of numpy arrays.

        Pads to the batch's own longest sentence, rounded up to a multiple of 8
        on JAX and TensorFlow (`keras_cosent.data.padding.pad_batch`; PyTorch
        pads to the exact length).

        Returns:
            dict of `(batch, length)` numpy arrays `token_ids`, `padding_mask`,
            `segment_ids`.
        """
        token_lists = self.tokenize(texts)
        if not token_lists:
            raise ValueError("`texts` is empty: nothing to preprocess.")
        return pad_batch(token_lists, pad_id=self.pad_id, max_length=self.max_length)


def check_texts(texts):
    """`texts` as a list of str; a TypeError naming the first item that is not one."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(
            "`texts` should be a list of strings; received a single "
            f"{type(texts).__name__}. Wrap it in a list: [text]."
        )
    if isinstance(texts, (collections.abc.Mapping, collections.abc.Set)):
        # A dict would give its keys, a set an arbitrary order: the embeddings
        # could not be matched back to the texts.
        raise TypeError(
            "`texts` should be a list of strings (an ordered sequence). Received: "
            f"{type(texts).__name__}"
        )
    try:
        texts = list(texts)
    except TypeError:
        raise TypeError(
            f"`texts` should be a list of strings. Received: {type(texts).__name__}"
        ) from None
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(
                f"`texts` should contain only strings; item {i} is "
                f"{type(text).__name__}: {text!r:.80}"
            )
    return texts


def _to_lists(token_ids):
    # keras-hub returns python lists on jax/torch and a RaggedTensor on tensorflow.
    if isinstance(token_ids, list):
        return token_ids
    if hasattr(token_ids, "row_splits"):
        flat = np.asarray(token_ids.flat_values)
        splits = np.asarray(token_ids.row_splits)
        return np.split(flat, splits[1:-1])
    return [list(ids) for ids in token_ids]
