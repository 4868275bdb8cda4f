"""The flow of a model in the fixed subspace of its loss's symmetry
(:func:`mesadyn.workflows._model_runs.flow_basis`, ``model_flow(basis=...)``).

- the flow of the subspace's coordinates ends where the flow of every free entry ends (the
  same trajectory), with no gradient off the subspace beyond round-off, for the signed
  permutations (gaussian) and the permutations (ones, where the off-diagonal pattern enters);
- the basis is offered only where it holds: an exact field and a start inside the subspace
  (not a Gaussian init, not a sampled field), and a bad basis is refused naming the problem.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.errors import MesadynError
from mesadyn.field import ExactField, FieldSpec
from mesadyn.models import PAPER
from mesadyn.process import Family, gaussian, ones
from mesadyn.workflows._model_flow import model_flow
from mesadyn.workflows._model_runs import flow_basis


def _flow(fld: ExactField, theta0: np.ndarray, basis: np.ndarray | None):
    free = PAPER.active_mask(3)
    return model_flow(fld, theta0, free, t_end=200.0, solver="auto", rtol=1e-10, atol=1e-12,
                      steady_tol=1e-10, max_steps=20_000, n_save=20, basis=basis)


@pytest.mark.parametrize("family,dim", [(gaussian(3), 3), (ones(3), 6)])
def test_the_subspace_flow_is_the_full_flow(family: Family, dim: int) -> None:
    d, T = 3, 5
    fld = ExactField(family, T)
    spec = FieldSpec("exact", family, T)
    theta0 = PAPER.diagonal_init(d, 0.5, 1.5).numpy()
    P = flow_basis(PAPER, spec, theta0, PAPER.active_mask(d))
    assert P is not None and P.shape[1] == dim
    sub, full = _flow(fld, theta0, P), _flow(fld, theta0, None)
    assert sub.status.value == full.status.value == "converged"
    assert sub.subspace == dim and full.subspace is None
    assert sub.leak is not None and sub.leak <= 1e-12
    assert np.abs(sub.final - full.final).max() <= 1e-7
    g = fld.grad(torch.from_numpy(sub.final)).numpy()
    assert np.abs(g).max() < 1e-10


def test_the_basis_is_offered_only_where_it_holds() -> None:
    d, T = 2, 5
    free = PAPER.active_mask(d)
    exact = FieldSpec("exact", gaussian(d), T)
    diag = PAPER.diagonal_init(d, 0.5, 1.5).numpy()
    assert flow_basis(PAPER, exact, diag, free) is not None
    assert flow_basis(PAPER, exact, PAPER.gaussian_init(d, 0.1, 1).numpy(), free) is None
    assert flow_basis(PAPER, FieldSpec("finite", gaussian(d), T, m=20), diag, free) is None
    fld = ExactField(gaussian(d), T)
    kw = dict(t_end=1.0, solver="auto", rtol=1e-6, atol=1e-8, steady_tol=0.0, max_steps=10,
              n_save=2)
    with pytest.raises(MesadynError, match="not orthonormal"):
        model_flow(fld, diag, free, basis=2 * np.eye(len(diag))[:, free], **kw)
    with pytest.raises(MesadynError, match="off the free entries"):
        model_flow(fld, diag, free, basis=np.eye(len(diag))[:, :3], **kw)
    with pytest.raises(MesadynError, match="not in the span"):
        model_flow(fld, diag, free, basis=np.eye(len(diag))[:, free][:, :2], **kw)
