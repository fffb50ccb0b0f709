"""The compiled kernels' faster inliner (sim/model/kernels/jit.py, SharedScopeBlockCopy) copies
IR blocks with a shared memo; it must give Numba exactly the IR, and so the machine code, that
Numba's own per-block copies give."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

numba = pytest.importorskip("numba")

import sim.model.kernels.jit as jit  # noqa: E402  (installs the copier)

ROOT = Path(__file__).resolve().parents[1]


def _blocks_of(fn):
    from numba.core import compiler
    return compiler.run_frontend(fn).blocks


def _sample(a, n):
    s = 0.0
    for i in range(n):
        if a[i] > 0:
            s += a[i] * 2.0
        else:
            s -= a[i]
    return s


def _vars_of(block):
    return [v for stmt in block.body for v in stmt.list_vars()]


@pytest.mark.skipif(os.environ.get("SIM_NUMBA_PLAIN_INLINER", "") not in ("", "0"), reason="inliner left as shipped")
def test_installed_in_numbas_inliner():
    from numba.core import inline_closurecall
    assert isinstance(inline_closurecall.copy, jit.SharedScopeBlockCopy)


def test_blocks_of_one_ir_share_one_fresh_scope_and_two_copies_share_nothing():
    import copy

    from numba.core import ir
    blocks = _blocks_of(_sample)
    assert len(blocks) > 2
    original_scope = next(iter(blocks.values())).scope
    assert all(b.scope is original_scope for b in blocks.values())
    copier = jit.SharedScopeBlockCopy(copy, ir.Block)

    def copy_all():
        return {label: copier.deepcopy(b) for label, b in blocks.items()}

    first, second = copy_all(), copy_all()
    for copied in (first, second):
        scopes = {id(b.scope) for b in copied.values()}
        assert len(scopes) == 1 and id(original_scope) not in scopes
        scope = next(iter(copied.values())).scope
        # every variable of the copy lives in the copy's scope, none in the original's
        assert all(v.scope is scope for b in copied.values() for v in _vars_of(b))
        # the same statements
        assert [str(s) for b in copied.values() for s in b.body] == [str(s) for b in blocks.values() for s in b.body]
        assert all(c is not o for c, o in zip(copied.values(), blocks.values()))
    # two copies of one IR share no block, scope or variable
    assert next(iter(first.values())).scope is not next(iter(second.values())).scope
    ids_first = {id(v) for b in first.values() for v in _vars_of(b)}
    assert not ids_first & {id(v) for b in second.values() for v in _vars_of(b)}
    # a copy is independent of the original: a variable defined in the copy's scope is not in the original's
    scope = next(iter(first.values())).scope
    scope.define("only_in_the_copy", loc=next(iter(first.values())).loc)
    assert "only_in_the_copy" not in original_scope.localvars._con
    # anything else is the copy module's own deepcopy
    payload = {"a": [1, 2]}
    assert copier.deepcopy(payload) == payload and copier.deepcopy(payload) is not payload
    assert copier.copy(payload) == payload


_PROGRAM = textwrap.dedent("""
    import hashlib, re, sys
    import numpy as np
    import sim.model.kernels.jit as jit
    from sim.model.kernels.jit import kernel

    @kernel(_nrt=False, inline='always')
    def leaf(a, i, x):
        if a[i] > x:
            a[i] -= x
            return 1
        a[i] += x
        return 0

    @kernel(_nrt=False, inline='always')
    def middle(a, b, i):
        n = leaf(a, i, b[i])
        n += leaf(b, i, a[i])
        return n

    @kernel(_nrt=False)
    def top(a, b):
        n = 0
        for i in range(a.shape[0]):
            n += middle(a, b, i)
            if n > 3:
                n -= leaf(a, 0, 1.0)
        return n

    a = np.arange(8.0); b = np.ones(8)
    print(top(a, b))
    ir = next(iter(top.inspect_llvm().values()))
    ir = "\\n".join(l for l in ir.splitlines() if not l.startswith(("; ModuleID", "source_filename")))
    ir = re.sub(r"\\.bytes\\.-?[0-9]+(\\.[0-9]+)?", ".bytes.X", ir)  # named after str hash()
    print(hashlib.sha256(ir.encode()).hexdigest(), len(ir))
    from numba.core import inline_closurecall
    print(type(inline_closurecall.copy).__name__)
""")


def test_the_machine_code_is_what_numbas_own_inliner_gives(tmp_path):
    """The same nested inline='always' program compiled in two fresh processes, one with the
    copier and one with Numba's inliner as shipped: identical LLVM IR (no disk cache, so both
    really compile)."""
    out = []
    for plain in ("0", "1"):
        env = dict(os.environ, SIM_NUMBA_PLAIN_INLINER=plain, SIM_NUMBA_CACHE_DIR=str(tmp_path / plain),
                   PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        # a fresh script per process: its kernels are cached beside it, so each really compiles
        script = tmp_path / f"prog{plain}.py"
        script.write_text(_PROGRAM)
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        out.append(r.stdout.split())
    assert out[0][0] == out[1][0]  # the same answer
    assert re.fullmatch(r"[0-9a-f]{64}", out[0][1])
    assert out[0][1:3] == out[1][1:3]  # the same LLVM IR
    assert (out[0][3], out[1][3]) == ("SharedScopeBlockCopy", "module")  # one compiled with the copier, one without
