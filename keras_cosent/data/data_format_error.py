"""The error every reader raises for a malformed data file.

It subclasses `ValueError`, so callers that already catch bad values keep working,
and it carries the file and the 1-based line number so that a user can open the
file at the right place.
"""


class DataFormatError(ValueError):
    """A data file, or one of its rows, is not in the expected format.

    Args:
        path: the file, as the caller named it.
        line: 1-based line number of the offending row, or `None` when the
            problem concerns the whole file (empty file, no valid rows).
        reason: what was wrong, naming the bad value.

    Example:

    >>> from keras_cosent.data import DataFormatError
    >>> str(DataFormatError("sts-train.csv", 17, "score 'abc' is not a number"))
    "sts-train.csv:17: score 'abc' is not a number"
    """

    def __init__(self, path, line, reason):
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {reason}")

    def __reduce__(self):
        # Keeps the error picklable (PyDataset workers, multiprocessing).
        return (type(self), (self.path, self.line, self.reason))
