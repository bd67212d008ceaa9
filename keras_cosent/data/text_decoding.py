"""Decodes the bytes of a data file into text, or says on which line and why not."""

import re

_BOM = b"\xef\xbb\xbf"
_PROBLEMS = {
    "\r": ("a carriage return (\\r) ends this line without \\n (an old Mac line ending?); "
           "convert the line endings to \\n"),
    # ASCII saved as UTF-16 without a BOM is valid UTF-8 with a NUL after every
    # letter: it decoded, and each line gained a row of NULs.
    "\x00": ("a NUL character (\\x00) (is the file UTF-16 or binary? re-encode it to "
             "UTF-8)"),
    "\ufeff": ("a byte-order mark (U+FEFF) inside the file (were two files joined? remove "
               "it)"),
}
_FOUND = re.compile(r"\r(?!\n)|[\x00\ufeff]")


def decode_text(raw, leading_bom=True):
    """Returns `(text, None)` for UTF-8 `raw` bytes, else `(None, (line, reason))`.

    A leading BOM is dropped when `leading_bom` is true (the start of a file).
    Besides bytes that are not UTF-8, it refuses what decodes but no text data
    file holds, naming the 1-based line of `raw`: a line ended by `\\r` alone
    (only `\\n` ends a line, so it and the next would be read as one), a NUL
    (a UTF-16 file without a BOM decodes as UTF-8 with one after every ASCII
    letter) and a BOM after the start (two files joined with `cat`); at the
    start, gzip's magic number is named as such.

    Example:

    >>> from keras_cosent.data.text_decoding import decode_text
    >>> decode_text(b"\\xef\\xbb\\xbfa\\r\\nb\\n")
    ('a\\r\\nb\\n', None)
    >>> decode_text("a\\nb".encode("utf-16-le"))[1]
    (1, 'a NUL character (\\\\x00) (is the file UTF-16 or binary? re-encode it to UTF-8)')
    """
    if leading_bom:
        if raw.startswith(b"\x1f\x8b"):
            # gzip's magic number, which decodes as a stray byte of "another encoding".
            return None, (1, "the file is gzip-compressed; decompress it first (gunzip)")
        # The BOM leaves the bytes, not the text, so that a decoding error's
        # offset indexes `raw`.
        raw = raw.removeprefix(_BOM)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        return None, (line, f"invalid UTF-8 byte {raw[error.start:error.start + 1]!r} "
                            "(is the file in another encoding? re-encode it to UTF-8)")
    # The last line may end in \r alone: nothing follows it to be joined.
    found = _FOUND.search(text.rstrip("\r\n"))
    if found:
        return None, (text.count("\n", 0, found.start()) + 1, _PROBLEMS[found.group()])
    return text, None
