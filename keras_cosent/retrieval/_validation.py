"""Argument checks shared by `keras_cosent.retrieval`, the evaluator callbacks and the
retrieval-row writer.

Kept in one place so that every check words its error the same way: the name of
the argument, what was expected, and the value received (as
`keras_cosent.losses._validation` does for the losses). They run before any
work, so that a bad argument fails at once rather than after an epoch or an
encoding pass.
"""

import collections.abc
import itertools
import math

from keras_cosent.utils.arguments import is_int
from keras_cosent.utils.arguments import is_number


def is_grade(value):
    """True for a relevance grade: an int, or a float equal to one (1.0 from a table)."""
    if is_int(value):
        return True
    return is_number(value) and math.isfinite(value) and float(value).is_integer()


def check_k_values(k_values, name="k_values"):
    """Returns the cutoffs as a list of ints, or raises unless they are positive ints."""
    expected = f"`{name}` should be a non-empty sequence of positive ints (cutoffs)."
    if isinstance(k_values, (str, bytes)) or not isinstance(k_values, collections.abc.Iterable):
        raise ValueError(f"{expected} Received: `{name}`={k_values!r}")
    values = list(k_values)
    bad = [k for k in values if not is_int(k) or k < 1]
    if not values or bad:
        detail = f" ({bad[0]!r} is not one)" if bad else ""
        raise ValueError(f"{expected} Received: `{name}`={values!r}{detail}")
    return [int(k) for k in values]


def check_encoder(encoder):
    """Raises unless `encoder` is None or an object with an `encode` method.

    A string has an `encode` method too (`str.encode`), so a model name or path
    passed where the encoder goes is refused by name.
    """
    if isinstance(encoder, (str, bytes, bytearray)):
        raise ValueError(
            "`encoder` should be an object with an `encode(texts, batch_size=...)` method "
            "(e.g. a keras_cosent.models.SentenceEncoder), not a string: load the model "
            f"first. Received: `encoder`={encoder!r}"
        )
    if encoder is not None and not callable(getattr(encoder, "encode", None)):
        raise ValueError(
            "`encoder` should have an `encode(texts, batch_size=...)` method. "
            f"Received: `encoder` of type {type(encoder).__name__}"
        )


def some_ids(ids, limit=3):
    """A few ids and their types, for messages: `['1', '2'] (str)`."""
    ids = list(itertools.islice(ids, limit))
    types = ", ".join(sorted({type(i).__name__ for i in ids}))
    return f"{ids!r} ({types})" if ids else "none"


def check_nested_mapping(name, value, inner="{doc_id: ...}"):
    """Raises unless `value` maps each query id to a mapping (a run or qrels)."""
    if not isinstance(value, collections.abc.Mapping):
        raise TypeError(
            f"`{name}` should be a mapping {{query_id: {inner}}}. "
            f"Received: `{name}` of type {type(value).__name__}"
        )
    for qid, docs in value.items():
        if not isinstance(docs, collections.abc.Mapping):
            raise TypeError(
                f"`{name}` should map each query id to a mapping {inner}. "
                f"Received: `{name}`[{qid!r}] of type {type(docs).__name__}"
            )


def check_distinct_as_strings(ids, name):
    """Raises if two of `ids` are equal as strings (`1` and `'1'`), naming `name`.

    Ids are compared as strings where texts and judgements are matched, so two
    such ids would be one document (or query) taken twice.
    """
    seen = {}
    for key in ids:
        if str(key) in seen:
            raise ValueError(
                f"`{name}` holds two ids that are equal as strings (ids are compared as "
                f"strings): {seen[str(key)]!r} and {key!r}"
            )
        seen[str(key)] = key


def check_qrels(qrels):
    """Raises unless `qrels` is `{query_id: {doc_id: int relevance}}`."""
    check_nested_mapping("qrels", qrels, "{doc_id: int relevance}")
    for qid, judged in qrels.items():
        for doc_id, grade in judged.items():
            if not is_grade(grade):
                raise ValueError(
                    f"`qrels` should hold int relevance grades. Received: {grade!r} for "
                    f"query {qid!r}, document {doc_id!r}"
                )
