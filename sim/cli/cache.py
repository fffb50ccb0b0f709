"""`sim cache info|clear`: the on-disk cache of engine runs."""
from __future__ import annotations

import json

from sim.cli._common import print_kv


def add_parser(sub) -> None:
    cc = sub.add_parser("cache", help="the on-disk cache of engine runs: where it is, how big, clear it")
    cc.add_argument("action", choices=["info", "clear"], help="info: folder, runs and size; clear: delete every run")
    cc.add_argument("--json", action="store_true", help="print one JSON object")
    cc.set_defaults(func=run)


def run(args) -> int:
    import dataclasses

    import sim.model.engine.run_cache as run_cache

    if args.action == "clear":
        removed = run_cache.clear()
        print(f"removed {removed:,} cached file(s) (engine runs and DRAM pattern probes) from {run_cache.cache_dir()}")
        return 0
    info = run_cache.info()
    if args.json:
        print(json.dumps(dataclasses.asdict(info)))
        return 0
    print(f"engine-run cache at {info.folder} ({'on' if info.enabled else 'off: SIM_NO_CACHE is set'})")
    print_kv({"runs": f"{info.runs:,} ({info.runs_this_version:,} of this physics version {info.physics_version})",
               "DRAM pattern probes": f"{info.values:,}",
               "size": f"{info.size_bytes / 2**20:,.1f} MiB of {info.limit_bytes / 2**20:,.0f} MiB "
                       "(SIM_CACHE_MAX_MB; least recently used runs go first)"})
    return 0
