"""The fused CPU kernel of k-layer linear attention's loss and gradient (numba).

:meth:`mesadyn.models.DeepLinearAttention.predict` runs each layer as a chunked causal scan of
batched complex products through torch, and autograd records about a hundred small tensor
operations per chunk, each a pass over memory (with conjugate copies of complex operands).
Here one compiled loop takes a group of :data:`LANES` sequences at a time through every
layer, forward and back, with every intermediate in cache, split into real and imaginary
parts with the lanes innermost, so every inner loop is a vector operation over the group.

For layer l with input stream ``s_t`` (width ``w_in``) and update of width ``w_out``
(design notes §7; ``ρ_t = t − 1``, position 1 not updated):

    q_t = K_l s_t,   v_t = P_l s_t,   Z_t = Σ_{i≤t} v_i s_i^*,   u_t = Z_t q_t / ρ_t,

``K_l``, ``P_l`` the active parts of ``W^KQ_l``, ``W^PV_l`` (layer 1 reads the x-blocks
``(x_t, x_{t−1})`` of ``e_t``; the last layer writes the first block only).  The first
layer's ``Z_t = P_1 M_t`` with the data's prefix Gram ``M_t = Σ_{i≤t} e_i e_i^*``, so it runs as
``u_t = P_1 (M_t q_t)/ρ_t`` (fewer products when ``w_out > w_in``), and its backward pass
needs no reverse sweep (``M_t`` holds no θ).  The backward pass of a later layer, given
``g_u`` (torch's convention for complex gradients, ``∂L/∂Re + i ∂L/∂Im``):

    g_q_t = Z_t^* g_u_t / ρ_t                (a forward sweep, rebuilding Z_t),
    G_i = Σ_{t≥i} g_u_t q_t^* / ρ_t,  g_v_i = G_i s_i,  g_s_i += G_i^* v_i   (a reverse sweep),
    g_s_t += K_lᵀ g_q_t + P_lᵀ g_v_t,   g_K_l += Re Σ_t g_q_t s_t^*,   g_P_l += Re Σ_t g_v_t s_t^*.

The arithmetic is IEEE (no fastmath, :func:`._fused._ieee_jit`) and every sum has a fixed
order: the lanes are independent, the gradient is accumulated per lane and the lanes summed
once per group in lane order, and the groups are summed in a fixed order.  The inner loops
still vectorize (over the lanes, which needs no reassociation), and the numbers are the same
bits on any number of threads, on any x86-64 CPU (numba's generic target included) and
whether numba compiles the kernel afresh or loads it from its cache.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeGuard

import numpy as np
import numpy.typing as npt

from ..models import DeepLinearAttention, Model
from ._fused import _ieee_jit

if TYPE_CHECKING:
    import torch

_F = npt.NDArray[np.float64]

#: Sequences per group: the innermost (vector) axis of every array of the kernel.  A loop over
#: 64 lanes is one LLVM vectorizes (with its runtime check that the arrays do not overlap); a
#: loop of 4 or 8, unrolled, stays scalar.  Measured at d = 5, T = 100, two layers, one
#: thread: 0.42, 0.34, 0.26, 0.12 and 0.19 CPU-s per 1000 sequences for 8, 16, 32, 64 and
#: 128 lanes.
LANES = 64


# ---- small vector kernels over a group's lanes (the last axis) --------------------------------
@_ieee_jit
def _real_mv(K: _F, rows: int, cols: int, sr: _F, si: _F, outr: _F,
             outi: _F) -> None:  # pragma: no cover - compiled (numba)
    """``out = K[:rows, :cols] s`` for a real matrix and complex lanes."""
    L = LANES
    for a in range(rows):
        for ln in range(L):
            outr[a, ln] = 0.0
            outi[a, ln] = 0.0
        for b in range(cols):
            kab = K[a, b]
            for ln in range(L):
                outr[a, ln] += kab * sr[b, ln]
                outi[a, ln] += kab * si[b, ln]


@_ieee_jit
def _real_mtv_add(K: _F, rows: int, cols: int, gr: _F, gi: _F, outr: _F,
                  outi: _F) -> None:  # pragma: no cover - compiled (numba)
    """``out += K[:rows, :cols]ᵀ g``."""
    L = LANES
    for a in range(rows):
        for b in range(cols):
            kab = K[a, b]
            for ln in range(L):
                outr[b, ln] += kab * gr[a, ln]
                outi[b, ln] += kab * gi[a, ln]


@_ieee_jit
def _outer_add(Zr: _F, Zi: _F, rows: int, cols: int, ar: _F, ai: _F, br: _F, bi: _F,
               scale: float) -> None:  # pragma: no cover - compiled (numba)
    """``Z += scale · a b^*``."""
    L = LANES
    for a in range(rows):
        for b in range(cols):
            for ln in range(L):
                xr = scale * ar[a, ln]
                xi = scale * ai[a, ln]
                Zr[a, b, ln] += xr * br[b, ln] + xi * bi[b, ln]
                Zi[a, b, ln] += xi * br[b, ln] - xr * bi[b, ln]


@_ieee_jit
def _cmv(Zr: _F, Zi: _F, rows: int, cols: int, br: _F, bi: _F, scale: float, outr: _F,
         outi: _F) -> None:  # pragma: no cover - compiled (numba)
    """``out = scale · Z b`` (Z rows × cols, complex)."""
    L = LANES
    for a in range(rows):
        for ln in range(L):
            outr[a, ln] = 0.0
            outi[a, ln] = 0.0
        for b in range(cols):
            for ln in range(L):
                mr = Zr[a, b, ln]
                mi = Zi[a, b, ln]
                outr[a, ln] += mr * br[b, ln] - mi * bi[b, ln]
                outi[a, ln] += mr * bi[b, ln] + mi * br[b, ln]
        for ln in range(L):
            outr[a, ln] *= scale
            outi[a, ln] *= scale


@_ieee_jit
def _cmhv(Zr: _F, Zi: _F, rows: int, cols: int, br: _F, bi: _F, scale: float, outr: _F,
          outi: _F, add: bool) -> None:  # pragma: no cover - compiled (numba)
    """``out = scale · Z^* b`` (or ``+=`` when ``add``)."""
    L = LANES
    if not add:
        for c in range(cols):
            for ln in range(L):
                outr[c, ln] = 0.0
                outi[c, ln] = 0.0
    for a in range(rows):
        for c in range(cols):
            for ln in range(L):
                mr = Zr[a, c, ln]
                mi = Zi[a, c, ln]
                xr = scale * br[a, ln]
                xi = scale * bi[a, ln]
                outr[c, ln] += mr * xr + mi * xi
                outi[c, ln] += mr * xi - mi * xr


@_ieee_jit
def _grad_add(gM: _F, rows: int, cols: int, gr: _F, gi: _F, sr: _F,
              si: _F) -> None:  # pragma: no cover - compiled (numba)
    """``gM[:rows, :cols, lane] += Re g s^*`` per lane (the gradient of a real matrix applied
    to s; the lanes are summed once per group, :func:`_lane_sum`)."""
    L = LANES
    for a in range(rows):
        for b in range(cols):
            for ln in range(L):
                gM[a, b, ln] += gr[a, ln] * sr[b, ln] + gi[a, ln] * si[b, ln]


@_ieee_jit
def _lane_sum(gL: _F, out: _F) -> None:  # pragma: no cover - compiled (numba)
    """``out[...] = Σ_lanes gL[..., lane]``, the lanes in order."""
    n0, n1, n2 = out.shape
    for i in range(n0):
        for a in range(n1):
            for b in range(n2):
                acc = 0.0
                for ln in range(LANES):
                    acc += gL[i, a, b, ln]
                out[i, a, b] = acc


@_ieee_jit
def deep_groups(Ks: _F, Ps: _F, xr: _F, xi: _F, w: _F, lo: int, hi: int,
                loss: _F, gK: _F, gP: _F) -> None:  # pragma: no cover - compiled (numba)
    """Groups ``lo..hi−1`` of the sequences ``xr``/``xi`` (G, T, d, LANES) with weights ``w``
    (G, LANES): each group's weighted loss ``Σ_lanes w ℓ`` into ``loss[g]`` and its gradient
    in every layer's ``K``/``P`` (k, 3d, 3d; the active parts top-left) into ``gK[g]``,
    ``gP[g]`` (overwritten)."""
    L = LANES
    k = Ks.shape[0]
    T = xr.shape[1]
    d = xr.shape[2]
    T1 = T - 1
    W = 3 * d
    w0 = 2 * d
    S_r = np.zeros((k, T1, W, L))
    S_i = np.zeros((k, T1, W, L))
    Q_r = np.zeros((k, T1, W, L))
    Q_i = np.zeros((k, T1, W, L))
    V_r = np.zeros((k, T1, W, L))  # v_t (later layers), z_t = M_t q_t / ρ_t (the first)
    V_i = np.zeros((k, T1, W, L))
    Go_r = np.zeros((T1, W, L))  # the gradient at the current layer's output
    Go_i = np.zeros((T1, W, L))
    Gs_r = np.zeros((T1, W, L))  # ... at its input
    Gs_i = np.zeros((T1, W, L))
    Gq_r = np.zeros((T1, W, L))
    Gq_i = np.zeros((T1, W, L))
    Z_r = np.zeros((W, W, L))
    Z_i = np.zeros((W, W, L))
    u_r = np.zeros((W, L))
    u_i = np.zeros((W, L))
    h_r = np.zeros((W, L))
    h_i = np.zeros((W, L))
    gKl = np.zeros((k, W, W, L))  # the group's gradient per lane
    gPl = np.zeros((k, W, W, L))
    tot = np.zeros(L)
    for g in range(lo, hi):
        gKl[:] = 0.0
        gPl[:] = 0.0
        tot[:] = 0.0
        # the first layer's input, e_t's x-blocks (x_t, x_{t−1})
        for t in range(T1):
            for c in range(d):
                for ln in range(L):
                    S_r[0, t, c, ln] = xr[g, t, c, ln]
                    S_i[0, t, c, ln] = xi[g, t, c, ln]
                    S_r[0, t, d + c, ln] = xr[g, t - 1, c, ln] if t > 0 else 0.0
                    S_i[0, t, d + c, ln] = xi[g, t - 1, c, ln] if t > 0 else 0.0
        # ---- forward ----------------------------------------------------------------------
        for layer in range(k):
            win = w0 if layer == 0 else W
            wout = d if layer == k - 1 else W
            Z_r[:] = 0.0
            Z_i[:] = 0.0
            for t in range(T1):
                s_r, s_i = S_r[layer, t], S_i[layer, t]
                q_r, q_i = Q_r[layer, t], Q_i[layer, t]
                v_r, v_i = V_r[layer, t], V_i[layer, t]
                _real_mv(Ks[layer], win, win, s_r, s_i, q_r, q_i)
                inv = 1.0 / t if t > 0 else 0.0
                if layer == 0:  # Z = M_t, v = z = M q / ρ, u = P z
                    _outer_add(Z_r, Z_i, win, win, s_r, s_i, s_r, s_i, 1.0)
                    _cmv(Z_r, Z_i, win, win, q_r, q_i, inv, v_r, v_i)
                    _real_mv(Ps[0], wout, win, v_r, v_i, u_r, u_i)
                else:  # v = P s, Z += v s^*, u = Z q / ρ
                    _real_mv(Ps[layer], wout, win, s_r, s_i, v_r, v_i)
                    _outer_add(Z_r, Z_i, wout, win, v_r, v_i, s_r, s_i, 1.0)
                    _cmv(Z_r, Z_i, wout, win, q_r, q_i, inv, u_r, u_i)
                # the next stream (e, or the embedding (0, e) after the first layer) + u;
                # the last layer's output ŷ = its first block, kept in Go until the loss
                if layer < k - 1:
                    nr, ni = S_r[layer + 1, t], S_i[layer + 1, t]
                else:
                    nr, ni = Go_r[t], Go_i[t]
                for a in range(wout):
                    for ln in range(L):
                        if layer > 0:
                            nr[a, ln] = s_r[a, ln] + u_r[a, ln]
                            ni[a, ln] = s_i[a, ln] + u_i[a, ln]
                        elif a >= d:
                            nr[a, ln] = s_r[a - d, ln] + u_r[a, ln]
                            ni[a, ln] = s_i[a - d, ln] + u_i[a, ln]
                        else:
                            nr[a, ln] = u_r[a, ln]
                            ni[a, ln] = u_i[a, ln]
        # ---- Eq. 2 at t = 2..T−1 and its gradient at ŷ -------------------------------------
        for t in range(T1):
            for a in range(W):
                for ln in range(L):
                    if t == 0 or a >= d:
                        Go_r[t, a, ln] = 0.0
                        Go_i[t, a, ln] = 0.0
                    else:
                        rr = Go_r[t, a, ln] - xr[g, t + 1, a, ln]
                        ri = Go_i[t, a, ln] - xi[g, t + 1, a, ln]
                        tot[ln] += w[g, ln] * 0.5 * (rr * rr + ri * ri)
                        Go_r[t, a, ln] = w[g, ln] * rr
                        Go_i[t, a, ln] = w[g, ln] * ri
        total = 0.0
        for ln in range(L):
            total += tot[ln]
        loss[g] = total
        # ---- backward through the later layers ---------------------------------------------
        for layer in range(k - 1, 0, -1):
            win = W
            wout = d if layer == k - 1 else W
            for t in range(T1):  # the residual path
                for a in range(W):
                    for ln in range(L):
                        Gs_r[t, a, ln] = Go_r[t, a, ln] if a < wout else 0.0
                        Gs_i[t, a, ln] = Go_i[t, a, ln] if a < wout else 0.0
            # forward sweep: g_q_t = Z_t^* g_u_t / ρ_t
            Z_r[:] = 0.0
            Z_i[:] = 0.0
            for t in range(T1):
                _outer_add(Z_r, Z_i, wout, win, V_r[layer, t], V_i[layer, t], S_r[layer, t],
                           S_i[layer, t], 1.0)
                inv = 1.0 / t if t > 0 else 0.0
                _cmhv(Z_r, Z_i, wout, win, Go_r[t], Go_i[t], inv, Gq_r[t], Gq_i[t], False)
            # reverse sweep: G_t = Σ_{t'≥t} g_u q^* / ρ;  g_v = G s;  g_s += G^* v
            Z_r[:] = 0.0
            Z_i[:] = 0.0
            for t in range(T1 - 1, -1, -1):
                s_r, s_i = S_r[layer, t], S_i[layer, t]
                if t > 0:
                    _outer_add(Z_r, Z_i, wout, win, Go_r[t], Go_i[t], Q_r[layer, t],
                               Q_i[layer, t], 1.0 / t)
                _cmv(Z_r, Z_i, wout, win, s_r, s_i, 1.0, h_r, h_i)
                _cmhv(Z_r, Z_i, wout, win, V_r[layer, t], V_i[layer, t], 1.0, Gs_r[t], Gs_i[t],
                      True)
                _real_mtv_add(Ks[layer], win, win, Gq_r[t], Gq_i[t], Gs_r[t], Gs_i[t])
                _real_mtv_add(Ps[layer], wout, win, h_r, h_i, Gs_r[t], Gs_i[t])
                _grad_add(gKl[layer], win, win, Gq_r[t], Gq_i[t], s_r, s_i)
                _grad_add(gPl[layer], wout, win, h_r, h_i, s_r, s_i)
            Go_r[:] = Gs_r
            Go_i[:] = Gs_i
        # ---- backward through the first layer: u = P z, z = M q / ρ, q = K e ----------------
        wout = d if k == 1 else W
        Z_r[:] = 0.0
        Z_i[:] = 0.0
        for t in range(T1):
            s_r, s_i = S_r[0, t], S_i[0, t]
            _outer_add(Z_r, Z_i, w0, w0, s_r, s_i, s_r, s_i, 1.0)
            if t == 0:
                continue
            # g_z = Pᵀ g_u (into h), g_P += Re g_u z^*, g_q = M g_z / ρ (M = M^*)
            for b in range(w0):
                for ln in range(L):
                    h_r[b, ln] = 0.0
                    h_i[b, ln] = 0.0
            _real_mtv_add(Ps[0], wout, w0, Go_r[t], Go_i[t], h_r, h_i)
            _grad_add(gPl[0], wout, w0, Go_r[t], Go_i[t], V_r[0, t], V_i[0, t])
            _cmv(Z_r, Z_i, w0, w0, h_r, h_i, 1.0 / t, u_r, u_i)
            _grad_add(gKl[0], w0, w0, u_r, u_i, s_r, s_i)
        _lane_sum(gKl, gK[g])
        _lane_sum(gPl, gP[g])


# ---- from θ and sequences to the kernel's arrays, and back ------------------------------------
def layer_blocks(theta: _F, k: int, d: int) -> tuple[_F, _F]:
    """Every layer's active ``K`` and ``P`` of a flat θ, top-left in (k, 3d, 3d) arrays."""
    W = 3 * d
    n = W * W
    Ks = np.zeros((k, W, W))
    Ps = np.zeros((k, W, W))
    for layer in range(k):
        KQ = theta[2 * layer * n:(2 * layer + 1) * n].reshape(W, W)
        PV = theta[(2 * layer + 1) * n:(2 * layer + 2) * n].reshape(W, W)
        rows = d if layer == k - 1 else W
        if layer == 0:
            Ks[0, :2 * d, :2 * d] = KQ[d:, d:]
            Ps[0, :rows, :2 * d] = PV[:rows, d:]
        else:
            Ks[layer] = KQ
            Ps[layer, :rows] = PV[:rows]
    return Ks, Ps


