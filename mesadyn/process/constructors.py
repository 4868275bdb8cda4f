"""The constructors of the families, each checking its arguments (a bad value is one
:class:`~mesadyn.errors.MesadynError` naming it)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import MesadynError, check_finite, check_int, check_positive
from .families import IID, MAX_ORDER, Family, Fixed, Sampled, Sampler, Sparse
from .mixture import Mixture
from .moments import Moments, Shifted, hankel_atoms
from .samplers import GaussianDraw, RademacherDraw, UniformDraw

if TYPE_CHECKING:
    import numpy as np

__all__ = ["SCALE_RANGE", "check_scale", "fixed", "gaussian", "iid", "mixture", "moments", "ones",
           "rademacher", "sampled", "shifted", "sparse", "uniform"]

#: Token scales (σ, c, |μ|) are kept within these bounds: the moments hold their sixth powers
#: and the loss products of them, which must stay finite and non-zero in float64.
SCALE_RANGE = (1e-20, 1e20)


def check_scale(name: str, value: object) -> float:
    """A positive token scale within :data:`SCALE_RANGE`, else a one-line error naming it."""
    v = check_positive(name, value)
    lo, hi = SCALE_RANGE
    if not lo <= v <= hi:
        raise MesadynError(f"{name} must lie in [{lo:g}, {hi:g}] (its sixth power enters the "
                           f"moments, and must stay finite and non-zero), got {name}={v!r}")
    return v


def gaussian(d: int, sigma: float = 1.0) -> IID:
    """``x_1 ~ N(0, σ² I_d)``: κ1 = 3σ⁴, κ2 = 15σ⁶, κ3 = 3(d−1)σ⁶."""
    d = check_int("d", d, 1)
    s = check_scale("sigma", sigma)
    return IID("gaussian", d, m2=s**2, m4=3 * s**4, m6=15 * s**6, sampler=GaussianDraw(d, s))


def sparse(d: int, scale: float = 1.0, *, c: float | None = None) -> Sparse:
    """Example 4.1: ``x_1 = ±c e_i`` with ``i`` uniform, ``c = scale`` (the name every
    ``Config`` and ``--scale`` use): κ1 = c⁴/d, κ2 = c⁶/d, κ3 = 0.

    ``c=`` is the deprecated spelling of ``scale`` (a ``DeprecationWarning``; removed in the
    next release)."""
    if c is not None:
        import warnings

        warnings.warn("sparse(d, c=...) is deprecated: use sparse(d, scale=...)",
                      DeprecationWarning, stacklevel=2)
        scale = c
    d = check_int("d", d, 1)
    value = check_scale("scale", scale)
    return Sparse("sparse", d, value)


def rademacher(d: int) -> IID:
    """iid ±1 coordinates: κ1 = κ2 = 1, κ3 = d − 1."""
    d = check_int("d", d, 1)
    return IID("rademacher", d, m2=1.0, m4=1.0, m6=1.0, sampler=RademacherDraw(d))


def uniform(d: int) -> IID:
    """iid U[−1, 1] coordinates: κ1 = 1/5, κ2 = 1/7, κ3 = (d − 1)/15."""
    d = check_int("d", d, 1)
    return IID("uniform", d, m2=1 / 3, m4=1 / 5, m6=1 / 7, sampler=UniformDraw(d))


def iid(d: int, m2: float, m4: float, m6: float, sampler: Sampler | None = None,
        name: str = "iid") -> IID:
    """Any iid zero-mean family, fixed by its moments ``m2, m4, m6`` (Assumption 4.1)."""
    d = check_int("d", d, 1)
    m2, m4, m6 = (check_positive(k, v) for k, v in (("m2", m2), ("m4", m4), ("m6", m6)))
    if m4 < m2**2 or m6 * m2 < m4**2:
        raise MesadynError(f"moments m2={m2}, m4={m4}, m6={m6} are not those of a distribution")
    if sampler is not None and not callable(sampler):
        raise MesadynError(f"sampler must be callable, got {sampler!r}")
    return IID(name, d, m2=m2, m4=m4, m6=m6, sampler=sampler)


def fixed(vector: list[float] | np.ndarray | tuple[float, ...], name: str = "fixed") -> Fixed:
    """A fixed initial token ``x_1 = v`` (Section 4.3 uses ``v = 1_d``)."""
    import numpy as np

    v = tuple(float(x) for x in np.asarray(vector, dtype=np.float64).ravel())
    if len(v) < 1 or not all(math.isfinite(x) for x in v):
        raise MesadynError(f"the fixed initial token must be a finite vector, got {list(v)}")
    return Fixed(name, len(v), v)


def sampled(d: int, sampler: Sampler, name: str = "sampled") -> Sampled:
    """A family known only through ``sampler(n, generator, device) -> (n, d)`` (kind
    ``"sampled"``): it has no exact moments, so only sampled fields apply to it."""
    d = check_int("d", d, 1)
    if not callable(sampler):
        raise MesadynError(f"sampler must be callable, got {sampler!r}")
    return Sampled(name, d, sampler)


def ones(d: int) -> Fixed:
    """``x_1 = 1_d`` (Section 4.3); Assumption 4.1 fails."""
    d = check_int("d", d, 1)
    return fixed([1.0] * d, name="ones")


def shifted(d: int, mu: float = 0.0, sigma: float = 1.0) -> Shifted:
    """``x_1 = μ·1_d + σ g``, ``g ~ N(0, I_d)`` (σ >= 0, not both 0)."""
    d = check_int("d", d, 1)
    mu = check_finite("mu", mu)
    sigma = check_finite("sigma", sigma)
    if sigma < 0:
        raise MesadynError(f"sigma must be >= 0, got sigma={sigma!r}")
    if sigma == 0 and mu == 0:
        raise MesadynError("shifted with mu=0 and sigma=0 is the zero token; give mu or sigma")
    for name, v in (("sigma", sigma), ("mu", abs(mu))):
        if v != 0:
            check_scale(name, v)
    return Shifted("shifted", d, mu, sigma)


def moments(d: int, values: Sequence[float] | Sequence[Sequence[float]] | np.ndarray,
            name: str = "moments") -> Moments:
    """Independent coordinates with ``E[x^k] = values[k−1]``, k = 1..6 (one sequence for every
    coordinate), or ``values[j][k−1]`` for coordinate j (a (d, 6) table).

    Raises:
        MesadynError: a sequence that no distribution has (Hankel positivity,
            :func:`hankel_atoms`), or a table of the wrong shape.
    """
    import numpy as np

    d = check_int("d", d, 1)
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != MAX_ORDER or arr.shape[0] not in (1, d):
        raise MesadynError(
            f"moments must be 6 numbers E[x^1..x^6] or a ({d}, 6) table, got shape {arr.shape}"
        )
    rows = tuple(tuple(float(v) for v in r) for r in arr)
    for j, r in enumerate(rows):
        hankel_atoms(r, "moments" if len(rows) == 1 else f"moments of coordinate {j}")
    if len(set(rows)) == 1:
        rows = rows[:1]
    return Moments(name, d, rows)


def mixture(components: Sequence[tuple[float, Family]], name: str = "mixture") -> Mixture:
    """Draw ``F_i`` with probability ``p_i``; the ``p_i`` lie in [0, 1] and sum to 1."""
    comps = list(components)
    if not comps:
        raise MesadynError("a mixture needs at least one component")
    ps = []
    for p, f in comps:
        p = check_finite("p", p)
        if not 0 <= p <= 1:
            raise MesadynError(f"mixture weights must lie in [0, 1], got p={p!r}")
        if not isinstance(f, Family):
            raise MesadynError(f"mixture components must be families, got {f!r}")
        ps.append(p)
    if abs(math.fsum(ps) - 1) > 1e-12:
        raise MesadynError(f"mixture weights must sum to 1, got {ps} (sum {math.fsum(ps)!r})")
    d = comps[0][1].d
    if any(f.d != d for _, f in comps):
        raise MesadynError(f"mixture components must share d, got {[f.d for _, f in comps]}")
    return Mixture(name, d, tuple((p, f) for p, (_, f) in zip(ps, comps, strict=True)))
