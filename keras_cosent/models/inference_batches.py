"""The two inference strategies of `SentenceEncoder.encode`: padded and packed batches.

Each yields `(inputs, index)` pairs: the model inputs of one forward pass and
the positions, in the input order, of the sentences it embeds. The layouts
themselves come from the one home of padding and packing:
`keras_cosent.data.padding` (`pad_batch`, `padded_length`) and
`keras_cosent.data.packing` (`packed_batches`) on the host, and
`keras_cosent.models.sequence_packing` for the packed model.
"""

import numpy as np

from keras_cosent.data import packing as host_packing
from keras_cosent.data.padding import pad_batch
from keras_cosent.data.padding import padded_length
from keras_cosent.models import sequence_packing


def padded_batches(token_lists, batch_size, pad_id, max_length):
    """Batches of `batch_size` sentences sorted by length, each padded to its longest.

    Longest first, so a batch that does not fit in memory fails at once; the
    last batch is filled up to `batch_size` (one compiled shape less).
    """
    n = len(token_lists)
    order = np.argsort([-len(ids) for ids in token_lists], kind="stable")
    for start in range(0, n, batch_size):
        index = order[start : start + batch_size]
        rows = [token_lists[i] for i in index]
        filler = batch_size - len(rows) if n > batch_size else 0
        batch = pad_batch(rows + [rows[-1]] * filler, pad_id=pad_id, max_length=max_length)
        yield batch, index


def packed_batches(token_lists, batch_size, pad_id, max_length):
    """Sentences packed end to end into rows as long as the longest one.

    Each pass holds as many tokens as `batch_size` sentences of average
    length, in whole rows (`keras_cosent.data.packing.packed_batches`).
    """
    lengths = np.array([len(ids) for ids in token_lists])
    row_length = padded_length(lengths.max(), max_length=max_length)
    rows_per_batch = max(1, int(round(batch_size * lengths.mean() / row_length)))
    rows_needed = -(-int(lengths.sum()) // row_length)
    rows_per_batch = min(rows_per_batch, rows_needed)
    return host_packing.packed_batches(token_lists, row_length, rows_per_batch, pad_id=pad_id)


def packed_model(encoder):
    """The packed-input twin of `encoder`, built once and sharing every weight.

    Kept out of Keras' tracking (`object.__setattr__`), so it is neither saved
    nor counted twice; it follows the encoder's XLA setting.
    """
    model = encoder.__dict__.get("_packed_model_cache")
    if model is None:
        model = sequence_packing.build_packed_model(encoder)
        object.__setattr__(encoder, "_packed_model_cache", model)
    jit_compile = encoder.jit_compile is True
    if model.jit_compile is not jit_compile:
        model.jit_compile = jit_compile
        model.predict_function = None
    return model
