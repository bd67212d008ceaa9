"""The `--output` directory of `train`: refusing a different run, and writing atomically.

A run directory is complete or absent. `train` writes everything into a hidden
staging directory beside `--output` and renames it into place at the very end, so
an interrupted or failed run leaves nothing half-written. `config.json` records the
run's configuration; a directory whose stored configuration differs from the new
one is refused rather than overwritten, and an identical one is reused.
"""

import contextlib
import json
import os
import pathlib
import shutil
import tempfile

from recipes.errors import CliError

CONFIG_FILE = "config.json"
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
        if self.overwrite:
            return "new"
        differences = config_differences(self.stored_config(), config)
        if differences:
            raise CliError(
                f"--output {self.path} already holds a different run (it differs in "
                f"{', '.join(differences)}); choose another --output or pass --overwrite"
            )
        return "same"

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
            elif self.overwrite:
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
