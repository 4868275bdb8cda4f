# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # From a theorem to a phase portrait
#
# The paper proves that, from the diagonal initialisation of Assumption 3.1
# ($W^{KQ}_{32} = a_0 I$, $W^{PV}_{12} = b_0 I$, every other entry 0), the gradient flow
# $\dot\theta = -\nabla L(\theta)$ of the population loss (Eq. 2) keeps $\theta$ diagonal, and
# the two diagonals $a(\tau)$, $b(\tau)$ follow a two-dimensional system (Lemma 5.2):
#
# $$\dot a = -a b^2 c_1 + b c_2, \qquad \dot b = -a^2 b c_1 + a c_2,$$
#
# with constants $c_1 = (T-2)\kappa_2 + H_{T-2}\kappa_3$ and $c_2 = (T-2)\kappa_1$
# (Lemma 5.3), whose minima lie on the hyperbola $ab = c_2/c_1$ (Theorem 4.1).
#
# This tutorial goes from the constants to the closed-form solution, checks it against the
# *full* 450-dimensional flow of the exact population loss, and draws the phase portrait.
# It uses the paper's setting: $d = 5$, $T = 100$, $x_1 \sim \mathcal N(0, \sigma^2 I)$ with
# $\sigma = 0.5$.  It runs in well under a minute on two cores.

# %%
# %matplotlib inline
import numpy as np
import torch

import mesadyn as md
from mesadyn import flow, plots, theory
from mesadyn.field import FieldSpec, make_field

d, T, sigma = 5, 100, 0.5
fam = md.gaussian(d, sigma=sigma)

# %% [markdown]
# ## 1. The constants of the theory
#
# For a Gaussian initial token the moments of Assumption 4.1 are $\kappa_1 = 3\sigma^4$,
# $\kappa_2 = 15\sigma^6$ and $\kappa_3 = 3(d-1)\sigma^6$.  `mesadyn.theory.constants` computes
# them, with $c_1$, $c_2$ and Theorem 4.1's fixed hyperbola $ab^* = c_2/c_1$.  We recompute
# each one from its formula as a check.

# %%
c = theory.constants(fam, T)
H = sum(1.0 / k for k in range(1, T - 1))  # H_{T-2}
by_hand = {
    "kappa1": 3 * sigma**4,
    "kappa2": 15 * sigma**6,
    "kappa3": 3 * (d - 1) * sigma**6,
}
by_hand["c1"] = (T - 2) * by_hand["kappa2"] + H * by_hand["kappa3"]
by_hand["c2"] = (T - 2) * by_hand["kappa1"]
for name, value in by_hand.items():
    print(f"{name:7s} mesadyn {getattr(c, name):12.6f}   by hand {value:12.6f}")
    assert np.isclose(getattr(c, name), value, rtol=1e-13)
print(f"ab* = c2/c1 = {c.ab_star:.6f}   (T -> infinity limit kappa1/kappa2 = {c.ab_limit:.6f})")

# %% [markdown]
# The paper's figures draw the $T \to \infty$ value $\kappa_1/\kappa_2 = 1/(5\sigma^2) = 0.8$;
# at the paper's own $T = 100$ the fixed hyperbola is $ab^* \approx 0.7676$.
#
# ## 2. The reduced flow in closed form
#
# The system conserves $\Delta = a^2 - b^2$, and $s = ab$ obeys the separable equation
# $\dot s = (c_2 - c_1 s)\sqrt{\Delta^2 + 4 s^2}$, so the flow has an explicit solution.
# `ReducedSystem.solution` evaluates it; `mesadyn.flow.integrate_reduced` integrates the same
# system numerically and reports the largest distance between the two.

# %%
system = md.ReducedSystem.from_family(fam, T)
inits = [(0.1, 0.1), (0.5, 1.5), (2.0, 2.0)]  # the paper's initialisations (Section 6)
tau = np.linspace(0.0, 0.05, 6)
a, b = system.solution(0.5, 1.5, tau)
print("tau      a(tau)     b(tau)     ab        a^2 - b^2")
for row in zip(tau, a, b, a * b, a * a - b * b, strict=True):
    print("  ".join(f"{v:9.6f}" for v in row))

