"""The built-in samplers of the families: frozen dataclasses, so equal by value (a family's
equality includes its sampler), each ``(n, generator, device) -> (n, d)`` float64."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    import torch

__all__ = ["AtomDraw", "GaussianDraw", "RademacherDraw", "UniformDraw"]


@final
@dataclass(frozen=True)
class GaussianDraw:
    """``x = μ + σ g``, ``g ~ N(0, I_d)``."""

    d: int
    sigma: float
    mu: float = 0.0

    def __call__(self, n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
        import torch

        x = self.sigma * torch.randn(n, self.d, generator=gen, device=device,
                                     dtype=torch.float64)
        return x + self.mu if self.mu != 0 else x


@final
@dataclass(frozen=True)
class RademacherDraw:
    """iid ±1 coordinates."""

    d: int

    def __call__(self, n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
        import torch

        return torch.randint(2, (n, self.d), generator=gen, device=device).to(torch.float64) * 2 - 1


@final
@dataclass(frozen=True)
class UniformDraw:
    """iid U[−1, 1] coordinates."""

    d: int

    def __call__(self, n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
        import torch

        u = torch.rand(n, self.d, generator=gen, device=device, dtype=torch.float64)
        return 2 * u - 1


@final
@dataclass(frozen=True)
class AtomDraw:
    """Independent coordinates, coordinate ``k`` drawn from the atoms ``nodes[k]`` with
    probabilities ``weights[k]`` (inverse-CDF of one uniform per coordinate)."""

    nodes: tuple[tuple[float, ...], ...]
    weights: tuple[tuple[float, ...], ...]

    def __call__(self, n: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
        import numpy as np
        import torch

        d = len(self.nodes)
        u = torch.rand(n, d, generator=gen, device=device, dtype=torch.float64)
        x = torch.empty(n, d, dtype=torch.float64, device=device)
        for k in range(d):
            cum = torch.tensor(np.cumsum(self.weights[k])[:-1], dtype=torch.float64,
                               device=device)
            idx = torch.bucketize(u[:, k].contiguous(), cum, right=True)
            x[:, k] = torch.tensor(self.nodes[k], dtype=torch.float64, device=device)[idx]
        return x

