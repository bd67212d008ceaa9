"""Parses one line of a JSON-lines data file into an object, or says why not."""

import json


class _RepeatedKey(Exception):
    pass


def _object_without_repeated_keys(pairs):
    record = dict(pairs)
    if len(record) < len(pairs):
        seen = set()
        raise _RepeatedKey(next(key for key, _ in pairs if key in seen or seen.add(key)))
    return record


def parse_json_object(line):
    """Returns `(dict, None)` for a line holding one JSON object, else `(None, reason)`.

    Besides malformed JSON and non-objects, it refuses what `json.loads` accepts
    but no data file means: a key given twice in one object (`json.loads` keeps
    the last silently, so `{"label": "-", "label": "entailment"}` trained as an
    entailment), an escaped lone surrogate (`"\\udc80"`, half of a
    UTF-16 pair, which fails later when the text is tokenized or written), and
    an integer too long for Python to convert (`ValueError`, not a
    `JSONDecodeError`).

    Example:

    >>> from keras_cosent.data.json_lines import parse_json_object
    >>> parse_json_object('{"text": "a"}')
    ({'text': 'a'}, None)
    >>> parse_json_object('["a"]')
    (None, 'expected a JSON object, found list')
    >>> parse_json_object('{"text": "a", "text": "b"}')
    (None, "duplicate key 'text' in one object")
    """
    try:
        record = json.loads(line, object_pairs_hook=_object_without_repeated_keys)
    except _RepeatedKey as error:
        return None, f"duplicate key {error.args[0]!r} in one object"
    except json.JSONDecodeError as error:
        return None, f"invalid JSON: {error.msg} (column {error.colno})"
    except ValueError as error:  # e.g. an integer of more than 4300 digits
        return None, f"invalid JSON: {error}"
    if not isinstance(record, dict):
        return None, f"expected a JSON object, found {type(record).__name__}"
    if "\\u" in line:
        try:
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as error:
            return None, (
                f"lone surrogate {error.object[error.start]!r} escaped in a string: "
                "not a Unicode character (half of a pair?)"
            )
    return record, None
