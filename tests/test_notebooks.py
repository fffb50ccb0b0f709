"""The notebooks in notebooks/ run top to bottom (nbclient), render tables and figures, write only
to the folder the user chose, and use only sim's public API (the names in ``sim.__all__``)."""
from __future__ import annotations

import ast
import json
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: what a notebook may import besides sim: the standard library bits they use, and the libraries a
#: notebook user has anyway
ALLOWED_IMPORTS = {"sys", "os", "pathlib", "tempfile", "IPython.display", "numpy", "pandas", "matplotlib",
                   "matplotlib.pyplot"}


def _code(nb_path: Path) -> list[str]:
    nb = json.loads(nb_path.read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def private_uses(source: str) -> list[str]:
    """Every import or attribute use in ``source`` that reaches past sim's public API: an import of
    any sim module but ``sim`` and ``sim.plot``, a ``from sim import`` or ``sim.NAME`` of a name not
    in ``sim.__all__``, a ``sim.plot.NAME`` not in ``sim.plot.__all__``, or an import of anything
    but sim and :data:`ALLOWED_IMPORTS`."""
    import sim
    import sim.plot

    public = {"sim": set(sim.__all__), "sim.plot": set(sim.plot.__all__)}
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "sim":
                    if a.name not in public:
                        bad.append(f"import {a.name}")
                elif a.name not in ALLOWED_IMPORTS:
                    bad.append(f"import {a.name}")
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if mod.split(".")[0] == "sim":
                bad += [f"from {mod} import {a.name}" for a in node.names
                        if mod not in public or a.name not in public[mod]]
            elif mod not in ALLOWED_IMPORTS:
                bad.append(f"from {mod} import ...")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sim":
            if node.attr not in public["sim"]:
                bad.append(f"sim.{node.attr}")
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
              and isinstance(node.value.value, ast.Name) and node.value.value.id == "sim"
              and node.value.attr == "plot" and node.attr not in public["sim.plot"]):
            bad.append(f"sim.plot.{node.attr}")
    return bad


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_use_only_the_public_api(nb_path):
    bad = [b for src in _code(nb_path) for b in private_uses(src)]
    assert not bad, f"{nb_path.name} reaches past sim's public API (sim.__all__): {bad}"
    assert not any("sim.__file__" in src for src in _code(nb_path))


@pytest.mark.parametrize("source, found", [
    ("import sim.apps.plotting as plotting", ["import sim.apps.plotting"]),
    ("from sim.apps.sweep import run_sweep", ["from sim.apps.sweep import run_sweep"]),
    ("from sim import _private", ["from sim import _private"]),
    ("import sim\nsim.apps.sweep.sweep({})", ["sim.apps"]),
    ("import sim\nsim.plot._plotting.roofline", ["sim.plot._plotting"]),
    ("import sim.model.cost.energy as E", ["import sim.model.cost.energy"]),
    ("import scipy", ["import scipy"]),
    ("import sim\nfrom sim import plot\nimport sim.plot\nsim.pareto_front\nsim.plot.heatmap\nimport numpy", []),
])
def test_the_public_api_check_catches_private_uses(source, found):
    assert private_uses(source) == found


def test_every_public_name_is_documented():
    import sim
    import sim.plot

    for mod in (sim, sim.plot):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if callable(obj):
                assert (obj.__doc__ or "").strip(), f"{mod.__name__}.{name} has no docstring"


@pytest.mark.parametrize("name", ["explore_chip", "sweep_pareto"])
def test_notebook_runs(name, monkeypatch, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("SIM_NOTEBOOK_OUT", str(tmp_path / "figs"))  # the user's folder, not the package's
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT / "notebooks")}})
    before = {p for p in ROOT.joinpath("notebooks").rglob("*")}
    t0 = time.monotonic()
    client.execute()
    elapsed = time.monotonic() - t0
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any("<table" in h for h in html), "results should render as HTML tables"
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2, "figures should be displayed"
    assert elapsed < 90, f"{name} took {elapsed:.0f} s"
    assert list((tmp_path / "figs").glob("*.png")), "figures are written to the folder the user chose"
    assert {p for p in ROOT.joinpath("notebooks").rglob("*")} == before, "nothing is written next to the notebooks"
    if name == "sweep_pareto":  # the sweep's results store too
        assert (tmp_path / "figs" / "notebook-sweep" / "results.parquet").is_file()
        assert (tmp_path / "figs" / "notebook-sweep.csv").is_file()
    sources = "".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "sim.__file__" not in sources
