"""What an iteration costs (:class:`Cost`: seconds, energy, FLOPs, bytes, kernels and calls) and
the grids :class:`~sim.apps.serving.latency.LatencyModel` samples it on, with the
interpolation between grid points."""
from __future__ import annotations

import bisect
from dataclasses import dataclass

__all__ = ["Cost", "ZERO", "token_grid", "pow2_grid", "lerp", "bracket"]


def token_grid(limit: int) -> list[int]:
    """Token counts up to ``limit``: powers of two, with their 1.5x midpoints above 64."""
    g = [1, 2, 4, 8, 16, 32, 64]
    x = 64
    while x < limit:
        g += [x + x // 2, 2 * x]
        x *= 2
    return g


def pow2_grid(lo: int, limit: int) -> list[int]:
    """``lo`` doubled until it reaches ``limit``."""
    g = [lo]
    while g[-1] < limit:
        g.append(g[-1] * 2)
    return g


@dataclass(frozen=True)
class Cost:
    """Seconds, joules (all chips of the replica), FLOPs, DRAM bytes, launched kernels and
    attention calls (per chip) of an iteration or a part.  ``seconds`` is device time until
    :meth:`~sim.apps.serving.latency.LatencyModel.launched` adds the host's share, which the kernels and the calls price:
    ``attention_calls`` counts every attention call of a prompt chunk (one per layer and chunk),
    ``masked_calls`` those of chunks behind cached tokens (a causal mask aligned to the bottom
    right), ``decode_calls`` the decoding sequences' attention calls (one per layer)."""

    seconds: float = 0.0
    energy_j: float = 0.0
    flops: float = 0.0
    dram_bytes: float = 0.0
    kernels: float = 0.0
    attention_calls: float = 0.0
    masked_calls: float = 0.0
    decode_calls: float = 0.0

    def __add__(self, o: "Cost") -> "Cost":
        return Cost(self.seconds + o.seconds, self.energy_j + o.energy_j, self.flops + o.flops,
                    self.dram_bytes + o.dram_bytes, self.kernels + o.kernels,
                    self.attention_calls + o.attention_calls, self.masked_calls + o.masked_calls,
                    self.decode_calls + o.decode_calls)

    def scale(self, w: float) -> "Cost":
        return Cost(self.seconds * w, self.energy_j * w, self.flops * w, self.dram_bytes * w, self.kernels * w,
                    self.attention_calls * w, self.masked_calls * w, self.decode_calls * w)

    def values(self) -> tuple:
        return (self.seconds, self.energy_j, self.flops, self.dram_bytes, self.kernels, self.attention_calls,
                self.masked_calls, self.decode_calls)


ZERO = Cost()


def lerp(a: Cost, b: Cost, w: float) -> Cost:
    return Cost(*(x + w * (y - x) for x, y in zip(a.values(), b.values())))


def bracket(grid: list[int], x: float) -> tuple[int, int, float]:
    """Grid points around ``x`` and the weight of the upper one (x beyond the grid: the last)."""
    if x <= grid[0]:
        return grid[0], grid[0], 0.0
    if x >= grid[-1]:
        return grid[-1], grid[-1], 0.0
    i = bisect.bisect_left(grid, x)
    hi, lo = grid[i], grid[i - 1]
    if hi == x:
        return hi, hi, 0.0
    return lo, hi, (x - lo) / (hi - lo)
