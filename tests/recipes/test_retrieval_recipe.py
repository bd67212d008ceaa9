"""`train --recipe retrieval-infonce`: mine with the starting encoder, train InfoNCE on
(query, positive, negatives) rows, keep the epoch with the best dev nDCG@10.

Everything runs on the tiny checkpoint over BEIR folders made from the demo pairs.
"""

import json
import shlex

import keras
import pytest

import recipes.training
from tests.recipes.conftest import demo_rows
from tests.recipes.conftest import save_tiny_checkpoint
from tests.recipes.test_cli import assert_error_after_notes
from tests.recipes.test_cli import assert_one_line_error
from tests.recipes.test_retrieval_cli import count_faiss_searches
from tests.recipes.test_retrieval_cli import read_jsonl
from tests.recipes.test_retrieval_cli import write_beir


def pair_folder(folder, split, rows, distractors=()):
    """Query i's positive is document i; `distractors` are further documents."""
    corpus = {f"d{i}": second for i, (_, second, _) in enumerate(rows)}
    corpus.update({f"x{i}": text for i, text in enumerate(distractors)})
    return write_beir(
        folder, split,
        {f"q{i}": first for i, (first, _, _) in enumerate(rows)},
        corpus,
        {f"q{i}": {f"d{i}": 1} for i in range(len(rows))},
    )


@pytest.fixture
def folders(tmp_path):
    train_rows = demo_rows("train")[:24]
    distractors = [second for _, second, _ in demo_rows("train")[24:48]]
    return {
        "train": pair_folder(tmp_path / "ir-train", "train", train_rows, distractors),
        "dev": pair_folder(tmp_path / "ir-dev", "dev", demo_rows("dev")[:20]),
    }


def recipe_args(tiny_checkpoint, folders, output, *extra):
    return ("train", "--recipe", "retrieval-infonce", "--backbone", tiny_checkpoint,
            "--train-retrieval", folders["train"], "--dev-retrieval", folders["dev"],
            "--epochs", 4, "--batch-size", 8, "--max-length", 16, "--lr", 2e-2,
            "--mine-negatives", 2, "--output", output, *extra)


def record_mining(monkeypatch):
    """Records the `fill` and `seed` the recipe mines with (the library tests check what they do)."""
    import keras_cosent.retrieval

    calls = []
    original = keras_cosent.retrieval.mine_hard_negatives

    def recording(*args, **kwargs):
        calls.append({k: kwargs.get(k) for k in ("fill", "seed")})
        return original(*args, **kwargs)

    monkeypatch.setattr(keras_cosent.retrieval, "mine_hard_negatives", recording)
    return calls


