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
# # Proposition 4.2 step by step
#
# Section 4.3 of the paper leaves Assumption 4.1 behind: every sequence starts from the same
# token $x_1 = \mathbf 1_d$.  If the gradient flow is *clipped* to the diagonals of
# $W^{KQ}_{32}$ and $W^{PV}_{12}$ (the structural assumption of Theorem 4.3), it converges to
# the diagonal point with $ab = c_2/c_1$, where now $c_1 = (T-2) + (d-1)H_{T-2}$ and
# $c_2 = T-2$ (Lemma A.5), and the trained model is one step of gradient descent on an
# in-context least-squares problem.
#
# Proposition 4.2 says that this point is **not** a fixed point of the unclipped flow: the
# gradient has non-zero entries off the diagonals, so without the clipping the model leaves
# the diagonal structure, and the trained transformer does not implement vanilla gradient
# descent.  We check each step with the exact population loss, at the paper's $d = 5$,
# $T = 100$ (a few seconds; the exact field is the expensive part).

# %%
# %matplotlib inline
import numpy as np
import torch

import mesadyn as md
from mesadyn import plots, theory
from mesadyn.analysis.fixedpoint import (
    balanced_point,
    flow_to_fixed_point,
    gradient_split,
    refine,
)
from mesadyn.analysis.spectrum import classify
from mesadyn.field import FieldSpec, make_field

d, T = 5, 100
fam = md.ones(d)
field = make_field(FieldSpec("exact", fam, T))

# %% [markdown]
# ## 1. The masked fixed point (Theorem 4.3)
#
# Start at $a = b = \sqrt{ab^*}$ and polish with Newton's method on $\nabla L = 0$, moving only
# the coordinates the clipping leaves free (`md.diagonal_mask`).  Lemma A.5's constants give
# $ab^*$ in closed form; the refined point must agree with it.

# %%
c = theory.constants(fam, T)
H = sum(1.0 / k for k in range(1, T - 1))
ab_lemma_a5 = (T - 2) / ((T - 2) + (d - 1) * H)
print(f"c1 = {c.c1:.6f}, c2 = {c.c2:.1f}, ab* = {c.ab_star:.10f} (Lemma A.5 by hand: "
      f"{ab_lemma_a5:.10f})")

mask = md.diagonal_mask(d)
masked = refine(field, balanced_point(fam, T), mask=mask)  # already exact: 0 iterations
ab = md.ab(torch.as_tensor(masked.theta)).numpy()
print(f"Newton: {masked.iterations} iterations, residual max|grad L| on the free coordinates "
      f"= {masked.residual:.1e}")
print("ab per coordinate:", ab.round(10))
assert np.allclose(ab, ab_lemma_a5, rtol=1e-10)

# %% [markdown]
# ## 2. Its gradient off the diagonals
#
# The gradient of the *full* loss at that point, split by where its entries sit.  On the
# diagonals it vanishes (the point is a fixed point of the clipped flow); off them, inside
# $W^{KQ}_{32}$ and $W^{PV}_{12}$, it does not — that is Proposition 4.2.

# %%
split = gradient_split(masked.grad)
for name, value in split.items():
    print(f"{name:26s} {value:.3e}")
assert split["diag_grad_norm"] < 1e-10 < 1.0 < split["offdiag_32_12_grad_norm"]

# %% [markdown]
# An independent check of the off-diagonal gradient: a central finite difference of the loss
# along one off-diagonal entry of $W^{KQ}_{32}$.

# %%
labels = md.block_labels(d)
k = int(np.flatnonzero((labels == "W_KQ_32") & ~mask)[0])
h = 1e-5
e = np.zeros_like(masked.theta)
e[k] = h
loss = lambda th: float(field.loss(torch.as_tensor(th)))  # noqa: E731
fd = (loss(masked.theta + e) - loss(masked.theta - e)) / (2 * h)
print(f"entry {k}: autodiff/exact gradient {masked.grad[k]:.8f}, finite difference {fd:.8f}")
assert abs(fd - masked.grad[k]) < 1e-5 * max(1.0, abs(fd))

# %% [markdown]
# ## 3. The unstable mode
#
# The spectrum of the flow's Jacobian $J = -\nabla^2 L$ at the masked point: the zero modes
# are the entries of $\theta$ that never reach the prediction (inactive blocks); all other
# eigenvalues are negative except one.  Its eigenvector lies in $W^{KQ}_{32}$ and
# $W^{PV}_{12}$: mostly along their diagonals, but coupled to their off-diagonal entries.
# Restricted to the diagonal coordinates alone (the clipped flow) the Jacobian has no positive
# eigenvalue, so it is the off-diagonal entries, which the clipping freezes, that destabilise
# the point.  (The point is not a critical point of the full loss, so this spectrum describes
# the linearised flow around it.)

