"""Subprocess entry point: writes the serving SavedModel under the TensorFlow backend.

`keras_cosent.export.export_saved_model` runs this with KERAS_BACKEND=tensorflow
when the caller's backend is JAX or PyTorch:

    python -m keras_cosent.export._export_worker --encoder x.keras --output DIR [--max-length N] [--no-string-signatures] [--truncate-dim D]

It exits non-zero with the error on stderr; the caller re-raises it. A
`ValueError` (a `max_length` or `truncate_dim` the model does not allow) is also
written as one `ERROR_MARKER` line, which the caller re-raises as the same
`ValueError`, as the TensorFlow backend raises it in process.
"""

import argparse
import json
import sys

ERROR_MARKER = "keras-cosent-export-value-error: "


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--encoder", required=True, help="the encoder's .keras file")
    parser.add_argument("--output", required=True, help="directory to write the SavedModel to")
    parser.add_argument("--max-length", type=int, default=None, help="truncation length")
    parser.add_argument(
        "--no-string-signatures",
        action="store_true",
        help="export encode_tokens only (core TensorFlow ops, no TensorFlow Text)",
    )
    parser.add_argument("--truncate-dim", type=int, default=None,
                        help="serve the first D coordinates, re-normalised")
    args = parser.parse_args(argv)

    import keras

    if keras.backend.backend() != "tensorflow":
        sys.exit(
            "keras_cosent.export._export_worker needs KERAS_BACKEND=tensorflow; "
            f"the backend is {keras.backend.backend()!r}"
        )
    import keras_cosent  # noqa: F401  (registers the classes load_model needs)
    from keras_cosent.export.serving_graph import write_serving_saved_model

    encoder = keras.saving.load_model(args.encoder)
    try:
        write_serving_saved_model(
            encoder,
            args.output,
            max_length=args.max_length,
            string_signatures=not args.no_string_signatures,
            truncate_dim=args.truncate_dim,
        )
    except ValueError as error:
        print(ERROR_MARKER + json.dumps(str(error)), file=sys.stderr)
        raise


if __name__ == "__main__":
    main()