def test_recipe_mines_trains_on_negatives_and_keeps_the_best_epoch(
        cli, tiny_checkpoint, folders, tmp_path, monkeypatch):
    built = []
    original_build = recipes.training.build

    def recording_build(*args, **kwargs):
        built.append(original_build(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(recipes.training, "build", recording_build)
    mining_calls = record_mining(monkeypatch)
    output = tmp_path / "run"
    result = cli(*recipe_args(tiny_checkpoint, folders, output))
    assert result.exit_code == 0, result.output

    # Mined into the run directory, in `keras-cosent mine`'s format.
    mined = read_jsonl(output / "mined.jsonl")
    train_queries = {r["_id"]: r["text"] for r in read_jsonl(folders["train"] / "queries.jsonl")}
    assert [row["query"] for row in mined] == list(train_queries.values())
    # The random tiny model scores everything alike, so the recipe's relative margin
    # leaves some rows short, and no document of the corpus passes it to complete them
    # (--mine-fill random, the default, draws only documents the margin accepts): they
    # are left out, and counted.
    assert mining_calls == [{"fill": "random", "seed": 42}]
    assert all(len(row["negatives"]) <= 2 for row in mined)
    full = [row for row in mined if len(row["negatives"]) == 2]
    assert 8 <= len(full) < 24
    assert f"{24 - len(full)} of 24 mined rows got fewer than 2 negatives" in result.stderr
    # The mining's encodings are announced, with their bars, on stderr.
    corpus_size = len(read_jsonl(folders["train"] / "corpus.jsonl"))
    assert f"encoding {len(train_queries)} queries" in result.stderr
    assert f"encoding {corpus_size} documents" in result.stderr
    assert f"{corpus_size}/{corpus_size}" in result.stderr
    # The negatives reached the batches: query, positive and 2 negatives per row.
    (setup,) = built
    assert setup.objective.name == "infonce" and setup.loss.mask_false_negatives
    assert setup.dataset.num_columns == 4 and len(setup.dataset) == len(full)
    assert setup.dataset.columns[2:] == [[row["negatives"][i] for row in full] for i in (0, 1)]
    x, y = setup.batches[0]
    # Packed batches index each sentence's tokens as (batch, columns, row_length).
    assert x["gather_index"].shape[:2] == (8, 4) and y.shape == (8,)

    # The best epoch by ir_dev_ndcg@10 is marked, and is the saved encoder.
    rows = json.loads((output / "metrics.json").read_text())
    assert len(rows) == 4
    values = [row["ir_dev_ndcg@10"] for row in rows]
    kept = [row["epoch"] for row in rows if row["kept"]]
    # At this learning rate later epochs can get worse (on torch epoch 1 of 4 is kept),
    # so the saved encoder is not simply the last epoch's.
    assert kept == [1 + values.index(max(values))]
    if keras.backend.backend() == "torch":
        assert kept[0] < len(rows), values  # keep-best differs from keep-last here
    results = json.loads((output / "results.json").read_text())
    assert results["kept_epoch"] == {"metric": "ir_dev_ndcg@10", "epoch": kept[0],
                                     "value": max(values)}
    assert results["dev_retrieval"]["ndcg@10"] == pytest.approx(max(values), abs=1e-4)
    # The dev score before training is measured too (the curve's epoch 0).
    before = results["dev_retrieval_before_training"]
    assert before["queries"] == 20
    assert before["ndcg@10"] != pytest.approx(max(values), abs=1e-3)
    assert "dev_retrieval_before_training" in result.stdout
    # Its encodings, and those after training, are announced on stderr with their bars.
    for when in ("dev retrieval before training", "dev retrieval"):
        assert f"{when}: encoding 20 queries" in result.stderr
    # So are those at the end of each of the 4 epochs, queries then documents each time.
    ends = [line for line in result.stderr.splitlines()
            if line.startswith("dev retrieval, end of epoch: encoding")]
    assert [line.split()[-1] for line in ends] == ["queries", "documents"] * 4, ends
    assert "/sentence" not in result.stdout
    # ... and is the starting checkpoint's, as `evaluate` scores it.
    start = tmp_path / "start.json"
    result = cli("evaluate", tiny_checkpoint, folders["dev"], "--task", "retrieval",
                 "--max-length", 16, "--json", start)
    assert result.exit_code == 0, result.output
    assert json.loads(start.read_text())["ndcg@10"] == pytest.approx(before["ndcg@10"], abs=1e-4)
    evaluated = tmp_path / "evaluated.json"
    result = cli("evaluate", output, folders["dev"], "--task", "retrieval", "--json", evaluated)
    assert result.exit_code == 0, result.output
    # x 100: 1e-6 unscaled.
    assert json.loads(evaluated.read_text())["ndcg@10"] == pytest.approx(max(values), abs=1e-4)

    # config.json records the recipe's resolved options; its command repeats the run
    # (same configuration: reused, not retrained).
    record = json.loads((output / "config.json").read_text())
    config = record["config"]
    assert config["loss"] == "infonce" and config["keep_best"] == "ir_dev_ndcg@10"
    assert config["mine_negatives"] == 2 and config["mine_relative_margin"] == 0.05
    assert config["mine_fill"] == "random"
    assert config["train_retrieval_split"] == "train" and "train_retrieval" in config["data_sha256"]
    words = shlex.split(record["command"])
    assert words[:4] == ["keras-cosent", "--backend", words[2], "train"]
    result = cli(*words[1:])
    assert result.exit_code == 0, result.output
    assert "already holds this run" in result.output


def test_mine_fill_none_is_passed_on_and_replayed(
        cli, tiny_checkpoint, folders, tmp_path, monkeypatch):
    mining_calls = record_mining(monkeypatch)
    output = tmp_path / "run"
    args = list(recipe_args(tiny_checkpoint, folders, output, "--mine-fill", "none",
                            "--seed", 5))
    args[args.index("--epochs") + 1] = 1
    result = cli(*args)
    assert result.exit_code == 0, result.output
    assert mining_calls == [{"fill": None, "seed": 5}]
    record = json.loads((output / "config.json").read_text())
    words = shlex.split(record["command"])
    assert words[words.index("--mine-fill") + 1] == "none"


def test_mining_that_leaves_no_full_row_says_which_options_help(cli, tiny_checkpoint, folders,
                                                                 tmp_path):
    # 60 negatives from a corpus of 48 documents: every row is short, none is filled.
    output = tmp_path / "run"
    args = list(recipe_args(tiny_checkpoint, folders, output, "--mine-fill", "none"))
    args[args.index("--mine-negatives") + 1] = 60
    message = assert_error_after_notes(
        cli(*args), f"--train-retrieval {folders['train']}: every mined row got fewer than 60",
        "--mine-negatives", "--mine-fill random")
    assert ".resume" not in message and "--range-max" not in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ir-dev", "ir-train"]


def test_relative_margin_off_overrides_the_recipe(cli, tiny_checkpoint, folders, tmp_path):
    """`--mine-relative-margin off` keeps every candidate; the replay command says `off`."""
    output = tmp_path / "run"
    args = list(recipe_args(tiny_checkpoint, folders, output, "--mine-relative-margin", "off"))
    args[args.index("--epochs") + 1] = 1
    result = cli(*args)
    assert result.exit_code == 0, result.output
    # The recipe's margin left rows short on this model (previous test); off, none is.
    mined = read_jsonl(output / "mined.jsonl")
    assert len(mined) == 24 and all(len(row["negatives"]) == 2 for row in mined)
    assert "mined rows got fewer" not in result.stderr
    record = json.loads((output / "config.json").read_text())
    assert record["config"]["mine_relative_margin"] == "off"
    words = shlex.split(record["command"])
    assert words[words.index("--mine-relative-margin") + 1] == "off"
    result = cli(*words[1:])
    assert result.exit_code == 0 and "already holds this run" in result.output, result.output
    result = cli(*recipe_args(tiny_checkpoint, folders, tmp_path / "bad",
                              "--mine-relative-margin", "of"))
    assert result.exit_code == 2 and "'of'" in result.output, result.output


def test_mined_rows_train_with_format_triplets_jsonl(cli, tiny_checkpoint, folders, tmp_path):
    """`mine`'s output is a `--train` file: --format triplets-jsonl, errors with file:line."""
    mined = tmp_path / "mined.jsonl"
    result = cli("mine", tiny_checkpoint, "--queries", folders["train"] / "queries.jsonl",
                 "--corpus", folders["train"] / "corpus.jsonl",
                 "--qrels", folders["train"] / "qrels" / "train.tsv", "-o", mined,
                 "--num-negatives", 1, "--max-length", 16)
    assert result.exit_code == 0, result.output
    result = cli("train", "--backbone", tiny_checkpoint, "--loss", "infonce", "--train", mined,
                 "--format", "triplets-jsonl", "--epochs", 1, "--batch-size", 8,
                 "--max-length", 16, "--output", tmp_path / "run")
    assert result.exit_code == 0, result.output

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "a", "positive": "b", "negatives": ["c"]}\n'
                   '{"query": "d", "positive": "e", "negatives": "f"}\n')
    result = cli("train", "--backbone", tiny_checkpoint, "--loss", "infonce", "--train", bad,
                 "--format", "triplets-jsonl", "--output", tmp_path / "bad-run")
    assert_one_line_error(result, "bad.jsonl:2", "`negatives` should be a list of strings")


