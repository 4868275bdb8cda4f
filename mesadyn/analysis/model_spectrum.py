"""The spectrum of ``J = −∇²L`` at a point of any :class:`~mesadyn.models.Model`, its zero modes
explained (the model's counterpart of :func:`mesadyn.analysis.spectrum.classify`).

A zero mode (``|μ| <= zero_rtol · max|μ|``, :data:`mesadyn.tolerances.ZERO_RTOL`) is explained
by an inactive entry of θ (no path to ŷ: :meth:`~mesadyn.models.Model.active_mask`), an active
entry the data never reach (a zero Hessian row at the point), or one of the model's declared
continuous symmetries (:meth:`~mesadyn.models.Model.symmetries`: the per-layer scalings and, for
k >= 2 layers, the residual-stream shears), each kept when ``‖H v‖ <= tol ‖v‖``; a zero mode
outside their span is ``unexplained``.  ``mesadyn stability --model`` and the continuation of a
model (:mod:`mesadyn.analysis.continuation`) report it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..record import Record
from ..tolerances import ZERO_RTOL

if TYPE_CHECKING:
    import numpy as np

    from ..models import Model

__all__ = ["ModelSpectrum", "model_spectrum"]


@dataclass(frozen=True)
class ModelSpectrum(Record):
    """The spectrum of ``J = −∇²L`` at a point of a model (:func:`model_spectrum`).

    ``n_zero`` modes have ``|μ| <= zero_rtol · max|μ|``; they are explained by ``inactive``
    entries (no path to ŷ), ``unused`` active entries (a zero Hessian row here) and
    ``symmetry`` (the declared tangents with ``‖H v‖ <= tol ‖v‖``, beyond the former);
    ``unexplained = n_zero − inactive − unused − symmetry``.  ``symmetry_residual`` is the
    largest component of a kept unit tangent outside the zero space.  ``leading`` are the
    five eigenvalues of largest ``|μ|`` and ``smallest_nonzero`` the five non-zero ones of
    smallest ``|μ|``, both with their signs (``μ > 0`` is unstable).
    """

    n: int
    n_zero: int
    n_stable: int
    n_unstable: int
    inactive: int
    unused: int
    symmetry: int
    declared: int
    unexplained: int
    symmetry_residual: float
    zero_gap: tuple[float, float]
    zero_rtol: float
    leading: list[float] = field(default_factory=list)
    smallest_nonzero: list[float] = field(default_factory=list)
    symmetry_names: list[str] = field(default_factory=list)


def _rank(M: np.ndarray) -> int:
    import numpy as np

    return int(np.linalg.matrix_rank(M, tol=1e-8)) if M.size else 0


def model_spectrum(H: Any, theta: Any, model: Model, *,
                   rtol: float = ZERO_RTOL) -> ModelSpectrum:
    """The spectrum of ``−H`` at ``theta`` of ``model``, zero modes explained
    (:class:`ModelSpectrum`)."""
    import numpy as np

    H = np.asarray(H, np.float64)
    H = 0.5 * (H + H.T)
    th = np.asarray(theta, np.float64)
    n = H.shape[0]
    d = model.dim_of(th)
    mu, V = np.linalg.eigh(-H)
    scale = float(np.abs(mu).max()) if n else 0.0
    tol = rtol * scale
    zero = np.abs(mu) <= tol
    absmu = np.abs(mu)
    gap = (float(absmu[zero].max() / scale) if zero.any() and scale else 0.0,
           float(absmu[~zero].min() / scale) if (~zero).any() and scale else float("inf"))
    act = model.active_mask(d)
    unused = act & (np.abs(H).max(axis=1) <= tol)
    E = np.eye(n)[:, ~act | unused]
    S = model.symmetries(th).copy()
    S[~act | unused] = 0.0
    norms = np.linalg.norm(S, axis=0)
    kept = [j for j in range(S.shape[1])
            if norms[j] > 0 and np.linalg.norm(H @ S[:, j]) <= tol * norms[j]]
    U = S[:, kept] / norms[kept] if kept else np.zeros((n, 0))
    n_sym = _rank(np.concatenate([E, U], axis=1)) - _rank(E)
    Nz = V[:, zero]
    resid = (float(np.abs(U - Nz @ (Nz.T @ U)).max()) if U.shape[1] and Nz.shape[1]
             else float("nan"))
    names = model.symmetry_names(d)
    nz = int(zero.sum())
    order = np.argsort(-absmu)
    nonzero = np.flatnonzero(~zero)
    nonzero = nonzero[np.argsort(absmu[nonzero], kind="stable")]
    return ModelSpectrum(
        n=n, n_zero=nz, n_stable=int((mu < -tol).sum()), n_unstable=int((mu > tol).sum()),
        inactive=int((~act).sum()), unused=int(unused.sum()), symmetry=n_sym,
        declared=len(names), unexplained=nz - int((~act).sum()) - int(unused.sum()) - n_sym,
        symmetry_residual=resid, zero_gap=gap, zero_rtol=rtol,
        leading=[float(mu[i]) for i in order[:5]],
        smallest_nonzero=[float(mu[i]) for i in nonzero[:5]],
        symmetry_names=[names[j] for j in kept] if len(names) == S.shape[1] else [])
