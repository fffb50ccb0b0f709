"""The DRAM address hash and refresh stagger, as plain integers: the GF(2) polynomial
parameters of :func:`sim.model.kernels.dram._gf2_hash` for a pseudo-channel or bank index
(:func:`_hash_poly`) and the permutation that spreads the pseudo-channels' first refreshes
(:func:`_stagger_multiplier`).

They are the number theory behind :meth:`~sim.model.memory.dram_parameters.DramParams.to_array`
and :meth:`~sim.model.memory.dram_parameters.DramParams.new_state`, kept apart from the
parameter record so that the table of primitive polynomials and its arithmetic can be read
and tested on their own.
"""
from __future__ import annotations

import math

from sim.errors import ConfigError, ConfigProblem


# Primitive polynomials over GF(2), x**s + ... + 1, by degree s: the middle terms' exponents
# (at most three, so that a hash step is a few shifts and XORs).  Standard table entries
# (e.g. W. Stahnke, "Primitive binary polynomials", Math. Comp. 27 (1973)).
_PRIMITIVE_POLY_TERMS = {
    1: (), 2: (1,), 3: (1,), 4: (1,), 5: (2,), 6: (1,), 7: (1,), 8: (2, 3, 4), 9: (4,),
    10: (3,), 11: (2,), 12: (1, 4, 6), 13: (1, 3, 4), 14: (1, 6, 10), 15: (1,),
    16: (1, 3, 12),
}


def _hash_poly(shift: int, in_bits: int) -> list[int]:
    """Parameters of :func:`sim.model.kernels.dram._gf2_hash` for a ``shift``-bit index of an
    ``in_bits``-bit value: [k1, k2, k3, fold period, fold rounds, reduction steps]."""
    if shift <= 0:
        return [0, 0, 0, 0, 0, 0]
    if shift not in _PRIMITIVE_POLY_TERMS:
        raise ConfigError([ConfigProblem(file="<dram>", line=0, path="channels",
                                         message=f"2**{shift} pseudo-channels or banks are not supported")])
    terms = list(_PRIMITIVE_POLY_TERMS[shift]) + [0, 0, 0]
    period = 0
    rounds = 0
    if shift <= 3:                       # x**(2**s - 1) = 1: fold with that period first
        period = (1 << shift) - 1
        while period << rounds < 63:
            rounds += 1
    bits = period if period else max(in_bits, shift)
    drop = shift - max(terms[:3])        # each step shortens the value by this many bits
    steps = 0 if shift == 1 else max(0, -(-(bits - shift) // drop))
    if shift == 1:                       # x + 1: the parity of all bits
        terms = [0, 0, 0]
    return terms[:3] + [period, rounds, steps]


def _stagger_multiplier(n: int) -> int:
    """Integer nearest 0.618 n that is coprime with n (1 for n <= 2)."""
    if n <= 2:
        return 1
    base = int(round(0.6180339887498949 * n))
    for d in range(n):
        for a in (base + d, base - d):
            if 0 < a < n and math.gcd(a, n) == 1:
                return a
    return 1
