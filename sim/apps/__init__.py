"""Applications over the model layer."""
