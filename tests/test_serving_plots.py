"""The serving figures' script (validation/serving_figures.py) and sim.apps.serving.plots on a
tiny model: every figure is drawn, and the Pareto plot marks exactly the non-dominated
SLO-meeting deployments."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from script_import import load_script

from sim.apps.serving import LengthDist

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def figs():
    mod = load_script(ROOT / "validation" / "serving_figures.py")
    return mod


@pytest.fixture(scope="module")
def runner(figs):
    return figs.Runner("npu_128x128", "tiny", num_requests=40, seed=1, prompt=LengthDist("uniform", low=32, high=400),
                       output=LengthDist("uniform", low=4, high=80), cache_dir=False)


def test_script_draws_every_figure(figs, runner, tmp_path):
    cdf = figs.cdf_figure(runner, tmp_path, rate=2000.0)
    sweep = figs.sweep_figure(runner, tmp_path, rates=[500.0, 4000.0])
    tl = figs.timeline_figure(runner, tmp_path, rate=4000.0, kv_capacity_tokens=1024)
    par = figs.pareto_figure(runner, tmp_path, rate=2000.0, grid={"replicas": [1, 2], "token_budget": [128, 512]},
                             slos={"ttft": 5e-3, "tpot": 1e-3})
    for name in ("latency_cdf", "throughput_latency", "timeline", "pareto"):
        assert (tmp_path / f"serving_{name}.png").stat().st_size > 5000, name
    assert set(cdf) == {"rate_per_s", "continuous", "chunked_prefill"}
    assert cdf["continuous"]["ttft_p99_ms"] >= cdf["continuous"]["ttft_p50_ms"] > 0
    assert [p["rate_per_s"] for p in sweep["chunked_prefill"]] == [500.0, 4000.0]
    assert tl["kv_utilisation_max"] > 0.9       # the capped cache saturates
    assert len(par["deployments"]) == 4
    assert any(d["on_front"] for d in par["deployments"])
    assert all(d["meets_slo"] for d in par["deployments"] if d["on_front"])


def test_latency_cdf_keeps_the_single_result_call(runner, tmp_path):
    from sim.apps.serving import plots

    p = plots.latency_cdf(runner.run("continuous", 1000.0), tmp_path / "one.png")
    assert p.stat().st_size > 5000


def test_pareto_marks_exactly_the_non_dominated_points(tmp_path, monkeypatch):
    import matplotlib.figure

    from sim.apps.serving import plots

    df = pd.DataFrame({
        "replicas":        [1, 1, 2, 2, 4, 4, 8],
        "token_budget":    [256, 512, 256, 512, 256, 512, 256],
        "tokens_per_s_per_user":        [10.0, 20.0, 15.0, 30.0, 25.0, 30.0, np.nan],
        "output_tokens_per_s_per_chip": [100.0, 80.0, 70.0, 40.0, 200.0, 30.0, np.nan],
        "meets_slo":       [True, True, True, True, False, True, False],
    }, index=list("ABCDEFG"))
    # A, B, D: no SLO-meeting point is as good in both; C is beaten by B, F by D (same x, fewer
    # tokens/chip); E would beat them all but misses the SLOs; G did not run
    assert plots.pareto_rows(df) == ["A", "B", "D"]

    drawn = []
    save = matplotlib.figure.Figure.savefig

    def spy(fig, *a, **kw):
        drawn.append(fig)
        return save(fig, *a, **kw)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    p = plots.pareto(df, tmp_path / "pareto.png")
    assert p.stat().st_size > 5000
    (ax,) = drawn[0].axes
    (front,) = [ln for ln in ax.lines if ln.get_gid() == "pareto_front"]
    assert list(front.get_xdata()) == [10.0, 20.0, 30.0]
    assert list(front.get_ydata()) == [100.0, 80.0, 40.0]
    filled = sum(len(c.get_offsets()) for c in ax.collections if c.get_facecolors()[:, :3].tolist() != [[1, 1, 1]])
    assert filled == 5                          # A, B, C, D, F meet the SLOs; E hollow; G not drawn
