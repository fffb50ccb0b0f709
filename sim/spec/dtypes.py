"""Number formats: storage size (values plus block scales) and the array rate they use.

A format's cost is modelled explicitly, not as a bare multiplier:

* ``bits`` per value, plus for block-scaled formats one ``scale_bits`` scale per
  ``block_size`` values (MXFP4: 32 values share an 8-bit power-of-two scale, OCP MX v1.0;
  NVFP4: 16 values share an FP8 E4M3 scale, NVIDIA Blackwell whitepaper) - so moving an
  NVFP4 tensor moves 4.5 bits per value, not 4;
* ``rate_class``: which of an array's ``macs_per_pe_per_cycle`` entries the format runs
  at (``fp8_e5m2`` runs on the ``fp8`` units, ``mxfp4`` and ``nvfp4`` on ``fp4`` units);
* ``scale_ops_per_block``: vector work to apply a block scale (one multiply per block of
  partial sums, done in the array's accumulator or the vector unit).

2:4 structured sparsity is not a format: see :func:`sparse_2_4_bytes`.
"""
from __future__ import annotations

from dataclasses import dataclass

from sim.errors import UnknownNameError


@dataclass(frozen=True)
class NumberFormat:
    name: str
    bits: int
    kind: str  # "float" | "int"
    rate_class: str
    block_size: int = 0  # values sharing one scale; 0 = no block scale
    scale_bits: int = 0
    description: str = ""

    @property
    def bits_per_value(self) -> float:
        """Average storage bits per value, block scales included."""
        return self.bits + (self.scale_bits / self.block_size if self.block_size else 0.0)

    def bytes_for(self, n_values: int) -> int:
        """Bytes to store ``n_values`` values (rounded up to whole bytes and whole blocks)."""
        n_values = int(n_values)
        value_bytes = -(-n_values * self.bits // 8)
        if self.block_size:
            blocks = -(-n_values // self.block_size)
            value_bytes += -(-blocks * self.scale_bits // 8)
        return value_bytes

    def scale_blocks(self, n_values: int) -> int:
        return -(-int(n_values) // self.block_size) if self.block_size else 0


_FORMATS: dict[str, NumberFormat] = {}


def _register(fmt: NumberFormat, *aliases: str) -> None:
    _FORMATS[fmt.name] = fmt
    for a in aliases:
        _FORMATS[a] = fmt


_register(NumberFormat("fp32", 32, "float", "fp32", description="IEEE-754 binary32"))
_register(NumberFormat("tf32", 32, "float", "tf32", description="NVIDIA TF32 (fp32 storage, 10-bit mantissa math)"))
_register(NumberFormat("bf16", 16, "float", "bf16", description="bfloat16"), "bfloat16")
_register(NumberFormat("fp16", 16, "float", "fp16", description="IEEE-754 binary16"), "float16", "half")
_register(NumberFormat("fp8_e4m3", 8, "float", "fp8", description="OCP FP8 E4M3"), "fp8", "e4m3")
_register(NumberFormat("fp8_e5m2", 8, "float", "fp8", description="OCP FP8 E5M2"), "e5m2")
_register(NumberFormat("int8", 8, "int", "int8", description="8-bit integer"))
_register(NumberFormat("int4", 4, "int", "int4", description="4-bit integer"))
_register(NumberFormat("fp4", 4, "float", "fp4", description="FP4 E2M1 without block scales"), "fp4_e2m1")
_register(NumberFormat("mxfp4", 4, "float", "fp4", block_size=32, scale_bits=8,
                       description="OCP MXFP4: E2M1 values, one E8M0 scale per 32 values"))
_register(NumberFormat("mxfp8", 8, "float", "fp8", block_size=32, scale_bits=8,
                       description="OCP MXFP8: E4M3 values, one E8M0 scale per 32 values"))
_register(NumberFormat("nvfp4", 4, "float", "fp4", block_size=16, scale_bits=8,
                       description="NVIDIA NVFP4: E2M1 values, one FP8 E4M3 scale per 16 values"))
_register(NumberFormat("int32", 32, "int", "int32", description="32-bit integer (accumulators, int8 GEMM output)"))

#: rate classes an array may list under ``macs_per_pe_per_cycle``
RATE_CLASSES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")

#: when an array lacks units for a rate class, the op runs on the next wider units that
#: the array has (values are widened on the way in, so storage savings remain but the
#: compute rate is that of the wider units).  Never the other way: a bf16 op cannot run
#: on int8-only units.
WIDER_RATE_CLASSES = {
    "fp4": ("fp8", "fp16", "bf16", "fp32"),
    "int4": ("int8", "fp8", "fp16", "bf16"),
    "fp8": ("fp16", "bf16", "fp32"),
    "int8": (),
    "fp16": ("bf16", "fp32"),
    "bf16": ("fp16", "fp32"),
    "tf32": ("fp32",),
    "fp32": (),
}


def get_format(name: str | NumberFormat) -> NumberFormat:
    """Look up a format by name or alias (case-insensitive)."""
    if isinstance(name, NumberFormat):
        return name
    key = str(name).strip().lower()
    if key not in _FORMATS:
        raise UnknownNameError("number format", name, sorted({f.name for f in _FORMATS.values()}))
    return _FORMATS[key]


def format_names() -> list[str]:
    return sorted({f.name for f in _FORMATS.values()})


def sparse_2_4_bytes(fmt: NumberFormat | str, n_dense_values: int) -> int:
    """Bytes of a 2:4 structured-sparse tensor: half the values plus 2-bit indices.

    Each group of 4 dense values keeps 2 values and two 2-bit positions (4 bits of
    metadata per group), as in NVIDIA's sparse tensor-core format (Ampere whitepaper).
    Block scales (if any) are kept for the dense block layout.
    """
    fmt = get_format(fmt)
    n = int(n_dense_values)
    groups = -(-n // 4)
    kept = groups * 2
    value_bytes = -(-kept * fmt.bits // 8)
    meta_bytes = -(-groups * 4 // 8)
    scale_bytes = -(-fmt.scale_blocks(n) * fmt.scale_bits // 8) if fmt.block_size else 0
    return value_bytes + meta_bytes + scale_bytes
