"""A named preset of `keras-cosent train` options."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Values for `train`'s options that reproduce a training set-up from the literature.

    Args:
        name: what `--recipe` accepts, e.g. `"sts-cosent"`.
        summary: one line for `--help` and `README`.
        options: train option names (as click passes them, e.g. `"batch_size"`)
            mapped to values. Options given on the command line win over these.
        reference: where the set-up comes from.
        requires: train options (click names) the recipe cannot run without,
            e.g. `("train_retrieval", "dev_retrieval")`; `train` refuses to
            start when one is missing.
    """

    name: str
    summary: str
    options: dict
    reference: str = ""
    requires: tuple = ()
