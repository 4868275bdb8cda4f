"""The exact field's helpers: where its contractions run, what they cost, the active indices.

:class:`Contractions` names the two engines of :class:`~mesadyn.field.ExactField`'s closed forms
(scipy/numpy on the host, torch on the field's device); :func:`device_bytes` is what the tensors
take on a device; the rest are small conversions the field uses.
"""

from __future__ import annotations

import enum
import math
import warnings

import numpy as np
import torch
from scipy import sparse

from ..errors import MesadynError


class Contractions(enum.StrEnum):
    """Where :class:`ExactField`'s closed-form contractions run."""

    SCIPY = "scipy"
    """scipy.sparse CSR and numpy on the host (CPU only; single-threaded sparse products)."""
    TORCH = "torch"
    """torch CSR on the field's device (any device; intra-op threads on the CPU)."""


#: The CPU default.  Measured (``benchmarks/bench_exact_device.py``, docs/exact-field.md):
#: torch is not faster on the shared 2-core machine and rounds differently from scipy in the
#: dense products, so scipy stays the CPU default and the golden outputs keep every digit.
DEFAULT_CPU_CONTRACTIONS = Contractions.SCIPY


def device_bytes(d: int, nnz: int, contractions: Contractions) -> int:
    """Bytes the field's tensors take on its device, plus one evaluation's working set.

    Stored: C (``d·n³`` float64), the COO copy of G behind the differentiable :meth:`loss`
    (two int64 indices and a float64 value per entry) and, for torch contractions, two CSR
    copies (int32 column, float64 value per entry; int32 row pointers).  Working set: a few
    ``n⁴`` float64 arrays (``K``, ``∇²_AA``) and the full Hessian ``(18d²)²``.
    """
    n = 2 * d
    n4 = n**4
    stored = 8 * d * n**3 + 24 * nnz
    if contractions is Contractions.TORCH:
        stored += _torch_csr_bytes(d, nnz)
    work = 8 * (4 * n4 + (18 * d * d) ** 2)
    return stored + work


def _sum_r2t(T: int, radius: float) -> float:
    """``Σ_{t=2}^{T−1} r^{2t}`` (``T − 2`` at r = 1): the constant ``½ Σ_t E‖x_{t+1}‖²`` of
    Eq. 2 is ``½ E‖x_1‖²`` times it."""
    if radius == 1:
        return float(T - 2)
    return math.fsum(radius ** (2 * t) for t in range(2, T))


def _choose_contractions(device: torch.device,
                         contractions: Contractions | str | None) -> Contractions:
    """Torch on any device but the CPU; :data:`DEFAULT_CPU_CONTRACTIONS` on the CPU."""
    if contractions is None:
        return DEFAULT_CPU_CONTRACTIONS if device.type == "cpu" else Contractions.TORCH
    try:
        c = Contractions(contractions)
    except ValueError:
        raise MesadynError(f"unknown contractions {contractions!r}; choose one of "
                           f"{', '.join(Contractions)}") from None
    if c is Contractions.SCIPY and device.type != "cpu":
        raise MesadynError(f"contractions='scipy' run on the CPU only, not on {device}; use "
                           "'torch'")
    return c


def _torch_csr_bytes(d: int, nnz: int) -> int:
    """The two torch CSR copies of G (int32 column, float64 value, int32 row pointers)."""
    return 2 * (12 * nnz + 4 * ((2 * d) ** 4 + 1))


def _csr_to(m: sparse.csr_matrix, device: torch.device) -> torch.Tensor:
    """A scipy CSR matrix as a torch sparse CSR tensor on ``device`` (int32 indices; the
    row sums keep scipy's order, so at one thread the products agree bit for bit)."""
    with warnings.catch_warnings():  # torch calls its sparse CSR support "beta"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(
            torch.as_tensor(m.indptr.astype(np.int32), device=device),
            torch.as_tensor(m.indices.astype(np.int32), device=device),
            torch.as_tensor(m.data, dtype=torch.float64, device=device),
            size=m.shape, check_invariants=False)


def _zeros(shape: tuple[int, int], device: torch.device) -> torch.Tensor:
    """float64 zeros on ``device``; on the CPU from ``calloc``'d pages (through numpy), so the
    rows of a Hessian that are never written (θ's inactive entries) cost nothing, as in the
    scipy path, instead of an eager fill of all (18d²)² entries."""
    if device.type == "cpu":
        return torch.from_numpy(np.zeros(shape))
    return torch.zeros(shape, dtype=torch.float64, device=device)


def _active_indices(d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat-θ indices of ``P`` (d×2d, row-major) and ``A`` (2d×2d, row-major)."""
    from ..model import P_and_A

    P, A = P_and_A(torch.arange(18 * d * d))
    return P.reshape(-1).clone(), A.reshape(-1).clone()
