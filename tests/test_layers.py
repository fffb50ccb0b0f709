"""The package's layers import one way (docs/architecture.md): cli -> apps -> model -> ir -> spec ->
errors, checked by import-linter's contract in pyproject.toml; no import cycle anywhere in sim/
(function-local imports included); and no function-local import of a sim module outside the
two places that defer imports on purpose (the facade and the command line, so that `import sim`
does not load Dask or SimPy and `sim --help` does not load Numba)."""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SIM = ROOT / "sim"
LAYERS = ("cli", "apps", "model", "ir", "spec", "errors")
DEFERRING = ("sim/__init__.py", "sim/cli/")


def _modules() -> dict[str, Path]:
    out = {}
    for p in SIM.rglob("*.py"):
        rel = p.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imports(path: Path, mods: dict[str, Path]):
    """(imported sim module, line, inside a function) for every import statement of ``path``."""
    tree = ast.parse(path.read_text())
    found = []

    def visit(node, in_func):
        for child in ast.iter_child_nodes(node):
            f = in_func or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.ImportFrom) and child.level == 0 and child.module and child.module.split(".")[0] == "sim":
                for a in child.names:
                    full = f"{child.module}.{a.name}"
                    found.append((full if full in mods else child.module, child.lineno, in_func))
            elif isinstance(child, ast.Import):
                for a in child.names:
                    if a.name.split(".")[0] == "sim":
                        found.append((a.name, child.lineno, in_func))
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue  # annotations only
            visit(child, f)

    visit(tree, False)
    return found


def test_import_linter_layers_contract_is_kept():
    pytest.importorskip("importlinter")
    from importlinter.cli import lint_imports

    assert lint_imports(config_filename=str(ROOT / "pyproject.toml")) == 0, "run `lint-imports` to see the broken import"


def test_layer_order_by_our_own_reading_too():
    """The same rule without import-linter (it reads the code the same way; this keeps the rule
    checked where the tool is missing): a module may import only its own layer or those below."""
    mods = _modules()
    rank = {name: i for i, name in enumerate(LAYERS)}
    bad = []
    for mod, path in mods.items():
        top = mod.split(".")[1] if "." in mod else None
        if top not in rank:
            continue
        for target, line, _ in _imports(path, mods):
            t = target.split(".")[1] if "." in target else None
            if t in rank and rank[t] < rank[top]:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {mod} ({top}) imports {target} ({t})")
    assert not bad, "\n".join(bad)


def test_no_import_cycle_in_the_package():
    mods = _modules()
    graph = {m: {t for t, _, _ in _imports(p, mods) if t in mods and t != m} for m, p in mods.items()}
    # a package imported as a parent of a submodule is not an edge the code chose: drop "sim" itself
    for m in graph:
        graph[m].discard("sim")
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in graph:
        if m not in index:
            strong(m)
    assert not cycles, f"import cycles: {cycles}"


def test_no_function_local_import_of_a_sim_module_outside_the_facade_and_cli():
    mods = _modules()
    local = []
    for mod, path in mods.items():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(DEFERRING):
            continue
        local += [f"{rel}:{line}: {t}" for t, line, in_func in _imports(path, mods) if in_func]
    assert not local, "function-local imports (the graph is acyclic: put them at the top):\n" + "\n".join(local)


def test_the_version_is_the_packages():
    from sim.version import __version__

    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(rf'^version = "{re.escape(__version__)}"$', text, re.M)
