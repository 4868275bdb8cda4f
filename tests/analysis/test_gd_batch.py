"""Batched regimes (:mod:`mesadyn.analysis.gd_batch`) against the single-run classifier
(:func:`mesadyn.analysis.gd_regime.classify` on a full trace), rule for rule, for the reduced
map and the exact field; the gradient-only Hessian-vector product against the field's own."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mesadyn.analysis.gd_batch import REGIMES, _hvp, field_regimes, reduced_regimes
from mesadyn.analysis.gd_orbits import ReducedMap
from mesadyn.analysis.gd_regime import Regime, classify, descend, reduced_descend
from mesadyn.errors import MesadynError
from mesadyn.field import FieldSpec, make_field
from mesadyn.model import diagonal_init, gaussian_init
from mesadyn.process import gaussian

C1, C2 = 290.9706484691779, 54.0


def test_reduced_batch_is_the_single_run_classifier():
    rng = np.random.default_rng(1)
    n = 240
    eta = rng.uniform(0.2, 2.6, n) / C2
    s = math.sqrt(C2 / C1)
    a0, b0 = rng.uniform(-2.5, 2.5, n) * s, rng.uniform(-2.5, 2.5, n) * s
    batch = reduced_regimes(eta, a0, b0, C1, C2, 300, chunk=100)  # three chunks
    gd = ReducedMap(C1, C2)
    got = batch.regimes()
    for i in range(n):
        tr = reduced_descend(a0[i], b0[i], eta[i], C1, C2, 300)
        assert got[i] is classify(tr, gd=gd)[0], i
        if tr.diverged_step is not None:
            assert batch.diverged_step[i] == tr.diverged_step
        else:
            np.testing.assert_allclose(batch.end[i], tr.theta[-1], rtol=0, atol=0)
    # every regime but "unsettled" occurs in this sample; the counts add up
    assert {r.value for r in got} >= {"monotone", "catapult", "edge_of_stability", "periodic",
                                      "chaotic", "divergent"}
    assert sum(batch.counts.values()) == n


def test_field_batch_is_the_single_run_classifier():
    fam, T = gaussian(2, 1.0), 8
    f = make_field(FieldSpec("exact", fam, T))
    starts, etas = [], []
    for k, (a0, b0) in enumerate([(0.1, 0.1), (0.5, 1.5), (0.6, 0.6)]):
        for eta in (0.01, 0.04, 0.06, 0.1):
            starts.append(diagonal_init(2, a0, b0).numpy()
                          + 1e-6 * gaussian_init(2, 1.0, seed=k).numpy())
            etas.append(eta)
    starts.append(gaussian_init(2, 0.1, seed=5).numpy())
    etas.append(0.05)
    th0, e = np.stack(starts), np.array(etas)
    batch = field_regimes(f, th0, e, 120, sharpness_every=5)
    for i in range(len(e)):
        tr = descend(f, th0[i], e[i], 120, sharpness_every=5)
        assert batch.regimes()[i] is classify(tr, f)[0], i
    assert len(set(batch.regimes())) >= 3


def test_hvp_from_gradients_is_exact():
    f = make_field(FieldSpec("exact", gaussian(2, 1.0), 8))
    rng = np.random.default_rng(0)
    th = rng.normal(0, 0.4, (3, f.n_params))
    v = rng.normal(size=(3, f.n_params))
    hv = _hvp(f, th, v)
    for i in range(3):
        want = f.hvp(torch.from_numpy(th[i]), torch.from_numpy(v[i])).numpy()
        np.testing.assert_allclose(hv[i], want, rtol=1e-8, atol=1e-9 * np.abs(want).max())


def test_codes_and_bad_input():
    assert REGIMES[0] is Regime.MONOTONE and len(REGIMES) == len(Regime)
    with pytest.raises(MesadynError, match="empty"):
        reduced_regimes([], [], [], C1, C2, 10)
    with pytest.raises(MesadynError, match="η"):
        reduced_regimes([0.0], [0.1], [0.1], C1, C2, 10)
    with pytest.raises(MesadynError, match="η"):
        reduced_regimes([math.nan], [0.1], [0.1], C1, C2, 10)
    f = make_field(FieldSpec("exact", gaussian(2, 1.0), 8))
    with pytest.raises(MesadynError, match="shape"):
        field_regimes(f, np.zeros((2, 3)), 0.01, 10)
