"""Every command block of README.md's Quick tour runs as written: each line of a ```bash
fence through bash with the venv's `sim` first on PATH, each ```python fence through the
venv's python.  Files a reader supplies themself (``my_chip.yaml``) are a copy of a shipped
chip; the commands run in a scratch folder that sees the repository's folders, so their
outputs (reports/, pareto.png) never land in the checkout."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
#: what a reader brings: name in the README -> shipped file standing in for it
SUPPLIED = {"my_chip.yaml": ROOT / "arch_configs" / "npu_128x128.yaml"}


def quick_tour_blocks() -> list[tuple[str, str, int]]:
    """(language, code, line in README.md) of every ```bash / ```python fence of the Quick tour."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("\n## Quick tour")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end > 0 else len(text)]
    base = text[:start].count("\n") + 1
    blocks = []
    for m in re.finditer(r"^```(bash|python)\n(.*?)^```", section, flags=re.S | re.M):
        blocks.append((m.group(1), m.group(2), base + section[:m.start()].count("\n") + 1))
    return blocks


def bash_commands() -> list[tuple[str, int]]:
    out = []
    for lang, code, line in quick_tour_blocks():
        if lang != "bash":
            continue
        for i, cmd in enumerate(code.splitlines(), start=1):
            cmd = re.sub(r"\s+#.*$", "", cmd).strip()
            if cmd and not cmd.startswith("#"):
                out.append((cmd, line + i))
    return out


def python_blocks() -> list[tuple[str, int]]:
    return [(code, line) for lang, code, line in quick_tour_blocks() if lang == "python"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("readme")
    for entry in ROOT.iterdir():  # the checkout's folders, read through links
        if entry.name.startswith(".") or entry.name in ("reports",) or entry.suffix == ".png":
            continue
        (d / entry.name).symlink_to(entry)
    for name, src in SUPPLIED.items():
        shutil.copy(src, d / name)
    return d


def _env() -> dict:
    env = dict(os.environ, PATH=str(BIN) + os.pathsep + os.environ.get("PATH", ""))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("SIM_DEBUG", None)
    return env


def test_the_quick_tour_has_commands():
    cmds = [c for c, _ in bash_commands()]
    assert len(cmds) >= 10 and all(c.startswith("sim ") for c in cmds), cmds
    assert python_blocks()
    assert shutil.which("sim", path=str(BIN)), "the venv's sim entry point"


def _writers_of_what_it_reads(cmd: str) -> list[tuple[str, int]]:
    """The earlier quick-tour lines whose ``--out`` folder ``cmd`` names (the sweep a plot reads)."""
    out = []
    for other, line in bash_commands():
        if other == cmd:
            break
        m = re.search(r"--out\s+(\S+)", other)
        if m and m.group(1) in cmd.split() and not cmd.split("--out")[-1].strip().startswith(m.group(1)):
            out.append((other, line))
    return out


# the sweep must run before the plot that reads its folder (the plot's test runs it first)
@pytest.mark.parametrize("cmd, line", bash_commands(), ids=[f"README.md:{ln}" for _, ln in bash_commands()])
def test_quick_tour_command(cmd, line, workdir):
    for earlier, _ in _writers_of_what_it_reads(cmd):
        # xdist may run this line on another worker than the one that wrote its input (or
        # before it): run the writer first. A sweep finds its finished points in the store
        # and waits for the ones another sweep on it is simulating, so this costs nothing.
        subprocess.run(["bash", "-c", earlier], cwd=workdir, env=_env(), capture_output=True, text=True, timeout=3600)
    proc = subprocess.run(["bash", "-c", cmd], cwd=workdir, env=_env(), capture_output=True, text=True,
                          timeout=3600)
    assert proc.returncode == 0, f"README.md:{line}: {cmd}\nexit {proc.returncode}\n{proc.stdout[-3000:]}\n" \
                                 f"{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr
    assert proc.stdout.strip() or cmd.startswith("sim plot"), cmd


@pytest.mark.parametrize("code, line", python_blocks(), ids=[f"README.md:{ln}" for _, ln in python_blocks()])
def test_quick_tour_python(code, line, workdir):
    # a plain script fed to stdin, as a reader pastes it: no __main__ guard
    proc = subprocess.run([str(BIN / "python"), "-"], input=code, cwd=workdir, env=_env(), capture_output=True,
                          text=True, timeout=3600)
    assert proc.returncode == 0, f"README.md:{line}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr
