"""Mixtures of families: draw ``F_i`` with probability ``p_i`` (docs/design.md §6)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, final

from .families import CoordinateGroup, Family, NoReducedSystem, _check_counts, _device

if TYPE_CHECKING:  # imported inside the functions that use them: `mesadyn theory` loads neither
    import numpy as np
    import torch

__all__ = ["Mixture"]


@final
@dataclass(frozen=True)
class Mixture(Family):
    """Draw ``F_i`` with probability ``p_i`` (docs/design.md §6): joint moments are the p-weighted
    sums, a partition is admitted if any component admits it, and κ1, κ2, κ3 are p-weighted
    sums when every component has them (the diagonal reduction is linear in the κ's)."""

    kind: ClassVar[str] = "mixture"
    name: str
    d: int
    components: tuple[tuple[float, Family], ...]

    @property
    def exact_moments(self) -> bool:
        return all(f.exact_moments for _, f in self.components)

    @property
    def assumption_41(self) -> bool:
        return all(f.assumption_41 for _, f in self.components)

    @property
    def coordinate_group(self) -> CoordinateGroup:
        group = CoordinateGroup.SIGNED_PERMUTATIONS
        for _, f in self.components:
            group = group.meet(f.coordinate_group)
        return group

    def kappas(self) -> tuple[float, float, float]:
        import numpy as np

        total = np.zeros(3)
        for p, f in self.components:
            try:
                total += p * np.asarray(f.kappas())
            except NoReducedSystem as exc:
                raise NoReducedSystem(
                    f"mixture {self.name!r} has no reduced system: component {f.name!r}: {exc}"
                ) from None
        return float(total[0]), float(total[1]), float(total[2])

    def moment(self, counts: np.ndarray) -> np.ndarray:
        import numpy as np

        counts = _check_counts(counts, self.d)
        out = np.zeros(counts.shape[0])
        for p, f in self.components:
            if p != 0:
                out = out + p * f.moment(counts)
        return out

    def admits(self, labels: tuple[int, ...]) -> bool:
        return any(f.admits(labels) for p, f in self.components if p != 0)

    @property
    def second_moment(self) -> float:
        return math.fsum(p * f.second_moment for p, f in self.components)

    @property
    def mean_sq_norm(self) -> float:
        return math.fsum(p * f.mean_sq_norm for p, f in self.components)

    def sample(self, n: int, generator: torch.Generator,
               device: torch.device | str | None = None) -> torch.Tensor:
        import numpy as np
        import torch

        if len(self.components) == 1:
            return self.components[0][1].sample(n, generator, device)
        device = _device(generator, device)
        u = torch.rand(n, generator=generator, device=device, dtype=torch.float64)
        cum = torch.tensor(np.cumsum([p for p, _ in self.components])[:-1],
                           dtype=torch.float64, device=device)
        which = torch.bucketize(u, cum, right=True)
        x = torch.empty(n, self.d, dtype=torch.float64, device=device)
        for i, (_, f) in enumerate(self.components):
            sel = which == i
            k = int(sel.sum())
            if k:
                x[sel] = f.sample(k, generator, device)
        return x

    def describe(self) -> dict[str, object]:
        out = self._head()
        out["components"] = [{"p": p, **f.describe()} for p, f in self.components]
        return out
