"""`keras-cosent check-serving`: what an exported SavedModel needs from TF Serving."""

import click

from recipes.context import pass_environment
from recipes.errors import CliError
from recipes.errors import one_line
from recipes.options import backend_option
from recipes.output_files import refuse_existing
from recipes.output_files import refuse_input
from recipes.output_files import refuse_unwritable
from recipes.output_files import write_json


@click.command(
    "check-serving", short_help="Audit an exported SavedModel for TF Serving."
)
@click.argument("export_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              show_default="none",
              help="Also write the full audit to this JSON file.")
@click.option("--overwrite", is_flag=True, default=False, show_default=True,
              help="Replace an existing --json file.")
@backend_option
@pass_environment
def check_serving(env, export_dir, json_path, overwrite):
    """Audit the SavedModel in EXPORT_DIR (one version, e.g. BASE_DIR/1).

    Lists each signature's inputs, outputs and op types, flags the ops that are
    not core TensorFlow (e.g. TensorFlow Text tokenisers) and the TensorFlow Text
    version a server needs for them; then loads the SavedModel as a server would
    and runs each signature on a probe batch (finite, unit-length embeddings),
    and fails when it cannot.
    """
    if overwrite and json_path is None:
        raise click.BadParameter("replaces an existing --json file; add --json FILE",
                                 param_hint="--overwrite")
    if json_path is not None:
        refuse_input(json_path, "--json", export_dir)
        refuse_existing(json_path, overwrite, "--json")
        refuse_unwritable(json_path, "--json")
    env.activate_backend()
    from keras_cosent.export import audit_saved_model
    from keras_cosent.export import format_audit

    try:
        report = audit_saved_model(export_dir)
    except ValueError as error:  # a corrupt saved_model.pb, or one TF Serving cannot serve
        raise CliError(one_line(error)) from None
    env.log(format_audit(report))
    from keras_cosent.export import probe_saved_model
    from keras_cosent.export.serving_probe import probe_problems

    report["probe"] = probe_saved_model(export_dir)
    problems = probe_problems(report["probe"])
    if not problems:
        env.log("")
        env.log(f"loaded the SavedModel and ran its {len(report['probe']['signatures'])} "
                "signatures on a probe batch: finite, unit-length embeddings")
    if json_path is not None:
        write_json(json_path, report)
        env.note(f"audit written to {json_path}")
    if problems:
        raise CliError(f"{export_dir}: " + "; ".join(problems))
