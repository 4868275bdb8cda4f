"""Population-loss vector fields behind one interface (:class:`Field`)."""

from __future__ import annotations

from typing import Any

from ..errors import MesadynError
from ..process import Family
from ._base import Field
from .exact import ExactField
from .finite import FiniteField, SampledField
from .montecarlo import Estimate, MonteCarloField

#: The field kinds :func:`make_field` builds, with the options each accepts.
FIELD_KINDS: dict[str, tuple[str, ...]] = {
    "exact": ("cache_dir", "cache", "device", "max_bytes"),
    "mc": ("samples", "seed", "batches", "device"),
    "finite": ("m", "seed", "device"),
}


def make_field(kind: str, family: Family, T: int, **kw: Any) -> Field:
    """The field of ``kind`` (``"exact"``, ``"mc"`` or ``"finite"``) for ``family`` and ``T``.

    Options set to ``None`` take their defaults; an option the kind does not take is an error.
    """
    if kind not in FIELD_KINDS:
        raise MesadynError(f"unknown field {kind!r}; choose one of {', '.join(FIELD_KINDS)}")
    opts = {k: v for k, v in kw.items() if v is not None}
    bad = sorted(set(opts) - set(FIELD_KINDS[kind]))
    if bad:
        raise MesadynError(
            f"the {kind} field does not take {', '.join(bad)}; it takes "
            f"{', '.join(FIELD_KINDS[kind])}"
        )
    if kind == "exact":
        return ExactField(family, T, **opts)
    if kind == "mc":
        return MonteCarloField(family, T, **opts)
    if "m" not in opts:
        raise MesadynError("the finite field needs the number of sequences m")
    return FiniteField(family, T, **opts)


__all__ = ["FIELD_KINDS", "Estimate", "ExactField", "Field", "FiniteField", "MonteCarloField",
           "SampledField", "make_field"]
