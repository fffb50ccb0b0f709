"""Result objects: plain data out of the simulator (dicts, JSON, pandas DataFrames).

An :class:`OpResult` is one op on one chip; a :class:`RunResult` is an ordered list of
them (a workload), with totals.  Both render as tables in Jupyter (``_repr_html_``).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class OpResult:
    name: str
    kind: str                    # gemm | attention | vector | copy | collective | conv2d
    cycles: float                # total, stalls included
    compute_cycles: float        # busiest core's array/vector busy cycles
    stall_cycles: float          # cycles - compute_cycles
    seconds: float
    macs: int
    flops: float
    utilization: float           # macs / (cycles x chip peak MACs per cycle in the op's format)
    dram_read_bytes: float
    dram_write_bytes: float
    l2_hit_bytes: float
    sram_read_bytes: float
    sram_write_bytes: float
    energy_pj: float
    energy_breakdown_pj: dict
    roofline_cycles: float       # max(compute bound, memory bound) at peak rates, simulated traffic
    bound: str                   # compute | memory: the roofline's class at the op's own intensity
    arithmetic_intensity: float  # flops per compulsory DRAM byte (each input read, output written once)
    achieved_dram_bytes_per_s: float
    mapping: dict
    memory: str                  # modeled | ideal
    details: dict = field(default_factory=dict)
    repeat: int = 1
    traffic_bound: str = ""      # compute | memory with the DRAM bytes the mapping really moves
    dram_intensity: float = 0.0  # flops per simulated DRAM byte

    @property
    def dram_bytes(self) -> float:
        return self.dram_read_bytes + self.dram_write_bytes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), default=_json_default, **kw)

    def summary(self) -> dict[str, Any]:
        """The flat fields a table shows (no nested mapping)."""
        d = {k: v for k, v in self.to_dict().items() if not isinstance(v, dict)}
        m = self.mapping
        d["dataflow"] = m.get("compute", {}).get("dataflow", "")
        d["tiles"] = f"{m.get('tile_m', '')}x{m.get('tile_n', '')}x{m.get('tile_k', '')}" if "tile_m" in m else ""
        return d

    def _repr_html_(self) -> str:
        import pandas as pd

        return pd.DataFrame([self.summary()]).T.rename(columns={0: self.name})._repr_html_()


def _json_default(o):
    import numpy as np

    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def results_dataframe(results) -> "Any":
    """One row per op result (``repeat`` kept as a column; totals multiply by it)."""
    import pandas as pd

    return pd.DataFrame([r.summary() for r in results])
