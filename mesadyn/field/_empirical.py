"""Empirical moment tensors: a sampled loss as the same polynomial as the exact one.

With fixed draws ``(x_1, λ)`` (common random numbers) the sampled loss of Eq. 2 is

    L̂ = ½ Σ Ĝ_{αβγ,α'β'γ'} Q_{αα'} A_{βγ} A_{β'γ'} − Σ Ĉ_{j,αβγ} P_{jα} A_{βγ} + ĉ,

the polynomial of :mod:`mesadyn.field.exact` (see ``docs/exact-field.md``) with the sample mean in
place of E:  ``Ĝ = Σ_{t=2}^{T−1} mean Re(ū^t ⊗ u^t)``, ``Ĉ_j = Σ_t mean Re(x̄_{t+1,j} u^t)`` and
``ĉ = ½ Σ_t mean‖x_{t+1}‖²`` (``= ½ (T−2) mean‖x_1‖²`` for ``|λ| = 1``), where
``u^t_{αβγ} = (1/(t−1)) Σ_{i≤t} e_{iα} ē_{iβ} e_{tγ}``.  (Only
the real part of ``ū ⊗ u`` survives: ``Q`` and ``A ⊗ A`` are symmetric under ``J ↔ J'``.)

:func:`build_moments` streams the draws in chunks: the rows ``u^t`` of a chunk (one per draw and
t) form a matrix ``U`` and ``Ĝ += Re(Uᴴ U)``, ``Ĉ += Re(Xᴴ U)`` are two matrix products, on the
device the draws live on.  Memory is the dense tensors plus one chunk.  Once built, loss,
gradient, HVP and Hessian are :class:`~mesadyn.field.ExactField`'s contractions
(:class:`EmpiricalPolynomial`), exact to rounding for the given draws.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import MesadynError
from ..model import P_and_A
from ..process import Family
from ..progress import ProgressCallback
from .exact import ExactField

#: Bytes of one chunk's ``U`` (complex rows of length (2d)³) during a build.
CHUNK_BYTES = 2**26


def tensor_bytes(d: int) -> int:
    """Peak memory of turning Ĝ into a polynomial: torch COO (value + two int64 indices), two
    scipy CSR copies (value + int32 index) and the index arrays and COO temporaries they are
    made from — about ``160·(2d)⁶`` bytes (plus Ĉ)."""
    n = 2 * d
    return int(n**6 * 160 + d * n**3 * 8 * 2)


def build_bytes(d: int) -> int:
    """Peak memory of :func:`build_moments` beyond the draws: the dense accumulator, one chunk,
    and the finished polynomial."""
    n = 2 * d
    return int(n**6 * 8 * 2 + 3 * CHUNK_BYTES + tensor_bytes(d))


@dataclass(frozen=True)
class EmpiricalMoments:
    """Ĝ (``(n², n², n²)`` indexed ``[α n + α', β n + γ, β' n + γ']``), Ĉ (``(d, n, n, n)``
    indexed ``[j, α, β, γ]``) and the constant ĉ, for ``n = 2d``; float64 numpy."""

    G: np.ndarray
    C: np.ndarray
    const: float
    samples: int
    seconds: float


def _rows(x1: torch.Tensor, lam: torch.Tensor, T: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of draws ``(x_1, λ)``: the real and imaginary parts of ``x_t = λ^{t−1} ⊙ x_1``
    (as :func:`~mesadyn.process.sequences`), then :func:`_rows_of`."""
    powers = torch.arange(T, device=lam.device, dtype=torch.float64)
    angle = torch.angle(lam)[:, None, :] * powers[None, :, None]  # (s, T, d): phase of x_t
    amp = x1[:, None, :]
    mod = lam.abs()
    # |λ| = r ≠ 1 (docs/design.md §6), as sequences()
    if not bool(((mod - 1).abs() <= 1e-14).all()):
        amp = amp * mod[:, None, :] ** powers[None, :, None]
    return _rows_of(torch.cos(angle) * amp, torch.sin(angle) * amp, T)


def _rows_of(xr: torch.Tensor, xi: torch.Tensor, T: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``S = [Re U; Im U]`` and ``Y = [Re X; Im X]`` (real, stacked along rows) for sequences
    with real part ``xr`` and imaginary part ``xi`` (each (s, T', d), T' >= T), where ``U`` holds
    the rows ``u^t`` of every sequence and t = 2..T−1 (shape (s(T−2), n³)) and ``X`` the targets
    ``x_{t+1}`` (shape (s(T−2), d)); so ``Re(Uᴴ U) = Sᵀ S`` and ``Re(Xᴴ U) = Yᵀ S``."""
    s, _, d = xr.shape
    dev = xr.device

    def embed(z: torch.Tensor) -> torch.Tensor:  # e_t = (x_t, x_{t−1}), x_0 = 0; t = 1..T−1
        prev = torch.nn.functional.pad(z, (0, 0, 1, 0))[:, :-1, :]
        return torch.cat([z, prev], dim=-1)[:, : T - 1]

    er, ei = embed(xr), embed(xi)
    # M_t = Σ_{i≤t} e_i e_iᴴ for t = 2..T−1: real part er erᵀ + ei eiᵀ, imaginary ei erᵀ − er eiᵀ
    Mr = torch.cumsum(er[..., :, None] * er[..., None, :] + ei[..., :, None] * ei[..., None, :],
                      dim=1)[:, 1:]
    Mi = torch.cumsum(ei[..., :, None] * er[..., None, :] - er[..., :, None] * ei[..., None, :],
                      dim=1)[:, 1:]
    rho = torch.arange(1, T - 1, device=dev, dtype=torch.float64)[None, :, None]  # t − 1
    etr, eti = er[:, 1:] / rho, ei[:, 1:] / rho
    n = er.shape[-1]
    rows = s * (T - 2)
    S = torch.empty(2, s, T - 2, n, n, n, dtype=torch.float64, device=dev)
    torch.mul(Mr[..., None], etr[..., None, None, :], out=S[0])
    S[0].sub_(Mi[..., None] * eti[..., None, None, :])  # Re(M e) = Mr er − Mi ei
    torch.mul(Mr[..., None], eti[..., None, None, :], out=S[1])
    S[1].add_(Mi[..., None] * etr[..., None, None, :])  # Im(M e) = Mr ei + Mi er
    Y = torch.stack([xr[:, 2:T], xi[:, 2:T]]).reshape(2 * rows, d)
    return S.reshape(2 * rows, n**3), Y


def _step(T: int, d: int, chunk_bytes: int, m: int) -> int:
    """Draws per chunk of a build: one chunk's ``S`` and temporaries within ``chunk_bytes``."""
    per_draw = (T - 2) * (2 * d) ** 3 * 8 * 4  # S and the temporaries of one of its halves
    return max(1, min(m, chunk_bytes // max(1, per_draw)))


def _accumulate(chunks: Iterable[tuple[torch.Tensor, torch.Tensor, float]], m: int, d: int,
                dev: torch.device, t0: float,
                progress: ProgressCallback | None) -> EmpiricalMoments:
    """Ĝ, Ĉ, ĉ from the rows ``(S, Y)`` of every chunk (``m`` draws in all; the third item is
    the fraction of draws done, for ``progress``), then the mean, symmetrised and laid out as
    :class:`~mesadyn.field.ExactField` lays out G."""
    n = 2 * d
    n3 = n**3
    G = torch.zeros(n3, n3, dtype=torch.float64, device=dev)
    C = torch.zeros(d, n3, dtype=torch.float64, device=dev)
    sq = 0.0
    for S, Y, done in chunks:
        G.addmm_(S.T, S)  # Re(Uᴴ U)
        C.addmm_(Y.T, S)  # Re(Xᴴ U)
        sq += float(Y.square().sum())  # Σ ‖x_{t+1}‖²
        del S, Y
        if progress is not None:
            progress(done)
    G /= m
    C /= m
    G = 0.5 * (G + G.T)  # exact symmetry J ↔ J' (rounding only)
    # [α, β, γ, α', β', γ'] → [α n + α', β n + γ, β' n + γ'] (ExactField's layout)
    G6 = G.reshape(n, n, n, n, n, n).permute(0, 3, 1, 2, 4, 5).reshape(n * n, n * n, n * n)
    const = 0.5 * sq / m  # ½ Σ_t mean‖x_{t+1}‖² (= ½ (T−2) mean‖x_1‖² when |λ| = 1)
    return EmpiricalMoments(G=G6.cpu().numpy().copy(), C=C.reshape(d, n, n, n).cpu().numpy(),
                            const=const, samples=m, seconds=time.perf_counter() - t0)


def build_moments(x1: torch.Tensor, lam: torch.Tensor, T: int, *,
                  chunk_bytes: int = CHUNK_BYTES,
                  progress: ProgressCallback | None = None) -> EmpiricalMoments:
    """Ĝ, Ĉ and ĉ of the draws ``(x1, λ)`` (see the module docstring), streamed in chunks.

    Arguments:
        x1: initial tokens (m, d), real; lam: transition diagonals (m, d), complex; T: >= 3.
        chunk_bytes: the size of one chunk's ``U`` (bounds the memory beyond the tensors).
        progress: called with the fraction of draws done after each chunk.

    Returns:
        :class:`EmpiricalMoments` (numpy float64 on the CPU), built on ``x1``'s device.
    """
    t0 = time.perf_counter()
    m, d = x1.shape
    step = _step(T, d, chunk_bytes, m)
    x1 = x1.to(torch.float64)
    lam = lam.to(torch.complex128)

    def chunks() -> Iterator[tuple[torch.Tensor, torch.Tensor, float]]:
        for lo in range(0, m, step):
            hi = min(m, lo + step)
            yield (*_rows(x1[lo:hi], lam[lo:hi], T), hi / m)

    return _accumulate(chunks(), m, d, x1.device, t0, progress)


def build_sequence_moments(blocks: Iterable[torch.Tensor], m: int, T: int, *,
                           chunk_bytes: int = CHUNK_BYTES,
                           progress: ProgressCallback | None = None) -> EmpiricalMoments:
    """Ĝ, Ĉ and ĉ of ``m`` arbitrary sequences (the module docstring's rows ``u^t`` hold for any
    sequence, not only ``x_t = λ^{t−1} ⊙ x_1``), streamed in chunks.

    Arguments:
        blocks: the sequences, complex (k, T', d) with T' >= T, in blocks of any sizes summing
            to ``m`` (e.g. regenerated from a seed block by block); only x_1..x_T are used.
        m: the number of sequences in all; T: >= 3.
        chunk_bytes, progress: as :func:`build_moments`.

    Returns:
        :class:`EmpiricalMoments` (numpy float64 on the CPU), built on the blocks' device.
    """
    t0 = time.perf_counter()
    it = iter(blocks)
    first = next(it, None)
    if first is None:
        raise MesadynError("build_sequence_moments needs at least one sequence")
    d = int(first.shape[-1])
    dev = first.device

    def chunks() -> Iterator[tuple[torch.Tensor, torch.Tensor, float]]:
        done = 0
        for x in itertools.chain([first], it):
            x = x.to(torch.complex128)
            step = _step(T, d, chunk_bytes, int(x.shape[0]))
            for lo in range(0, x.shape[0], step):
                part = x[lo:lo + step, :T]
                done += part.shape[0]
                yield (*_rows_of(part.real.contiguous(), part.imag.contiguous(), T), done / m)
        if done != m:
            raise MesadynError(f"build_sequence_moments got {done} sequences, expected m={m}")

    return _accumulate(chunks(), m, d, dev, t0, progress)


class EmpiricalPolynomial(ExactField):
    """:class:`~mesadyn.field.ExactField`'s contractions (loss, gradient, HVP, Hessian, the
    differentiable torch loss) on empirical tensors: the sampled loss as a polynomial.

    Private to the sampled fields, which delegate to it; not a family's exact field.
    """

    def __init__(self, family: Family, T: int, moments: EmpiricalMoments) -> None:
        self.family = family
        self.T = T
        self.device = torch.device("cpu")
        d = family.d
        n = 2 * d
        self._n = n
        G = moments.G
        q, a1, a2 = (i.ravel() for i in np.indices(G.shape, dtype=np.int64))
        self._to_torch({"C": moments.C, "g_q": q, "g_a1": a1, "g_a2": a2,
                        "g_val": G.ravel()})
        self.const = moments.const
        P, A = P_and_A(torch.arange(18 * d * d))
        self._iP, self._iA = P.reshape(-1).clone(), A.reshape(-1).clone()
        self.build_seconds = moments.seconds
        self.memory_estimate = tensor_bytes(d)
        self.cache_status = "empirical"
        self.cache_path = None
