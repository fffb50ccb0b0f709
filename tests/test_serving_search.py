"""The deployment search (``sim.apps.serving.search``, ``sim serve --search``) over replicas,
tensor parallelism, the chunk budget and aggregated against disaggregated serving: one row per
distinct deployment, each the serve() of that deployment on the same requests, the chips it
uses, the SLO verdict, the ranking and the Pareto front recomputed independently."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sim.apps.serving import serve
from sim.apps.serving.search import parse_axis, search
from sim.apps.serving.workload import LengthDist, generate
from sim.errors import UnknownNameError, WorkloadError

CHIP, MODEL = "npu_128x128", "tiny"
SLOS = {"ttft": 0.1e-3, "tpot": 0.022e-3}     # tight enough to separate the deployments
GRID = {"replicas": [1, 2], "tensor_parallel": [1, 2], "token_budget": [128, 2048],
        "scheduler": ["chunked_prefill", "disaggregated"], "prefill_replicas": [1]}


@pytest.fixture(scope="module")
def chip():
    from sim.spec.registry import load_chip

    return load_chip(CHIP)


@pytest.fixture(scope="module")
def reqs():
    return generate(rate_per_s=3000.0, duration_s=0.1, prompt=LengthDist("uniform", low=64, high=400),
                    output=LengthDist("uniform", low=8, high=60), seed=5)


@pytest.fixture(scope="module")
def df(chip, reqs):
    return search(chip, MODEL, GRID, slos=SLOS, requests=reqs, cache_dir=False)


def test_one_row_per_distinct_deployment(df):
    # 2 x 2 x 2 aggregated, and as many disaggregated (prefill_replicas has one value)
    assert len(df) == 16
    agg = df[df["scheduler"] == "chunked_prefill"]
    assert agg["prefill_replicas"].isna().all()          # an axis only disaggregation reads is dropped
    failed = df[df["error"].notna()]
    # disaggregation needs a prefill and a decode pool: one replica cannot
    assert set(map(tuple, failed[["scheduler", "replicas"]].values)) == {("disaggregated", 1)}
    assert failed["error"].str.contains("needs >= 2 replicas").all()
    ran = df[df["error"].isna()]
    assert len(ran) == 12
    np.testing.assert_array_equal(ran["chips"], ran["replicas"] * ran["tensor_parallel"])


def test_rows_are_the_deployments_own_runs(chip, reqs, df):
    """A row is what serve() gives for that deployment on the same requests (so the axes
    reach the simulation: TP, budget and pools change the numbers)."""
    for _, row in df[df["error"].isna()].iloc[[0, -1]].iterrows():
        kw = {k: row[k] for k in GRID if row[k] == row[k]}
        kw = {k: int(v) if isinstance(v, (float, np.floating, np.integer)) else v for k, v in kw.items()}
        s = serve(chip, MODEL, reqs, slos=SLOS, cache_dir=False, **kw).summary
        assert row["tpot_p50_s"] == pytest.approx(s["tpot_p50_s"], rel=1e-12)
        assert row["output_tokens_per_s_per_chip"] == pytest.approx(s["output_tokens_per_s"] / s["chips"], rel=1e-12)
    assert df.loc[df["error"].isna(), "tpot_p50_s"].nunique() > 4


def test_verdict_ranking_and_front(df):
    ran = df[df["error"].isna()]
    meets = ran["stable"].astype(bool) & (ran["slo_attainment"] >= 0.9)
    assert (ran["meets_slo"] == meets).all()
    assert 0 < meets.sum() < len(ran)               # the SLOs separate deployments
    ok = ran[meets]
    # best goodput per chip first, among those meeting the SLOs
    assert df.iloc[0]["meets_slo"]
    assert df.iloc[0]["goodput_req_per_s_per_chip"] == pytest.approx(ok["goodput_req_per_s_per_chip"].max())
    # the Pareto front, recomputed by broadcasting: no other point at least as good in both and better in one
    x = ok["output_tokens_per_s_per_chip"].to_numpy()
    y = ok["tokens_per_s_per_user"].to_numpy()
    ge = (x[None, :] >= x[:, None]) & (y[None, :] >= y[:, None])
    gt = (x[None, :] > x[:, None]) | (y[None, :] > y[:, None])
    dominated = (ge & gt).any(axis=1)
    np.testing.assert_array_equal(ok["pareto"].to_numpy(), ~dominated)
    assert not df.loc[~df["meets_slo"], "pareto"].any()


def test_axes_parse_and_refuse(chip, reqs):
    assert parse_axis("tensor-parallel=1,2,4") == ("tensor_parallel", [1, 2, 4])
    assert parse_axis("scheduler=continuous,disaggregated") == ("scheduler", ["continuous", "disaggregated"])
    assert parse_axis("prefix_caching=true,false") == ("prefix_caching", [True, False])
    with pytest.raises(UnknownNameError, match="did you mean 'replicas'"):
        parse_axis("replica=1,2")
    with pytest.raises(WorkloadError, match="not a whole number"):
        parse_axis("replicas=1,x")
    with pytest.raises(WorkloadError, match="repeated"):
        parse_axis("replicas=1,1")
    with pytest.raises(WorkloadError, match="search axis replicas = 0"):
        search(chip, MODEL, {"replicas": [0, 1]}, requests=reqs, cache_dir=False)
    with pytest.raises(WorkloadError, match="more than the 4,096"):
        search(chip, MODEL, {"max_batch": list(range(1, 101)), "token_budget": list(range(1, 101))}, requests=reqs)
    with pytest.raises(WorkloadError, match="unknown scheduler 'contnuous'"):
        search(chip, MODEL, {"scheduler": ["contnuous"]}, requests=reqs, cache_dir=False)


def test_cli_search_writes_table_and_front(tmp_path, capsys):
    from sim.cli import main

    base = ["serve", CHIP, MODEL, "--rate", "3000", "--duration", "0.05", "--prompt", "uniform:64:400",
            "--output", "uniform:8:60", "--slo-ttft-ms", "0.5", "--no-progress"]
    rc = main(base + ["--search", "replicas=1,2", "--search", "scheduler=continuous,disaggregated",
                      "--out", str(tmp_path / "s")])
    assert rc == 0
    out = capsys.readouterr().out
    assert "4 deployments" in out and "not run (1)" in out     # one replica cannot be split in two pools
    assert (tmp_path / "s" / "search.csv").exists()
    assert (tmp_path / "s" / "pareto.png").stat().st_size > 5_000
    assert main(base + ["--search", "tensor_parallel=1,2", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["axes"] == {"tensor_parallel": [1, 2]} and len(obj["deployments"]) == 2
    assert main(base + ["--search", "replicas=1", "--search", "replicas=2"]) == 2
    assert main(base + ["--search", "replicas=1", "--min-attainment", "1.5"]) == 2
    err = capsys.readouterr().err
    assert "given twice" in err and "--min-attainment" in err and "Traceback" not in err
