"""Speculative decoding with the draft model on chips of its own (``draft_chip``): the
iteration is the target's verification plus the draft's passes plus the hops between the
chips, the draft's memory leaves the target's KV cache, a faster draft chip never slows a
step, the chips and peaks of the summary count the draft's, and bad input names the option."""
from __future__ import annotations

import numpy as np
import pytest

from sim.apps.serving import Request, serve
from sim.errors import ConfigError, WorkloadError
from sim.spec.registry import load_chip

CHIP, MODEL, DRAFT = "npu_128x128", "tiny", "tiny"
HOP_S = 1e-3        # far above any tiny iteration, so a hop shows plainly


@pytest.fixture(scope="module")
def chip():
    return load_chip(CHIP)


def _one_request(chip, **kw):
    """One request alone: its iterations are one prefill, then decode steps of batch 1."""
    reqs = [Request(0, 0.0, 64, 40)]
    return serve(chip, MODEL, reqs, speculative_k=3, speculative_alpha=0.6, draft_model=DRAFT, cache_dir=False,
                 seed=3, **kw)


def test_own_chip_adds_exactly_the_hops(chip):
    """The draft on a chip of the same kind, at the same parallelism (1), is priced by the same
    grid as a draft sharing the target's chip; so each decode step differs by exactly two hops
    and the prefill by one, and the energy per iteration is the same."""
    shared = _one_request(chip)
    own = _one_request(chip, draft_chip=chip, draft_link_latency_s=HOP_S)
    a, b = shared.iterations, own.iterations
    assert len(a) == len(b)                 # the same seeded acceptance draws: the same steps
    dt_a = (a["end_s"] - a["start_s"]).to_numpy()
    dt_b = (b["end_s"] - b["start_s"]).to_numpy()
    hops = np.where(b["decode_seqs"] > 0, 2, 1)
    np.testing.assert_allclose(dt_b - dt_a, hops * HOP_S, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(b["energy_j"], a["energy_j"], rtol=1e-12)
    assert (a["prefill_seqs"] > 0).sum() == 1 and (b["decode_seqs"] > 0).sum() == len(b) - 1
    # the summary counts the draft's chip
    assert shared.summary["chips"] == 1 and own.summary["chips"] == 2
    assert own.summary["draft_chip"] == chip.name and own.summary["draft_chips_per_replica"] == 1
    s = own.summary
    assert s["output_tokens_per_s_per_chip"] == pytest.approx(s["output_tokens_per_s"] / 2)


def test_draft_memory_leaves_the_target_cache(chip):
    """With the draft beside the target, its weights and its KV share the target's memory; on
    chips of its own they do not, so the target's cache holds more tokens (closed form: the
    target's free memory over its KV bytes per token)."""
    from sim.apps.inference import run_precision
    from sim.model.workload.llm import weight_bytes
    from sim.model.workload.models import load_model_spec

    shared = _one_request(chip)
    own = _one_request(chip, draft_chip=chip)
    spec = load_model_spec(MODEL)
    prec = run_precision(chip, "bf16")
    free = chip.memory.dram.capacity_bytes * 0.9
    per_tok = spec.kv_bytes_per_token(prec.kv_format)
    w = weight_bytes(spec, prec)
    blocks_shared = int((free - 2 * w) // (2 * per_tok * 16))
    blocks_own = int((free - w) // (per_tok * 16))     # the draft's chip holds the same model: the same bound
    assert shared.summary["kv_blocks_per_replica"] == blocks_shared
    assert own.summary["kv_blocks_per_replica"] == blocks_own > blocks_shared


def test_a_faster_draft_chip_never_slows_a_step(chip):
    """The draft's decode passes are memory bound at batch 1: a draft chip with twice the DRAM
    pin rate makes each step no slower, and the end-to-end time shorter."""
    dram = chip.memory.dram
    pins = f"memory.levels.{dram.name}.data_rate_gbps_per_pin"
    fast = load_chip(CHIP, overrides=[f"{pins}={2 * dram.data_rate_gbps_per_pin}"])
    assert fast.memory.dram.peak_bytes_per_s > 1.9 * dram.peak_bytes_per_s
    slow = _one_request(chip, draft_chip=chip, draft_link_latency_s=0.0)
    quick = _one_request(chip, draft_chip=fast, draft_link_latency_s=0.0)
    dt_slow = (slow.iterations["end_s"] - slow.iterations["start_s"]).to_numpy()
    dt_quick = (quick.iterations["end_s"] - quick.iterations["start_s"]).to_numpy()
    assert (dt_quick <= dt_slow * (1 + 1e-12)).all()
    assert quick.summary["e2e_p50_s"] < slow.summary["e2e_p50_s"]


def test_mfu_counts_every_chips_peak(chip):
    """MFU and MBU divide by the peaks of all chips, the draft's included."""
    own = _one_request(chip, draft_chip=chip)
    s, its = own.summary, own.iterations
    span = s["makespan_s"]
    peak = chip.dtype_peak_flops("bf16") * 2
    assert s["mfu"] == pytest.approx(its["flops"].sum() / span / peak, rel=1e-9)
    assert s["mbu"] == pytest.approx(its["dram_bytes"].sum() / span / (chip.memory.dram.peak_bytes_per_s * 2),
                                     rel=1e-9)


def test_bad_draft_placement_is_refused(chip, tmp_path, capsys):
    with pytest.raises(WorkloadError, match="draft_chip.*give draft_model"):
        serve(chip, MODEL, [Request(0, 0.0, 8, 4)], draft_chip=chip, cache_dir=False)
    with pytest.raises(WorkloadError, match="draft_tensor_parallel"):
        serve(chip, MODEL, [Request(0, 0.0, 8, 4)], draft_model=DRAFT, draft_tensor_parallel=2, cache_dir=False)
    with pytest.raises(WorkloadError, match="draft_chip: unknown chip"):
        serve(chip, MODEL, [Request(0, 0.0, 8, 4)], draft_model=DRAFT, draft_chip="npu_nonesuch", cache_dir=False)
    with pytest.raises(WorkloadError, match="draft_link_latency_s"):
        serve(chip, MODEL, [Request(0, 0.0, 8, 4)], draft_model=DRAFT, draft_chip=chip, draft_link_latency_s=-1.0,
              cache_dir=False)
    bad = tmp_path / "bad_chip.yaml"
    bad.write_text("name: bad\nclock_mhz: -5\n")
    with pytest.raises(ConfigError):
        serve(chip, MODEL, [Request(0, 0.0, 8, 4)], draft_model=DRAFT, draft_chip=str(bad), cache_dir=False)

    from sim.cli import main

    base = ["serve", CHIP, MODEL, "--num-requests", "3", "--rate", "50", "--prompt", "32", "--output", "8",
            "--no-progress"]
    assert main(base + ["--draft-chip", CHIP]) == 2
    assert main(base + ["--draft-model", DRAFT, "--draft-chip", "npu_nonesuch"]) == 2
    assert main(base + ["--draft-model", DRAFT, "--draft-tensor-parallel", "2"]) == 2
    err = capsys.readouterr().err
    assert "give --draft-model too" in err and "--draft-chip: unknown chip" in err and "give --draft-chip too" in err
    assert "Traceback" not in err
    assert main(base + ["--speculative-k", "2", "--draft-model", DRAFT, "--draft-chip", CHIP, "--json"]) == 0
