"""The kernel-library part of a chip file: how ops may be mapped when a library supplies the kernels.

:class:`MappingSpec` (``mapping:``) constrains the mapper for chips whose kernels come from a
library (tile menus, split-K, clusters, fixed kernel lists per array); :class:`KernelSpec` is
one kernel of such a list and :func:`kernel_entry` reads either form of a list entry.  That
the arrays it names exist is checked by :class:`sim.spec.chip.ChipSpec`, which sees both.
Re-exported by :mod:`sim.spec.chip`.
"""
from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

from pydantic import model_validator

from sim.spec.spec_base import Flag, NonEmpty, _int, _num, _rule_errors, _Spec


class KernelSpec(_Spec):
    """One GEMM kernel of a library path's fixed list (``mapping.array_kernels``), as its
    name spells it (CUTLASS ``..._128x256_32x3_...``: tile_m x tile_n, k tile, stages)."""

    tile_m: _int(1, 1 << 20)
    tile_n: _int(1, 1 << 20)
    # the k tile in bytes of the narrower operand (32 bf16 or 64 int8 elements = 64 B);
    # None: the mapping's tile_k_bytes
    tile_k_bytes: Optional[_int(1, 1 << 20)] = None
    stages: _int(1, 64)
    # threads per block on an array of one lane per PE (SIMT), as the list's fourth value
    threads: Optional[_int(1, 1 << 20)] = None
    # the share of the array's rate (its macs_per_pe_per_cycle) this kernel's compute loop
    # sustains, as the list's fifth value: a SIMT kernel with a small register tile per thread
    # spends more of its issue slots on shared-memory loads and loop overhead than the kernel
    # the array's rate was measured on (None: 1, that rate)
    rate_share: Optional[_num(gt=0, le=1)] = None

    def as_tuple(self) -> tuple:
        """(tile_m, tile_n, stages, threads or 0, tile_k_bytes or 0, rate share)."""
        return (self.tile_m, self.tile_n, self.stages, self.threads or 0, self.tile_k_bytes or 0,
                float(self.rate_share or 1.0))


def kernel_entry(entry) -> tuple:
    """An ``array_kernels`` entry as (tile_m, tile_n, stages, threads or 0, tile_k_bytes or 0,
    rate share)."""
    if isinstance(entry, KernelSpec):
        return entry.as_tuple()
    t = tuple(entry)
    return (t[0], t[1], t[2], t[3] if len(t) > 3 else 0, 0, float(t[4]) if len(t) > 4 else 1.0)


