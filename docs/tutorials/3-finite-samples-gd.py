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
# # Finite samples and gradient descent
#
# The theorems are about the gradient *flow* of the *population* loss.  The paper's
# simulations (Section 6, Appendix B) run something else: full-batch gradient descent
# $\theta_{k+1} = \theta_k - \eta \nabla L_m(\theta_k)$ on the loss $L_m$ of $m$ fixed
# training sequences.  Two approximations separate the two:
#
# - **time discretisation**: $k$ steps of size $\eta$ follow the flow up to time
#   $\tau = k\eta$, with an error of order $\eta$;
# - **sampling**: $L_m$ is an average over $m$ sequences, so its minimiser differs from the
#   population one by $O(1/\sqrt m)$ — different draws give different runs.
#
# This tutorial runs the paper's GD protocol (`mesadyn.train`) on several independent
# training sets, and compares the mean trajectory, with error bars across draws, with the
# closed-form population flow of Lemma 5.2 at $\tau = k\eta$.
#
# **Size.** The paper uses $d = 5$, $T = 100$, $m = 10\,000$ and 200 steps, about a minute
# per run on two cores.  To run in well under two minutes in total we use $d = 3$, $T = 20$,
# $m = 1000$ and six draws; with $T = 20$ the constants $c_1, c_2$ are smaller than at
# $T = 100$, so we take a larger step $\eta = 5 \cdot 10^{-3}$ (Table 1's $10^{-3}$ is for
# $T = 100$) and 300 steps, which reach $\tau = 1.5$.

# %%
# %matplotlib inline
import numpy as np
import torch

import mesadyn as md
from mesadyn import flow, plots, theory
from mesadyn.field import FieldSpec, make_field

d, T, sigma = 3, 20, 0.5
m, steps, lr = 1000, 300, 5e-3
seeds = [1, 2, 3, 4, 5, 6]
a0, b0 = 0.5, 1.5  # one of the paper's initialisations (Section 6)
fam = md.gaussian(d, sigma=sigma)

# %% [markdown]
# ## 1. The population flow, in closed form
#
# From the diagonal initialisation the population flow stays diagonal and $(a, b)$ follow
# Lemma 5.2 (tutorial 1 checks this against the full flow of the exact loss).  Its limit lies
# on the hyperbola $ab^* = c_2/c_1$ of Theorem 4.1.

# %%
c = theory.constants(fam, T)
system = md.ReducedSystem.from_family(fam, T)
tau = lr * np.arange(steps + 1)
a_flow, b_flow = system.solution(a0, b0, tau)
ab_flow = a_flow * b_flow
print(f"c1 = {c.c1:.4f}, c2 = {c.c2:.4f}, ab* = c2/c1 = {c.ab_star:.6f}; "
      f"flow at tau = {tau[-1]:g}: ab = {ab_flow[-1]:.6f}")

# %% [markdown]
# ## 2. Gradient descent on finite samples
#
# One run per seed: the seed draws the $m$ training sequences (and a held-out test set from
# a separate stream).  Each run records, at every step, the per-coordinate
# $ab = \mathrm{diag}(W^{KQ}_{32}) \odot \mathrm{diag}(W^{PV}_{12})$, the train and test losses
# and Proposition 4.1's in-context ratio on the test set.

# %%
runs = [md.train(fam, T, m=m, steps=steps, lr=lr, a0=a0, b0=b0, seed=s, eval_every=100)
        for s in seeds]
ab_runs = np.stack([r.ab_mean for r in runs])  # (seeds, steps + 1)
mean = ab_runs.mean(axis=0)
se = ab_runs.std(axis=0, ddof=1) / np.sqrt(len(runs))
for k in (0, 50, 100, 200, 300):
    print(f"step {k:3d} (tau = {tau[k]:.2f}): GD ab = {mean[k]:.5f} +/- {se[k]:.5f}   "
          f"flow ab = {ab_flow[k]:.5f}")

# %% [markdown]
# ## 3. Discretisation: GD against the flow of its own loss
#
# Seed 1's training set defines a loss $L_m$; `FieldSpec("finite", ..., m=m, seed=1)` builds
# the same $m$ sequences as `md.train(..., seed=1)` (the train loss at step 0 is the field's
# loss at $\theta_0$).  Integrating $\dot\theta = -\nabla L_m(\theta)$ and reading it at
# $\tau = k\eta$ separates the two approximations: GD follows this flow up to $O(\eta)$.

# %%
field = make_field(FieldSpec("finite", fam, T, m=m, seed=seeds[0]))
theta0 = md.diagonal_init(d, a0, b0)
assert np.isclose(float(field.loss(theta0)), runs[0].train_loss[0], rtol=1e-12)
own = flow.integrate(field, theta0, t_end=tau[-1], solver="scipy:RK45", rtol=1e-8, atol=1e-10,
                     n_save=300)
ab_own = np.interp(tau, own.t, [md.ab(torch.as_tensor(th)).mean().item() for th in own.theta])
gap_own = np.max(np.abs(runs[0].ab_mean - ab_own))
gap_pop = np.max(np.abs(runs[0].ab_mean - ab_flow))
print(f"seed 1: max_k |GD ab - flow of L_m ab| = {gap_own:.2e}   (eta = {lr:g})")
print(f"seed 1: max_k |GD ab - population flow ab| = {gap_pop:.2e}")

