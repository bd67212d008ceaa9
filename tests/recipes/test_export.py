"""`keras-cosent export`, `export-st` and `check-serving`: refusals (fast), a trained run written
for sentence-transformers, and a real SavedModel export (slow)."""

import json

import numpy as np
import pytest

from tests.recipes.test_cli import assert_one_line_error


def test_existing_version_needs_overwrite(cli, trained_run, tmp_path):
    (tmp_path / "base" / "1").mkdir(parents=True)
    result = cli("export", trained_run["output"], tmp_path / "base", "--version", 1)
    assert_one_line_error(result, "already exists", "--overwrite")


def test_check_serving_needs_a_version_directory(cli, tmp_path):
    result = cli("check-serving", tmp_path)
    assert_one_line_error(result, "saved_model.pb")
    (tmp_path / "saved_model.pb").write_bytes(b"garbage\n")
    result = cli("check-serving", tmp_path)
    assert_one_line_error(result, f"{tmp_path / 'saved_model.pb'} is not a SavedModel")


def test_check_serving_json_never_replaces_a_file_of_the_savedmodel(cli, tmp_path):
    # Refused before the SavedModel is read: the audit would overwrite its graph.
    graph = tmp_path / "saved_model.pb"
    graph.write_bytes(b"the graph\n")
    result = cli("check-serving", tmp_path, "--json", graph)
    assert_one_line_error(result, f"--json {graph} would replace a file of the input folder")
    assert graph.read_bytes() == b"the graph\n"


def test_check_serving_keeps_an_existing_json_unless_overwrite(cli, tmp_path):
    # Both refused before the SavedModel is read.
    (tmp_path / "model").mkdir()
    audit = tmp_path / "audit.json"
    audit.write_text("{}\n")
    result = cli("check-serving", tmp_path / "model", "--json", audit)
    assert_one_line_error(result, f"--json {audit} already exists", "--overwrite")
    assert audit.read_text() == "{}\n"
    result = cli("check-serving", tmp_path / "model", "--overwrite")
    assert_one_line_error(result, "--overwrite", "add --json FILE")


def test_export_st_writes_a_folder_the_peer_embeds_as_the_run_does(cli, trained_run, tmp_path):
    import sentence_transformers as st
    from keras_cosent.models import load_encoder

    target = tmp_path / "st"
    result = cli("export-st", trained_run["output"], target)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(target)
    sentences = ["A man is playing a guitar.", "The cat sat on the mat.", "飞机正在起飞。"]
    np.testing.assert_allclose(
        st.SentenceTransformer(str(target), device="cpu").encode(sentences),
        load_encoder(trained_run["output"]).encode(sentences), atol=1e-5, rtol=0)
    result = cli("export-st", trained_run["output"], target)
    assert_one_line_error(result, "already exists and is not empty", "--overwrite")
    assert cli("export-st", trained_run["output"], target, "--overwrite").exit_code == 0


def test_a_folder_saved_with_truncate_dim_is_read_back_at_full_width_with_a_note(
        cli, trained_run, tmp_path):
    import sentence_transformers as st

    target = tmp_path / "st"
    assert cli("export-st", trained_run["output"], target, "--truncate-dim", 8).exit_code == 0
    source = tmp_path / "s.txt"
    source.write_text("A man is playing a guitar.\nThe cat sat on the mat.\n", encoding="utf-8")
    peer = st.SentenceTransformer(str(target), device="cpu").encode(
        source.read_text().splitlines(), normalize_embeddings=True)
    assert peer.shape == (2, 8)
    note = (f"{target} was saved with truncate_dim 8 (its config_sentence_transformers.json), "
            "which keras-cosent does not apply")
    result = cli("encode", target, source, "-o", tmp_path / "full.npy")
    assert result.exit_code == 0, result.output
    assert note in result.stderr and "pass --truncate-dim 8" in result.stderr
    assert np.load(tmp_path / "full.npy").shape == (2, 16)
    result = cli("encode", target, source, "-o", tmp_path / "cut.npy", "--truncate-dim", 8)
    assert result.exit_code == 0, result.output
    assert note not in result.stderr
    np.testing.assert_allclose(np.load(tmp_path / "cut.npy"), peer, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_export_then_check_serving(cli, trained_run, tmp_path):
    result = cli("export", trained_run["output"], tmp_path / "base")
    assert result.exit_code == 0, result.output
    version_dir = tmp_path / "base" / "1"
    assert result.stdout.strip() == str(version_dir)
    assert (version_dir / "saved_model.pb").is_file()
    result = cli("check-serving", version_dir, "--json", tmp_path / "audit.json")
    assert result.exit_code == 0, result.output
    assert "serving_default" in result.stdout and "encode_tokens" in result.stdout
    audit = json.loads((tmp_path / "audit.json").read_text())
    assert audit["signatures"]["encode_tokens"]["core_only"]
    assert not audit["signatures"]["serving_default"]["core_only"]
    # Loaded as a server would and run: every signature answers.
    assert "ran its 3 signatures on a probe batch" in result.stdout
    assert audit["probe"]["loaded"] and all(
        s["ok"] for s in audit["probe"]["signatures"].values())
    assert audit["probe"]["signatures"]["serving_default"]["outputs"]["embeddings"][0] == 2

    # The graph alone passes the op audit; without its variables no server loads it.
    import shutil

    broken = tmp_path / "broken" / "1"
    shutil.copytree(version_dir, broken)
    shutil.rmtree(broken / "variables")
    result = cli("check-serving", broken)
    assert_one_line_error(result, f"{broken}: the SavedModel does not load")

    result = cli("export", trained_run["output"], tmp_path / "base", "--no-string-signatures")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(tmp_path / "base" / "2")
    result = cli("check-serving", tmp_path / "base" / "2", "--json", tmp_path / "core.json")
    assert result.exit_code == 0, result.output
    audit = json.loads((tmp_path / "core.json").read_text())
    assert all(signature["core_only"] for signature in audit["signatures"].values())


def test_a_failed_export_leaves_no_empty_base_directory(cli, trained_run, tmp_path):
    base = tmp_path / "serving"
    result = cli("export", trained_run["output"], base, "--max-length", 1000)
    assert_one_line_error(result, "`max_length`=1000 exceeds")
    assert not base.exists()


def test_a_failure_inside_the_export_keeps_its_traceback(cli, trained_run, tmp_path,
                                                        monkeypatch):
    # The user's mistakes are refused before the export starts; what fails inside
    # it (here the TensorFlow worker, as _export_in_subprocess reports it) is a
    # bug, and the CLI must not shrink it to one line.
    from keras_cosent.export import saved_model_export

    def failing_worker(*args, **kwargs):
        raise RuntimeError("Exporting encoder.keras through the TensorFlow backend failed "
                           "(exit code 1).\nWorker output (last lines):\nTraceback (most "
                           "recent call last):\nZeroDivisionError: division by zero")

    monkeypatch.setattr(saved_model_export, "_write_export", failing_worker)
    base = tmp_path / "serving"
    result = cli("export", trained_run["output"], base)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, RuntimeError)
    assert "ZeroDivisionError: division by zero" in str(result.exception)
    assert "Error: " not in result.stderr
    assert not base.exists()