def test_dev_retrieval_holdout_and_the_models_token_limit(cli, folders, tmp_path):
    """`--dev-retrieval-holdout 6` scores 6 held-out training queries and trains on the
    rest; the recipe cuts texts at the model's token limit (48 here), not at 64."""
    from keras_cosent.data import hold_out_queries
    from keras_cosent.data import read_beir
    from recipes.model_loading import load_encoder

    checkpoint = save_tiny_checkpoint(tmp_path / "tiny-48", max_sequence_length=48)
    output = tmp_path / "run"
    result = cli("train", "--recipe", "retrieval-infonce", "--backbone", checkpoint,
                 "--train-retrieval", folders["train"], "--dev-retrieval-holdout", 6,
                 "--epochs", 1, "--batch-size", 8, "--lr", 2e-2, "--mine-negatives", 1,
                 "--mine-relative-margin", "off", "--output", output)
    assert result.exit_code == 0, result.output
    assert "6 of 24 queries of --train-retrieval held out" in result.stderr
    train, dev = hold_out_queries(read_beir(folders["train"], "train"), 6, seed=0)
    mined = read_jsonl(output / "mined.jsonl")
    assert [row["query"] for row in mined] == list(train.queries.values())
    # No dev positive reaches training, as a positive or as a mined negative.
    dev_positives = {dev.corpus[d] for q in dev.queries for d in dev.qrels[q]}
    assert len(dev_positives) == 6
    assert not dev_positives & {t for row in mined for t in [row["positive"], *row["negatives"]]}
    results = json.loads((output / "results.json").read_text())
    for key in ("dev_retrieval_before_training", "dev_retrieval"):
        assert (results[key]["queries"], results[key]["documents"]) == (6, len(dev.corpus))
    record = json.loads((output / "config.json").read_text())
    assert record["config"]["dev_retrieval_holdout"] == 6
    assert record["config"]["max_length"] is None
    assert load_encoder(output).max_length == 48
    words = shlex.split(record["command"])
    assert "--max-length" not in words
    result = cli(*words[1:])
    assert result.exit_code == 0 and "already holds this run" in result.output, result.output


