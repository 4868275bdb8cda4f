"""What every workflow shares: the process options and the initialisation options.

Every ``Config`` of :mod:`mesadyn.workflows` starts with the process options of
:class:`ProcessOptions` (``x1, sigma, scale, d, T, seed``); the ones that start a flow or a
training run from a point validate ``init, a0, b0, sigma_w`` with :func:`check_init`.  Both are
validated on construction, so a bad value fails before any work, naming the value.
Family construction itself lives in :func:`mesadyn.process.family`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import MesadynError, check_finite, check_int, check_positive

if TYPE_CHECKING:  # torch-backed types: imported where they are built
    import torch

    from ..process import Family

#: Largest accepted seed (numpy and torch generators take 64-bit seeds).
MAX_SEED = 2**63 - 1


class Init(enum.StrEnum):
    """How θ starts: Assumption 3.1's diagonal point, or iid ``N(0, σ_w²)`` entries."""

    DIAGONAL = "diagonal"
    GAUSSIAN = "gaussian"


def choice(name: str, value: object, enum_type: type[enum.StrEnum]) -> Any:
    """``value`` as a member of ``enum_type``, or a MesadynError naming it and the choices."""
    try:
        return enum_type(value if isinstance(value, str) else repr(value))
    except ValueError:
        names = ", ".join(m.value for m in enum_type)
        raise MesadynError(f"unknown {name} {value!r}; choose {names}") from None


def check_seed(seed: object) -> int:
    """A seed in ``0 .. 2**63 − 1`` (a bigger one does not fit the generators)."""
    s = check_int("seed", seed, 0)
    if s > MAX_SEED:
        raise MesadynError(f"seed must be <= 2**63 - 1, got seed={s}")
    return s


def optional_path(name: str, value: object) -> str | None:
    """``None`` or a non-empty path string."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise MesadynError(f"{name} must be a file path, got {value!r}")
    return value


@dataclass(frozen=True)
class ProcessOptions:
    """The process: initial-token family ``x1`` (Section 3.1) with its ``sigma``/``scale``,
    dimension ``d``, training length ``T`` and the random ``seed``."""

    x1: str = "gaussian"
    sigma: float = 1.0
    scale: float = 1.0
    d: int = 5
    T: int = 100
    seed: int = 1

    def __post_init__(self) -> None:
        from ..theory import check_T

        # the family's own constructor names a bad family, d, sigma or scale
        fam = self.family()
        set_fields(self, d=fam.d, T=check_T(self.T), seed=check_seed(self.seed))

    def family(self) -> Family:
        """The :class:`~mesadyn.process.Family` these options name."""
        from ..process import family

        return family(self.x1, self.d, sigma=self.sigma, scale=self.scale)


def check_init(init: object, a0: object, b0: object,
               sigma_w: object) -> tuple[Init, float, float, float]:
    """The validated start options ``(init, a0, b0, sigma_w)``: diagonal is Assumption 3.1's
    ``W^KQ_32 = a0 I``, ``W^PV_12 = b0 I``; gaussian draws every entry from ``N(0, sigma_w²)``."""
    return (choice("init", init, Init), check_finite("a0", a0), check_finite("b0", b0),
            check_positive("sigma_w", sigma_w))


def set_fields(config: object, **values: object) -> None:
    """Store validated values on a frozen dataclass (inside its ``__post_init__``)."""
    for name, value in values.items():
        object.__setattr__(config, name, value)


def initial_theta(init: Init, d: int, a0: float, b0: float, sigma_w: float,
                  seed: int) -> torch.Tensor:
    """θ0 from the init options (:func:`mesadyn.model.diagonal_init` / ``gaussian_init``)."""
    from ..model import diagonal_init, gaussian_init

    if init is Init.DIAGONAL:
        return diagonal_init(d, a0, b0)
    return gaussian_init(d, sigma_w, seed)
