"""Plots: each figure is written, titled, and has axis labels with units; `sim plot`."""
from __future__ import annotations

import json
import textwrap

import pytest

import sim.apps.plotting as P
from sim.cli import main
from sim.spec.registry import load_chip
from sim.apps.energy_report import llm_energy_components_j
from sim.apps.inference import run_llm
from sim.ir.results import _json_default

RUN = dict(phase="decode", batch=2, context_len=64)


@pytest.fixture
def figs(monkeypatch):
    """Record (title, [(xlabel, ylabel), ...]) of every figure saved."""
    seen = []
    orig = P._save

    def spy(fig, path):
        axes = [a for a in fig.axes if a.get_label() != "<colorbar>"]
        titles = [a.get_title() for a in axes] + [fig._suptitle.get_text() if fig._suptitle else ""]
        seen.append({"titles": [t for t in titles if t], "labels": [(a.get_xlabel(), a.get_ylabel()) for a in axes]})
        out = orig(fig, path)
        assert out.stat().st_size > 5000
        return out

    # every figure module saves through plotting.style._save, imported into it
    from sim.apps.plotting import run_figures, sweep_figures, validation_figures

    for mod in (run_figures, sweep_figures, validation_figures):
        monkeypatch.setattr(mod, "_save", spy)
    return seen


@pytest.fixture(scope="module")
def run():
    chip = load_chip("npu_128x128")
    res = run_llm(chip, "tiny", **RUN)
    return chip, res, llm_energy_components_j(chip, "tiny", res, **RUN)


@pytest.fixture(scope="module")
def sweep_df(tmp_path_factory):
    from sim.apps.sweep import run_sweep

    d = tmp_path_factory.mktemp("sw")
    spec = d / "s.yaml"
    spec.write_text(textwrap.dedent("""\
        name: plot-test
        chip: npu_128x128
        workloads: [{model: tiny, phase: decode, batch: 2, context_len: 64}]
        parameters:
          cores.arrays.0.rows: [64, 128]
          memory.levels.hbm.data_rate_gbps_per_pin: [3.2, 6.4, 9.6]
        metrics: [tokens_per_s, area_mm2, energy_per_token_j]
        """))
    df, _ = run_sweep(spec, out=d / "out", jobs=1, progress=False)
    return df, d / "out"


def test_label_for_units():
    assert P.label_for("tokens_per_s") == ("throughput (tokens/s)", 1.0)
    assert P.label_for("memory.levels.vmem.capacity_kib")[0] == "vmem capacity (KiB)"
    assert P.label_for("memory.levels.hbm.data_rate_gbps_per_pin")[0] == "hbm data rate (Gb/s per pin)"
    assert P.label_for("cores.arrays.0.rows")[0] == "array rows"
    assert P.label_for("energy_per_token_j.hbm") == ("energy per token, hbm (mJ)", 1e3)


def test_roofline_and_breakdown(tmp_path, run, figs):
    chip, res, comps = run
    P.roofline(res["ops"], chip, tmp_path / "roof.png")
    P.breakdown(res, tmp_path / "bd.png", components_j=comps)
    roof, bd = figs
    assert roof["titles"] and "FLOP/s" in roof["labels"][0][1] and "FLOP per DRAM byte" in roof["labels"][0][0]
    assert len(bd["labels"]) == 3 and "tiny decode" in bd["titles"][-1]
    assert "(µs)" in bd["labels"][0][0] or "(ms)" in bd["labels"][0][0]
    assert all("(" in xl for xl, _ in bd["labels"])  # every x axis has a unit


def test_pareto_and_heatmap(tmp_path, sweep_df, figs):
    df, _ = sweep_df
    P.pareto(df, tmp_path / "p.png")
    P.heatmap(df, tmp_path / "h.png", x="cores.arrays.0.rows", y="memory.levels.hbm.data_rate_gbps_per_pin")
    par, heat = figs
    assert par["labels"][0] == ("chip area (mm²)  (lower is better)", "throughput (tokens/s)  (higher is better)")
    assert "Pareto front" in par["titles"][0]
    assert heat["labels"][0] == ("array rows", "hbm data rate (Gb/s per pin)")
    with pytest.raises(KeyError, match="no column 'nope'"):
        P.pareto(df, tmp_path / "x.png", x="nope")


def test_cli_plot(tmp_path, run, sweep_df, capsys):
    chip, res, _ = run
    js = tmp_path / "run.json"
    js.write_text(json.dumps(res, default=_json_default))
    _, out = sweep_df
    for args in (["roofline", str(js)], ["breakdown", str(js)], ["pareto", str(out)],
                 ["heatmap", str(out), "--z", "energy_per_token_j"],
                 ["pareto", str(out / "results.csv"), str(out / "results.parquet")],
                 ["heatmap", str(out), "--where", "cores.arrays.0.rows=64", "--x", "cores.arrays.0.rows",
                  "--y", "memory.levels.hbm.data_rate_gbps_per_pin"]):
        png = tmp_path / f"{args[0]}-{len(args)}.png"
        assert main(["plot", *args, "--out", str(png)]) == 0, capsys.readouterr().err
        assert png.stat().st_size > 5000
    assert main(["plot", "pareto", str(tmp_path / "missing")]) == 2
    assert "no such results" in capsys.readouterr().err
    assert main(["plot", "breakdown", str(out / "results.csv")]) == 2


