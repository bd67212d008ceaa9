"""The preprocessing rules shared by `SentenceEncoder` and the serving export.

One home for the two rules both used to spell out: which token ids open and
close a sentence (`special_token_ids`) and which `max_length` values a
backbone accepts (`check_max_length`). Padding and packing of token lists live
in `keras_cosent.data.padding` / `keras_cosent.data.packing` (host side) and
`keras_cosent.models.sequence_packing` (model side).
"""

import numpy as np


def special_token_ids(tokenizer):
    """The ids of the tokens that open and close a sentence, as `(start, end)`.

    BERT names (`cls_token_id`, `sep_token_id`) first, then keras-hub's
    generic `start_token_id` / `end_token_id`.

    Raises:
        ValueError: when `tokenizer` has neither name for one of the two.
    """
    ids = []
    for attrs in (("cls_token_id", "start_token_id"), ("sep_token_id", "end_token_id")):
        token_id = next(
            (getattr(tokenizer, a) for a in attrs if getattr(tokenizer, a, None) is not None),
            None,
        )
        if token_id is None:
            raise ValueError(
                f"The tokenizer ({type(tokenizer).__name__}) has none of {', '.join(attrs)}; "
                "encoding needs the ids of the tokens that open and close a sentence "
                "([CLS] and [SEP] for BERT)."
            )
        ids.append(int(token_id))
    return tuple(ids)


def check_max_length(max_length, backbone=None):
    """Returns `max_length` as an int after checking it fits `backbone`.

    Args:
        max_length: the longest token sequence, `[CLS]` and `[SEP]` included.
        backbone: optional keras-hub backbone; its `max_sequence_length` (when
            it has one) is the upper bound.

    Raises:
        ValueError: when `max_length` is not an int in `[3, max_sequence_length]`.
    """
    if isinstance(max_length, np.integer):
        max_length = int(max_length)
    if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 3:
        raise ValueError(
            "`max_length` should be an int >= 3 ([CLS], one token, [SEP]). "
            f"Received: `max_length`={max_length!r}"
        )
    backbone_max = getattr(backbone, "max_sequence_length", None)
    if backbone_max is not None and max_length > backbone_max:
        raise ValueError(
            f"`max_length`={max_length} exceeds the backbone's "
            f"`max_sequence_length`={backbone_max}."
        )
    return max_length
