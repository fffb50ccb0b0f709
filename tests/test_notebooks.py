"""The notebooks in notebooks/ run top to bottom (nbclient), render tables and figures."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["explore_chip", "sweep_pareto"])
def test_notebook_runs(name, monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("SIM_NOTEBOOK_OUT", str(tmp_path / "figs"))  # the user's folder, not the package's
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT / "notebooks")}})
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
    sources = "".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "sim.__file__" not in sources
