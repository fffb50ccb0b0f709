"""Build hook: ship the repository's data folders inside the package.

``arch_configs/``, ``dataflows/``, ``workloads/``, ``stacks/``, ``kernel_libraries/``, ``dram_technologies/`` and ``networks/`` stay at the top of the repository
(the design card's layout, and what a source checkout reads); a built wheel carries
copies under ``sim/data/<folder>`` so an installed simulator finds its chips, dataflows
and models without the repository (``sim.spec.catalog`` looks there first).  Everything else
about the build is in pyproject.toml.
"""
from pathlib import Path
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

DATA_FOLDERS = ("arch_configs", "dataflows", "workloads", "stacks", "kernel_libraries", "dram_technologies", "networks")


class BuildPyWithData(build_py):
    """build_py, then copy every YAML file of the data folders into ``sim/data/``."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the repository's folders directly
        root = Path(__file__).resolve().parent
        for folder in DATA_FOLDERS:
            target = Path(self.build_lib) / "sim" / "data" / folder
            target.mkdir(parents=True, exist_ok=True)
            for src in sorted((root / folder).glob("*.y*ml")):
                shutil.copy2(src, target / src.name)


setup(cmdclass={"build_py": BuildPyWithData})