# %% [markdown]
# ## 4. Sampling: the draws against the population flow
#
# Each draw ends at the minimiser of its own $L_m$; the draws scatter around the population
# value by $O(1/\sqrt m)$, and the standard error of their mean says whether Theorem 4.1's
# $ab^*$ is consistent with them.  At $m = 1000$ the mean sits above $ab^*$ by a few standard
# errors: the minimiser of the finite-sample loss is *biased* (the mean of the minimisers is
# not the minimiser of the mean loss), by an amount that shrinks as $m$ grows.  With
# $m = 4000$ and eight draws (not run here: four times longer) we measured an offset of
# $0.006 \pm 0.010$, consistent with zero, against $0.043 \pm 0.017$ at $m = 1000$.  The
# paper's $m = 10\,000$ at $T = 100$ makes both effects small.

# %%
final = ab_runs[:, -1]
z = (final.mean() - c.ab_star) / (final.std(ddof=1) / np.sqrt(len(final)))
print("final ab per draw:", final.round(5))
print(f"mean {final.mean():.5f} +/- {final.std(ddof=1) / np.sqrt(len(final)):.5f} (SE); "
      f"Theorem 4.1: {c.ab_star:.5f}; z = {z:+.2f}")
print(f"spread of the draws (SD) {final.std(ddof=1):.5f}; the GD path's largest distance from "
      f"the flow {np.max(np.abs(mean - ab_flow)):.5f}")

# %% [markdown]
# ## 5. The in-context ratio (Proposition 4.1)
#
# At the trained point the model predicts $\hat y = W(ab\,\hat\Sigma)x$, so the ratio
# $E[\hat y_j / (Wx)_j]$ is $ab^* E[x_j^2] = \sigma^2 ab^*$: not 1 (Theorem 4.2: the
# mesa-optimizer does not recover $W$ for Gaussian tokens).  Each run estimates it on its
# test set, with a standard error.

# %%
ratio = np.array([r.ratio[-1] for r in runs])
ratio_se = np.array([r.ratio_se[-1] for r in runs])
predicted = theory.predicted_ratio(fam, T)
for s, r_, e in zip(seeds, ratio, ratio_se, strict=True):
    print(f"seed {s}: ratio {r_:.4f} +/- {e:.4f}")
print(f"Proposition 4.1 at T = {T}: {predicted:.4f}  (T -> infinity: {sigma**2 * c.ab_limit:.4f})")

# %% [markdown]
# ## 6. The figure
#
# Left: the mean $ab$ of the GD runs with a band of $\pm 2$ standard errors across draws, the
# population flow at $\tau = k\eta$, and Theorem 4.1's $ab^*$.  Right: train and test losses
# of each run (log scale), against $\tau$.  Figures follow `mesadyn.plots.style()`, the
# package's publication style.

# %%
from matplotlib.figure import Figure  # noqa: E402

init_colour = plots.INIT_COLOURS[plots.DiagonalInit(a0, b0)]  # its colour in every figure
with plots.style():
    fig = Figure(figsize=plots.figsize("two", aspect=0.4), layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    ax.fill_between(tau, mean - 2 * se, mean + 2 * se, color=init_colour, alpha=0.25,
                    label=r"GD mean $\pm 2$ SE")
    ax.plot(tau, mean, lw=1.2, color=init_colour,
            label=f"GD from $(a_0,b_0)=({a0:g},{b0:g})$, mean of {len(runs)} draws ($m={m}$)")
    ax.plot(tau, ab_flow, "k--", lw=1.0, label="population flow (Lemma 5.2)")
    ax.plot(tau, ab_own, ":", color="C2", lw=1.2, label=r"flow of $L_m$, seed 1")
    ax.plot(tau, runs[0].ab_mean, lw=0.6, color="C2", alpha=0.6,
            label="GD, seed 1 (under the dotted line)")
    ax.axhline(c.ab_star, color=plots.OKABE_ITO["vermillion"], lw=0.8, ls=":",
               label=r"$ab^* = c_2/c_1$")
    ax.set_xlabel(r"$\tau = k\eta$")
    ax.set_ylabel(r"$ab$")
    for r in runs:
        ax2.semilogy(tau, r.train_loss, lw=0.8, color="C0", alpha=0.7)
        ok = np.isfinite(r.test_loss)
        ax2.semilogy(tau[ok], r.test_loss[ok], "o", ms=2.5, color="C1", alpha=0.7)
    plots.log_ticks(ax2)  # plain-number ticks: the losses span less than a decade
    ax2.plot([], [], color="C0", label="train loss")
    ax2.plot([], [], "o", color="C1", label="test loss")
    ax2.set_xlabel(r"$\tau = k\eta$")
    ax2.set_ylabel(r"loss $L_m$ (train), test loss")
    ax2.legend(loc="upper right")
    fig.legend(handles=ax.get_legend_handles_labels()[0], loc="outside lower center", ncols=3)
fig  # noqa: B018 (the notebook displays it)
