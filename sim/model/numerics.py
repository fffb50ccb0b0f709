"""How much error a number format adds to a weight matrix (torch on the CPU, imported lazily).

Every quantiser here is written out (no library quantiser is used): values are divided by
their scale, rounded to the nearest point of the format's grid with ties to even
(``torch.round`` rounds half to even), saturated at the format's largest value, and
multiplied back.  The error is measured on the dequantised result, in float64.

Formats (``fmt``) and their scaling
-----------------------------------
``int8``      per-output-channel (row) symmetric: ``s = max|row| / 127``, ``q ∈ [-127, 127]``;
              one 16-bit scale per row (``bits = 8 + 16/k``).
``int4``      group-wise along the input dimension (``group=128``).  Default asymmetric,
              GPTQ-style: the group range is widened to include 0, ``s = (max − min)/15``,
              ``zero = round(−min/s)``, ``q ∈ [0, 15]``; a 16-bit scale and a 4-bit zero per
              group (``bits = 4 + 20/group``).  ``symmetric=True``: ``s = max|g| / 7``,
              ``q ∈ [−8, 7]`` (``bits = 4 + 16/group``).
``fp8_e4m3``  OCP E4M3 (FN: no infinities, max 448, min normal 2^-6, subnormals to 2^-9)
              with one per-tensor fp32 scale ``amax / 448``.
``fp8_e5m2``  OCP E5M2 (max 57344, min normal 2^-14, subnormals to 2^-16), per-tensor scale.
``mxfp4``     OCP Microscaling spec v1.0: blocks of 32 values along the input dimension
              share an E8M0 (power-of-two) scale ``X = 2^(floor(log2(amax)) − 2)`` (2 is the
              largest exponent of E2M1), elements E2M1 (grid 0, 0.5, 1, 1.5, 2, 3, 4, 6)
              with round-to-nearest-even and saturation at ±6 (``bits = 4 + 8/32 = 4.25``).
``nvfp4``     NVIDIA NVFP4: blocks of 16 values share an FP8 E4M3 scale, plus one fp32
              per-tensor scale ``amax / (448·6)`` so block scales fit E4M3; the block scale
              is ``amax_block / 6 / s_tensor`` rounded to E4M3; elements E2M1
              (``bits = 4 + 8/16 = 4.5``).
``2:4``       magnitude pruning: in every group of 4 consecutive values along the input
              dimension the 2 largest |w| are kept (ties: the earlier position), kept values
              stored in ``base`` (default bf16) with 2-bit positions
              (``bits = 16/2 + 1 = 9`` for bf16), as :func:`sim.spec.dtypes.sparse_2_4_bytes`.
``bf16``, ``fp16``, ``fp32``  plain casts (baselines).

``bits_per_value`` counts element bits plus per-row / per-group / per-block scales, but not
a single per-tensor scalar (an fp32 scale over a whole matrix is 0.00...1 bit per value).

Weights are 2-D ``[out, in]`` (rows = output channels, the reduction dimension ``k`` is
the last one); 1-D is one row; more dimensions are flattened to rows.  A last dimension
that is not a multiple of the block / group is zero-padded (the padding cannot change a
block's max) and cropped after.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

from sim.errors import UnknownNameError, WorkloadError

E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)

#: (mantissa bits, minimum normal exponent, largest finite value)
FLOAT_GRIDS = {
    "fp8_e4m3": (3, -6, 448.0),
    "fp8_e5m2": (2, -14, 57344.0),
    "fp4_e2m1": (1, 0, 6.0),
}

_ALIASES = {
    "int8": "int8", "int4": "int4",
    "fp8_e4m3": "fp8_e4m3", "fp8": "fp8_e4m3", "e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2", "e5m2": "fp8_e5m2",
    "mxfp4": "mxfp4", "nvfp4": "nvfp4",
    "2:4": "2:4", "sparse_2_4": "2:4", "sparse24": "2:4",
    "bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "fp32": "fp32",
}

FORMATS = ("int8", "int4", "fp8_e4m3", "fp8_e5m2", "mxfp4", "nvfp4", "2:4")


def _canonical(fmt: str) -> str:
    key = str(fmt).strip().lower()
    if key not in _ALIASES:
        raise UnknownNameError("quantisation format", fmt, sorted(set(_ALIASES)))
    return _ALIASES[key]


def _as_rows(weight: Any):
    """float64 2-D tensor view of ``weight`` (torch tensor or numpy array) and its shape."""
    import torch

    if isinstance(weight, torch.Tensor):
        t = weight.detach().to("cpu", torch.float64)
    else:
        import numpy as np

        t = torch.as_tensor(np.asarray(weight, dtype=np.float64))
    if t.dim() == 0 or t.numel() == 0:
        raise WorkloadError("format_error: the weight must be a non-empty vector or matrix")
    if not torch.isfinite(t).all():
        raise WorkloadError("format_error: the weight contains NaN or infinite values")
    shape = tuple(t.shape)
    if t.dim() == 1:
        t = t.reshape(1, -1)
    elif t.dim() > 2:
        t = t.reshape(-1, t.shape[-1])
    return t, shape


def _blocks(t, size: int):
    """Zero-pad the last dimension to a multiple of ``size``; return [rows, blocks, size]."""
    import torch

    rows, k = t.shape
    pad = (-k) % size
    if pad:
        t = torch.cat([t, t.new_zeros(rows, pad)], dim=1)
    return t.reshape(rows, -1, size), k


def _unblock(b, k: int):
    return b.reshape(b.shape[0], -1)[:, :k]


def round_to_float_grid(x, mantissa_bits: int, min_normal_exp: int, max_value: float):
    """Round to a binary float grid (``mantissa_bits`` stored bits, subnormals below
    ``2^min_normal_exp``) with ties to even, saturating at ``±max_value``."""
    import torch

    x = x.to(torch.float64)
    ax = x.abs()
    _, e = torch.frexp(ax)  # ax = m·2^e, m in [0.5, 1)
    exp = (e - 1).clamp(min=min_normal_exp)
    step = torch.pow(torch.tensor(2.0, dtype=torch.float64), (exp - mantissa_bits).to(torch.float64))
    q = torch.round(ax / step) * step
    q = q.clamp(max=max_value)
    return torch.copysign(q, x)


def _float_grid(x, name: str):
    m, emin, mx = FLOAT_GRIDS[name]
    return round_to_float_grid(x, m, emin, mx)


# --------------------------------------------------------------------------- quantisers


def _int8(t, **_):
    import torch

    s = t.abs().amax(dim=1, keepdim=True) / 127.0
    s = torch.where(s > 0, s, torch.ones_like(s))
    q = torch.clamp(torch.round(t / s), -127, 127)
    return q * s, 8 + 16 / t.shape[1]


def _int4(t, group: int = 128, symmetric: bool = False, **_):
    import torch

    if group < 1:
        raise WorkloadError(f"int4: group must be >= 1, got {group}")
    b, k = _blocks(t, group)
    if symmetric:
        s = b.abs().amax(dim=-1, keepdim=True) / 7.0
        s = torch.where(s > 0, s, torch.ones_like(s))
        q = torch.clamp(torch.round(b / s), -8, 7) * s
        bits = 4 + 16 / group
    else:
        lo = b.amin(dim=-1, keepdim=True).clamp(max=0.0)
        hi = b.amax(dim=-1, keepdim=True).clamp(min=0.0)
        s = (hi - lo) / 15.0
        s = torch.where(s > 0, s, torch.ones_like(s))
        zero = torch.round(-lo / s)
        q = (torch.clamp(torch.round(b / s) + zero, 0, 15) - zero) * s
        bits = 4 + 20 / group
    return _unblock(q, k), bits


def _fp8(t, name: str, **_):
    import torch

    fmax = FLOAT_GRIDS[name][2]
    amax = float(t.abs().max())
    s = amax / fmax if amax > 0 else 1.0
    s = float(torch.tensor(s, dtype=torch.float32))  # the scale is stored as fp32
    return _float_grid(t / s, name) * s, 8.0


def mx_shared_scale(amax):
    """OCP MX v1.0 E8M0 scale for FP4 E2M1 elements: ``2^(floor(log2(amax)) − 2)``, clamped
    to the E8M0 range 2^-127..2^127; 1 for an all-zero block."""
    import torch

    _, e = torch.frexp(amax)
    exp = (e - 1 - 2).clamp(-127, 127).to(torch.float64)
    scale = torch.pow(torch.tensor(2.0, dtype=torch.float64), exp)
    return torch.where(amax > 0, scale, torch.ones_like(scale))


def _mxfp4(t, block: int = 32, **_):
    b, k = _blocks(t, block)
    x = mx_shared_scale(b.abs().amax(dim=-1, keepdim=True))
    q = _float_grid(b / x, "fp4_e2m1") * x
    return _unblock(q, k), 4 + 8 / block


def _nvfp4(t, block: int = 16, **_):
    import torch

    b, k = _blocks(t, block)
    amax = float(t.abs().max())
    s_t = amax / (448.0 * 6.0) if amax > 0 else 1.0
    s_t = float(torch.tensor(s_t, dtype=torch.float32))
    s_b = _float_grid(b.abs().amax(dim=-1, keepdim=True) / 6.0 / s_t, "fp8_e4m3")
    scale = s_b * s_t
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.where(scale > 0, _float_grid(b / safe, "fp4_e2m1") * scale, torch.zeros_like(b))
    return _unblock(q, k), 4 + 8 / block


def _cast(t, name: str):
    import torch

    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]
    return t.to(dt).to(torch.float64)


def _sparse24(t, base: str | None = "bf16", **_):
    import torch

    b, k = _blocks(t, 4)
    order = torch.sort(b.abs(), dim=-1, descending=True, stable=True).indices
    mask = torch.zeros_like(b, dtype=torch.bool)
    mask.scatter_(-1, order[..., :2], True)
    q = torch.where(mask, b, torch.zeros_like(b))
    bits_base = 64 if base is None else {"bf16": 16, "fp16": 16, "fp32": 32}.get(base)
    if bits_base is None:
        raise WorkloadError(f"2:4: base must be bf16, fp16, fp32 or None, got {base!r}")
    if base is not None:
        q = _cast(q, base)
    return _unblock(q, k), bits_base / 2 + 1


def quantize(weight: Any, fmt: str, **opts: Any):
    """The weight after a round trip through ``fmt`` (float64 tensor of the input's shape)."""
    q, _ = _quantize(weight, fmt, **opts)
    return q


def _quantize(weight: Any, fmt: str, **opts: Any):
    name = _canonical(fmt)
    t, shape = _as_rows(weight)
    if name == "int8":
        q, bits = _int8(t, **opts)
    elif name == "int4":
        q, bits = _int4(t, **opts)
    elif name in ("fp8_e4m3", "fp8_e5m2"):
        q, bits = _fp8(t, name, **opts)
    elif name == "mxfp4":
        q, bits = _mxfp4(t, **opts)
    elif name == "nvfp4":
        q, bits = _nvfp4(t, **opts)
    elif name == "2:4":
        q, bits = _sparse24(t, **opts)
    else:
        q, bits = _cast(t, name), {"bf16": 16, "fp16": 16, "fp32": 32}[name]
    return q.reshape(shape), float(bits)


def format_error(weight: Any, fmt: str, **opts: Any) -> dict[str, float]:
    """Error of storing ``weight`` in ``fmt``: relative Frobenius error ``‖W−Q‖/‖W‖``,
    largest absolute error, SQNR in dB (``10·log10(ΣW² / Σ(W−Q)²)``, inf when exact) and
    storage bits per value (scales included, see the module notes)."""
    import torch

    t, shape = _as_rows(weight)
    q, bits = _quantize(t.reshape(shape), fmt, **opts)
    w = t.reshape(shape)
    err = w - q
    e2 = float((err * err).sum())
    w2 = float((w * w).sum())
    return {
        "rel_fro_error": math.sqrt(e2 / w2) if w2 > 0 else (0.0 if e2 == 0 else math.inf),
        "max_abs_error": float(err.abs().max()),
        "sqnr_db": (10 * math.log10(w2 / e2)) if e2 > 0 else math.inf,
        "bits_per_value": bits,
    }


def format_error_table(weight: Any, formats: Iterable[str | tuple[str, dict]] | None = None):
    """One row per format (index ``format``), columns as :func:`format_error`.

    ``formats``: names, or ``(name, options)`` pairs such as ``("int4", {"group": 64})``;
    default :data:`FORMATS`.
    """
    import pandas as pd

    rows, index = [], []
    for item in (FORMATS if formats is None else formats):
        if isinstance(item, tuple):
            fmt, opts = item
            label = fmt + "(" + ", ".join(f"{k}={v}" for k, v in sorted(opts.items())) + ")"
        else:
            fmt, opts, label = item, {}, item
        rows.append(format_error(weight, fmt, **opts))
        index.append(label)
    return pd.DataFrame(rows, index=pd.Index(index, name="format"))


__all__ = ["format_error", "format_error_table", "quantize", "round_to_float_grid", "mx_shared_scale",
           "E2M1_GRID", "FLOAT_GRIDS", "FORMATS"]