def test_default_heatmap_axes_skip_zipped_parameters():
    """A zip of rows and vmem varies them together (3 of 9 cells); the default heat map takes
    a pair that fills its grid (the campaign's default left 6 of 9 cells blank)."""
    import pandas as pd

    rows = [{"cores.arrays.0.rows": r, "memory.levels.vmem.capacity_kib": v, "clock_mhz": c, "tokens_per_s": 1.0}
            for r, v in ((64, 1024), (128, 2048), (256, 4096)) for c in (900, 1050)]
    df = pd.DataFrame(rows)
    df.attrs["parameters"] = ["cores.arrays.0.rows", "memory.levels.vmem.capacity_kib", "clock_mhz"]
    x, y = P.heatmap_axes(df)
    assert {x, y} == {"cores.arrays.0.rows", "clock_mhz"}
    full = df[[x, y]].drop_duplicates()
    assert len(full) == df[x].nunique() * df[y].nunique()


def test_pareto_axis_of_a_narrow_spread_starts_at_zero(tmp_path, monkeypatch):
    """Energy per token varying by 8 % must not fill the axis (the campaign read it as a
    factor of several); a wide spread keeps the data's own limits."""
    import pandas as pd

    figs = []
    real_save = P._save
    from sim.apps.plotting import sweep_figures

    monkeypatch.setattr(sweep_figures, "_save",
                        lambda fig, path: (figs.append(fig.axes[0].get_ylim()), real_save(fig, path))[1])
    df = pd.DataFrame({"area_mm2": [100.0, 150.0, 200.0, 300.0], "energy_per_token_j": [1.00, 0.97, 0.94, 0.92],
                       "cores.count": [1, 2, 3, 4], "error": [None] * 4})
    df.attrs["parameters"] = ["cores.count"]
    P.pareto(df, tmp_path / "narrow.png", x="area_mm2", y="energy_per_token_j")
    assert figs[-1][0] == 0.0
    P.pareto(df.assign(energy_per_token_j=[1.0, 0.7, 0.5, 0.4]), tmp_path / "wide.png", x="area_mm2",
             y="energy_per_token_j")
    assert figs[-1][0] > 0.0


def _spy_figures(monkeypatch, module):
    """The matplotlib figures ``module`` saves (kept open for inspection)."""
    kept = []
    orig = module._save

    def spy(fig, path):
        kept.append(fig)
        return orig(fig, path)

    monkeypatch.setattr(module, "_save", spy)
    return kept


def test_validation_scatter_puts_bands_under_points_encodes_format_and_states_the_totals(tmp_path, monkeypatch):
    """Issue 14: the bands were drawn over the points, the number format was not encoded and
    the overall median / p90 were not shown."""
    import pandas as pd

    from sim.apps.plotting import validation_figures as V

    kept = _spy_figures(monkeypatch, V)
    df = pd.DataFrame({"kind": ["gemm", "gemm", "attention", "copy"], "dtype": ["bf16", "fp8", "bf16", "uint8"],
                       "measured_ms": [1.0, 2.0, 0.5, 0.1], "predicted_ms": [1.1, 1.8, 0.5, 0.13],
                       "error_pct": [10.0, -10.0, 0.0, 30.0]})
    V.validation_scatter(df, tmp_path / "s.png", "cases")
    ax = kept[0].axes[0]
    bands = [c for c in ax.collections if c.get_label() in ("±10 %", "±25 %")]
    points = [c for c in ax.collections if len(c.get_offsets()) and c not in bands]
    assert len(bands) == 2 and points
    assert max(b.get_zorder() for b in bands) < min(p.get_zorder() for p in points)
    # one marker per number format: bf16 / fp8 / uint8 points have three different paths
    assert len({p.get_paths()[0].vertices.tobytes() for p in points}) == 3
    text = " ".join(t.get_text() for t in ax.texts)
    err = df["error_pct"].abs()
    assert f"median |err| {err.median():.1f} %" in text and f"p90 {err.quantile(0.9):.1f} %" in text


def test_roofline_ridge_labels_sit_above_the_op_markers(tmp_path, run, monkeypatch):
    """Issue 14: ridge labels were hidden under the op markers."""
    from sim.apps.plotting import run_figures as R

    chip, res, _ = run
    kept = _spy_figures(monkeypatch, R)
    R.roofline(res["ops"], chip, tmp_path / "roof.png")
    ax = kept[0].axes[0]
    ridges = [t for t in ax.texts if t.get_text().startswith("ridge")]
    markers = [c for c in ax.collections if len(c.get_offsets())]
    assert ridges and markers
    assert min(t.get_zorder() for t in ridges) > max(c.get_zorder() for c in markers)
    assert all(t.get_bbox_patch() is not None for t in ridges)  # on a white ground
