"""How the command line reports a user's mistake: one line, exit code 2, no traceback.

Every command runs inside `KerasCosentGroup.invoke`, which turns the library's
data and file errors into `CliError` in this one place, and `KerasCosentGroup.main`
prints every click error as a single `Error: ...` line. Anything else is a bug and
keeps its traceback.
"""

import errno
import sys

import click

# Library exceptions that describe a bad input rather than a bug, as (module,
# attribute). Looked up only in modules already imported, so that this file never
# imports keras itself.
LIBRARY_USER_ERRORS = (("keras_cosent.data", "DataFormatError"),)
OS_USER_ERRORS = (
    FileExistsError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError
)
# Other OS errors that say where the user asked to write, not what went wrong in
# the code: a read-only file system, a full disk, an exhausted quota.
ENVIRONMENT_ERRNOS = {errno.EROFS, errno.ENOSPC, errno.EDQUOT}


class CliError(click.ClickException):
    """A bad input found after parsing (bad data, wrong model, occupied output)."""

    exit_code = 2


def one_line(message):
    """Collapses a possibly multi-line message to one line."""
    return " ".join(str(message).split())


def user_error_types():
    """The exception classes that `as_cli_error` reports without a traceback."""
    types = list(OS_USER_ERRORS)
    for module_name, attribute in LIBRARY_USER_ERRORS:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        error_type = getattr(module, attribute, None)
        if isinstance(error_type, type) and issubclass(error_type, BaseException):
            types.append(error_type)
    return tuple(types)


def as_cli_error(error):
    """Returns `error` as a `CliError` if it is a user error, else None."""
    if isinstance(error, click.ClickException):
        return None
    if isinstance(error, user_error_types()) or (
            isinstance(error, OSError) and error.errno in ENVIRONMENT_ERRNOS):
        if isinstance(error, OSError) and error.filename is not None:
            reason = error.strerror or type(error).__name__
            return CliError(f"{error.filename}: {reason}")
        return CliError(one_line(error))
    return None

