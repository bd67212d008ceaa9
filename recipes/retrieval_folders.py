"""Which qrels split of a BEIR folder a command reads, checked before Keras starts.

Kept free of keras imports, so that `train` and `evaluate` refuse a folder
without qrels, or a split it lacks, in a fraction of a second rather than after
the backend has loaded.
"""

import pathlib

from recipes.errors import CliError


def retrieval_split(folder, split=None, option="FOLDER", split_option="--split", preferred=None,
                    note=None):
    """The qrels split of a BEIR folder to use: `split`; else the folder's only one;
    else, among several, `preferred` (BEIR's own names: `train` to train on, `dev`
    to select on, `test` to report), said through `note`."""
    qrels_dir = pathlib.Path(folder) / "qrels"
    available = sorted(p.stem for p in qrels_dir.glob("*.tsv")) if qrels_dir.is_dir() else []
    if not available:
        raise CliError(f"{option} {folder}: not a BEIR folder (no qrels/<split>.tsv)")
    if split is None:
        if len(available) == 1:
            return available[0]
        if preferred in available:
            if note is not None:
                note(f"{option} {folder}: reading qrels/{preferred}.tsv of its splits "
                     f"{', '.join(available)} ({split_option} picks another)")
            return preferred
        raise CliError(
            f"{option} {folder}: has the splits {', '.join(available)}; choose one "
            f"with {split_option}"
        )
    if split not in available:
        raise CliError(
            f"{option} {folder}: no qrels/{split}.tsv; its splits are {', '.join(available)}"
        )
    return split
