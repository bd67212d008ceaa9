"""Where the commands write: refused before any work when it cannot be written, and an
OS error while writing reported as one line naming the file, with nothing left behind."""

import errno
import json

import pytest

from recipes import output_files
from recipes.errors import CliError
from recipes.errors import as_cli_error
from recipes.output_files import refuse_unwritable
from recipes.output_files import write_atomically
from recipes.output_files import write_json
from tests.recipes.test_cli import assert_one_line_error


@pytest.mark.parametrize("error, shown", [
    # NumPy's short write on a full disk carries no errno.
    (OSError("11520 requested and 2016 written"),
     "11520 requested and 2016 written (is the disk full?)"),
    (PermissionError(errno.EACCES, "Permission denied"), "Permission denied"),
    (OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
])
def test_an_os_error_while_writing_names_the_file_and_leaves_nothing(tmp_path, error, shown):
    target = tmp_path / "out.npy"

    def write(partial):
        with open(partial, "wb") as f:
            f.write(b"half")
        raise error

    with pytest.raises(CliError, match=f"cannot write {target}: ") as raised:
        write_atomically(target, write)
    assert raised.value.message.endswith(shown)
    assert list(tmp_path.iterdir()) == []


def test_a_path_mistake_keeps_its_own_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):  # as_cli_error reports it with its file name
        write_atomically(tmp_path / "file" / "out.npy", lambda partial: None)


def test_os_errors_of_the_place_written_are_user_errors():
    for number in (errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EACCES):
        error = OSError(number, "reason", "/some/where")
        assert as_cli_error(error).message == "/some/where: reason"
    assert as_cli_error(OSError(errno.EIO, "Input/output error", "/x")) is None  # keeps its traceback


def test_refuse_unwritable(tmp_path, monkeypatch):
    refuse_unwritable(tmp_path / "new" / "deeper" / "out.npy", "--output")  # folders to be made
    (tmp_path / "file").write_text("x")
    with pytest.raises(CliError, match=f"--output .*: {tmp_path / 'file'} is a file, not a folder"):
        refuse_unwritable(tmp_path / "file" / "out.npy", "--output")
    with pytest.raises(CliError, match="is a file, not a folder"):
        refuse_unwritable(tmp_path / "file", "BASE_DIR", inside=True)
    # Permission bits do not bind root, so the check is made to fail here.
    monkeypatch.setattr(output_files.os, "access", lambda path, mode: False)
    with pytest.raises(CliError, match=f"cannot write there: {tmp_path} is not writable by you"):
        refuse_unwritable(tmp_path / "new" / "out.npy", "--output")


def test_commands_refuse_an_unwritable_output_before_loading_anything(cli, tmp_path):
    (tmp_path / "file").write_text("x")
    sentences = tmp_path / "s.txt"
    sentences.write_text("a sentence\n")
    # No such model: the output is refused first, before the backend starts.
    result = cli("encode", "no-such-model", sentences, "-o", tmp_path / "file" / "e.npy")
    assert_one_line_error(result, "--output", "is a file, not a folder")
    result = cli("train", "--output", tmp_path / "file" / "run")
    assert_one_line_error(result, "--output", "is a file, not a folder")
    result = cli("export", "no-such-model", tmp_path / "file" / "base")
    assert_one_line_error(result, "BASE_DIR", "is a file, not a folder")
    # "-" reads stdin as an input; as an output it would make a file named "-".
    result = cli("encode", "no-such-model", sentences, "-o", "-")
    assert_one_line_error(result, "--output -: writes a file, not to stdout")


def test_write_json_writes_a_non_finite_score_as_null(tmp_path):
    # Python's json wrote a bare NaN token (a diverged model's --json), which is not
    # JSON: jq and browsers refuse it.
    path = tmp_path / "out.json"
    write_json(path, {"spearman": float("nan"), "pearson": 0.5,
                      "per_query": {"q": [float("inf"), -float("inf"), 1.0]}, "pairs": 3})

    def refuse(token):
        raise ValueError(f"not JSON: {token}")

    assert json.loads(path.read_text(), parse_constant=refuse) == {
        "spearman": None, "pearson": 0.5, "per_query": {"q": [None, None, 1.0]}, "pairs": 3}
