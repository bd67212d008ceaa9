"""decode_text: UTF-8 as Python decodes it, and what decodes but is no text file."""

import gzip

import numpy as np
import pytest

from keras_cosent.data.text_decoding import decode_text


def test_text_decodes_as_python_does_without_a_leading_bom():
    rng = np.random.default_rng(0)
    alphabet = list("ab \t,\"'é中😀\u2028\x0b") + ["\r\n", "\n"]
    for _ in range(200):
        text = "".join(rng.choice(alphabet, size=int(rng.integers(0, 30))))
        raw = text.encode("utf-8")
        assert decode_text(raw) == (text, None)
        assert decode_text(b"\xef\xbb\xbf" + raw) == (text, None)
        # Past the start (the next line of a file read line by line) it is refused.
        assert decode_text(b"\xef\xbb\xbf" + raw, leading_bom=False)[1][0] == 1


@pytest.mark.parametrize("raw, line, reason", [
    (b"a\nb\xe9c\n", 2, "invalid UTF-8 byte b'\\xe9'"),
    ("one\ntwo\n".encode("utf-16-le"), 1, "a NUL character"),
    (b"a\nb\nc\x00\n", 3, "a NUL character"),
    (b"a\n\xef\xbb\xbfb\n", 2, "a byte-order mark"),
    (b"a\r\nb\rc\n", 2, "a carriage return"),
    # Was "invalid UTF-8 byte b'\x8b' (is the file in another encoding?".
    (gzip.compress(b"a\tb\t1\n"), 1, "the file is gzip-compressed"),
])
def test_what_is_not_text_names_its_line(raw, line, reason):
    text, (found_line, found_reason) = decode_text(raw)
    assert text is None and found_line == line and found_reason.startswith(reason)


def test_a_last_line_may_end_in_a_carriage_return_alone():
    # Nothing follows it to be joined with, as a text editor on an old Mac saves one line.
    assert decode_text(b"only\r") == ("only\r", None)
    assert decode_text(b"a\r\nb\r\n") == ("a\r\nb\r\n", None)
