"""Host-side sequence packing: several tokenised sentences share one row of tokens.

NumPy only. `pack_lengths` assigns sentences to rows (best fit decreasing);
`packed_batches` lays a corpus out in passes of a fixed number of rows (what
`SentenceEncoder.encode` runs) and `pack_batch` one training batch in as few
rows as it needs, slots in input order (what `PairBatches(packing=True)`
yields). Each sentence gets a `pack_ids` number within its row, positions that
restart at 0, and a gather row telling the model where its tokens sit; the
model side, which turns `pack_ids` into a block-diagonal attention mask and
reads the sentences back out, is `keras_cosent.models.sequence_packing`.
"""

import numpy as np

from keras_cosent.data.padding import padded_length

# The arrays of a packed input, as `packed_batches` and `pack_batch` lay them out.
PACKED_KEYS = ("token_ids", "positions", "segment_ids", "pack_ids", "gather_index", "gather_mask")
# Those with one row per sentence (the others have one per packed row); a
# training batch gives them a column axis, `(batch, columns, row_length)`.
PER_SENTENCE_KEYS = ("gather_index", "gather_mask")


def pack_lengths(lengths, row_length):
    """Assigns sequences to rows of `row_length` tokens, best fit decreasing.

    Sequences are placed longest first, each into the row whose free space it
    fills most tightly (a new row when none has room): the classic bin-packing
    heuristic, never more than 11/9 of the fewest rows possible, plus one.

    Args:
        lengths: sequence of ints, the token count of each sequence (>= 1).
        row_length: int, tokens per row; every length must fit.

    Returns:
        A list of rows, each a list of indices into `lengths` in placement order.

    Example:

    >>> from keras_cosent.data.packing import pack_lengths
    >>> pack_lengths([5, 3, 4, 2, 2], row_length=8)
    [[0, 1], [2, 3, 4]]
    """
    row_length = int(row_length)
    lengths = [int(n) for n in lengths]
    for i, n in enumerate(lengths):
        if not 1 <= n <= row_length:
            raise ValueError(
                f"Sequence {i} has {n} tokens; `row_length`={row_length} needs "
                "every sequence to have between 1 and row_length tokens."
            )
    rows = []
    free = []
    # rows_with_free[c]: the rows with exactly c free tokens, so best fit is a
    # scan over at most row_length counts rather than over every row.
    rows_with_free = [[] for _ in range(row_length + 1)]
    for i in np.argsort([-n for n in lengths], kind="stable"):
        n = lengths[i]
        row = None
        for capacity in range(n, row_length + 1):
            if rows_with_free[capacity]:
                row = rows_with_free[capacity].pop()
                break
        if row is None:
            row = len(rows)
            rows.append([])
            free.append(row_length)
        rows[row].append(int(i))
        free[row] -= n
        rows_with_free[free[row]].append(row)
    return rows


def packed_batches(token_lists, row_length, rows_per_batch, pad_id=0, slot_multiple=8):
    """Packs tokenised sentences into equally shaped model inputs.

    Args:
        token_lists: list of 1-D int arrays (special tokens included).
        row_length: int, tokens per packed row (at least the longest sequence).
        rows_per_batch: int, rows per forward pass.
        pad_id: id written into unused row positions.
        slot_multiple: the number of sentence slots per pass (the most sentences
            any pass holds) is rounded up to a multiple of this, so that inputs
            of similar size share compiled functions.

    Yields:
        One `(inputs, indices)` per forward pass, built when asked for, so a
        large corpus is never laid out in memory at once. `inputs` is a dict of
        numpy arrays, `token_ids`, `positions`, `segment_ids`, `pack_ids` of shape
        `(rows_per_batch, row_length)` (`pack_ids` numbers the sentences of a
        row from 1, 0 marks unused positions) and `gather_index`,
        `gather_mask` of shape `(slots, row_length)` (where each slot's tokens
        sit in the flattened rows); `indices` the positions in `token_lists` of
        the sentences in slot order. Every pass has the same shapes: the last
        is filled with empty rows and slots.
    """
    if len(token_lists) == 0:
        raise ValueError("`token_lists` is empty: there is nothing to pack.")
    rows = pack_lengths([len(ids) for ids in token_lists], row_length)
    groups = [rows[i : i + rows_per_batch] for i in range(0, len(rows), rows_per_batch)]
    slots = max(sum(len(row) for row in group) for group in groups)
    slots = padded_length(slots, slot_multiple)
    for group in groups:
        indices = [i for row in group for i in row]
        slot_of = {i: slot for slot, i in enumerate(indices)}
        inputs = _lay_out(token_lists, group, rows_per_batch, row_length, slots, slot_of, pad_id)
        yield inputs, np.asarray(indices, dtype="int64")


