"""Files the commands write whole or not at all: written beside the target, then renamed."""

import json
import os
import tempfile

from recipes.errors import CliError


def refuse_existing(path, overwrite, option="--output"):
    """A `CliError` when `path` exists and `overwrite` is off, or when it is a directory."""
    if os.path.isdir(path):
        raise CliError(f"{option} {path} is a directory; expected a file name")
    if os.path.exists(path) and not overwrite:
        raise CliError(f"{option} {path} already exists; pass --overwrite to replace it")


def refuse_input(path, option, *inputs):
    """A `CliError` when the output `path` is one of the command's input files."""
    if not os.path.exists(path):
        return
    for given in inputs:
        if given not in (None, "-") and os.path.isfile(given) and os.path.samefile(path, given):
            raise CliError(f"{option} {path} is the input file {given}; choose another name")


def write_atomically(path, write):
    """Calls `write(temporary_path)` for a file beside `path`, then renames it to `path`.

    A failure (an exception, Ctrl-C) leaves neither a partial file nor a changed
    `path`: readers see the old file or the whole new one.
    """
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
    """Writes `value` as indented JSON to `path`, whole or not at all (`write_atomically`)."""

    def write(partial):
        with open(partial, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2)
            f.write("\n")

    write_atomically(path, write)
