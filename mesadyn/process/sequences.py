"""Sequences of the AR process: ``x_1 ~ D``, ``x_{t+1} = W x_t + ε_t`` (Section 3.1,
docs/design.md §6).

``W = r·diag(λ_1..λ_d)`` with ``λ_k = exp(iθ_k)``, ``θ_k ~ U[0, 2π)`` independent and fresh for
every sequence (the paper, r = 1, no noise: :func:`sample` and :func:`sequences`); beyond it a
real or Haar :class:`Rotation` and AR noise (:func:`sample_sequences`: the draws of the
sampled fields and of the exact fields' Monte-Carlo checks).
Sequences are complex128.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import TYPE_CHECKING

from ..errors import MesadynError, check_finite, check_int, check_positive
from .families import Family, _device

if TYPE_CHECKING:
    import torch

__all__ = ["Rotation", "check_noise", "check_radius", "check_rotation", "sample", "sample_lambdas",
           "sample_sequences", "sample_transitions", "sequences"]


def check_radius(radius: float) -> float:
    """The radius r > 0 of ``W = r·diag(λ)`` (docs/design.md §6)."""
    return check_positive("radius", radius)


def sample_lambdas(n: int, d: int, generator: torch.Generator,
                   device: torch.device | str | None = None, radius: float = 1.0
                   ) -> torch.Tensor:
    """Diagonal of W: ``r·λ_k``, ``λ_k = exp(iθ_k)``, ``θ_k ~ U[0, 2π)``; complex128 (n, d)."""
    import torch

    radius = check_radius(radius)
    device = _device(generator, device)
    theta = 2 * math.pi * torch.rand(n, d, generator=generator, device=device,
                                     dtype=torch.float64)
    return torch.polar(torch.full_like(theta, radius), theta)


def sequences(x1: torch.Tensor, lam: torch.Tensor, T: int) -> torch.Tensor:
    """``x_t = λ^{t−1} ⊙ x_1`` for t = 1..T; complex128 of shape (n, T, d).

    ``λ`` may have any modulus (``r·λ`` for the radius r); a modulus within 1e-14 of 1 is
    taken as exactly 1, so unit rotations give the phases alone.
    """
    import torch

    T = check_int("T", T, 1)
    powers = torch.arange(T, device=lam.device, dtype=torch.float64)
    angle = torch.angle(lam)[:, None, :] * powers[None, :, None]
    mod = lam.abs()
    if bool(((mod - 1).abs() <= 1e-14).all()):
        lam_pow = torch.polar(torch.ones_like(angle), angle)
    else:
        lam_pow = torch.polar(mod[:, None, :] ** powers[None, :, None], angle)
    return lam_pow * x1.to(torch.complex128)[:, None, :]


def sample(fam: Family, n: int, T: int, generator: torch.Generator,
           device: torch.device | str | None = None, radius: float = 1.0
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``n`` initial tokens and transition diagonals: ``(x1 (n, d) real, rλ (n, d)
    complex)`` (``|rλ_k| = r``; r = 1 is the paper).

    Draws ``x_1`` first, then ``λ``, from one generator, so a seed fixes both.
    """
    n = check_int("n", n, 1)
    check_int("T", T, 1)
    radius = check_radius(radius)
    x1 = fam.sample(n, generator, device)
    lam = sample_lambdas(n, fam.d, generator, device, radius)
    return x1, lam



class Rotation(StrEnum):
    """The transition matrix W (docs/design.md §6), times the radius r."""

    DIAGONAL = "diagonal"
    """``diag(λ)``, λ uniform on the torus (the paper)."""
    REAL = "real"
    """``blockdiag(R(φ_1), …, R(φ_{d/2}))``, φ uniform on [0, 2π): real sequences, d even."""
    HAAR = "haar"
    """Haar-distributed on U(d) (dense)."""


def check_rotation(rotation: Rotation | str) -> Rotation:
    """The :class:`Rotation` named ``rotation``, or an error naming it."""
    try:
        return Rotation(rotation)
    except ValueError:
        raise MesadynError(
            f"unknown rotation {rotation!r}; choose one of {', '.join(Rotation)}") from None


