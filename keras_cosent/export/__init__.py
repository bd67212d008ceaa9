"""keras_cosent.export: SavedModel export for TF Serving. Imports TensorFlow lazily."""