def to_theta(gK: _F, gP: _F, d: int) -> _F:
    """The flat gradient in θ of the gradients in :func:`layer_blocks`' arrays."""
    k = gK.shape[0]
    W = 3 * d
    n = W * W
    out = np.zeros(2 * k * n)
    for layer in range(k):
        KQ = np.zeros((W, W))
        PV = np.zeros((W, W))
        rows = d if layer == k - 1 else W
        if layer == 0:
            KQ[d:, d:] = gK[0, :2 * d, :2 * d]
            PV[:rows, d:] = gP[0, :rows, :2 * d]
        else:
            KQ[:] = gK[layer]
            PV[:rows] = gP[layer, :rows]
        out[2 * layer * n:(2 * layer + 1) * n] = KQ.ravel()
        out[(2 * layer + 1) * n:(2 * layer + 2) * n] = PV.ravel()
    return out


def lanes(x: npt.NDArray[np.complex128], w: _F) -> tuple[_F, _F, _F]:
    """Sequences (n, T, d) and weights (n,) as groups of :data:`LANES`: ``xr``, ``xi``
    (G, T, d, LANES) and ``w`` (G, LANES), the last group padded with zero sequences of
    weight 0 (their loss and gradient are 0)."""
    n, T, d = x.shape
    G = -(-n // LANES)
    pad = G * LANES - n
    if pad:
        x = np.concatenate([x, np.zeros((pad, T, d), x.dtype)])
        w = np.concatenate([w, np.zeros(pad)])
    xg = x.reshape(G, LANES, T, d).transpose(0, 2, 3, 1)
    return (np.ascontiguousarray(xg.real), np.ascontiguousarray(xg.imag),
            np.ascontiguousarray(w.reshape(G, LANES)))


#: Groups per call of :func:`deep_groups` (the unit the threads share out).
GROUPS_PER_BLOCK = 2
#: Sequences per chunk handed to the kernel (it keeps no autograd graph, so chunks are
#: large: the last group of each chunk is padded).
CHUNK = 8192


def applies(model: Model, device: torch.device) -> TypeGuard[DeepLinearAttention]:
    """Whether the fused kernel computes ``model``'s loss and gradient on ``device``: k-layer
    linear attention on the CPU."""
    return isinstance(model, DeepLinearAttention) and device.type == "cpu"


def loss_and_grad(model: DeepLinearAttention, theta: torch.Tensor,
                  chunks: Iterable[tuple[torch.Tensor, torch.Tensor]]
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(Σ_s w_s ℓ(θ; x_s), its gradient)`` over the weighted ``chunks`` (sequences complex
    (n, T, d), weights (n,)) by :func:`deep_groups`, the groups of each chunk shared out over
    torch's threads (:func:`._ar_autograd._run_blocks`) and summed in a fixed order."""
    import torch

    from ._ar_autograd import _run_blocks

    th = theta.detach().to("cpu", torch.float64).numpy()
    d = model.dim_of(th)
    Ks, Ps = layer_blocks(th, model.k, d)
    total = 0.0
    gK_sum = np.zeros_like(Ks)
    gP_sum = np.zeros_like(Ps)
    for x, w in chunks:
        xr, xi, wg = lanes(x.detach().cpu().numpy().astype(np.complex128, copy=False),
                           w.detach().cpu().numpy().astype(np.float64, copy=False))
        G = xr.shape[0]
        loss = np.zeros(G)
        gK = np.zeros((G, *Ks.shape))
        gP = np.zeros((G, *Ps.shape))

        def work(starts: list[int], xr: _F = xr, xi: _F = xi, wg: _F = wg, G: int = G,
                 loss: _F = loss, gK: _F = gK, gP: _F = gP) -> None:
            for lo in starts:
                deep_groups(Ks, Ps, xr, xi, wg, lo, min(lo + GROUPS_PER_BLOCK, G), loss, gK, gP)

        _run_blocks(work, list(range(0, G, GROUPS_PER_BLOCK)), torch.device("cpu"))
        total += float(loss.sum())
        gK_sum += gK.sum(0)
        gP_sum += gP.sum(0)
    grad = torch.from_numpy(to_theta(gK_sum, gP_sum, d)).to(theta.device, theta.dtype)
    return torch.tensor(total, dtype=theta.dtype, device=theta.device), grad
