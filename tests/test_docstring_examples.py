"""Every `>>>` example in `keras_cosent` runs and prints what it says, on each backend.

Modules whose own tests already run their examples are listed in
`DOCTESTED_ELSEWHERE` (checked below to still do so); this file runs the rest,
so that a module that gains examples is covered without anyone remembering to.
"""

import doctest
import importlib
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "keras_cosent"
TESTS = pathlib.Path(__file__).resolve().parent

# Module -> the test file that runs its examples with `doctest.testmod`.
DOCTESTED_ELSEWHERE = {
    **{f"keras_cosent.{name}": "losses/test_docstring_examples.py" for name in (
        "losses", "losses.cosent_loss", "losses.infonce_loss", "losses.angle_loss",
        "losses.cosine_mse_loss", "losses.softmax_loss", "losses.ntxent_loss",
        "losses.triplet_loss", "losses.margin_ranking_loss", "losses.supcon_loss",
        "losses.matryoshka_loss", "utils.similarity", "utils.truncation", "data.beir",
        "retrieval.search", "retrieval.metrics", "retrieval.mining",
        "layers.softmax_classifier_head", "export.sentence_transformers_export",
        "models.checkpoints")},
    "keras_cosent.losses.joint_loss": "losses/test_joint_loss.py",
    "keras_cosent.callbacks.resumable_training": "callbacks/test_resumable_training.py",
    "keras_cosent.callbacks.collapse_guard": "callbacks/test_collapse_guard.py",
    "keras_cosent.data.packing": "models/test_sequence_packing.py",
    "keras_cosent.models.momentum_contrast_model": "models/test_momentum_contrast_model.py",
    "keras_cosent.models.xla": "models/test_sentence_encoder.py",
    "keras_cosent.models.sentence_preprocessor": "models/test_sentence_preprocessor.py",
    "keras_cosent.models.hf_bert_tokenizer": "models/test_hf_bert_tokenizer.py",
    "keras_cosent.data.padding": "data/test_pair_batches.py",
    "keras_cosent.data.pair_batches": "data/test_pair_batches.py",
    **{f"keras_cosent.optimizers.{name}": "optimizers/test_adamw.py"
       for name in ("adam_w", "adamw", "torch_fused_adamw", "warmup_linear_decay")},
    "keras_cosent.runtime": "runtime/test_runtime.py",
    "keras_cosent.metrics.spearman_correlation": "metrics/test_spearman_correlation.py",
    "keras_cosent.metrics.pearson_correlation": "metrics/test_pearson_correlation.py",
}


def _modules_with_examples():
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>> " not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return names


MODULES = _modules_with_examples()


def test_the_modules_are_found():
    # The discovery itself: a module known to hold examples, and the count.
    assert "keras_cosent.data.readers" in MODULES
    assert "keras_cosent.training.builder" in MODULES
    assert len(MODULES) > 50


@pytest.mark.parametrize("module_name", sorted(DOCTESTED_ELSEWHERE))
def test_modules_listed_as_doctested_elsewhere_are(module_name):
    assert module_name in MODULES, f"{module_name} has no examples (or moved): drop it here"
    source = (TESTS / DOCTESTED_ELSEWHERE[module_name]).read_text(encoding="utf-8")
    assert "doctest.testmod" in source
    assert module_name.rsplit(".", 1)[-1] in source, (
        f"{DOCTESTED_ELSEWHERE[module_name]} no longer names {module_name}")


@pytest.mark.parametrize("module_name", [m for m in MODULES if m not in DOCTESTED_ELSEWHERE])
def test_examples_run(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, verbose=False, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {module_name}'s examples failed (above)"
    if result.attempted == 0:  # only examples that need what a test has not (a SavedModel)
        lines = [line for line in pathlib.Path(module.__file__).read_text().splitlines()
                 if line.strip().startswith(">>> ")]
        assert lines and all("doctest: +SKIP" in line for line in lines), module_name