def pack_batch(token_lists, row_length, pad_id=0, rows_multiple=1):
    """Packs one training batch: sentence `i` of `token_lists` is slot `i`.

    Unlike `packed_batches` (inference over a corpus, in passes of a fixed
    number of rows), a training batch is packed into as few rows as it needs,
    rounded up to `rows_multiple` so that a compiled train step sees few
    distinct shapes, and its slots keep the input order, so the embeddings
    come out in the order the loss expects.

    Args:
        token_lists: list of 1-D int arrays (special tokens included).
        row_length: int, tokens per row (at least the longest sequence).
        pad_id: id written into unused row positions.
        rows_multiple: round the number of rows up to a multiple of this
            (with empty rows).

    Returns:
        A dict of numpy arrays: `token_ids`, `positions`, `segment_ids`,
        `pack_ids` of shape `(rows, row_length)` and `gather_index`,
        `gather_mask` of shape `(len(token_lists), row_length)`, as in
        `packed_batches`.

    Example:

    >>> import numpy as np
    >>> from keras_cosent.data.packing import pack_batch
    >>> out = pack_batch([np.array([101, 7, 102]), np.array([101, 102])], row_length=6)
    >>> out["token_ids"].tolist(), out["pack_ids"].tolist()
    ([[101, 7, 102, 101, 102, 0]], [[1, 1, 1, 2, 2, 0]])
    >>> out["gather_index"][1].tolist()
    [3, 4, 0, 0, 0, 0]
    """
    if len(token_lists) == 0:
        raise ValueError("`token_lists` is empty: cannot pack an empty batch.")
    rows, num_rows = batch_rows([len(ids) for ids in token_lists], row_length, rows_multiple)
    slot_of = {i: i for i in range(len(token_lists))}
    return _lay_out(token_lists, rows, num_rows, row_length, len(token_lists), slot_of, pad_id)


def batch_rows(lengths, row_length, rows_multiple=1):
    """The rows `pack_batch` fills for sequences of these lengths, and how many it lays out.

    Returns:
        `(rows, num_rows)`: `pack_lengths`' rows, and their count rounded up to
        `rows_multiple` (the empty rows included), so that callers that only
        count positions (`PairBatches.padding_ratio`) count what `pack_batch` builds.
    """
    rows = pack_lengths(lengths, row_length)
    return rows, padded_length(len(rows), rows_multiple)


def _lay_out(token_lists, rows, num_rows, row_length, slots, slot_of, pad_id):
    """The packed input arrays for `rows` (lists of indices into `token_lists`).

    Rows past `len(rows)` and slots no sentence takes stay empty.
    """
    shape = (num_rows, row_length)
    token_ids = np.full(shape, pad_id, dtype="int32")
    positions = np.zeros(shape, dtype="int32")
    pack_ids = np.zeros(shape, dtype="int32")
    gather_index = np.zeros((slots, row_length), dtype="int32")
    gather_mask = np.zeros((slots, row_length), dtype=bool)
    # An empty slot reads one real position, so that no pooling sees an
    # all-False mask (a max over nothing is -inf); its output is dropped.
    gather_mask[:, 0] = True
    for r, row in enumerate(rows):
        offset = 0
        for k, i in enumerate(row):
            ids = token_lists[i]
            n = len(ids)
            token_ids[r, offset : offset + n] = ids
            positions[r, offset : offset + n] = np.arange(n)
            pack_ids[r, offset : offset + n] = k + 1
            slot = slot_of[i]
            gather_index[slot, :n] = r * row_length + offset + np.arange(n)
            gather_mask[slot, :n] = True
            offset += n
    return {
        "token_ids": token_ids,
        "positions": positions,
        "segment_ids": np.zeros_like(token_ids),
        "pack_ids": pack_ids,
        "gather_index": gather_index,
        "gather_mask": gather_mask,
    }
