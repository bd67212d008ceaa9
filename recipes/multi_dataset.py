"""`train` with several `--train` files: the per-file options, and the training set-up.

`--train` may be repeated. `--format` and `--loss` are then given once (for every
file) or once per `--train`, matched in order; `--text-columns` and
`--label-column` apply to every file. The files train together
(`keras_cosent.training.build_multi`: each batch from one file with that file's
loss, `--sampling proportional|round-robin`) or, with `--staged`, one after the
other (`recipes.staged_training`).

The configuration of a run with one `--train` is what it was before the option
could repeat (scalars, no `sampling`/`staged` keys), so that earlier runs keep
their identity; with several, `train`, and `format`/`loss` when given per file,
are lists. Imported by the `train` command before Keras is.
"""

import click

SAMPLINGS = ("proportional", "round-robin")
DEFAULT_SAMPLING = "proportional"
# Options given once for all --train files or once per file, with their defaults.
PER_TRAIN = {"format": "pair-tsv", "loss": "cosent"}
# Multi-dataset options, recorded only when there are several --train files.
MULTI_ONLY = ("sampling", "staged", "stage_epochs")


def _check_stage_epochs(ctx, param, value):
    """'1, 4' -> '1,4': positive integers (their count is checked against --train)."""
    if value is None:
        return None
    words = [word.strip() for word in str(value).split(",")]
    if not all(word.isascii() and word.isdigit() and int(word) > 0 for word in words):
        raise click.BadParameter(
            f"{value!r} should be positive integers separated by commas, one per stage, "
            "e.g. 1,4"
        )
    return ",".join(str(int(word)) for word in words)


def _flag(name):
    return "--" + name.replace("_", "-")


def _as_list(value):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def resolve_per_train_options(ctx, options, resume=False):
    """Turns the repeatable options into the configuration's values, in place.

    One `--train` (or none: the demo set): `train`, `format`, `loss` become
    single values as before. Several: `train` a list, `format`/`loss` a
    single value when given once, else a list with one entry per file.
    Raises `click.BadParameter` naming the option when the counts do not match.
    """
    trains = _as_list(options.get("train"))
    count = max(len(trains), 1)
    for name, default in PER_TRAIN.items():
        values = _as_list(options.get(name)) or [default]
        if len(values) == 1:
            options[name] = values[0]
        elif len(values) == count and count > 1:
            options[name] = values
        else:
            raise click.BadParameter(
                f"given {len(values)} times for {len(trains)} --train file(s); give it once "
                "(for every file) or once per --train, in the same order",
                param_hint=_flag(name),
            )
    options["train"] = trains if len(trains) > 1 else (trains[0] if trains else None)
    if len(trains) <= 1:
        for name in MULTI_ONLY:
            value = options.pop(name, None)
            if value not in (None, False):
                raise click.BadParameter(
                    "needs several --train files (one per dataset or stage, e.g. "
                    "--train nli.jsonl --train sts.tsv)", param_hint=_flag(name))
        return options
    staged = bool(options.get("staged"))
    if staged and options.get("sampling") is not None:
        raise click.BadParameter(
            "--staged trains the files one after the other; --sampling interleaves them",
            param_hint="--sampling",
        )
    if not staged and options.get("stage_epochs") is not None:
        raise click.BadParameter("applies to --staged runs only", param_hint="--stage-epochs")
    if staged:
        options.pop("sampling", None)
        if options.get("stage_epochs") is not None:
            epochs = options["stage_epochs"].split(",")
            if len(epochs) != count:
                raise click.BadParameter(
                    f"{options['stage_epochs']!r} gives {len(epochs)} stage(s) for "
                    f"{count} --train files; give one number per --train",
                    param_hint="--stage-epochs",
                )
        else:
            options.pop("stage_epochs", None)
    else:
        options.pop("staged", None)
        options.pop("stage_epochs", None)
        if options.get("sampling") is None:
            options["sampling"] = DEFAULT_SAMPLING
    unsupported = [name for name in ("train_retrieval", "dev_retrieval", "dev_retrieval_holdout",
                                     "mini_batch_size", "queue_size", "word_repetition")
                   if options.get(name) is not None]
    if (options.get("devices") or 1) > 1:
        unsupported.append("devices")
    if staged:
        unsupported += [name for name in ("keep_best", "collapse_guard") if options.get(name)]
    if unsupported:
        raise click.BadParameter(
            f"not supported with several --train files{' and --staged' if staged else ''}; "
            "it needs a run of one --train file",
            param_hint=_flag(unsupported[0]),
        )
    if staged and resume:
        raise click.BadParameter(
            "a --staged run cannot be resumed (each stage is a separate fit); pass "
            "--overwrite to train it again", param_hint="--resume",
        )
    return options


def is_multi(config):
    """Whether the run trains on several --train files (together or staged)."""
    return isinstance(config.get("train"), list)


def per_train(config, name, index):
    """The value of a per-file option (`format`, `loss`) for --train number `index`."""
    value = config[name]
    return value[index] if isinstance(value, list) else value


def read_training_files(config):
    """`[(dataset, format, loss), ...]`, one per --train, read as each file's loss needs."""
    from keras_cosent.training import get_objective
    from recipes.data_loading import warn_dropped
    from recipes.options import parse_text_columns

    columns = parse_text_columns(config["text_columns"])
    tasks = []
    for index, path in enumerate(config["train"]):
        data_format, loss = per_train(config, "format", index), per_train(config, "loss", index)
        dataset = warn_dropped(
            get_objective(loss).read(path, data_format, columns, config["label_column"]))
        tasks.append((dataset, data_format, loss))
    return tasks


def build_setup(config, encoder, tasks, matryoshka_dims=None):
    """The `keras_cosent.training.build_multi` set-up of the run's --train files."""
    from keras_cosent.training import Task
    from keras_cosent.training import build_multi
    from recipes.options import loss_options

    return build_multi(
        encoder,
        [Task(dataset, loss, loss_options(config, loss), data_format)
         for dataset, data_format, loss in tasks],
        sampling=config["sampling"],
        batch_size=config["batch_size"],
        epochs=config["epochs"],
        learning_rate=config["lr"],
        warmup=config["warmup"],
        weight_decay=config["weight_decay"],
        max_grad_norm=config.get("max_grad_norm"),
        seed=config["seed"],
        packing=config["packing"],
        matryoshka_dims=matryoshka_dims,
    )


def task_records(setup):
    """What results.json records of each --train file: loss name, rows, batches per epoch."""
    counts = setup.batches.batches_per_task
    return [
        {"name": task.name, "train": task.dataset.source, "format": task.data_format,
         "loss": task.objective if isinstance(task.objective, str) else task.objective.name,
         "rows": len(task.dataset), "batches_per_epoch": count}
        for task, count in zip(setup.tasks, counts)
    ]
