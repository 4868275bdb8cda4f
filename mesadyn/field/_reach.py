"""The reach of the exact Haar field, checked without importing numpy (``FieldSpec`` calls it).

The exact Haar field (:mod:`mesadyn.field._haar`) takes one O(T) lattice sum per set partition
β of a tensor's slots, CUE exponent vector m and h-pattern: ``Σ_β (2d − 1)^{|β|−1}`` per
pattern, about 2·10⁴ at d = 4 and 1.5·10⁵ at d = 5 (build 3–8 s at d = 4, T = 20–100, and 29 s
at d = 5, T = 100, on a shared 2-core machine), and 5·10⁵ at d = 6.  It is built for
``d <= HAAR_MAX_D`` and ``T <= HAAR_MAX_T``, and without noise (the noise pairs change the
Weingarten degree and carry covariance weights: not implemented); beyond that only the sampled
fields apply.
"""

from __future__ import annotations

from ..errors import MesadynError

#: The largest d and T the exact Haar field is built for.
HAAR_MAX_D = 5
HAAR_MAX_T = 1000


def check_haar(d: int, T: int, noise: float) -> None:
    """The exact Haar field's reach: noiseless, ``d <= HAAR_MAX_D``, ``T <= HAAR_MAX_T``.

    Raises:
        MesadynError: one line naming the value beyond the reach.
    """
    why = "use --field mc (or finite)"
    if noise != 0:
        raise MesadynError(f"no exact field for rotation=haar with noise={noise!r}: the exact "
                           f"Haar field is noiseless; {why}")
    if d > HAAR_MAX_D:
        raise MesadynError(f"the exact Haar field is built for d <= {HAAR_MAX_D}, got d={d} "
                           f"(its time sums grow like (2d-1)^(d-1)); {why}")
    if T > HAAR_MAX_T:
        raise MesadynError(f"the exact Haar field is built for T <= {HAAR_MAX_T}, got T={T}; "
                           f"{why}")
