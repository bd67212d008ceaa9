"""Named presets of `keras-cosent train`'s options, one module per recipe family.

`keras-cosent train --recipe NAME` fills every option the command line leaves at
its default from the recipe; options given explicitly always win. The modules
document where each set-up comes from.
"""

import click

from recipes.presets import nli_supervised
from recipes.presets import retrieval_infonce
from recipes.presets import simcse_unsup
from recipes.presets import staged
from recipes.presets import sts_cosent

RECIPES = {**sts_cosent.RECIPES, **simcse_unsup.RECIPES, **nli_supervised.RECIPES,
           **retrieval_infonce.RECIPES, **staged.RECIPES}


def apply_recipe(ctx, params):
    """Returns `params` with the recipe's values for the options left at their defaults."""
    name = params.get("recipe")
    if name is None:
        return dict(params)
    resolved = dict(params)
    for option, value in RECIPES[name].options.items():
        source = ctx.get_parameter_source(option)
        if source in (None, click.core.ParameterSource.DEFAULT):
            resolved[option] = value
    return resolved
