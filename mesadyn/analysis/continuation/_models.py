"""The continuation problem of a model other than the paper's, read through the
:class:`~mesadyn.models.Model` API (docs/design.md §7).

The paper's problem reads θ in its 18d² layout (:mod:`._problem`); a model's is read here:

* :func:`model_structure` — the free coordinates (the model's active entries that the data
  reach: a nonzero gradient at a random θ) and one :class:`~._system.Symmetry` per declared
  continuous symmetry (:meth:`Model.symmetries <mesadyn.models.Model.symmetries>`: the
  per-layer scalings and, for k >= 2, the 2d² residual-stream shears).  Each is linear in θ, so
  its generator ``S`` is read off column by column (``S e_j`` is the tangent at the unit vector
  ``e_j``); the scalings are symmetric and conserve ``‖W^KQ_l‖² − ‖W^PV_l‖²`` (the invariant
  gauge holds them), the shears are not and conserve nothing (the slice gauge cuts them).
* :func:`independent_symmetries` — the declared symmetries whose tangents at the start are
  independent: a tangent that vanishes there (the orbit is a point) or lies in the span of
  the others needs no phase condition, and one would make the bordered Jacobian singular.
  Under a mask, a symmetry whose orbit moves an entry the mask holds (and ``L`` depends on)
  is no symmetry of the masked problem, and is dropped too.
* :func:`analyse_model_point` — loss, ``max|∇L|``, :meth:`Model.ab
  <mesadyn.models.Model.ab>`, the per-layer invariants, the mass off the layered diagonals and
  the spectrum of ``−∇²L`` with its zero modes explained
  (:func:`mesadyn.analysis.model_spectrum.model_spectrum`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from ..model_spectrum import model_spectrum
from ._system import Symmetry

if TYPE_CHECKING:
    from ...field import Field
    from ...models import Model
    from ._follow import PointAnalysis
    from ._problem import ParametricField

__all__ = ["analyse_model_point", "independent_symmetries", "model_structure"]

#: An active entry is reached by the data when its gradient at a random θ exceeds this
#: fraction of the largest entry (an entry the data never reach has a gradient of 0, or of
#: rounding where a sum over the quadrature nodes cancels).
USED_RTOL = 1e-12
#: A symmetry tangent is kept when its part outside the span of the tangents kept before it is
#: above this fraction of ``‖θ‖`` over the free coordinates (the tangents are linear in θ).
INDEPENDENT_RTOL = 1e-8


def generators(model: Model, d: int) -> list[Symmetry]:
    """One :class:`Symmetry` per declared symmetry of ``model`` at dimension ``d``, its
    generator read off :meth:`Model.symmetries <mesadyn.models.Model.symmetries>` at the unit
    vectors (stored as its diagonal when it is diagonal: the scalings)."""
    n = model.n_params(d)
    names = model.symmetry_names(d)
    cols = np.stack([model.symmetries(e) for e in np.eye(n)], axis=1)  # (n, n, k): S_k e_j
    out = []
    for k, name in enumerate(names):
        S = np.ascontiguousarray(cols[:, :, k])
        diag = np.diag(S).copy()
        out.append(Symmetry(name, diag if np.array_equal(S, np.diag(diag)) else S))
    return out


def model_structure(fields: list[Field], model: Model, d: int,
                    seed: int) -> tuple[np.ndarray, tuple[Symmetry, ...]]:
    """The free coordinates (active entries with a gradient above :data:`USED_RTOL` of the
    largest at two random θ, in any of ``fields``) and the declared symmetries
    (:func:`generators`)."""
    rng = np.random.default_rng(seed)
    n = model.n_params(d)
    act = model.active_mask(d)
    used = np.zeros(n, bool)
    for _ in range(2):
        theta = torch.as_tensor(0.5 * rng.standard_normal(n))
        for f in fields:
            g = np.abs(f.grad(theta).numpy())
            used |= act & (g > USED_RTOL * g.max())
    return used, tuple(generators(model, d))


def independent_symmetries(symmetries: tuple[Symmetry, ...], theta: np.ndarray,
                           free: np.ndarray, held: np.ndarray) -> tuple[Symmetry, ...]:
    """The symmetries whose tangents at ``theta`` (on ``free``) are independent, kept in
    order (Gram–Schmidt with :data:`INDEPENDENT_RTOL` of ``‖θ_free‖``), leaving out those
    whose orbit moves an entry of ``held`` (entries ``L`` depends on that a mask keeps fixed:
    ``S`` maps the free entries or θ into them)."""
    scale = float(np.linalg.norm(theta[free]))
    basis: list[np.ndarray] = []
    kept = []
    for s in symmetries:
        full = s.tangent(theta)
        S = s.generator
        leaks = (np.abs(full[held]).max(initial=0.0) > INDEPENDENT_RTOL * scale
                 or (S.ndim == 2 and np.abs(S[np.ix_(held, free)]).max(initial=0.0) > 0))
        if leaks:
            continue
        t = full[free]
        for b in basis:
            t = t - (b @ t) * b
        for b in basis:  # twice is enough (Kahan): the kept tangents are orthonormal to rounding
            t = t - (b @ t) * b
        nrm = float(np.linalg.norm(t))
        if nrm > INDEPENDENT_RTOL * scale:
            basis.append(t / nrm)
            kept.append(s)
    return tuple(kept)


def analyse_model_point(problem: ParametricField, theta: np.ndarray, p: float
                        ) -> PointAnalysis:
    """The quantities every model has at one point (module docstring): ``ab`` is
    ``Σ_l a_l b_l`` per coordinate, ``offdiag_mass`` the share of ``‖θ‖²`` (active entries)
    off every layer's diagonals of ``W^KQ_32`` and ``W^PV_12``, ``invariant`` the sum of the
    per-layer ``invariants``; the Hessian is the problem's (cached from the corrector)."""
    from ._follow import PointAnalysis

    model = problem.model
    th = np.asarray(theta, np.float64)
    d = problem.d
    L, g = problem.field(p).loss_and_grad(torch.as_tensor(th))
    H = problem.hessian(th, p)
    sp = model_spectrum(H, th, model)
    act = model.active_mask(d)
    off = act & ~model.diagonal_mask(d)
    na = float(th[act] @ th[act])
    inv = np.asarray(model.invariants(th), np.float64)
    zm = {k: v for k, v in sp.to_dict().items()
          if k in ("inactive", "unused", "symmetry", "declared", "unexplained",
                   "symmetry_residual", "zero_gap", "zero_rtol", "symmetry_names")}
    return PointAnalysis(
        loss=float(L), residual=float(g.abs().max()),
        ab=np.asarray(model.ab(th), np.float64).copy(),
        offdiag_mass=float(th[off] @ th[off]) / na if na > 0 else 0.0,
        invariant=float(inv.sum()), eigenvalues=np.linalg.eigvalsh(-0.5 * (H + H.T)),
        n_zero=sp.n_zero, n_stable=sp.n_stable, n_unstable=sp.n_unstable, zero_modes=zm,
        invariants=tuple(float(v) for v in inv))
