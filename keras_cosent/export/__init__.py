"""keras_cosent.export: SavedModel export for TF Serving, its op audit, and
sentence-transformers folders.

- `export_saved_model(encoder_or_path, base_dir, ...)` writes `<base_dir>/<version>/`
  with the `serving_default` (sentences), `encode_tokens` (token ids) and
  `similarity` signatures, from any Keras backend.
- `audit_saved_model(export_dir)` / `format_audit(report)` list the ops each
  signature needs and which TensorFlow Text version the string signatures need.
- `probe_saved_model(export_dir)` loads the SavedModel as a server would and runs
  each signature on a probe batch.
- `export_sentence_transformers(encoder_or_path, directory)` writes a BERT encoder
  as a sentence-transformers / Hugging Face folder.

TensorFlow is imported lazily, inside these functions: importing this package
costs nothing on the JAX and PyTorch backends.
"""

from keras_cosent.export.op_audit import audit_saved_model
from keras_cosent.export.op_audit import format_audit
from keras_cosent.export.saved_model_export import export_saved_model
from keras_cosent.export.sentence_transformers_export import export_sentence_transformers
from keras_cosent.export.serving_probe import probe_saved_model

__all__ = [
    "audit_saved_model",
    "format_audit",
    "export_saved_model",
    "export_sentence_transformers",
    "probe_saved_model",
]