class MappingSpec(_Spec):
    """Constraints on how ops are mapped, for chips whose kernels come from a library
    (a GPU's cuBLAS/CUTLASS offers a fixed menu of tile shapes); None = free search.

    ``tile_m``/``tile_n``: allowed tile sizes along m and n; ``tile_k_bytes``: the k tile
    in bytes of the A operand (128 -> 64 bf16 or 128 fp8 elements); ``split_k``: allowed
    split-K factors (partial sums reduced by a second pass); ``distribution``: how work is
    spread over cores (``cyclic`` deals output tiles like thread blocks: each core that finishes takes the next).
    """

    distribution: Literal["any", "block", "cyclic"] = "any"
    tile_m: Optional[Annotated[tuple[_int(1, 1 << 20), ...], NonEmpty]] = None   # type: ignore[valid-type]
    tile_n: Optional[Annotated[tuple[_int(1, 1 << 20), ...], NonEmpty]] = None   # type: ignore[valid-type]
    tile_k_bytes: Optional[_int(1, 1 << 20)] = None
    # (an empty list left no mapping: 'no mapping found', the key unnamed)
    split_k: Annotated[tuple[_int(1, 1024), ...], NonEmpty] = (1,)   # type: ignore[valid-type]
    # cores whose loads of the same tile are multicast (a GPU thread-block cluster with
    # TMA multicast): one trip over the chip-level cache's bus serves them all
    cluster_size: _int(1, 64) = 1
    # arrays whose library kernels run in such clusters (None: all of them); kernels of the
    # other arrays load tiles one core at a time
    cluster_arrays: Optional[tuple[str, ...]] = None
    # tile shapes a GEMM kernel of the library can have, on the arrays of tile_rule_arrays
    # (None: all): at least one of tile_m, tile_n (rounded up to 8) is a multiple of
    # tile_one_side_multiple (a Hopper warpgroup MMA is 64 rows on one operand's side), and
    # tile_m x tile_n is at most tile_max_elements (the fp32 accumulators live in registers)
    tile_one_side_multiple: Optional[_int(1, 1 << 20)] = None
    tile_max_elements: Optional[_int(1, 1 << 40)] = None
    # accumulator elements one core holds for the tile_rule_arrays' kernels (None: any two
    # tiles' worth).  A tile over half of it holds one set of accumulators, so its results
    # must leave before the next tile accumulates (a Hopper cooperative kernel, registers:
    # 40,960 fp32 = 160 KiB of 256 KiB); a smaller tile holds two (ping-pong)
    accumulator_elements: Optional[_int(1, 1 << 40)] = None
    tile_rule_arrays: Optional[tuple[str, ...]] = None
    # GEMM kernels of a library path bound to one array, by array name: the only
    # (tile_m, tile_n, smem stages) it offers, and its split-K factors (default split_k).
    # An optional fourth value is the kernel's threads per block on an array of one lane
    # per PE (SIMT): a block of fewer threads than the array has PEs uses only that share
    # of it, and as many such blocks as fit share the core at once; an optional fifth, the
    # share of the array's rate its compute loop sustains (KernelSpec.rate_share)
    array_kernels: dict[str, tuple[Union[tuple[_int(1, 1 << 20), _int(1, 1 << 20), _int(1, 64)],
                                         tuple[_int(1, 1 << 20), _int(1, 1 << 20), _int(1, 64), _int(1, 1 << 20)],
                                         tuple[_int(1, 1 << 20), _int(1, 1 << 20), _int(1, 64), _int(1, 1 << 20),
                                               _num(gt=0, le=1)],
                                         KernelSpec],
                                   ...]] = {}
    array_split_k: dict[str, tuple[_int(1, 1024), ...]] = {}
    # DRAM requests one core keeps in flight in that path's kernels, by array name (default:
    # the DRAM level's max_outstanding_requests_per_core; e.g. cp.async loads vs TMA)
    array_outstanding_requests: dict[str, _int(1, 1 << 20)] = {}
    # arrays whose library kernels keep their smem pipeline full with asynchronous copies
    # (cp.async multistage, CUTLASS sm80): one core has (stages - 1) k-steps of A and B
    # tiles in flight, so its DRAM requests in flight follow the kernel's tile and stages
    # instead of a fixed count (array_outstanding_requests / the DRAM level's)
    array_inflight_from_stages: tuple[str, ...] = ()
    # bytes per SM cycle one core's loads of that path's kernels land in its tile buffer, by
    # array name, where it is below the buffer's fill port (bytes_per_cycle of the core's
    # SRAM): e.g. cp.async copies through L1 against TMA bulk copies
    array_port_bytes_per_cycle: dict[str, _num(gt=0, le=1e9)] = {}
    # shared memory one thread block's pipeline may use (e.g. 163 KB = 166,912 B on sm80):
    # every array_kernels entry with a k tile (its own or tile_k_bytes) must fit stages x
    # (tile_m + tile_n) x k-tile bytes in it; None = not checked
    shared_memory_bytes: Optional[_int(1, 1 << 40)] = None
    # a library whose GEMM kernels size their smem pipeline to what fits (CUTLASS's
    # automatic stage count): stages = floor(pipeline_fill_bytes / (A + B tile bytes)),
    # between 2 and pipeline_max_stages, for the kernels of pipeline_fill_arrays (None: all
    # arrays); without it every kernel uses the tile buffer's pipeline_stages
    pipeline_fill_bytes: Optional[_int(1, 1 << 40)] = None
    pipeline_max_stages: _int(2, 16) = 16
    pipeline_fill_arrays: Optional[tuple[str, ...]] = None
    # the mapper's best few candidates (by its analytic estimate; with the best of up to two
    # kinds of tile they lack, sim.model.engine.run.diverse_band) are simulated and the
    # fastest kept, as a kernel library's autotuner picks among its kernels
    refine_candidates: _int(1, 16) = 1
    # when the library's fused attention splits the keys over cores (split-KV /
    # flash-decoding, partial results combined by a second pass): "always" when cores
    # would otherwise idle, or "decode" - only for single-query steps
    attention_split_kv: Literal["always", "decode"] = "always"
    # tile buffers per operand of the library's fused attention kernel (None: the SRAM's)
    attention_pipeline_stages: Optional[_int(1, 64)] = None
    # the fused attention kernel's (query rows, key rows) per tile, by array name: the only
    # tile that library path runs (default: the mapper searches tile_m x tile_n)
    attention_tiles: dict[str, tuple[_int(1, 1 << 20), _int(1, 1 << 20)]] = {}
    # whether a fused attention tile holds the query rows of all heads that share a KV head
    # (grouped-query packing: K/V read once per group): "always", "decode" (single-query
    # steps only; longer queries run one query head per thread block, the heads of a group
    # reading the same K/V through the chip-level cache) or "never"
    attention_gqa_packing: Literal["always", "decode", "never"] = "always"
    # cores per multicast cluster of the library's attention kernel (None: cluster_size)
    attention_cluster_size: Optional[_int(1, 64)] = None
    # a kernel computes every tile at its full shape, however few of its rows, columns or
    # k elements are valid (GPU kernels issue MMA instructions of the tile's shape, the
    # missing operand elements zero-filled): edge tiles cost a full tile's compute, and a
    # library kernel whose tile is larger than the problem computes the padded tile
    pad_edge_tiles: Flag = False
    # fixed time a library GEMM or attention kernel spends outside its tile loop (kernel
    # parameters and TMA descriptors fetched, barriers set up, the epilogue's stores
    # drained before exit), on top of a minimal kernel's launch; microbenchmarked
    kernel_prologue_ns: _num(ge=0, le=1e9) = 0.0

    @model_validator(mode="after")
    def _stages_fit_shared_memory(self) -> "MappingSpec":
        limit = self.shared_memory_bytes
        if limit is None:
            return self
        problems = []
        for name, kernels in self.array_kernels.items():
            for i, entry in enumerate(kernels):
                m, n, stages, _, k_bytes, _ = kernel_entry(entry)
                k_bytes = k_bytes or self.tile_k_bytes
                if not k_bytes:
                    continue
                need = stages * (m + n) * k_bytes
                if need > limit:
                    problems.append((("array_kernels", name, i),
                                     f"kernel {m}x{n}, k tile {k_bytes} B, {stages} stages needs {need:,} B of shared "
                                     f"memory ({stages} x ({m} + {n}) x {k_bytes}), more than shared_memory_bytes "
                                     f"{limit:,}", entry if not isinstance(entry, KernelSpec) else entry.model_dump()))
        if problems:
            raise _rule_errors("MappingSpec", problems)
        return self
