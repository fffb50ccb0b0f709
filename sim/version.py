"""The simulator's version (kept equal to pyproject.toml's; tests/test_layers.py checks it): its own
module so that every layer can read it without importing the public facade."""
__version__ = "0.1.0"
