"""Distinct ops simulated on several threads at once (sim.model.engine.simulate.simulate_ops):
the same answers as one thread, in any order; the thread count is the user's to set."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import sim
from sim.apps.iteration import run_trace
from sim.ir.ops import Gemm, VectorOp
from sim.model.engine import run as R
from sim.model.engine.lower import Options
from sim.model.engine.memo import Memo
from sim.model.engine.simulate import simulate_ops, threads, threads_limited
from sim.model.workload.iteration import Sequence
from sim.model.workload.llm import build_iteration
from sim.model.workload.models import load_model_spec

REPO = Path(__file__).resolve().parents[1]

_FIELDS = ("seconds", "cycles", "compute_cycles", "stall_cycles", "dram_read_bytes", "dram_write_bytes", "energy_pj")


@pytest.fixture
def cold(monkeypatch):
    """No run remembered in memory or on disk: every answer below is simulated."""
    monkeypatch.setenv("SIM_NO_CACHE", "1")
    R.clear_cache()
    yield
    R.clear_cache()


def _ops():
    return [(Gemm("qkv", m=512, n=1536, k=1024), Options()),
            (Gemm("up", m=256, n=4096, k=1024), Options()),
            (Gemm("down", m=256, n=1024, k=2048), Options()),
            (VectorOp("silu", "silu", elements=256 * 2048, ops_per_element=4.0, read_bytes=2 * 256 * 2048,
                      write_bytes=2 * 256 * 2048), Options()),
            (Gemm("qkv", m=512, n=1536, k=1024), Options()),   # a repeat: one simulation, one answer
            (Gemm("up", m=256, n=4096, k=1024), Options(dataflow="os"))]


def test_threads_give_the_answers_of_one_thread_in_the_order_asked(cold):
    chip = sim.load_chip("npu_128x128")
    one = simulate_ops(chip, _ops(), workers=1)
    R.clear_cache()
    four = simulate_ops(chip, _ops(), workers=4)
    assert [r.name for r in four] == [op.name for op, _ in _ops()]
    for a, b in zip(one, four):
        assert {k: getattr(a, k) for k in _FIELDS} == {k: getattr(b, k) for k in _FIELDS}
        assert a.mapping == b.mapping
    assert four[0] is four[4], "a repeated question is answered once"


def test_a_whole_iteration_is_identical_on_one_thread_and_on_two(cold):
    """A Llama-3-8B-class prefill on the H200 (DVFS on: every op tries several clocks and
    reuses its top clock's run, so the threads share memos) gives every row bit for bit."""
    chip = sim.load_chip("h200_sxm")
    spec = load_model_spec("llama3-8b")
    trace = build_iteration(spec, [Sequence(256, 0)])
    with threads_limited(1):
        one = run_trace(chip, trace)
    R.clear_cache()
    with threads_limited(2):
        two = run_trace(chip, trace)
    assert one.seconds == two.seconds and one.energy_j == two.energy_j
    assert one.ops == two.ops


def test_the_thread_count_follows_the_limit_then_the_environment(monkeypatch):
    monkeypatch.setenv("SIM_THREADS", "3")
    assert threads() == 3
    with threads_limited(1):
        assert threads() == 1
        with threads_limited(None):
            assert threads() == 3
    monkeypatch.delenv("SIM_THREADS")
    assert threads() == len(os.sched_getaffinity(0))
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("SIM_THREADS", bad)
        with pytest.raises(sim.SimError, match="SIM_THREADS"):
            threads()


def test_a_bad_thread_count_is_one_clear_message_and_exit_2():
    env = dict(os.environ, SIM_THREADS="many")
    p = subprocess.run([sys.executable, "-m", "sim", "run", "npu_128x128", "llama3-8b", "--phase", "prefill",
                        "--prompt-len", "128"], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert p.returncode == 2, p.stderr
    assert "SIM_THREADS='many'" in p.stderr and "Traceback" not in p.stderr


def test_the_memo_stays_consistent_under_threads():
    """Four threads reading, adding and evicting at once: no lost update raises, the bound holds."""
    memo: Memo[int] = Memo(64)
    errors = []

    def hammer(seed: int) -> None:
        try:
            for i in range(20000):
                key = (seed * 7919 + i * 104729) % 257
                got = memo.get(key)
                assert got is None or got == key * 2
                memo.put(key, key * 2)
        except Exception as exc:  # pragma: no cover - the failure being tested for
            errors.append(exc)

    workers = [threading.Thread(target=hammer, args=(s,)) for s in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors
    assert len(memo) <= 64


def test_a_generation_is_identical_on_one_thread_and_on_two(cold):
    """A generation simulates its prefill's and sampled decode steps' kernels together first
    (sim.apps.iteration.simulate_traces): every figure of the result is unchanged."""
    kw = dict(phase="generate", batch=2, prompt_len=256, new_tokens=40)
    with threads_limited(1):
        one = sim.run_llm("h200_sxm", "tiny", **kw).to_dict()
    R.clear_cache()
    with threads_limited(2):
        two = sim.run_llm("h200_sxm", "tiny", **kw).to_dict()
    assert one == two


@pytest.mark.parametrize("chip_name,m,n,k", [("h200_sxm", 1024, 4096, 4096), ("h100_sxm", 128, 28672, 8192),
                                            ("npu_128x128", 512, 2048, 1024), ("h200_sxm", 96, 12288, 4096)])
def test_candidates_raced_at_once_give_the_one_thread_answer(cold, chip_name, m, n, k):
    """An op's candidate mappings simulated at once (sim.model.engine.run: the first alone, the
    rest together, then those the one-at-a-time walk skips dropped again) win with the same
    mapping and the same figures as one candidate after another."""
    chip = sim.load_chip(chip_name)
    op = Gemm("g", m=m, n=n, k=k)
    with threads_limited(1):
        one = R.simulate_op_at_clock(chip, op, Options())
    R.clear_cache()
    with threads_limited(3):
        three = R.simulate_op_at_clock(chip, op, Options())
    assert {f: getattr(one, f) for f in _FIELDS} == {f: getattr(three, f) for f in _FIELDS}
    assert one.mapping == three.mapping


def test_a_key_asked_by_several_threads_at_once_is_computed_once():
    """Memo.get_or_compute: the threads that miss a key another is computing wait for its
    answer; a thread asking again for the key it computes does not wait for itself; a failed
    computation lets a waiting thread compute it."""
    memo: Memo[str] = Memo(8)
    calls = []
    release = threading.Event()

    def slow() -> str:
        calls.append(threading.get_ident())
        release.wait(5)
        return "answer"

    got = []
    workers = [threading.Thread(target=lambda: got.append(memo.get_or_compute("k", slow))) for _ in range(4)]
    for w in workers:
        w.start()
    release.set()
    for w in workers:
        w.join()
    assert got == ["answer"] * 4 and len(calls) == 1

    assert memo.get_or_compute("outer", lambda: memo.get_or_compute("outer", lambda: "inner")) == "inner"

    def fails() -> str:
        raise RuntimeError("engine stopped")

    with pytest.raises(RuntimeError):
        memo.get_or_compute("bad", fails)
    assert memo.get_or_compute("bad", lambda: "second try") == "second try"


def test_an_op_that_outweighs_the_rest_gets_two_threads_for_its_candidates(cold, monkeypatch):
    """A decode step's lm_head outweighs every other op together: on one pool thread its
    candidates would run one after another on the critical path, so it runs its candidates on
    two threads beside the pool (a Llama-3-8B batch-8 decode step on h200_sxm: 4.5 -> 3.6 s,
    2026-12-07).  The answers are those of one thread."""
    import sim.model.engine.simulate as S
    led = []
    real = S._simulate_alone
    monkeypatch.setattr(S, "_simulate_alone",
                        lambda chip, q, n=1: (led.append((q[0].name, n)) if n > 1 else None) or real(chip, q, n))
    chip = sim.load_chip("npu_128x128")
    ops = [(Gemm("lm_head", m=8, n=49152, k=2048), Options())] + [_ops()[i] for i in (2, 3)]
    one = simulate_ops(chip, ops, workers=1)
    R.clear_cache()
    two = simulate_ops(chip, ops, workers=2)
    assert led == [("lm_head", 2)]
    for a, b in zip(one, two):
        assert {k: getattr(a, k) for k in _FIELDS} == {k: getattr(b, k) for k in _FIELDS}
        assert a.mapping == b.mapping
