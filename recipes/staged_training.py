"""`train --staged`: the --train files one after the other, in one run directory.

Stage `i` trains on the `i`-th `--train` file with its own `--loss` and
`--format` (`recipes.multi_dataset`), for its `--stage-epochs` entry (or
`--epochs`), with a fresh AdamW and its own warm-up/decay, starting from the
weights the previous stage ended with: the set-up of
`keras_cosent.training.build` for each stage, re-seeded with `--seed` and its
dropout generators put back to their starting states. A staged run therefore
trains the weights that plain runs chained would (stage i a `train` whose
`--backbone` is stage i-1's output, with that stage's options). The dev set is
scored before training and after every epoch of every stage.
`metrics.csv`/`metrics.json` hold every epoch, numbered across the stages, with
`stage` and `stage_loss` columns; `training.png` marks where each stage starts;
`results.json` records each stage's file, loss, rows, epochs and batches per
epoch under `stages`.

`--recipe nli-infonce-then-sts-cosent` is such a run: InfoNCE on NLI triplets,
then CoSENT on STS pairs (`recipes.presets.staged`).

Imported lazily by `recipes.training`, after the Keras backend is chosen.
"""

import time

import keras

from keras_cosent.callbacks import ResumableTraining
from keras_cosent.training import build
from recipes import reporting
from recipes.evaluation import epoch_end_sts_evaluator
from recipes.evaluation import evaluate_sts
from recipes.model_loading import load_encoder
from recipes.options import loss_options
from recipes.progress import prefixed
from recipes.progress import to_stderr

STAGE_LOG = "stage{stage}.csv"
DEV_NAME = "dev"


def stage_epochs(config):
    """Epochs of each stage: `--stage-epochs`, else `--epochs` for every stage."""
    if config.get("stage_epochs"):
        return [int(word) for word in config["stage_epochs"].split(",")]
    return [config["epochs"]] * len(config["train"])


def train_stages(config, directory, env, backup_dir):
    """Trains the stages `config` names and writes the run into `directory`.

    Returns:
        The final evaluation results (as `recipes.training.train_encoder`), and
        `stages`: one record per stage.
    """
    from keras_cosent.training import get_objective
    from keras_cosent.training.builder import shaped_task
    from keras_cosent.utils.seed_states import seed_states
    from recipes.training import check_finite_embeddings
    from recipes.training import float32_start
    from recipes.training import interrupt_check
    from recipes.training import non_finite_loss_error
    from recipes.training import parse_matryoshka_dims
    from recipes.training import read_datasets
    from recipes.training import rows_made
    from recipes.training import run_policy
    from recipes.training import saved_encoder
    from recipes.training import zero_loss_warning

    tasks, _, dev, test = read_datasets(config)
    # Every stage's rows shaped and checked before the first stage trains: a later
    # stage's bad file would otherwise end the run after the earlier stages' work,
    # which a staged run cannot resume.
    for dataset, data_format, loss in tasks:
        shaped_task(get_objective(loss), dataset, data_format, config["batch_size"],
                    loss_options(config, loss))
    start_scored = float32_start(config)
    keras.utils.set_random_seed(config["seed"])
    with run_policy(config):
        encoder = load_encoder(config["backbone"], config["pooling"], config["max_length"],
                               option="--backbone")
        matryoshka_dims = parse_matryoshka_dims(config.get("matryoshka_dims"), encoder,
                                                config["backbone"])
        initial_seed_states = [keras.ops.convert_to_numpy(v.value) for v in seed_states(encoder)]
        results, stages, rows, stage_starts = {}, [], [], []
        if dev is not None:
            results["dev_before_training"] = evaluate_sts(
                start_scored or encoder, dev, note=prefixed(env.note, "dev before training"))
        del start_scored
        percent = ("_spearman", "_pearson")
        start = time.time()
        for stage, ((dataset, data_format, loss), epochs) in enumerate(
                zip(tasks, stage_epochs(config)), start=1):
            # Seeded again for each stage, and the layers' dropout generators put
            # back to the states they started with (on JAX and TensorFlow each
            # draw advances them), as a plain run of the stage starts: a stage
            # draws the dropout masks of `train --backbone <previous stage's
            # output>`, so the stages equal the plain runs chained.
            keras.utils.set_random_seed(config["seed"])
            for variable, state in zip(seed_states(encoder), initial_seed_states):
                variable.assign(state)
            setup = build(
                encoder, dataset, loss,
                batch_size=config["batch_size"], epochs=epochs, learning_rate=config["lr"],
                warmup=config["warmup"], weight_decay=config["weight_decay"],
                max_grad_norm=config.get("max_grad_norm"),
                seed=config["seed"], packing=config["packing"], data_format=data_format,
                matryoshka_dims=matryoshka_dims, **loss_options(config, loss),
            )
            log = backup_dir / STAGE_LOG.format(stage=stage)
            callbacks = [interrupt_check()]
            if dev is not None:
                callbacks.append(epoch_end_sts_evaluator(encoder, dev, DEV_NAME, env.note))
            callbacks += [
                zero_loss_warning(),
                non_finite_loss_error(),
                keras.callbacks.CSVLogger(str(log)),
                # Serves each epoch's batches as a plain run does (from the seed and
                # the epoch number); the backup is removed when the stage ends.
                ResumableTraining(backup_dir / f"stage{stage}", setup.batches),
            ]
            made = rows_made(setup.dataset, dataset, data_format)
            env.note(f"stage {stage}: {loss} on {made}: "
                     f"{epochs} epoch(s) x {len(setup.batches)} steps")
            with to_stderr():
                setup.model.fit(setup.batches, epochs=epochs, callbacks=callbacks, verbose=1,
                                shuffle=False)
            if rows:
                stage_starts.append(len(rows) + 1)
            for row in reporting.history_rows(reporting.read_epoch_log(log),
                                              percent_suffixes=percent):
                rows.append({"epoch": len(rows) + 1, "stage": stage, "stage_loss": loss,
                             **{k: v for k, v in row.items() if k != "epoch"}})
            stages.append({"stage": stage, "train": dataset.source, "format": data_format,
                           "loss": loss, "rows": len(setup.dataset), "epochs": epochs,
                           "batches_per_epoch": len(setup.batches)})
        train_seconds = time.time() - start

    encoder = saved_encoder(encoder, directory, config)  # scored as saved
    check_finite_embeddings(encoder, [dataset for dataset, _, _ in tasks])
    if dev is not None:
        results["dev"] = evaluate_sts(encoder, dev, note=prefixed(env.note, "dev"))
    if test is not None:
        results["test"] = evaluate_sts(encoder, test, note=prefixed(env.note, "test"))
    results["stages"] = stages
    reporting.write_metrics(directory, rows)
    reporting.plot_training(
        directory / reporting.PLOT_FILE, rows,
        f"{DEV_NAME}_spearman" if dev is not None else None,
        initial_spearman=results["dev_before_training"]["spearman"] if dev is not None else None,
        stage_starts=stage_starts,
    )
    reporting.write_results(directory, results)
    env.note(f"trained {len(stages)} stages in {train_seconds:.0f} s")
    return results
