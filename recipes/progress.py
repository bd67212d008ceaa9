"""Progress of what a command runs, on stderr: each encoding announced with a bar, and
`fit`'s epoch lines and bar, so that stdout holds only results."""

import contextlib
import sys


class _Announced:
    """An encoder whose `encode` shows a progress bar on stderr, each call announced by `note`.

    `what` names the texts of each call in turn (e.g. queries, then documents),
    from the first again after the last (an evaluator encodes at every epoch's
    end). The bar goes to stderr with the notes, so that stdout holds only
    results (Keras' `Progbar` writes to `sys.stdout`).
    """

    def __init__(self, encoder, note, what):
        self._encoder, self._note, self._what = encoder, note, tuple(what) or ("texts",)
        self._calls = 0

    def encode(self, texts, batch_size=32, **options):
        what = self._what[self._calls % len(self._what)]
        self._calls += 1
        with encoding_bar(self._note, len(texts), what) as bar:
            return self._encoder.encode(texts, batch_size=batch_size, progress=bar, **options)


@contextlib.contextmanager
def encoding_bar(note, total, what):
    """A `keras.utils.Progbar` of `total` sentences on stderr, announced by `note`
    as the encoding of `total` `what`; `SentenceEncoder.encode(progress=bar)`
    advances it, over one call or several (a file encoded in chunks)."""
    import keras

    note(f"encoding {total} {what}")
    with contextlib.redirect_stdout(sys.stderr):
        yield keras.utils.Progbar(total, unit_name="sentence")


def announced(encoder, note, *what):
    """`encoder` (a `SentenceEncoder`) whose encodings `note` announces, each named by
    `what` in turn, with a progress bar on stderr; `encoder` itself when `note` is None."""
    return encoder if note is None else _Announced(encoder, note, what)


def prefixed(note, context):
    """`note` with each message led by `context` (which evaluation an encoding is for)."""
    return lambda message: note(f"{context}: {message}")


class _LineTracking:
    """A text stream that writes to `stream` and remembers whether its last write
    left a line open: Keras' progress bar ends its line only when its next update
    starts, after the callbacks of the step or the epoch have run. Text that is
    not a bar update (which starts by going back over the line, or below it)
    written while the line is open starts a line of its own: a callback's print."""

    def __init__(self, stream):
        self._stream = stream
        self.line_open = False

    def write(self, text):
        if not text:
            return self._stream.write(text)
        if self.line_open and text[0] not in "\n\r\b":
            text = "\n" + text
        self.line_open = not text.endswith("\n")
        return self._stream.write(text)

    def __getattr__(self, name):  # flush, isatty, encoding: the stream's own
        return getattr(self._stream, name)


_tracking = []


@contextlib.contextmanager
def to_stderr():
    """A context in which Keras' printing (`fit`'s epoch lines and progress bar, the
    callbacks' epoch notes) goes to stderr: Keras writes to `sys.stdout`. Within
    it, `end_open_line` ends a line the bar left open."""
    tracking = _LineTracking(sys.stderr)
    _tracking.append(tracking)
    try:
        with contextlib.redirect_stdout(tracking):
            yield
    finally:
        _tracking.remove(tracking)
        if tracking.line_open:
            # Left by a bar that Ctrl-C or an error stopped: what is said of
            # it next (outside this context) starts a line of its own.
            tracking.write("\n")
            tracking.flush()


def end_open_line():
    """Ends the line that Keras' progress bar left open on stderr, if any, so that a
    message written there next (a note, a warning) starts a line of its own."""
    for tracking in _tracking:
        if tracking.line_open:
            tracking.write("\n")
            tracking.flush()
