"""The CLI's family grammar: :func:`family` from the option values, :func:`parse_mixture`
(``"p1:name1,p2:name2(key=value;...)"``) and :func:`parse_moments` (``"m1,...,m6;..."``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum

from ..errors import MesadynError, check_finite
from .constructors import gaussian, ones, rademacher, shifted, sparse, uniform
from .constructors import mixture as _mixture_family
from .constructors import moments as _moments_family
from .families import MAX_ORDER, Family
from .mixture import Mixture

__all__ = ["FAMILIES", "FamilyName", "family", "parse_mixture", "parse_moments"]

#: The paper's families (Section 3.1, Example 4.1, Section 4.3), by name.
FAMILIES = ("gaussian", "sparse", "ones", "rademacher", "uniform")


class FamilyName(StrEnum):
    """Every family :func:`family` builds by name (the CLI's ``--x1`` choices)."""

    GAUSSIAN = "gaussian"
    SPARSE = "sparse"
    ONES = "ones"
    RADEMACHER = "rademacher"
    UNIFORM = "uniform"
    SHIFTED = "shifted"
    MOMENTS = "moments"
    MIXTURE = "mixture"


_ITEM = re.compile(r"^\s*([^:]+?)\s*:\s*([A-Za-z]+)\s*(?:\((.*)\))?\s*$")


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def parse_mixture(text: str, d: int, *, sigma: float = 1.0, scale: float = 1.0,
                  mu: float = 0.0,
                  moments: str | Sequence[float] | Sequence[Sequence[float]] | None = None
                  ) -> Mixture:
    """The mixture written ``"p1:name1,p2:name2(key=value;...)"``, e.g.
    ``"0.3:ones,0.7:gaussian"`` or ``"0.5:gaussian(sigma=0.5),0.5:gaussian(sigma=2)"``.

    Each component is :func:`family` ``(name, d, ...)`` with the shared ``sigma``, ``scale``,
    ``mu`` and ``moments`` unless its parentheses override them (keys: sigma, scale, mu).
    """
    comps: list[tuple[float, Family]] = []
    for item in _split_top(text):
        got = _ITEM.match(item)
        if got is None:
            raise MesadynError(
                f"mixture component {item.strip()!r} must read p:name or p:name(key=value;...)"
            )
        p_text, name, args = got.groups()
        try:
            p = float(p_text)
        except ValueError:
            raise MesadynError(f"mixture weight must be a number, got {p_text!r}") from None
        if name == FamilyName.MIXTURE:
            raise MesadynError("a mixture component cannot itself be a mixture")
        opts: dict[str, float] = {"sigma": sigma, "scale": scale, "mu": mu}
        given: set[str] = set()
        for kv in (args or "").split(";"):
            if not kv.strip():
                continue
            key, _, val = kv.partition("=")
            key = key.strip()
            if key not in opts:
                raise MesadynError(
                    f"mixture component {name!r}: unknown parameter {key!r} (sigma, scale, mu)"
                )
            if key in given:
                raise MesadynError(f"mixture component {name!r}: {key} is given twice in "
                                   f"{item.strip()!r}; give each parameter once")
            given.add(key)
            try:
                opts[key] = float(val)
            except ValueError:
                raise MesadynError(f"mixture component {name!r}: {key}={val.strip()!r} "
                                   "is not a number") from None
        uses_moments = name == FamilyName.MOMENTS
        comps.append((p, family(name, d, sigma=opts["sigma"], scale=opts["scale"],
                                mu=opts["mu"], moments=moments if uses_moments else None)))
    if moments is not None and not any(f.name == FamilyName.MOMENTS for _, f in comps):
        raise MesadynError(f"moments={moments!r} were given but no mixture component is the "
                           "moments family; drop them or add a moments component")
    return _mixture_family(comps)


def parse_moments(text: str) -> list[list[float]]:
    """``"m1,...,m6"`` (one sequence) or ``"m1,...,m6;m1,...,m6;..."`` (one per coordinate)."""
    rows = []
    for part in text.split(";"):
        entries = part.replace(" ", "").split(",")
        if "" in entries:  # a trailing, leading or doubled comma: an entry is missing
            raise MesadynError(f"moments must be six numbers m1,...,m6 separated by single "
                               f"commas, got {part.strip()!r} (an empty entry)")
        try:
            rows.append([float(v) for v in entries])
        except ValueError:
            raise MesadynError(f"moments must be numbers m1,...,m6, got {part.strip()!r}") from None
        if len(rows[-1]) != MAX_ORDER:
            raise MesadynError(f"moments need 6 numbers E[x^1..x^6], got {part.strip()!r}")
    return rows


def family(name: str, d: int, sigma: float = 1.0, scale: float = 1.0, mu: float = 0.0,
           moments: str | Sequence[float] | Sequence[Sequence[float]] | None = None,
           mixture: str | None = None) -> Family:
    """The family called ``name`` (a :class:`FamilyName`) from the CLI's option values.

    Arguments:
        name: gaussian (σ), sparse (c = ``scale``), ones, rademacher, uniform,
            shifted (``mu``, σ), moments (``moments``: ``"m1,...,m6"``, ``;`` between
            per-coordinate sequences, or numbers), mixture (``mixture``, :func:`parse_mixture`).

    Raises:
        MesadynError: an unknown name, bad parameters, or an option the family does not use.
    """
    if not isinstance(name, str) or name not in FamilyName.__members__.values():
        raise MesadynError(
            f"unknown family {name!r}; choose one of {', '.join(m.value for m in FamilyName)}"
        )
    mu = check_finite("mu", mu)
    if mixture is not None and not isinstance(mixture, str):
        raise MesadynError(f"mixture must be text such as '0.3:ones,0.7:gaussian', got "
                           f"{mixture!r}")
    if mu != 0 and name not in (FamilyName.SHIFTED, FamilyName.MIXTURE):
        raise MesadynError(f"mu={mu!r} applies to the shifted family, not {name!r}")
    if mixture is not None and name != FamilyName.MIXTURE:
        raise MesadynError(f"a mixture was given but the family is {name!r}; use mixture")
    if moments is not None and name not in (FamilyName.MOMENTS, FamilyName.MIXTURE):
        raise MesadynError(f"moments={moments!r} apply to the moments family (or a moments "
                           f"component of a mixture), not {name!r}; use --x1 moments")
    if name == FamilyName.GAUSSIAN:
        return gaussian(d, sigma)
    if name == FamilyName.SPARSE:
        return sparse(d, scale)
    if name == FamilyName.ONES:
        return ones(d)
    if name == FamilyName.RADEMACHER:
        return rademacher(d)
    if name == FamilyName.UNIFORM:
        return uniform(d)
    if name == FamilyName.SHIFTED:
        return shifted(d, mu, sigma)
    if name == FamilyName.MOMENTS:
        if moments is None:
            raise MesadynError("the moments family needs its moments E[x^1..x^6]")
        values = parse_moments(moments) if isinstance(moments, str) else moments
        return _moments_family(d, values)
    if mixture is None:
        raise MesadynError("the mixture family needs its components, e.g. 0.3:ones,0.7:gaussian")
    return parse_mixture(mixture, d, sigma=sigma, scale=scale, mu=mu, moments=moments)
