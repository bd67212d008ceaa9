"""The `--output` directory of `train`: refusing a different run, and writing atomically.

A run directory is complete or absent. `train` writes everything into a hidden
staging directory beside `--output` and renames it into place at the very end, so
an interrupted or failed run leaves nothing half-written. `config.json` records the
run's configuration; a directory whose stored configuration differs from the new
one is refused rather than overwritten, and an identical one is reused.

Training state is backed up after every epoch into a second hidden directory
beside `--output` (`.NAME.resume`), which survives an interruption: `train
--resume` continues from it, `--overwrite` discards it, and a plain `train`
refuses to start over it. It is removed once the run is published.
"""

import contextlib
import json
import os
import pathlib
import shutil
import tempfile

from recipes.errors import CliError

CONFIG_FILE = "config.json"
BACKUP_SUFFIX = ".resume"
# Where a run lives is not part of what it is: a moved run is the same run.
IGNORED_KEYS = ("output",)


def config_differences(stored, new):
    """Names of the configuration keys whose values differ, sorted."""
    keys = (set(stored) | set(new)) - set(IGNORED_KEYS)
    return sorted(key for key in keys if stored.get(key) != new.get(key))


class RunDirectory:
    """The `--output` directory of one `train` invocation.

    Args:
        path: the directory the run should end up in.
        overwrite: replace the keras-cosent run already there, if any.
    """

    def __init__(self, path, overwrite=False):
        self.path = pathlib.Path(path)
        self.overwrite = overwrite
        # Whether the run replaces the one published at `path`: --overwrite, or the
        # resumed continuation of an interrupted --overwrite run.
        self.replaces = overwrite
        self._made_parents = []  # folders above the run that `backup` creates

    def _is_empty(self):
        return self.path.is_dir() and not any(self.path.iterdir())

    def stored_config(self):
        """The `config` section of the run's `config.json` in `path`."""
        config_path = self.path / CONFIG_FILE
        try:
            with open(config_path, encoding="utf-8") as f:
                return json.load(f)["config"]
        except (ValueError, KeyError, TypeError):
            raise CliError(
                f"--output {self.path} holds an unreadable {CONFIG_FILE}; "
                "choose another directory or pass --overwrite"
            ) from None

    def check(self, config):
        """Returns "new" or "same" (an identical run is there); raises for anything else.

        `--overwrite` replaces only a directory that holds a keras-cosent run, so
        that a mistyped `--output` can never delete unrelated files.
        """
        if not self.path.exists():
            return "new"
        if not self.path.is_dir():
            raise CliError(f"--output {self.path} exists and is not a directory")
        if self._is_empty():
            return "new"
        if not (self.path / CONFIG_FILE).is_file():
            raise CliError(
                f"--output {self.path} is not empty and holds no keras-cosent run "
                f"(no {CONFIG_FILE}); choose another directory"
            )
        if self.replaces:
            return "new"
        differences = config_differences(self.stored_config(), config)
        if differences:
            raise CliError(
                f"--output {self.path} already holds a different run (it differs in "
                f"{', '.join(differences)}); choose another --output or pass --overwrite"
            )
        return "same"

    @property
    def backup_path(self):
        """Where the interrupted run's training state lives: `.NAME.resume` beside `path`."""
        return self.path.absolute().parent / f".{self.path.name}{BACKUP_SUFFIX}"

    def backup(self, config, resume=False):
        """Prepares the backup directory for a run of `config`; returns `(path, resumed)`.

        `resumed` is True when `path` holds the state of an interrupted run of
        the same configuration and `resume` was asked for. An interrupted run's
        state is never silently discarded: without `resume` it is refused
        unless `overwrite`, and with it a different configuration is refused.
        """
        path = self.backup_path
        self._made_parents = [folder for folder in reversed(path.parent.parents)
                              if not folder.exists()]
        if not path.parent.exists():
            self._made_parents.append(path.parent)
        if path.exists():
            stored = None
            try:
                with open(path / CONFIG_FILE, encoding="utf-8") as f:
                    stored = json.load(f)["config"]
            except (OSError, ValueError, KeyError, TypeError):
                pass
            if self.overwrite or (stored is None and not resume):
                shutil.rmtree(path)
                # The discarded run's staging folder too, which its kill left behind.
                self._remove_stale_staging()
            elif stored is None:
                raise CliError(
                    f"--resume: {path} holds no readable {CONFIG_FILE}; pass --overwrite "
                    "to start again"
                )
            elif not resume:
                if stored.get("staged"):
                    # Its stages are separate fits: nothing there to --resume.
                    raise CliError(
                        f"--output {self.path} has an interrupted --staged run (its state is "
                        f"in {path}), which cannot be resumed; pass --overwrite to start again"
                    )
                raise CliError(
                    f"--output {self.path} has an interrupted run (its state is in {path}); "
                    "pass --resume to continue it or --overwrite to start again"
                )
            else:
                differences = config_differences(stored, config)
                if differences:
                    raise CliError(
                        f"--resume: the interrupted run in {path} differs in "
                        f"{', '.join(differences)}; pass the same options or --overwrite "
                        "to start again"
                    )
                self._remove_stale_staging()
                return path, True
        path.mkdir(parents=True)
        partial = path / f"{CONFIG_FILE}.partial"
        with open(partial, "w", encoding="utf-8") as f:
            json.dump({"config": config, "replaces": self.replaces}, f, indent=2)
        os.replace(partial, path / CONFIG_FILE)
        return path, False

    def continue_replacing(self, config):
        """Before `check`, for --resume: when the backup holds an interrupted run of
        `config` that was started with --overwrite, its continuation replaces the
        run at `path` as it would have (the same command plus --resume continues
        it, where the published run would otherwise refuse it as a different run)."""
        try:
            with open(self.backup_path / CONFIG_FILE, encoding="utf-8") as f:
                stored = json.load(f)
        except (OSError, ValueError):
            return
        if (isinstance(stored, dict) and stored.get("replaces") is True
                and isinstance(stored.get("config"), dict)
                and not config_differences(stored["config"], config)):
            self.replaces = True

    def _remove_stale_staging(self):
        # A killed run cannot remove its staging directory; the resumed run
        # replaces it.
        for stale in self.path.absolute().parent.glob(f".{self.path.name}.partial-*"):
            shutil.rmtree(stale, ignore_errors=True)

    def has_saved_epoch(self):
        """Whether the backup holds the state of at least one finished epoch."""
        # The metadata is written after the weights: weights alone are a first save
        # cut short (ResumableTraining discards them), not a finished epoch.
        return any((self.backup_path / f"latest.weights.h5{suffix}").is_file()
                   and (self.backup_path / f"training_metadata.json{suffix}").is_file()
                   for suffix in ("", ".bkp"))

    def remove_backup(self):
        shutil.rmtree(self.backup_path, ignore_errors=True)
        if not self.path.exists():
            # A run that failed before it was published: the folders made for it
            # go too, so that a mistyped --output leaves nothing behind.
            for folder in reversed(self._made_parents):
                try:
                    folder.rmdir()
                except OSError:  # not empty (someone else's files): kept
                    break

    @contextlib.contextmanager
    def staging(self):
        """Yields an empty directory to write the run into; publishes it on success."""
        parent = self.path.absolute().parent
        parent.mkdir(parents=True, exist_ok=True)
        staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{self.path.name}.partial-", dir=parent))
        try:
            # mkdtemp makes the directory private (0700); a run is an ordinary folder.
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(staging, 0o777 & ~umask)
            yield staging
            self._publish(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def _publish(self, staging):
        previous = None
        if self.path.exists():
            if self._is_empty():
                self.path.rmdir()
            elif self.replaces:
                previous = pathlib.Path(tempfile.mkdtemp(
                    prefix=f".{self.path.name}.replaced-", dir=staging.parent))
                os.replace(self.path, previous / self.path.name)
            else:
                raise CliError(
                    f"--output {self.path} was created by someone else while training; "
                    "the new run was discarded"
                )
        os.replace(staging, self.path)
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)