def test_recipe_option_errors(cli, tiny_checkpoint, folders, small_train, tmp_path):
    output = tmp_path / "run"
    result = cli("train", "--recipe", "retrieval-infonce", "--backbone", tiny_checkpoint,
                 "--train-retrieval", folders["train"], "--output", output)
    assert_one_line_error(
        result, "--recipe retrieval-infonce needs one of --dev-retrieval, --dev-retrieval-holdout")
    result = cli("train", "--recipe", "retrieval-infonce", "--backbone", tiny_checkpoint,
                 "--output", output)
    assert_one_line_error(result, "--recipe retrieval-infonce needs --train-retrieval and one "
                                  "of --dev-retrieval, --dev-retrieval-holdout")
    result = cli("train", "--train", small_train, "--dev-retrieval-holdout", 5,
                 "--output", output)
    assert_one_line_error(result, "--dev-retrieval-holdout", "give one")
    result = cli("train", "--recipe", "retrieval-infonce", "--backbone", tiny_checkpoint,
                 "--train-retrieval", folders["train"], "--dev-retrieval", folders["dev"],
                 "--dev-retrieval-holdout", 5, "--output", output)
    assert_one_line_error(result, "--dev-retrieval-holdout", "not both")
    result = cli("train", "--recipe", "retrieval-infonce", "--backbone", tiny_checkpoint,
                 "--train-retrieval", folders["train"], "--dev-retrieval-holdout", 24,
                 "--output", output)
    # Said in the option's terms (hold_out_queries' own message names its `size`).
    message = assert_error_after_notes(
        result, f"--dev-retrieval-holdout 24: --train-retrieval {folders['train']} has 24 "
                "queries with a relevant document; hold out at most 23")
    assert "size" not in message
    # One pair left cannot fill an InfoNCE batch: refused before the mining, where
    # the error named the run's mined.jsonl, which the failed run did not keep. The
    # folder has a dev split too, which --dev-retrieval would score: said.
    (folders["train"] / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\n")
    result = cli("train", "--recipe", "retrieval-infonce", "--backbone", tiny_checkpoint,
                 "--train-retrieval", folders["train"], "--dev-retrieval-holdout", 23,
                 "--output", output)
    assert_error_after_notes(
        result, f"--dev-retrieval-holdout 23 leaves --train-retrieval {folders['train']} 1 "
                "(query, positive) pair(s) to train on, and --loss infonce needs at least 2 "
                "rows in a batch to learn from; hold out fewer queries")
    assert "mining" not in result.stderr and not output.exists()
    assert (f"--dev-retrieval-holdout: --train-retrieval {folders['train']} has a dev split of "
            f"its own (qrels/dev.tsv), which --dev-retrieval {folders['train']} would score "
            "instead of held-out training queries") in " ".join(result.stderr.split())
    # A folder without one of its files, named with the option that gave it (the data
    # hash for config.json read it first: "corpus.jsonl: No such file or directory").
    (folders["dev"] / "corpus.jsonl").unlink()
    result = cli("train", "--recipe", "retrieval-infonce", "--backbone", tiny_checkpoint,
                 "--train-retrieval", folders["train"], "--dev-retrieval", folders["dev"],
                 "--output", output)
    assert_error_after_notes(
        result, f"--dev-retrieval {folders['dev']}: BEIR folder {str(folders['dev'])!r} has no "
                "corpus.jsonl")
    assert not output.exists()
    result = cli("train", "--train", small_train, "--train-retrieval", folders["train"],
                 "--output", output)
    assert_one_line_error(result, "--train or --train-retrieval, not both")
    result = cli("train", "--train", small_train, "--mine-negatives", 2, "--output", output)
    assert_one_line_error(result, "--mine-negatives", "--train-retrieval only")
    result = cli("train", "--train", small_train, "--keep-best", "ir_dev_ndcg@10",
                 "--output", output)
    assert_one_line_error(result, "--keep-best", "--dev-retrieval")
    result = cli("train", "--train", small_train, "--keep-best", "dev_spearman",
                 "--output", output)
    assert_one_line_error(result, "--keep-best", "--dev")
    assert not output.exists()


def test_a_loss_that_cannot_take_the_mined_rows_is_refused_before_mining(
        cli, tiny_checkpoint, folders, tmp_path, monkeypatch):
    # The mined rows are unlabelled (query, positive, negatives...): a pair loss
    # (the default cosent) or a loss with another number of negatives would fail
    # only once the whole corpus is mined.
    mining_calls = record_mining(monkeypatch)
    output = tmp_path / "run"
    base = ("train", "--backbone", tiny_checkpoint, "--train-retrieval", folders["train"],
            "--dev-retrieval", folders["dev"], "--output", output)
    assert_one_line_error(
        cli(*base), "--loss", "cosent cannot train on the rows --train-retrieval mines, "
        "unlabelled (query, positive, 3 negatives): objective 'cosent'",
        "needs 2 text columns and a label, found 5 columns and no label",
        "--recipe retrieval-infonce")
    assert_one_line_error(
        cli(*base, "--loss", "triplet"), "--loss",
        "(query, positive, 3 negatives)", "3 text columns; found 5",
        "--mine-negatives 1 makes rows it takes")
    # The objective's whole reason, whatever punctuation it holds.
    assert_one_line_error(
        cli(*base, "--loss", "supcon"), "--loss", "(e.g. --text-columns text --label-column "
        "label); triplets-jsonl files have no classes (--recipe retrieval-infonce")
    # Losses that take the rows but not as mined: simcse embeds each text alone,
    # ntxent keeps (query, positive); the negatives were mined for nothing.
    assert_one_line_error(
        cli(*base, "--loss", "simcse"), "--loss", "objective 'simcse' trains on each text "
        "alone, not on the (query, positive) pairs (--recipe retrieval-infonce")
    assert_one_line_error(
        cli(*base, "--loss", "ntxent"), "--loss", "objective 'ntxent' keeps the (query, "
        "positive) pairs and would leave the mined negatives unused (--mine-negatives 0 "
        "makes rows it takes)")
    assert mining_calls == [] and not output.exists()
    # The counts they take pass the check and train.
    result = cli(*base, "--loss", "triplet", "--mine-negatives", 1, "--epochs", 1,
                 "--batch-size", 8, "--max-length", 16)
    assert result.exit_code == 0, result.output
    assert len(mining_calls) == 1
    assert all(len(row["negatives"]) == 1 for row in read_jsonl(output / "mined.jsonl"))


def test_faiss_mines_and_scores_dev_as_the_numpy_search_does(
        cli, tiny_checkpoint, folders, small_train, tmp_path, monkeypatch):
    searches = count_faiss_searches(monkeypatch)
    runs = {}
    for name, extra in (("numpy", ()), ("faiss", ("--faiss",))):
        output = tmp_path / name
        result = cli(*recipe_args(tiny_checkpoint, folders, output, *extra), "--epochs", 2)
        assert result.exit_code == 0, result.output
        runs[name] = output
    # Mining over 48 train documents, then dev (20) before training, after each of the
    # two epochs and at the end: every search of the --faiss run, none of the other's.
    assert searches == [48, 20, 20, 20, 20]
    assert read_jsonl(runs["faiss"] / "mined.jsonl") == read_jsonl(runs["numpy"] / "mined.jsonl")
    figures = {name: json.loads((run / "results.json").read_text()) for name, run in runs.items()}
    for split in ("dev_retrieval_before_training", "dev_retrieval"):
        for key, value in figures["numpy"][split].items():
            assert figures["faiss"][split][key] == pytest.approx(value, abs=1e-4), (split, key)
    config = json.loads((runs["faiss"] / "config.json").read_text())
    assert config["config"]["use_faiss"] is True and "--faiss" in shlex.split(config["command"])

    result = cli("train", "--train", small_train, "--faiss", "--output", tmp_path / "refused")
    assert_one_line_error(result, "--faiss", "--train-retrieval", "--dev-retrieval")


class _Angles:
    """An encoder stand-in: each text's embedding is given by hand."""

    def __init__(self, vectors):
        self.vectors = vectors

    def encode(self, texts, batch_size=32, **kwargs):
        import numpy as np

        return np.array([self.vectors[t] for t in texts], "float32")


@pytest.mark.parametrize("count", [0, 1])
def test_training_rows_leave_out_pairs_with_a_blank_query_or_positive(tmp_path, count):
    from keras_cosent.data import RetrievalDataset
    from recipes.context import Environment

    data = RetrievalDataset(
        corpus={"d1": "a man rides", "d2": " ", "d3": "a cat", "d4": "a dog"},
        queries={"q1": "a man", "q2": "\t", "q3": "a bird"},
        qrels={"q1": {"d1": 1}, "q2": {"d4": 1}, "q3": {"d2": 1}}, source="ir-train")
    vectors = {"a man rides": [1, 0], " ": [0.9, 0.1], "a cat": [0.5, 0.5], "a dog": [0, 1],
               "a man": [1, 0.1], "\t": [0, 1], "a bird": [0.4, 0.6]}
    notes = []

    class Recording(Environment):
        def note(self, message):
            notes.append(message)

    config = {"mine_negatives": count, "mine_fill": "none", "mine_relative_margin": "off",
              "seed": 0, "output": str(tmp_path / "run")}
    (tmp_path / "backup").mkdir()
    (tmp_path / "run").mkdir()
    train = recipes.training.mine_training_rows(
        config, _Angles(vectors), Recording(), tmp_path / "backup", tmp_path / "run", data)
    # Only (q1, d1) makes a row; the blank document, nearest to q1 after d1, is
    # passed over for the next one.
    assert [column[0] for column in train.columns[:2]] == ["a man", "a man rides"]
    assert len(train) == 1
    if count:
        assert train.columns[2] == ["a cat"]
        assert "1 blank documents of ir-train were never taken as negatives" in " ".join(notes)
    assert "2 (query, positive) pairs of ir-train have a blank query or positive" in " ".join(notes)


def test_training_rows_take_a_repeated_text_once_and_say_so(tmp_path):
    from keras_cosent.data import RetrievalDataset
    from recipes.context import Environment

    # "a cat" under d2 and d3, the two documents nearest q1 after its positive.
    data = RetrievalDataset(
        corpus={"d1": "a man rides", "d2": "a cat", "d3": "a cat", "d4": "a dog"},
        queries={"q1": "a man"}, qrels={"q1": {"d1": 1}}, source="ir-train")
    vectors = {"a man rides": [1, 0], "a cat": [0.6, 0.4], "a dog": [0, 1], "a man": [1, 0.1]}
    notes = []

    class Recording(Environment):
        def note(self, message):
            notes.append(message)

    config = {"mine_negatives": 2, "mine_fill": "none", "mine_relative_margin": "off",
              "seed": 0, "output": str(tmp_path / "run")}
    (tmp_path / "backup").mkdir()
    (tmp_path / "run").mkdir()
    train = recipes.training.mine_training_rows(
        config, _Angles(vectors), Recording(), tmp_path / "backup", tmp_path / "run", data)
    assert [column[0] for column in train.columns] == ["a man", "a man rides", "a cat", "a dog"]
    assert ("1 documents of ir-train repeat an earlier document's text; each text was one "
            "candidate, never two negatives of a row") in notes
