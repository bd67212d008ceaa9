"""The command stored in a run's `config.json` reproduces the run's configuration.

Every option must survive the trip option -> stored command -> parsed option, booleans
in both directions (a `--no-packing` run must not replay as packed).
"""

import shlex

import click
import pytest

from recipes.cli import main
from recipes.commands.train import NOT_CONFIG
from recipes.commands.train import command_line
from recipes.commands.train import train
from recipes.multi_dataset import resolve_per_train_options

# --staged needs several --train files; its replay is checked by the staged run
# (tests/recipes/test_multi_dataset_cli.py).
BOOLEAN_OPTIONS = [
    p for p in train.params
    if isinstance(p, click.Option) and p.is_flag and p.name not in NOT_CONFIG + ("staged",)
]


def _parsed_options(command):
    """The option values click gives `train` for the stored command's words."""
    words = shlex.split(command)
    start = words.index("train")
    with main.make_context("keras-cosent", words[words.index("--backend"):start]) as group:
        tuning = group.params["tuning"]
    with train.make_context("train", words[start + 1:]) as ctx:
        params = dict(ctx.params)
        # As `train` resolves them: one --format/--loss is a value, several a list.
        resolve_per_train_options(ctx, params)
        return {**params, "tuning": tuning}


def _config_of(**changes):
    with train.make_context("train", ["--output", "run"]) as ctx:
        params = dict(ctx.params)
        resolve_per_train_options(ctx, params)
    params.update(changes)
    for name in NOT_CONFIG:
        params.pop(name)
    return {"backend": "jax", "tuning": True, **params}


def test_there_are_boolean_options_to_check():
    assert {p.name for p in BOOLEAN_OPTIONS} >= {"packing", "collapse_guard"}


@pytest.mark.parametrize("words,expected", [
    ([], None),
    (["--mixed-precision"], "mixed_float16"),  # the flag alone, as before it took a value
    (["--mixed-precision", "--seed", "3"], "mixed_float16"),
    (["--mixed-precision", "mixed_bfloat16"], "mixed_bfloat16"),
    (["--mixed-precision=mixed_float16"], "mixed_float16"),
])
def test_mixed_precision_takes_a_policy_or_means_float16_alone(words, expected):
    with train.make_context("train", ["--output", "run", *words]) as ctx:
        assert ctx.params["mixed_precision"] == expected


def test_mixed_precision_refuses_other_policies_and_lists_the_choices():
    with pytest.raises(click.BadParameter, match="mixed_bfloat16.*mixed_float16"):
        train.make_context("train", ["--output", "run", "--mixed-precision", "float16"])


@pytest.mark.parametrize("stored", ["mixed_bfloat16", "mixed_float16", False])
def test_mixed_precision_round_trips(stored):
    # Off is stored as False, as runs stored it when the option was a plain flag.
    config = _config_of(mixed_precision=stored)
    with click.Context(train, info_name="train") as ctx:
        command = command_line(ctx, config)
    assert ("--mixed-precision" in command) is bool(stored), command
    assert _parsed_options(command)["mixed_precision"] == (stored or None)


def test_off_mixed_precision_keeps_the_configuration_of_earlier_runs(tmp_path):
    from recipes.commands.train import build_config

    options = dict(_config_of(), output=str(tmp_path / "run"))
    options.pop("backend"), options.pop("tuning")
    assert build_config("jax", {**options, "mixed_precision": None})["mixed_precision"] is False
    assert build_config("jax", {**options, "mixed_precision": "mixed_bfloat16"})[
        "mixed_precision"] == "mixed_bfloat16"


def test_a_run_without_symmetric_keeps_the_configuration_of_earlier_runs(tmp_path):
    from recipes.commands.train import build_config

    options = dict(_config_of(), output=str(tmp_path / "run"))
    options.pop("backend"), options.pop("tuning")
    assert "symmetric" not in build_config("jax", {**options, "symmetric": False})
    assert build_config("jax", {**options, "symmetric": True})["symmetric"] is True


@pytest.mark.parametrize("param", BOOLEAN_OPTIONS + ["tuning"],
                         ids=lambda p: getattr(p, "name", p))
@pytest.mark.parametrize("value", [True, False])
def test_each_boolean_option_round_trips(param, value):
    name = getattr(param, "name", param)
    config = _config_of(**{name: value})
    with click.Context(train, info_name="train") as ctx:
        command = command_line(ctx, config)
    parsed = _parsed_options(command)
    assert parsed[name] is value, command
    for name, stored in config.items():
        if name in parsed:
            assert parsed[name] == stored, (name, command)


@pytest.mark.parametrize("backend, devices, launcher", [
    ("torch", 2, ["torchrun", "--nproc_per_node", "2", "-m", "recipes"]),
    ("torch", 1, ["keras-cosent"]),
    ("jax", 2, ["keras-cosent"]),  # one process spans the devices
])
def test_a_pytorch_run_on_several_devices_is_repeated_under_torchrun(backend, devices, launcher):
    config = {**_config_of(devices=devices), "backend": backend}
    with click.Context(train, info_name="train") as ctx:
        command = command_line(ctx, config)
    words = shlex.split(command)
    assert words[: len(launcher) + 2] == launcher + ["--backend", backend], command
    assert _parsed_options(command)["devices"] == devices


def test_every_valued_option_round_trips():
    config = _config_of(epochs=3, batch_size=8, lr=3e-5, warmup=0.2, max_length=40,
                        pooling="cls", loss="angle", seed=7, format="sts-benchmark",
                        eval_format="pair-tsv", text_columns="a,b", label_column="y",
                        margin=0.3, matryoshka_dims="64,32,16", collapse_guard=True,
                        guard_min_delta=0.02, guard_factor=0.3, guard_patience=3)
    with click.Context(train, info_name="train") as ctx:
        parsed = _parsed_options(command_line(ctx, config))
    assert {k: parsed[k] for k in config if k in parsed} == {
        k: v for k, v in config.items() if k in parsed}


def test_options_about_an_existing_run_are_not_replayed():
    # --resume and --overwrite say what to do with what is in --output, not what the run is.
    config = {**_config_of(), "resume": True, "overwrite": True}
    with click.Context(train, info_name="train") as ctx:
        command = command_line(ctx, config)
    assert "--resume" not in command and "--overwrite" not in command
