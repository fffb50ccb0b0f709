#!/usr/bin/env bash
# A real first install, as a new user makes it (issue 14): build the wheel, create a
# brand-new virtual environment outside the checkout, `pip install` the wheel with its
# dependencies from the package registry, and run the quick tour's first commands and
# `make demo`'s main job from a folder outside the checkout.  Prints the time of every step.
#
#   benchmarks/fresh_install.sh            # or: make install-check
#   PYTHON=python3.12 KEEP=1 benchmarks/fresh_install.sh
#
# Needs the network (the registry), so it is not part of `make test`.  torch is pinned
# away: the core must install and run without it (a constraint no torch release meets
# makes the install fail if any dependency asked for torch, and the script checks that
# torch is absent afterwards).  pip's own configuration (index, mirrors, constraints) is
# used as it is.  The Numba and run caches start empty, so the first simulating command
# includes the one-time kernel compile, as a new user's does.  Exit status 0 only if every
# step passed; KEEP=1 keeps the scratch folder.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/sim-fresh-install.XXXXXX")"
if [[ "${KEEP:-0}" != "1" ]]; then
    trap 'rm -rf "$SCRATCH"' EXIT
fi
VENV="$SCRATCH/venv"
WORK="$SCRATCH/work"          # where the user runs commands: outside the checkout
mkdir -p "$WORK" "$SCRATCH/dist"
# nothing of the checkout or of another environment may leak in
unset PYTHONPATH VIRTUAL_ENV PYTHONHOME
for v in $(env | sed -n 's/^\(SIM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
export SIM_NUMBA_CACHE_DIR="$SCRATCH/numba-cache" SIM_CACHE_DIR="$SCRATCH/run-cache" SIM_USER_DIR="$SCRATCH/user"
printf 'torch<0\n' > "$SCRATCH/no-torch.txt"   # no release satisfies it: torch cannot be installed

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
T_ALL=$(now)
declare -a REPORT=()
step() {  # step NAME COMMAND...: run, time, record; stop at the first failure
    local name="$1"; shift
    local t0 t1
    t0=$(now)
    echo "== $name: $*" >&2
    if "$@" > "$SCRATCH/$name.log" 2>&1; then
        t1=$(now)
        REPORT+=("$(printf '%-14s %8.1f s  ok' "$name" "$(secs "$t0" "$t1")")")
        tail -n 3 "$SCRATCH/$name.log" | sed 's/^/   | /' >&2
    else
        t1=$(now)
        REPORT+=("$(printf '%-14s %8.1f s  FAILED' "$name" "$(secs "$t0" "$t1")")")
        tail -n 30 "$SCRATCH/$name.log" | sed 's/^/   | /' >&2
        summary; exit 1
    fi
}
summary() {
    echo
    echo "fresh install of sim from $REPO ($("$PYTHON" --version 2>&1), $(uname -sm)):"
    printf '  %s\n' "${REPORT[@]}"
    printf '  %-14s %8.1f s\n' "total" "$(secs "$T_ALL" "$(now)")"
}

step venv        "$PYTHON" -m venv "$VENV"
step wheel       "$VENV/bin/python" -m pip wheel --no-deps -q -w "$SCRATCH/dist" "$REPO"
WHEEL="$(ls "$SCRATCH"/dist/sim-*.whl)"
step install     "$VENV/bin/python" -m pip install -q -c "$SCRATCH/no-torch.txt" "$WHEEL"
step no-torch    "$VENV/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is not None)"
cd "$WORK"
step version     "$VENV/bin/sim" --version
step list-chips  "$VENV/bin/sim" list chips
step gemm        "$VENV/bin/sim" gemm npu_128x128 --m 2048 --k 4096 --n 4096 --dataflow ws
step demo        "$VENV/bin/sim" demo --out "$WORK/reports/demo"
step demo-files  test -s "$WORK/reports/demo/summary.json" -a -s "$WORK/reports/demo/roofline.png"
step outside     "$VENV/bin/python" -c "import sim, sys; sys.exit(sim.__file__.startswith('$REPO'))"
summary
