"""Recipe presets: valid train options, filling only what the command line leaves alone."""

import click
import pytest

from recipes.commands.train import train
from recipes.presets import RECIPES
from recipes.presets import apply_recipe

TRAIN_OPTIONS = {param.name: param for param in train.params}


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipe_options_are_valid_train_options(name):
    recipe = RECIPES[name]
    assert recipe.name == name and recipe.summary and recipe.reference
    for option, value in recipe.options.items():
        assert option in TRAIN_OPTIONS, f"{name}: unknown train option {option!r}"
        # The option's own type must accept the preset value unchanged; a repeatable
        # option (--train, --format, --loss) takes one value or one per --train.
        param = TRAIN_OPTIONS[option]
        if param.multiple:
            values = value if isinstance(value, tuple) else (value,)
            assert param.type_cast_value(None, values) == values
        else:
            assert param.type_cast_value(None, value) == value


def resolve(args):
    ctx = train.make_context("train", list(args) + ["--output", "unused"])
    return apply_recipe(ctx, ctx.params)


def test_recipe_fills_defaults_and_explicit_options_win():
    resolved = resolve(["--recipe", "simcse-unsup", "--epochs", "3"])
    assert resolved["loss"] == "simcse"
    assert resolved["temperature"] == 0.05
    assert resolved["format"] == "text-lines"
    assert resolved["batch_size"] == 64
    assert resolved["epochs"] == 3


def test_explicit_value_equal_to_the_default_still_wins():
    resolved = resolve(["--recipe", "nli-simcse", "--batch-size", "16"])
    assert resolved["batch_size"] == 16
    assert resolved["loss"] == "infonce"


def test_without_recipe_nothing_changes():
    ctx = train.make_context("train", ["--output", "unused"])
    assert apply_recipe(ctx, ctx.params) == ctx.params


def test_nli_recipes_read_nli_and_sts_recipe_ranks_with_cosent():
    assert RECIPES["nli-cosent"].options["format"] == "nli-jsonl"
    assert RECIPES["nli-cosent"].options["loss"] == "cosent"
    assert RECIPES["nli-simcse"].options["loss"] == "infonce"
    assert RECIPES["sts-cosent"].options["loss"] == "cosent"
    assert RECIPES["sts-cosent"].options["scale"] == 20.0
    assert isinstance(train, click.Command)
