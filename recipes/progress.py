"""Progress of what a command runs, on stderr: each encoding announced with a bar, and
`fit`'s epoch lines and bar, so that stdout holds only results."""

import contextlib
import sys


class _Announced:
    """An encoder whose `encode` shows a progress bar on stderr, each call announced by `note`.

    `what` names the texts of each call in turn (e.g. queries, then documents).
    The bar goes to stderr with the notes, so that stdout holds only results
    (Keras' `Progbar` writes to `sys.stdout`).
    """

    def __init__(self, encoder, note, what):
        self._encoder, self._note, self._what = encoder, note, list(what)

    def encode(self, texts, batch_size=32, **options):
        what = self._what.pop(0) if self._what else "texts"
        self._note(f"encoding {len(texts)} {what}")
        with contextlib.redirect_stdout(sys.stderr):
            return self._encoder.encode(texts, batch_size=batch_size, progress=True, **options)


def announced(encoder, note, *what):
    """`encoder` (a `SentenceEncoder`) whose encodings `note` announces, each named by
    `what` in turn, with a progress bar on stderr; `encoder` itself when `note` is None."""
    return encoder if note is None else _Announced(encoder, note, what)


def prefixed(note, context):
    """`note` with each message led by `context` (which evaluation an encoding is for)."""
    return lambda message: note(f"{context}: {message}")


def to_stderr():
    """A context in which Keras' printing (`fit`'s epoch lines and progress bar, the
    callbacks' epoch notes) goes to stderr: Keras writes to `sys.stdout`."""
    return contextlib.redirect_stdout(sys.stderr)