def test_export_st_never_writes_over_the_model(cli, trained_run):
    run = trained_run["output"]
    for target in (run, run.parent):
        result = cli("export-st", run, target, "--overwrite")
        assert_one_line_error(result, "holds MODEL", "choose another DIRECTORY")
    assert (run / "encoder.keras").is_file()


def test_export_st_never_writes_over_the_packaged_model(cli, tmp_path, monkeypatch):
    # The alias names the packaged folder: `export-st all-MiniLM-L6-v2 <that folder>
    # --overwrite` passed the check, which looked only at MODEL as a path.
    from keras_cosent.models import checkpoints

    packaged = tmp_path / "packaged"
    packaged.mkdir()
    (packaged / "config.json").write_text("{}")
    monkeypatch.setattr(checkpoints, "default_checkpoint", lambda: str(packaged))
    for target in (packaged, tmp_path):
        result = cli("export-st", "all-MiniLM-L6-v2", target, "--overwrite")
        assert_one_line_error(result, "holds MODEL all-MiniLM-L6-v2", "choose another DIRECTORY")
    assert (packaged / "config.json").read_text() == "{}"


def test_export_of_a_file_that_is_not_a_keras_archive(cli, tmp_path):
    not_zip = tmp_path / "encoder.keras"
    not_zip.write_text("not a zip archive")
    result = cli("export", not_zip, tmp_path / "serving")
    assert_one_line_error(result, "is not a `.keras` file (a zip archive")
    assert not (tmp_path / "serving").exists()


def test_export_of_a_model_it_cannot_serve_is_a_one_line_error(cli, trained_run, tmp_path):
    # Neither is loaded by the command before the export starts (the worker would be
    # the first to): what the archive holds says so at once.
    import keras

    from keras_cosent.models import SentenceEncoder
    from keras_cosent.models import load_encoder

    other = tmp_path / "dense.keras"
    keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]).save(other)
    result = cli("export", other, tmp_path / "serving")
    assert_one_line_error(result, "holds a Sequential, not a keras-cosent SentenceEncoder")
    encoder = load_encoder(str(trained_run["output"]))
    bare = tmp_path / "bare.keras"
    SentenceEncoder(encoder.backbone, None, max_length=encoder.max_length).save(bare)
    result = cli("export", bare, tmp_path / "serving")
    assert_one_line_error(result, "has no tokenizer", "--no-string-signatures")
    assert not (tmp_path / "serving").exists()


def test_version_folders_are_ascii_numbers(cli, trained_run, tmp_path):
    # TF Serving reads only ASCII-digit version folders: "²" and "١" (str.isdigit())
    # are neither versions nor a crash.
    from keras_cosent.export.saved_model_export import _next_version

    for name in ("²", "١", "3", "07"):
        (tmp_path / name).mkdir()
    assert _next_version(str(tmp_path)) == 8
    with pytest.raises(ValueError, match="should be an integer from 0 to"):
        from keras_cosent.export.saved_model_export import _check_version

        _check_version("²")
