"""Files the commands write whole or not at all: written beside the target, then renamed."""

import json
import math
import os
import tempfile

from recipes.errors import CliError
from recipes.errors import one_line


def refuse_existing(path, overwrite, option="--output"):
    """A `CliError` when `path` exists and `overwrite` is off, or when it is a directory."""
    if os.path.isdir(path):
        raise CliError(f"{option} {path} is a directory; expected a file name")
    if os.path.exists(path) and not overwrite:
        raise CliError(f"{option} {path} already exists; pass --overwrite to replace it")


def refuse_input(path, option, *inputs):
    """A `CliError` when the output `path` is one of the command's input files, or
    would replace a file inside an input folder (a model's, a data set's: its
    weights, its qrels). A new file in such a folder is left to the user."""
    if not os.path.exists(path):
        return
    target = os.path.realpath(path)
    for given in inputs:
        if given in (None, "-") or not os.path.exists(given):
            continue
        if os.path.isdir(given):
            folder = os.path.realpath(given)
            if os.path.commonpath([folder, target]) == folder:
                raise CliError(f"{option} {path} would replace a file of the input folder "
                               f"{given}; write it elsewhere")
        elif os.path.samefile(path, given):
            raise CliError(f"{option} {path} is the input file {given}; choose another name")


def refuse_inputs_inside(folder, option, inputs):
    """A `CliError` when a folder that a run replaces holds one of its inputs.

    `inputs` maps an option name to its path (a file or folder; None, a preset
    name or a missing path is skipped). Replacing `folder` would delete the
    input: the starting model, the training file (a run's own `mined.jsonl`).
    """
    if not os.path.isdir(folder):
        return
    outer = os.path.realpath(folder)
    for name, given in inputs.items():
        for path in given if isinstance(given, (list, tuple)) else [given]:
            if path is None or not os.path.exists(path):
                continue
            if os.path.commonpath([outer, os.path.realpath(path)]) == outer:
                raise CliError(f"{option} {folder} holds the input {name} {path}, which "
                               "replacing the run would delete; write the run elsewhere")


def refuse_unwritable(path, option, inside=False):
    """A `CliError`, before any work, when `path` could not be created: the nearest
    folder above it that exists is a file, is read-only or is not writable by the user.

    With `inside`, `path` is a folder the command writes into, and is checked
    itself when it exists. `-` is refused: it is not stdout here. A full disk
    is found only when writing (`write_atomically` reports it).
    """
    if str(path) == "-":
        # Read as stdin where an input is expected; stdout holds the results table.
        raise CliError(f"{option} -: writes a file, not to stdout; give a file name")
    folder = os.path.abspath(path) if inside else os.path.dirname(os.path.abspath(path))
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise CliError(f"{option} {path}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
        reason = "is on a read-only file system" if read_only else "is not writable by you"
        raise CliError(f"{option} {path}: cannot write there: {folder} {reason}")


def write_atomically(path, write):
    """Calls `write(temporary_path)` for a file beside `path`, then renames it to `path`.

    A failure (an exception, Ctrl-C) leaves neither a partial file nor a changed
    `path`: readers see the old file or the whole new one. An OS error while
    writing (no permission, a read-only or full disk: NumPy reports a short
    write without saying where) is a `CliError` naming `path`.
    """
    try:
        _write_atomically(path, write)
    except OSError as error:
        if isinstance(error, (FileNotFoundError, NotADirectoryError, FileExistsError)):
            raise  # a path mistake, reported with its own file name
        # NumPy reports a short write ("N requested and M written") with no errno.
        reason = error.strerror or f"{one_line(error) or type(error).__name__} (is the disk full?)"
        raise CliError(f"cannot write {path}: {reason}") from error


def _write_atomically(path, write):
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, partial = tempfile.mkstemp(
        prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=directory
    )
    try:
        os.close(handle)
        write(partial)
        # mkstemp makes the file private; the result is an ordinary file.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(partial, 0o666 & ~umask)
        os.replace(partial, path)
    except BaseException:
        if os.path.exists(partial):
            os.unlink(partial)
        raise


def write_json(path, value):
    """Writes `value` as indented JSON to `path`, whole or not at all (`write_atomically`).

    A float that is not finite (the NaN score of a diverged model) is written
    as `null`: JSON has no NaN, and `jq` or a browser refuse Python's `NaN` token.
    """

    def write(partial):
        with open(partial, "w", encoding="utf-8") as f:
            json.dump(_finite_or_null(value), f, indent=2, allow_nan=False)
            f.write("\n")

    write_atomically(path, write)


def _finite_or_null(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite_or_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_null(item) for item in value]
    return value
