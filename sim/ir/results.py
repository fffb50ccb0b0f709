"""Result objects: plain data out of the simulator (dicts, JSON, pandas DataFrames).

An :class:`OpResult` is one op on one chip; a :class:`RunResult` is an ordered list of
them (a workload), with totals.  Both render as tables in Jupyter (``_repr_html_``).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, repr=False)
class OpResult:
    """One op simulated on one chip.

    Times and counts (floats unless said otherwise):

    * ``name``, ``kind`` - the op's name and kind (``gemm``, ``attention``, ``vector``,
      ``copy``, ``collective``, ``conv2d``)
    * ``cycles`` - total core cycles, stalls included; ``compute_cycles`` - the busiest
      core's array/vector busy cycles; ``stall_cycles`` = ``cycles - compute_cycles``
    * ``seconds`` - ``cycles`` at the chip's clock (launch overheads included)
    * ``macs`` (int), ``flops`` - work of one instance of the op
    * ``utilization`` - ``macs / (cycles x the chip's peak MACs per cycle in the op's format)``
    * ``dram_read_bytes``, ``dram_write_bytes``, ``l2_hit_bytes``, ``sram_read_bytes``,
      ``sram_write_bytes`` - bytes moved at each level (:attr:`dram_bytes` is read + write)
    * ``energy_pj`` and ``energy_breakdown_pj`` (per memory level, ``mac``, ``vector``,
      ``noc``, ``static``)
    * ``roofline_cycles`` - max(compute bound, memory bound) at peak rates, simulated traffic
    * ``bound`` - ``compute`` or ``memory``: the roofline's class at the op's own arithmetic
      intensity; ``traffic_bound`` - the same with the DRAM bytes the mapping really moves;
      :attr:`limited_by` - what the simulated time is mostly made of (``compute``, ``array``
      fill/drain and tile quantisation, ``memory`` stalls or launch ``overhead``)
    * ``arithmetic_intensity`` - FLOPs per compulsory DRAM byte (each input read and the
      output written once); ``dram_intensity`` - FLOPs per simulated DRAM byte
    * ``achieved_dram_bytes_per_s`` - DRAM bytes / seconds
    * ``mapping`` - distribution over cores, tile sizes, loop order, split-K, the array,
      dataflow and rate used, the size of the search space
    * ``memory`` - ``modeled`` (SRAM + DRAM timing) or ``ideal`` (stall-free compute)
    * ``details`` - engine counters (tile loads, DRAM row hits, refreshes, ...)
    * ``repeat`` - how many times the op runs in its workload (totals multiply by it)
    """

    name: str
    kind: str
    cycles: float
    compute_cycles: float
    stall_cycles: float
    seconds: float
    macs: int
    flops: float
    utilization: float
    dram_read_bytes: float
    dram_write_bytes: float
    l2_hit_bytes: float
    sram_read_bytes: float
    sram_write_bytes: float
    energy_pj: float
    energy_breakdown_pj: dict
    roofline_cycles: float
    bound: str
    arithmetic_intensity: float
    achieved_dram_bytes_per_s: float
    mapping: dict
    memory: str
    details: dict = field(default_factory=dict)
    repeat: int = 1
    traffic_bound: str = ""
    dram_intensity: float = 0.0

    def __repr__(self) -> str:
        """The headline numbers as plain Python values (no ``np.float64(...)``)."""
        keys = ("cycles", "compute_cycles", "stall_cycles", "seconds", "macs", "utilization", "dram_read_bytes",
                "dram_write_bytes", "energy_pj", "bound", "traffic_bound", "memory")
        body = ", ".join(f"{k}={_plain(getattr(self, k))!r}" for k in keys)
        extra = f", repeat={self.repeat}" if self.repeat != 1 else ""
        return f"OpResult(name={self.name!r}, kind={self.kind!r}, {body}{extra}, mapping={{...}})"

    @property
    def dram_bytes(self) -> float:
        return self.dram_read_bytes + self.dram_write_bytes

    @property
    def time_split_cycles(self) -> dict[str, float]:
        """The simulated cycles split by what they are spent on: ``compute`` (the MACs or
        vector ops at the unit's peak rate), ``array`` (the busiest core's busy cycles
        beyond that: fill and drain, tile quantisation, idle rows), ``memory`` (waiting for
        data) and ``overhead`` (launch and kernel prologue)."""
        d = self.details or {}
        peak = float(d.get("compute_bound_cycles", self.compute_cycles))
        overhead = float(d.get("launch_overhead_cycles", 0.0))
        return {"compute": min(peak, self.compute_cycles),
                "array": max(0.0, self.compute_cycles - peak),
                "memory": max(0.0, self.stall_cycles - overhead),
                "overhead": min(overhead, self.stall_cycles)}

    @property
    def limited_by(self) -> str:
        """The largest part of :attr:`time_split_cycles`: a GEMM on a big array at 9 % of its
        peak whose time is fill and drain says ``array``, not ``memory``."""
        split = self.time_split_cycles
        return max(split, key=lambda k: split[k])

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain Python data (NumPy scalars become int/float), plus
        ``limited_by``."""
        return {**_plain(asdict(self)), "limited_by": self.limited_by}

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