# %%
hess = field.hessian(torch.as_tensor(masked.theta)).numpy()
spectrum = classify(hess, masked.theta)
print(f"zero {spectrum.n_zero}, stable {spectrum.n_stable}, unstable {spectrum.n_unstable}")
top = int(np.argmax(spectrum.eigenvalues))
v = spectrum.eigenvectors[:, top]
in_blocks = np.isin(labels, ("W_KQ_32", "W_PV_12"))
print(f"unstable eigenvalue {spectrum.eigenvalues[top]:.6f}; eigenvector weight (sum of v_i^2):")
print(f"  on the diagonals of W^KQ_32, W^PV_12:     {np.sum(v[mask] ** 2):.4f}")
print(f"  off the diagonals, in those two blocks:   {np.sum(v[in_blocks & ~mask] ** 2):.4f}")
print(f"  everywhere else:                          {np.sum(v[~in_blocks] ** 2):.1e}")
clipped = np.linalg.eigvalsh(-hess[np.ix_(mask, mask)])
print(f"largest eigenvalue of J restricted to the diagonals: {clipped.max():.2e}")
assert spectrum.n_unstable == 1 and clipped.max() < 1e-9 * np.abs(clipped).max()

# %% [markdown]
# ## 4. Released: the dense fixed point (Appendix B.5)
#
# Now let every coordinate move: follow the unclipped flow from the masked point until the
# gradient is below $10^{-8}$, then polish with Newton.  The point it reaches has a lower loss
# and dense $W^{KQ}_{32}$, $W^{PV}_{12}$ — no longer multiples of the identity.

# %%
dense, end = flow_to_fixed_point(field, masked.theta)
print(f"flow: status {end.status} at tau = {end.t:.3f}; Newton residual {dense.residual:.1e}")
print(f"loss: masked {masked.loss:.8f} -> released {dense.loss:.8f}")
assert dense.residual < 1e-10 and dense.loss < masked.loss

W_KQ, W_PV = md.unpack(torch.as_tensor(dense.theta))
W1 = W_KQ[2 * d :, d : 2 * d].numpy()  # W^KQ_32
W2 = W_PV[:d, d : 2 * d].numpy()  # W^PV_12
np.set_printoptions(precision=4, suppress=True)
print("W^KQ_32 =\n", W1)
print("W^PV_12 =\n", W2)
offdiag = lambda W: float(np.max(np.abs(W - np.diag(np.diag(W)))))  # noqa: E731
print(f"largest off-diagonal entry: W^KQ_32 {offdiag(W1):.4f}, W^PV_12 {offdiag(W2):.4f}")

# %% [markdown]
# The dense point's Jacobian is stable apart from its zero modes (inactive entries and the
# scaling symmetry $(P, A) \to (\alpha P, A/\alpha)$ of the loss):

# %%
dense_spectrum = classify(field.hessian(torch.as_tensor(dense.theta)).numpy(), dense.theta)
print(f"zero {dense_spectrum.n_zero}, stable {dense_spectrum.n_stable}, "
      f"unstable {dense_spectrum.n_unstable}")

# %% [markdown]
# ## 5. The heat maps
#
# $W^{KQ}$ and $W^{PV}$ at the two points, in the style of the paper's Figure 7: the blocks
# that reach the prediction (Eq. 1) are outlined.  Left, the masked point (diagonal blocks);
# right, the released dense point.

# %%
fig, _ = plots.weight_heatmaps(masked.theta, title=r"masked fixed point (Theorem 4.3)")
fig  # noqa: B018 (the notebook displays it)

# %%
fig, _ = plots.weight_heatmaps(dense.theta, title=r"released dense fixed point (Prop. 4.2)")
fig  # noqa: B018 (the notebook displays it)

# %% [markdown]
# On one colour scale the off-diagonal entries (about $-0.05$ and $-0.03$ against diagonals
# near $0.92$) are faint.  With the diagonals removed, the dense structure of the released
# point is plain: every off-diagonal entry of $W^{KQ}_{32}$ and of $W^{PV}_{12}$ takes one
# common value.

# %%
from matplotlib.colors import TwoSlopeNorm  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

with plots.style():
    fig = Figure(figsize=plots.figsize("one", aspect=0.5), layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, W, name in zip(axes, (W1, W2), ("W^{KQ}_{32}", "W^{PV}_{12}"), strict=True):
        off = W - np.diag(np.diag(W))
        vmax = float(np.abs(off).max())
        im = ax.imshow(off, cmap="RdBu_r", norm=TwoSlopeNorm(0.0, -vmax, vmax))
        ax.set_title(rf"${name} - \mathrm{{diag}}$")
        ax.set_xticks([])
        ax.set_yticks([])
        fig.colorbar(im, ax=ax, shrink=0.8)
fig  # noqa: B018 (the notebook displays it)
