"""`keras-cosent encode`: shape, dtype, unit rows in input order, stdin, bad input."""

import keras
import numpy as np

from tests.recipes.conftest import demo_rows
from tests.recipes.test_cli import assert_one_line_error

SENTENCES = [row[0] for row in demo_rows("dev")[:7]] + ["Short.", "The ferry leaves at noon."]


def test_encode_a_file(cli, trained_run, tmp_path):
    source = tmp_path / "sentences.txt"
    source.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    result = cli("encode", trained_run["output"], source, "-o", tmp_path / "out.npy",
                 "--batch-size", 4)
    assert result.exit_code == 0, result.output
    embeddings = np.load(tmp_path / "out.npy")
    assert embeddings.shape == (len(SENTENCES), 16)
    assert embeddings.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, rtol=1e-5)
    # Row i is line i: compare with each sentence embedded on its own.
    encoder = keras.saving.load_model(trained_run["output"] / "encoder.keras")
    for i in (0, 7, 8):
        np.testing.assert_allclose(embeddings[i], encoder.encode([SENTENCES[i]])[0], atol=1e-5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.npy", "sentences.txt"]
    # The encoding is announced with its progress bar on stderr; stdout stays empty.
    n = len(SENTENCES)
    assert f"encoding {n} sentences" in result.stderr and f"{n}/{n}" in result.stderr
    assert result.stdout == ""


def test_a_file_longer_than_a_chunk_is_encoded_in_chunks_under_one_bar(
        cli, trained_run, tmp_path, monkeypatch):
    # Chunks bound the command's memory by their size, not the file's; the rows
    # are those of one call, in the input's order, and one bar counts them all.
    from keras_cosent.models import SentenceEncoder
    from recipes.commands import encode as command

    calls = []
    encode = SentenceEncoder.encode

    def recording(self, texts, *args, **kwargs):
        calls.append(len(texts))
        return encode(self, texts, *args, **kwargs)

    monkeypatch.setattr(command, "CHUNK_SENTENCES", 4)
    monkeypatch.setattr(SentenceEncoder, "encode", recording)
    source = tmp_path / "sentences.txt"
    source.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    result = cli("encode", trained_run["output"], source, "-o", tmp_path / "out.npy",
                 "--truncate-dim", 8)
    assert result.exit_code == 0, result.output
    assert calls == [4, 4, 1]
    monkeypatch.undo()
    encoder = keras.saving.load_model(trained_run["output"] / "encoder.keras")
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"),
                               encoder.encode(SENTENCES, truncate_dim=8), atol=1e-5)
    n = len(SENTENCES)
    assert result.stderr.count(f"encoding {n} sentences") == 1 and f"{n}/{n}" in result.stderr
    assert "/4 " not in result.stderr and sorted(p.name for p in tmp_path.iterdir()) == [
        "out.npy", "sentences.txt"]


def test_encode_stdin_equals_the_file(cli, trained_run, tmp_path):
    text = "\n".join(SENTENCES)  # no final newline
    source = tmp_path / "s.txt"
    source.write_text(text, encoding="utf-8")
    assert cli("encode", trained_run["output"], source, "-o", tmp_path / "a.npy").exit_code == 0
    result = cli("encode", trained_run["output"], "-", "-o", tmp_path / "b.npy", input=text)
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(np.load(tmp_path / "b.npy"), np.load(tmp_path / "a.npy"), atol=1e-6)


def test_empty_line_is_a_one_line_error(cli, trained_run, tmp_path):
    result = cli("encode", trained_run["output"], "-", "-o", tmp_path / "out.npy",
                 input="first\n\nthird\n")
    assert_one_line_error(result, "stdin:2", "empty line")
    assert not (tmp_path / "out.npy").exists()


def test_lines_ended_by_a_carriage_return_alone_are_a_one_line_error(cli, trained_run, tmp_path):
    # Only \n ends a line: the whole input was one sentence, one row.
    result = cli("encode", trained_run["output"], "-", "-o", tmp_path / "out.npy",
                 input="first\rsecond\rthird\r")
    assert_one_line_error(result, "stdin:1", "carriage return")
    assert not (tmp_path / "out.npy").exists()
    # One such line among \n lines: the two lines would be one sentence.
    result = cli("encode", trained_run["output"], "-", "-o", tmp_path / "out.npy",
                 input="first\r\nsecond\rthird\n")
    assert_one_line_error(result, "stdin:2", "carriage return")
    assert not (tmp_path / "out.npy").exists()


def test_output_is_never_the_input_and_bad_bytes_name_their_line(cli, trained_run, tmp_path):
    source = tmp_path / "sentences.txt"
    source.write_text("first\nsecond\n", encoding="utf-8")
    result = cli("encode", trained_run["output"], source, "-o", source)
    assert_one_line_error(result, "--output", "is the input file")
    assert source.read_text(encoding="utf-8") == "first\nsecond\n"
    source.write_bytes("first\nsecond\n".encode() + b"caf\xe9\n")
    result = cli("encode", trained_run["output"], source, "-o", tmp_path / "out.npy")
    assert_one_line_error(result, f"{source}:3: invalid UTF-8 byte b'\\xe9'")
    assert not (tmp_path / "out.npy").exists()
    source.write_bytes(b"\xef\xbb\xbf" + "first\nsecond\n".encode() + b"caf\xe9\n")
    result = cli("encode", trained_run["output"], source, "-o", tmp_path / "out.npy")
    assert_one_line_error(result, f"{source}:3: invalid UTF-8 byte b'\\xe9'")
    # UTF-16 without a BOM decodes as UTF-8 with NULs: 2 lines gave 3 rows.
    source.write_bytes("first\nsecond\n".encode("utf-16-le"))
    result = cli("encode", trained_run["output"], source, "-o", tmp_path / "out.npy")
    assert_one_line_error(result, f"{source}:1: a NUL character", "UTF-16")
    assert not (tmp_path / "out.npy").exists()


def test_an_existing_output_is_kept_unless_overwrite(cli, trained_run, tmp_path):
    source = tmp_path / "s.txt"
    source.write_text("first\nsecond\n", encoding="utf-8")
    output = tmp_path / "out.npy"
    output.write_bytes(b"earlier embeddings\n")
    result = cli("encode", trained_run["output"], source, "-o", output)
    assert_one_line_error(result, f"--output {output} already exists", "--overwrite")
    assert output.read_bytes() == b"earlier embeddings\n"
    result = cli("encode", trained_run["output"], source, "-o", output, "--overwrite")
    assert result.exit_code == 0, result.output
    assert np.load(output).shape == (2, 16)
    # Never over the input, --overwrite or not.
    result = cli("encode", trained_run["output"], source, "-o", source, "--overwrite")
    assert_one_line_error(result, "--output", "is the input file")
    assert source.read_text(encoding="utf-8") == "first\nsecond\n"
