"""The phase reflection ``λ ↦ −λ`` and the parity it gives θ (:meth:`Model.phase_parity_mask`),
against independent computations.

- ``R`` (negate the even entries) leaves the exact loss invariant, by the moment-tensor field
  (the paper's model) and by quadrature (one to three layers, several families), while a
  finite sample's loss is not: the test can fail;
- the exact gradient at a θ without even entries has none (to round-off);
- the parity is the block pattern ``p_r + p_c`` odd for ``p = (1, 0, 1)``, the same for the
  paper's model and one layer of the deep model, and softmax attention declares none.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mesadyn.field import ExactField, FieldSpec, FiniteField, make_field
from mesadyn.models import PAPER, DeepLinearAttention, SoftmaxAttention
from mesadyn.process import gaussian, ones, rademacher, sparse


def _reflect(odd: np.ndarray, theta: np.ndarray) -> np.ndarray:
    return np.where(odd, theta, -theta)


@pytest.mark.parametrize(("k", "d", "T", "family", "options"), [
    (1, 2, 5, gaussian(2, 0.9), {}),
    (2, 1, 4, gaussian(1, 1.0), {}),
    (2, 2, 5, ones(2), {}),
    (2, 2, 4, rademacher(2), {}),
    (3, 1, 4, sparse(1, 1.5), {}),
])
def test_the_exact_loss_is_invariant_and_keeps_the_odd_entries(k, d, T, family, options):
    model = DeepLinearAttention(k)
    fld = make_field(FieldSpec("exact", family, T, model=model, **options))
    odd = model.phase_parity_mask(d)
    assert odd is not None
    theta = model.gaussian_init(d, 0.4, seed=2).numpy()
    L, g = fld.loss_and_grad(torch.from_numpy(theta))
    Lr, gr = fld.loss_and_grad(torch.from_numpy(_reflect(odd, theta)))
    assert float(Lr) == pytest.approx(float(L), rel=1e-12)
    # the gradient transforms as θ does
    np.testing.assert_allclose(gr.numpy(), _reflect(odd, g.numpy()), rtol=0,
                               atol=1e-12 * float(g.abs().max()))
    _, g_odd = fld.loss_and_grad(torch.from_numpy(theta * odd))
    assert float(g_odd[torch.from_numpy(~odd)].abs().max()) <= 1e-12 * float(g_odd.abs().max())
    assert float(g_odd[torch.from_numpy(odd)].abs().max()) > 0


def test_the_paper_model_by_moment_tensors_and_a_finite_sample_that_is_not():
    d, T = 2, 6
    odd = PAPER.phase_parity_mask(d)
    assert odd is not None
    np.testing.assert_array_equal(odd, DeepLinearAttention(1).phase_parity_mask(d))
    theta = PAPER.gaussian_init(d, 0.5, seed=4).numpy()
    exact = ExactField(gaussian(d, 1.0), T)
    L = float(exact.loss(torch.from_numpy(theta)))
    assert float(exact.loss(torch.from_numpy(_reflect(odd, theta)))) == pytest.approx(L,
                                                                                     rel=1e-12)
    finite = FiniteField(gaussian(d, 1.0), T, m=50, seed=1)
    Lf = float(finite.loss(torch.from_numpy(theta)))
    assert abs(float(finite.loss(torch.from_numpy(_reflect(odd, theta)))) - Lf) > 1e-6 * Lf


def test_the_pattern_and_the_models_without_one():
    odd = DeepLinearAttention(2).phase_parity_mask(1)
    assert odd is not None and odd.shape == (36,)
    block = odd[:9].reshape(3, 3)
    np.testing.assert_array_equal(block, [[False, True, False], [True, False, True],
                                          [False, True, False]])
    assert (odd.reshape(4, 9) == block.ravel()).all()
    # the layered diagonal init (W^KQ_32, W^PV_12 in every layer) has odd entries only
    theta = DeepLinearAttention(2).diagonal_init(1, 0.5, 1.5).numpy()
    assert not theta[~odd].any() and theta[odd].any()
    assert SoftmaxAttention().phase_parity_mask(2) is None
