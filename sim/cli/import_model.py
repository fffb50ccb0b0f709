"""`sim import-model config.json`: a Hugging Face config -> a workloads/ model YAML."""
from __future__ import annotations

import sys
from pathlib import Path

from sim.cli._common import note
from sim.errors import SimError


def add_parser(sub) -> None:
    im = sub.add_parser("import-model", help="a Hugging Face config.json -> a workloads/ model YAML",
                        description="Convert a Hugging Face transformers config.json (Llama, Mistral, Mixtral, "
                                    "Qwen2, Gemma, Falcon, GPT-2/NeoX, ... decoder-only models) into a model YAML "
                                    "for `sim run` and sweeps, recording the source file in its 'source' key. "
                                    "The result is validated before it is written.")
    im.add_argument("config", help="the model's config.json (Hugging Face format)")
    im.add_argument("--name", default=None, help="model name (default: the folder or file name)")
    im.add_argument("--source", default=None,
                    help="what to record as the source (default: the config file's path; e.g. a Hugging Face URL)")
    im.add_argument("--out", default=None, metavar="FILE", help="write the YAML here (default: print it)")
    im.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    im.set_defaults(func=run)


def run(args) -> int:
    from sim.apps.single_op import import_hf_config

    text, spec = import_hf_config(args.config, name=args.name, source=args.source)
    if args.out:
        out = Path(args.out)
        if out.exists() and not args.force:
            raise SimError(f"--out {out} exists; pass --force to overwrite it")
        if out.exists() and not out.is_file():
            raise SimError(f"--out {out} is not a file")
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise SimError(f"cannot write {out}: {exc.strerror or exc}") from None
        note(args, f"wrote {out}: model '{spec.name}' ({spec.num_layers} layers, hidden {spec.hidden_size}); "
                   f"run it with `sim run CHIP {out}`")
    else:
        sys.stdout.write(text)
    return 0
