"""Regenerate the README's figures of one run: Llama-3-8B on the default NPU.

* plots/llama3_8b_roofline.png - prefill (2,048 tokens) and decode (batch 16, 2k context)
  ops on the roofline of npu_128x128;
* plots/llama3_8b_decode_breakdown.png - where a decode step's time and energy go, by op
  and by memory level.

Simulates through the public API (run_llm) and plots with sim.apps.plotting.  From the
repository root:  python plots/run_figures.py [--chip npu_128x128] [--model llama3-8b]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import sim.apps.energy_report as ER  # noqa: E402
import sim.apps.plotting as plotting  # noqa: E402
from sim.spec.registry import load_chip  # noqa: E402
from sim.apps.inference import run_llm  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chip", default="npu_128x128")
    ap.add_argument("--model", default="llama3-8b")
    ap.add_argument("--out", default=str(ROOT / "plots"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    chip = load_chip(args.chip)
    decode_kw = dict(phase="decode", batch=16, context_len=2048, dtype="fp8")
    prefill_kw = dict(phase="prefill", batch=1, prompt_len=2048, dtype="fp8")
    dec = run_llm(chip, args.model, **decode_kw)
    pre = run_llm(chip, args.model, **prefill_kw)
    comps = ER.llm_energy_components_j(chip, args.model, dec, **decode_kw)
    name = args.model.replace("-", "_").replace(".", "_")
    p1 = plotting.roofline(pre["ops"] + dec["ops"], chip, out / f"{name}_roofline.png",
                           title=f"{args.model} (FP8) on {chip.name}: prefill of 2,048 tokens and "
                                 "decode at batch 16")
    p2 = plotting.breakdown(dec, out / f"{name}_decode_breakdown.png", components_j=comps,
                            title=f"{args.model} decode step (batch 16, 2,048-token context, FP8) on {chip.name}")
    for p in (p1, p2):
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