for a0, b0 in inits:
    t_end = system.horizon(a0, b0)  # well past settling: max(3 x settle time, 50/c2)
    run = flow.integrate_reduced(system, a0, b0, t_end=t_end, rtol=1e-10, atol=1e-12)
    print(f"(a0, b0) = ({a0}, {b0}): limit {system.limit(a0, b0)}, ab -> {run.ab[-1]:.10f}, "
          f"max |numerical - closed form| = {run.closed_form_max_error():.1e}")

# %% [markdown]
# ## 3. The full flow of the exact population loss
#
# `mesadyn.field` builds the loss $L(\theta)$ of Eq. 2 *exactly* — the expectation over
# $x_1$ and $W$ is a finite sum of moment tensors — with its gradient and Hessian.  A
# `FieldSpec` names the field; `make_field` builds it (once per process).  Every one of the
# $18 d^2 = 450$ coordinates of $\theta$ evolves in this flow, integrated by the package's
# default full-flow solver (`flow.default_solver`: LSODA, which uses the exact Hessian).

# %%
field = make_field(FieldSpec("exact", fam, T))
print(field.describe())

flows = {}
solver = flow.default_solver(reduced=False)
for a0, b0 in inits:
    theta0 = md.diagonal_init(d, a0, b0)
    flows[a0, b0] = flow.integrate(field, theta0, t_end=system.horizon(a0, b0), solver=solver,
                                   rtol=1e-10, atol=1e-12)
    res = flows[a0, b0]
    print(f"({a0}, {b0}): {solver} status {res.status} at tau = {res.t[-1]:.3g}, "
          f"{res.nfev} evaluations, "
          f"invariant drift {res.invariant_drift():.1e}")


# %% [markdown]
# ## 4. The two agree
#
# `mesadyn.model.diagonal_entries` reads the diagonals of $W^{KQ}_{32}$ and $W^{PV}_{12}$ —
# the per-coordinate $(a, b)$ — off $\theta$ (or off a whole trajectory at once); compare them
# with the closed form at the same times.  Every other entry of $\theta$ stays exactly zero,
# and the full flow conserves $\|A\|_F^2 - \|P\|_F^2$ (here $d(a_0^2 - b_0^2)$).

# %%
worst = {}
for (a0, b0), res in flows.items():
    a_cf, b_cf = system.solution(a0, b0, res.t)
    a, b = md.model.diagonal_entries(res.theta)  # shape (len(res.t), d) each
    err = max(np.max(np.abs(a - a_cf[:, None])), np.max(np.abs(b - b_cf[:, None])))
    off = float(np.max(np.abs(res.theta[:, ~md.diagonal_mask(d)])))
    inv = md.model.invariant(res.theta)
    worst[a0, b0] = err
    print(f"({a0}, {b0}): max |full - closed form| = {err:.1e}, max off-diagonal entry = "
          f"{off:.1e}, invariant {inv[0]:.6f} -> {inv[-1]:.6f}, "
          f"final ab = {md.ab(torch.as_tensor(res.final)).numpy().round(6)}")
    assert np.allclose(inv, d * (a0**2 - b0**2), atol=1e-8)
assert max(worst.values()) < 1e-6

# %% [markdown]
# ## 5. The phase portrait
#
# `mesadyn.plots.portrait` draws the reduced flow's plane: streamlines coloured by speed,
# the fixed hyperbola $ab = c_2/c_1$ (both branches), the saddle at the origin with its
# stable manifold $a = -b$, level sets of the conserved $a^2 - b^2$ (which are also the
# orbits), and the closed-form trajectories from the paper's three inits.  Passing the full
# flows as `full_flow` overlays them (projected on the mean diagonals); the right-hand panel
# shows $ab(\tau)$ against Theorem 4.1's value at $T = 100$ and the $T \to \infty$ limit.
# Like every figure of `mesadyn.plots` it returns `(Figure, Axes)`.

# %%
fig, ax = plots.portrait(fam, T, inits=inits, full_flow=list(flows.values()),
                            inset_ab=True)
fig  # noqa: B018 (the notebook displays it)
