"""Import a project script by its path: the fit and figure scripts under validation/ are
files to run, not modules of a package, and several tests check what they compute."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def load_script(path) -> ModuleType:
    """The Python file at ``path`` as a module (named after the file), executed once per call."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