def check_noise(noise: object) -> float:
    """The AR noise scale ``s >= 0`` of ``x_{t+1} = W x_t + ε_t`` (finite), or an error naming
    it."""
    s = check_finite("noise", noise)
    if s < 0:
        raise MesadynError(f"noise must be >= 0, got noise={s!r}")
    return s


def _haar_unitary(n: int, d: int, generator: torch.Generator,
                  device: torch.device) -> torch.Tensor:
    """``n`` Haar-distributed d×d unitaries: QR of a complex Ginibre matrix with the phases of
    R's diagonal divided out (Mezzadri 2007)."""
    import torch

    z = torch.complex(torch.randn(n, d, d, generator=generator, device=device,
                                  dtype=torch.float64),
                      torch.randn(n, d, d, generator=generator, device=device,
                                  dtype=torch.float64)) / math.sqrt(2)
    q, r = torch.linalg.qr(z)
    ph = torch.diagonal(r, dim1=-2, dim2=-1)
    return q * (ph / ph.abs())[:, None, :]


def sample_transitions(n: int, d: int, generator: torch.Generator,
                       device: torch.device | str | None = None, *, radius: float = 1.0,
                       rotation: Rotation | str = Rotation.DIAGONAL) -> torch.Tensor:
    """``n`` transition matrices ``W = r·R`` as complex128 (n, d, d).

    Raises:
        MesadynError: r <= 0, an unknown rotation, or ``real`` with d odd.
    """
    import torch

    radius = check_radius(radius)
    rot = check_rotation(rotation)
    device = _device(generator, device)
    if rot is Rotation.DIAGONAL:
        return torch.diag_embed(sample_lambdas(n, d, generator, device, radius))
    if rot is Rotation.HAAR:
        return radius * _haar_unitary(n, d, generator, device)
    if d % 2:
        raise MesadynError(f"real rotations need an even d, got d={d}")
    phi = 2 * math.pi * torch.rand(n, d // 2, generator=generator, device=device,
                                   dtype=torch.float64)
    c, s = torch.cos(phi), torch.sin(phi)
    W = torch.zeros(n, d, d, dtype=torch.float64, device=device)
    k = torch.arange(0, d, 2, device=device)
    W[:, k, k], W[:, k, k + 1], W[:, k + 1, k], W[:, k + 1, k + 1] = c, -s, s, c
    return (radius * W).to(torch.complex128)


def sample_sequences(fam: Family, n: int, T: int, generator: torch.Generator,
                     device: torch.device | str | None = None, *, radius: float = 1.0,
                     rotation: Rotation | str = Rotation.DIAGONAL, noise: float = 0.0
                     ) -> torch.Tensor:
    """``n`` sequences ``x_1..x_T`` (complex128, (n, T, d)) of ``x_{t+1} = W x_t + ε_t``.

    ``W = r·R`` (:func:`sample_transitions`), fresh per sequence; ``ε_t`` iid circular complex
    Gaussian with ``E|ε_{t,k}|² = noise²``.  Draws ``x_1``, then W, then the noise, from one
    generator.  The diagonal noiseless case is :func:`sample` + :func:`sequences` (same draws).

    Raises:
        MesadynError: bad n, T, radius, rotation or noise (< 0), or d odd for ``real``.
    """
    import torch

    n = check_int("n", n, 1)
    T = check_int("T", T, 1)
    noise = check_noise(noise)
    rot = check_rotation(rotation)
    if rot is Rotation.DIAGONAL and noise == 0:
        x1, lam = sample(fam, n, T, generator, device, radius=radius)
        return sequences(x1, lam, T)
    device = _device(generator, device)
    x1 = fam.sample(n, generator, device)
    W = sample_transitions(n, fam.d, generator, device, radius=radius, rotation=rotation)
    x = torch.empty(n, T, fam.d, dtype=torch.complex128, device=device)
    x[:, 0] = x1.to(torch.complex128)
    for t in range(T - 1):
        nxt = (W @ x[:, t, :, None]).squeeze(-1)
        if noise > 0:
            eps = torch.complex(
                torch.randn(n, fam.d, generator=generator, device=device, dtype=torch.float64),
                torch.randn(n, fam.d, generator=generator, device=device, dtype=torch.float64))
            nxt = nxt + (noise / math.sqrt(2)) * eps
        x[:, t + 1] = nxt
    return x
