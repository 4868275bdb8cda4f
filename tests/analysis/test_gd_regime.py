"""The regime of one GD run (:mod:`mesadyn.analysis.gd_regime`): a genuine cycle (the reduced
map's closed-form 2-cycle) against an oscillation still decaying, chaos on the reduced map by
its own Lyapunov exponent, and ab as the mean of the per-coordinate products."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mesadyn.analysis.gd_orbits import ReducedMap, reduced_period2
from mesadyn.analysis.gd_regime import Regime, classify, descend, period, reduced_descend
from mesadyn.field import FieldSpec, make_field
from mesadyn.model import ab, diagonal_init
from mesadyn.process import gaussian

C1, C2 = 290.9706484691779, 54.0


def test_a_cycle_is_periodic_and_a_decaying_oscillation_is_not():
    eta = 1.1 / C2
    cycle = reduced_period2(eta, C1, C2)
    tr = reduced_descend(cycle[0, 0], cycle[0, 1], eta, C1, C2, 40)
    assert period(tr) == 2 and classify(tr, gd=ReducedMap(C1, C2))[0] is Regime.PERIODIC
    # just below the flip the balanced point's multiplier is −0.999: the oscillation decays
    # so slowly that consecutive periods agree to 1e-8, yet it is no cycle: its loss falls at
    # every step, so it is still converging
    s = math.sqrt(C2 / C1)
    tr = reduced_descend(s * (1 + 1e-4), s * (1 + 1e-4), 0.9995 / C2, C1, C2, 200)
    assert period(tr) is None
    assert classify(tr, gd=ReducedMap(C1, C2))[0] is Regime.CONVERGING


def test_reduced_chaos_needs_the_map():
    """Past the period-doubling cascade the balanced line is chaotic: the reduced trace is
    classified by the Lyapunov exponent of ReducedMap (without the map: unsettled)."""
    s = math.sqrt(C2 / C1)
    tr = reduced_descend(0.9 * s, 0.9 * s, 1.9 / C2, C1, C2, 400)
    assert tr.diverged_step is None
    regime, why = classify(tr, gd=ReducedMap(C1, C2))
    assert regime is Regime.CHAOTIC and "Lyapunov" in why
    assert classify(tr)[0] is Regime.UNSETTLED


def test_trace_ab_is_the_mean_per_coordinate_product():
    """A limit with per-coordinate signs (a_i, b_i) = ±(a, b) has ab = a·b in every
    coordinate; the trace's ab is the mean of those products (not mean(a)·mean(b))."""
    f = make_field(FieldSpec("exact", gaussian(3, 1.0), 20))
    th = diagonal_init(3, 0.4, 0.5).numpy()
    kq, pv = (2 * 3 + 0) * 9 + 3 + 0, 81 + 0 * 9 + 3 + 0  # diag entries of coordinate 0
    th[kq], th[pv] = -th[kq], -th[pv]
    tr = descend(f, th, 1e-3, 2, sharpness_every=0)
    np.testing.assert_allclose(tr.ab, [float(np.mean(ab(x))) for x in tr.theta], rtol=1e-15)
    assert tr.ab[0] == pytest.approx(0.2, rel=1e-14)