#: the OpResult fields that add up when kernels run one after another
SUMMED_WORK_FIELDS = ("dram_read_bytes", "dram_write_bytes", "l2_hit_bytes", "sram_read_bytes",
                      "sram_write_bytes", "energy_pj")


def summed_work(results) -> dict[str, Any]:
    """The work of several kernels together: :data:`SUMMED_WORK_FIELDS` summed and the energy
    breakdowns merged key by key (keys in order of first appearance, so the result does not
    depend on hash seeds).  Times, cycles and bounds are the caller's to combine: back to
    back they add, in one launch they do not."""
    results = list(results)
    out: dict[str, Any] = {f: sum(getattr(r, f) for r in results) for f in SUMMED_WORK_FIELDS}
    energy: dict[str, float] = {}
    for r in results:
        for key, v in (r.energy_breakdown_pj or {}).items():
            energy[key] = energy.get(key, 0.0) + float(v)
    out["energy_breakdown_pj"] = energy
    return out


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
    if callable(getattr(o, "to_dict", None)):  # a typed result (sim.apps.results.LlmRun, ...)
        return o.to_dict()
    if isinstance(o, Mapping):  # a read-only view (an LlmRun's op rows)
        return dict(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _plain(v: Any) -> Any:
    """``v`` with NumPy scalars and arrays (also inside dicts, lists, tuples) as plain Python."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        return v
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(_plain(x) for x in v)
    return v


def results_dataframe(results) -> "Any":
    """One row per op: a pandas DataFrame.

    ``results`` may be a list of :class:`OpResult` (``repeat`` kept as a column; totals
    multiply by it), the ``ops`` list of :func:`sim.run_llm`'s result (mappings, one per op,
    with ``phase``, ``total_seconds``...), a whole ``run_llm`` result (its ``ops``; any
    mapping with ``ops``, as :class:`sim.apps.results.LlmRun` is), or one :class:`OpResult`.
    """
    import pandas as pd

    if isinstance(results, OpResult):
        results = [results]
    elif isinstance(results, Mapping) and "ops" in results:
        results = results["ops"]
    rows = []
    for r in results:
        if isinstance(r, OpResult):
            rows.append(r.summary())
        elif isinstance(r, Mapping):
            rows.append({k: _plain(v) for k, v in r.items() if not isinstance(v, dict)})
        else:
            raise TypeError(f"results_dataframe takes OpResults or run_llm's op dicts, got {type(r).__name__}")
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- human-readable numbers

_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_bytes(v: float) -> str:
    """Bytes with an SI prefix (decimal: 1 GB = 10^9 B): ``1.07 GB``, ``512 B``."""
    if v != v:
        return "nan"
    a = abs(v)
    for scale, prefix in _SI:
        if a >= scale:
            return f"{v / scale:,.3g} {prefix}B" if a / scale < 1000 else f"{v / scale:,.0f} {prefix}B"
    return f"{v:,.0f} B" if float(v).is_integer() else f"{v:.3g} B"


def format_number(v: Any, key: str = "") -> str:
    """One number format for every human-readable table: thousands separators for large
    values (``642,747``; ``97,500,000``), four significant digits otherwise (``0.1234``,
    ``3.5e-06`` for tiny ones), SI units for byte counts (``key`` ending in ``bytes``)."""
    if isinstance(v, bool) or v is None:
        return str(v)
    try:
        import numpy as np

        if isinstance(v, np.generic):
            v = v.item()
    except ImportError:  # pragma: no cover
        pass
    if not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return str(v)
    if key.endswith("bytes_per_s"):
        return format_bytes(float(v)) + "/s"
    if key.endswith("bytes") or key.endswith("_bytes_per_sequence"):
        return format_bytes(float(v))
    if isinstance(v, int) or (float(v).is_integer() and abs(v) < 1e18):
        return f"{int(v):,}"
    a = abs(v)
    if a >= 1e4:
        return f"{v:,.0f}"
    if a >= 1 or a == 0:
        return f"{v:,.4g}" if a < 1000 else f"{v:,.1f}"
    if a >= 1e-3:
        return f"{v:.4g}"
    return f"{v:.3e}"
