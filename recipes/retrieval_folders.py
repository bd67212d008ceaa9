"""Which qrels split of a BEIR folder a command reads, checked before Keras starts.

Kept free of keras imports, so that `train` and `evaluate` refuse a folder
without qrels, or a split it lacks, in a fraction of a second rather than after
the backend has loaded.
"""

import pathlib

from recipes.errors import CliError


def retrieval_split(folder, split=None, option="FOLDER", split_option="--split"):
    """The qrels split of a BEIR folder to use: `split`, else the folder's only one."""
    qrels_dir = pathlib.Path(folder) / "qrels"
    available = sorted(p.stem for p in qrels_dir.glob("*.tsv")) if qrels_dir.is_dir() else []
    if not available:
        raise CliError(f"{option} {folder}: not a BEIR folder (no qrels/<split>.tsv)")
    if split is None:
        if len(available) > 1:
            raise CliError(
                f"{option} {folder}: has the splits {', '.join(available)}; choose one "
                f"with {split_option}"
            )
        return available[0]
    if split not in available:
        raise CliError(
            f"{option} {folder}: no qrels/{split}.tsv; its splits are {', '.join(available)}"
        )
    return split
