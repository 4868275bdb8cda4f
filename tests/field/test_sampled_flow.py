"""A Monte-Carlo flow with the polynomial's exact Hessian (LSODA) reaches the sampled field's own
fixed point; the end point is checked by the independent direct path."""

from __future__ import annotations

import torch

from mesadyn.field import FieldSpec, Form, make_field
from mesadyn.flow import integrate
from mesadyn.model import diagonal_init
from mesadyn.process import gaussian


def test_mc_flow_converges_to_the_sampled_fixed_point() -> None:
    f = make_field(FieldSpec("mc", gaussian(2, 1.0), 6, samples=2000, seed=3, batches=4,
                             device="cpu"), reuse=False)
    assert f.form is Form.POLYNOMIAL and f.has_exact_hessian
    res = integrate(f, diagonal_init(2, 0.5, 1.5), t_end=1e6, solver="scipy:LSODA",
                    rtol=1e-10, atol=1e-12, steady_tol=1e-9)
    assert str(res.status) == "converged" and res.njev > 0
    end = torch.as_tensor(res.theta[-1])
    _, g = f.direct_loss_and_grad(end)  # the prefix-sum path, not the polynomial
    assert float(g.abs().max()) < 1e-8
    assert f.describe()["form"] == "polynomial"
