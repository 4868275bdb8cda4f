"""The fused CPU kernels of Eq. 2's per-sequence loss on AR draws, in numba: the closed form
(:class:`._ar_kernels._ClosedForm`) and the prefix Grams (:class:`._ar_kernels._PrefixGram`),
the sampled fields' :class:`~._ar_kernels.Kernel` ``fused``.

The batched path runs each block of sequences as seven batched complex d×d products through
torch (the products that reduce over t run at half the speed of the others in MKL), and
forms ``(Ã, P̃, C)`` and their adjoints by many small tensor operations that autograd
records.  Here one compiled loop takes one sequence at a time, from θ's blocks to the
sequence's loss and its gradient in θ's blocks: the ``(d, τ)`` intermediates stay in cache,
split into real and imaginary parts so that every inner loop runs over t with contiguous
loads (vectorized, with FMA), and the reductions over t are dot products.  The formulas are
those of :class:`._ar_kernels._ClosedForm`; the gradients follow them back by the chain rule
(``g`` below is the conjugate of torch's gradient, so ``dL/dθ = Re Σ g ∂Z/∂θ`` for real θ).

The prefix-Gram kernel (few sequences: those whose phases nearly coincide, or short T) runs
over t in order, accumulating ``G'_t``.

Why numba: a compiled loop is the only way to fuse these products on the CPU (torch has no
such fusion for complex tensors, and a C extension would need a compiler at install time);
numba compiles the function once per machine and caches it on disk (``cache=True``).

Reproducibility: the numbers do not depend on the number of threads (each sequence is one
loop), but the vectorized sums over t round in an order set by the CPU's vector width, so
two machines may differ in the last bits (``tests/golden``: 1–2 ulps from mesadyn 0.1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numba
import numpy as np
import numpy.typing as npt

_F = npt.NDArray[np.float64]
_C = npt.NDArray[np.complex128]
_Fn = TypeVar("_Fn", bound=Callable[..., object])

#: Reassociation lets LLVM vectorize the sums over t; contraction, the fused multiply-adds.
#: Nothing else (no assumption about NaN or infinity: a non-finite θ still gives NaN).
_FASTMATH = {"contract", "reassoc"}


#: The order of θ's blocks in :func:`closed_form_loss`'s ``blocks`` and ``grad``.
BLOCKS = ("A00", "A01", "A10", "A11", "P0", "P1")


def _compile(fn: _Fn, fastmath: set[str] | bool) -> _Fn:
    """``numba.njit`` without the GIL, cached on disk where a cache directory is writable."""
    try:
        return numba.njit(fn, cache=True, nogil=True, fastmath=fastmath, boundscheck=False,
                          error_model="numpy")  # type: ignore[return-value]
    except RuntimeError:  # no writable cache location (numba's locators): compile per process
        return numba.njit(fn, cache=False, nogil=True, fastmath=fastmath, boundscheck=False,
                          error_model="numpy")  # type: ignore[return-value]


def _jit(fn: _Fn) -> _Fn:
    """:func:`_compile` with :data:`_FASTMATH`: sums reassociated and multiply-adds fused as
    LLVM sees fit, so the last bits depend on the CPU and on how numba inlined the callees."""
    return _compile(fn, _FASTMATH)


def _ieee_jit(fn: _Fn) -> _Fn:
    """:func:`_compile` in IEEE arithmetic (no fastmath): every operation rounds as written,
    so a kernel whose sums have a fixed order gives the same bits on every CPU, compiled
    afresh or loaded from numba's cache."""
    return _compile(fn, False)


@_jit
def _scratch(d: int) -> tuple[_C, _C, _C, _C, _C, _F, _C, _C]:  # pragma: no cover - numba
    """One sequence's ``Ã``, ``P̃`` and their adjoints (d, d), and ``s_1``, ``P_0 x_1`` and
    their adjoints (d,): the per-sequence scratch of both kernels."""
    c = np.complex128
    return (np.empty((d, d), c), np.empty((d, d), c), np.empty((d, d), c), np.empty((d, d), c),
            np.empty(d, c), np.empty(d), np.empty(d, c), np.empty(d, c))


@_jit
def _matrices(blocks: _F, x: _F, lc: _C, H: _C, Pt: _C, s1: _C,
              p0x: _F) -> None:  # pragma: no cover - compiled (numba)
    """One sequence's ``Ã``, ``P̃``, ``s_1``, ``P_0 x_1`` (:func:`mesadyn.model.ar_matrices`)
    from θ's :data:`BLOCKS`, into ``H``, ``Pt``, ``s1``, ``p0x``."""
    d = x.shape[0]
    A00, A01, A10, A11, P0, P1 = blocks[0], blocks[1], blocks[2], blocks[3], blocks[4], blocks[5]
    for i in range(d):
        p0x[i] = 0.0
        for j in range(d):
            p0x[i] += P0[i, j] * x[j]
    for j in range(d):
        s1[j] = 0.0
        for i in range(d):
            b0 = A00[i, j] + A01[i, j] * lc[j]
            b1 = A10[i, j] + A11[i, j] * lc[j]
            H[i, j] = x[i] * (b0 + lc[i].conjugate() * b1) * x[j]
            Pt[i, j] = (P0[i, j] + P1[i, j] * lc[j]) * x[j]
            s1[j] += x[i] * b0 * x[j]


@_jit
def _to_blocks(x: _F, lc: _C, gH: _C, gP: _C, gs1: _C, gp0x: _C,
               out: _F) -> None:  # pragma: no cover - compiled (numba)
    """Back from ``g_Ã``, ``g_P̃``, ``g_{s_1}``, ``g_{P_0 x_1}`` through :func:`_matrices` to
    the gradient in θ's :data:`BLOCKS` (the real parts), into ``out`` (6, d, d)."""
    d = x.shape[0]
    for i in range(d):
        for j in range(d):
            xx = x[i] * x[j]
            gb0 = (gH[i, j] + gs1[j]) * xx
            gb1 = gH[i, j] * xx * lc[i].conjugate()
            gp = gP[i, j] * x[j]
            out[0, i, j] = gb0.real
            out[1, i, j] = (gb0 * lc[j]).real
            out[2, i, j] = gb1.real
            out[3, i, j] = (gb1 * lc[j]).real
            out[4, i, j] = gp.real + gp0x[i].real * x[j]
            out[5, i, j] = (gp * lc[j]).real


@_jit
def _times_rows(M: _C, transpose: bool, xr: _F, xi: _F, yr: _F,
                yi: _F) -> None:  # pragma: no cover - compiled (numba)
    """``y = M x`` (``M^T x`` when ``transpose``) for a complex (d, d) ``M`` and rows ``x``
    (d, τ) split into real and imaginary parts, into ``y`` likewise: one pass over t per
    entry of ``M``."""
    d, tau = xr.shape
    for l in range(d):
        yr[l, :] = 0.0
        yi[l, :] = 0.0
        for j in range(d):
            m = M[j, l] if transpose else M[l, j]
            a, b = m.real, m.imag
            for t in range(tau):
                yr[l, t] += a * xr[j, t] - b * xi[j, t]
                yi[l, t] += a * xi[j, t] + b * xr[j, t]


@_jit
def closed_form_loss(blocks: _F, x1: _F, lc: _C, dx: _C, K: _C, W: _C, inv_rho: _F,
                     e: float,
                     lo: int, hi: int, loss: _F, grad: _F,
                     need: bool) -> None:  # pragma: no cover - compiled (numba)
    """Sequences ``lo ≤ n < hi`` of the closed-form loss, in place: ``loss[n]`` and ``grad[n]``.

    For each sequence, with ``X = diag(x_1)``, ``L = diag(lc)`` (``Λ^{-1}``),
    ``B_0 = A_00 + A_01 L``, ``B_1 = A_10 + A_11 L`` (:func:`mesadyn.model.ar_matrices`)::

        Ã = X (B_0 + L̄ B_1) X,   P̃ = (P_0 + P_1 L) X,   s_1 = x_1^T B_0 X,
        C = (P_0 x_1) s_1^T + P̃ K Ã,

    and then, over ``t = 1..τ`` (``W = W_t`` the phases, ``u = W/ρ_t``, ``h = Ã W``)::

        s = e h − u ∘ K (W̄ ∘ h),   r = C u + P̃ s + dx ∘ W   (= ŷ_t − x_{t+1}),
        loss[n] = ½ Σ_t ‖r‖².

    # Arguments
    - ``blocks`` (6, d, d): θ's :data:`BLOCKS`; ``x1`` (n, d); ``lc`` (n, d): ``λ̄`` when
      ``|λ| = 1``, else ``1/λ``; ``dx`` (n, d): ``−x_1 ∘ λ``; ``K`` (n, d, d):
      ``z/(1 − z)``, 0 where ``z = 1``; ``W`` (n, d, τ): ``λ^{t−1}``; ``inv_rho`` (τ,):
      ``1/ρ_t``; ``e``: 1 where ``E`` is the identity, 0 where it is zero.
    - ``loss`` (n,), ``grad`` (n, 6, d, d): ``½ Σ_t ‖r‖²`` and its gradient in ``blocks``
      (only when ``need``), written on rows ``lo..hi−1`` and nowhere else, so threads may
      share them.
    """
    d = x1.shape[1]
    tw = W.shape[2]
    # the scratch rows padded with zeros to a multiple of 8 (W = u = 0 there, so r = 0 and
    # nothing is added): the loops over t then have no scalar remainder (measured 15% faster)
    tau = (tw + 7) // 8 * 8
    H, Pt, gH, gP, s1, p0x, gs1, gp0x = _scratch(d)  # g: conj of the gradients
    M = np.empty((d, d), np.complex128)  # K Ã
    C = np.empty((d, d), np.complex128)
    gC = np.empty((d, d), np.complex128)
    gM = np.empty((d, d), np.complex128)
    wr, wi = np.zeros((d, tau)), np.zeros((d, tau))  # W
    ur, ui = np.zeros((d, tau)), np.zeros((d, tau))  # u = W/ρ
    hr, hi_ = np.zeros((d, tau)), np.zeros((d, tau))  # h; later b
    qr, qi = np.zeros((d, tau)), np.zeros((d, tau))  # W̄ ∘ h; later u ∘ γ
    sr, si = np.zeros((d, tau)), np.zeros((d, tau))  # s
    rr, ri = np.zeros((d, tau)), np.zeros((d, tau))  # r
    gr, gi = np.zeros((d, tau)), np.zeros((d, tau))  # γ = P̃^T r̄
    for n in range(lo, hi):
        x, lcn, Kn = x1[n], lc[n], K[n]
        _matrices(blocks, x, lcn, H, Pt, s1, p0x)  # Ã, P̃, s_1, P_0 x_1; then C
        for i in range(d):
            for j in range(d):
                a = 0j
                for k in range(d):
                    a += Kn[i, k] * H[k, j]
                M[i, j] = a
        for i in range(d):
            for j in range(d):
                a = p0x[i] * s1[j]
                for k in range(d):
                    a += Pt[i, k] * M[k, j]
                C[i, j] = a
        for k in range(d):
            for t in range(tw):
                z = W[n, k, t]
                wr[k, t] = z.real
                wi[k, t] = z.imag
                ur[k, t] = z.real * inv_rho[t]
                ui[k, t] = z.imag * inv_rho[t]
        # h = Ã W and q = W̄ ∘ h
        _times_rows(H, False, wr, wi, hr, hi_)
        for l in range(d):
            for t in range(tau):
                qr[l, t] = wr[l, t] * hr[l, t] + wi[l, t] * hi_[l, t]
                qi[l, t] = wr[l, t] * hi_[l, t] - wi[l, t] * hr[l, t]
        # s = e h − u ∘ (K q)
        _times_rows(Kn, False, qr, qi, sr, si)
        for l in range(d):
            for t in range(tau):
                xr, xi = sr[l, t], si[l, t]
                sr[l, t] = e * hr[l, t] - (ur[l, t] * xr - ui[l, t] * xi)
                si[l, t] = e * hi_[l, t] - (ur[l, t] * xi + ui[l, t] * xr)
        # r = C u + P̃ s + dx ∘ W, and the loss
        acc = 0.0
        for i in range(d):
            a, b = dx[n, i].real, dx[n, i].imag
            for t in range(tau):
                rr[i, t] = a * wr[i, t] - b * wi[i, t]
                ri[i, t] = a * wi[i, t] + b * wr[i, t]
            for l in range(d):
                a, b = C[i, l].real, C[i, l].imag
                c, f = Pt[i, l].real, Pt[i, l].imag
                for t in range(tau):
                    rr[i, t] += a * ur[l, t] - b * ui[l, t] + c * sr[l, t] - f * si[l, t]
                    ri[i, t] += a * ui[l, t] + b * ur[l, t] + c * si[l, t] + f * sr[l, t]
            for t in range(tau):
                acc += rr[i, t] * rr[i, t] + ri[i, t] * ri[i, t]
        loss[n] = 0.5 * acc
        if not need:
            continue
        # γ = P̃^T r̄ and q = u ∘ γ
        for l in range(d):
            gr[l, :] = 0.0
            gi[l, :] = 0.0
            for i in range(d):
                c, f = Pt[i, l].real, Pt[i, l].imag
                for t in range(tau):
                    gr[l, t] += c * rr[i, t] + f * ri[i, t]
                    gi[l, t] += f * rr[i, t] - c * ri[i, t]
            for t in range(tau):
                qr[l, t] = ur[l, t] * gr[l, t] - ui[l, t] * gi[l, t]
                qi[l, t] = ur[l, t] * gi[l, t] + ui[l, t] * gr[l, t]
        # b = e γ − W̄ ∘ (K^T q), in h's place
        _times_rows(Kn, True, qr, qi, hr, hi_)
        for j in range(d):
            for t in range(tau):
                xr, xi = hr[j, t], hi_[j, t]
                hr[j, t] = e * gr[j, t] - (wr[j, t] * xr + wi[j, t] * xi)
                hi_[j, t] = e * gi[j, t] - (wr[j, t] * xi - wi[j, t] * xr)
        # the reductions over t: g_C = Σ r̄ u^T, g_P̃ = Σ r̄ s^T, g_Ã = Σ b W^T
        for i in range(d):
            for l in range(d):
                a1 = a2 = a3 = a4 = 0.0
                for t in range(tau):
                    a1 += rr[i, t] * ur[l, t] + ri[i, t] * ui[l, t]
                    a2 += rr[i, t] * ui[l, t] - ri[i, t] * ur[l, t]
                    a3 += rr[i, t] * sr[l, t] + ri[i, t] * si[l, t]
                    a4 += rr[i, t] * si[l, t] - ri[i, t] * sr[l, t]
                gC[i, l] = complex(a1, a2)
                gP[i, l] = complex(a3, a4)
        for j in range(d):
            for k in range(d):
                a1 = a2 = 0.0
                for t in range(tau):
                    a1 += hr[j, t] * wr[k, t] - hi_[j, t] * wi[k, t]
                    a2 += hr[j, t] * wi[k, t] + hi_[j, t] * wr[k, t]
                gH[j, k] = complex(a1, a2)
        # back through C = (P_0 x_1) s_1^T + P̃ M, M = K Ã
        for i in range(d):
            for k in range(d):
                a = 0j  # (g_C M^T)[i, k] and (P̃^T g_C)[i, k]
                b = 0j
                for j in range(d):
                    a += gC[i, j] * M[k, j]
                    b += Pt[j, i] * gC[j, k]
                gP[i, k] += a
                gM[i, k] = b
        for k in range(d):
            for j in range(d):
                a = 0j
                for i in range(d):
                    a += Kn[i, k] * gM[i, j]
                gH[k, j] += a
        for i in range(d):
            gp0x[i] = 0j
            gs1[i] = 0j
            for j in range(d):
                gp0x[i] += gC[i, j] * s1[j]
                gs1[i] += gC[j, i] * p0x[j]
        _to_blocks(x, lcn, gH, gP, gs1, gp0x, grad[n])


@_jit
def prefix_gram_loss(blocks: _F, x1: _F, lc: _C, dx: _C, W: _C, inv_rho: _F,
                     lo: int, hi: int, loss: _F, grad: _F,
                     need: bool) -> None:  # pragma: no cover - compiled (numba)
    """:func:`closed_form_loss` through the prefix Grams ``G'_t = Σ_{i≤t} W_i W_i^*``,
    accumulated over t in order (:class:`._ar_kernels._PrefixGram`: no cancellation where
    two phases nearly coincide, and any ``E``): ``r = (P_0 x_1)(s_1^T u) + P̃ G'_t Ã u + dx ∘ W``.

    # Arguments
    As :func:`closed_form_loss`, but ``W`` is (n, τ, d) (time first: one ``W_t`` per step)
    and there is no ``K`` or ``e``.
    """
    d = x1.shape[1]
    tau = W.shape[1]
    H, Pt, gH, gP, s1, p0x, gs1, gp0x = _scratch(d)
    G = np.empty((d, d), np.complex128)  # G'_t
    w = np.empty(d, np.complex128)
    u = np.empty(d, np.complex128)
    a = np.empty(d, np.complex128)  # Ã u
    v = np.empty(d, np.complex128)  # G'_t Ã u
    rb = np.empty(d, np.complex128)  # r̄
    gv = np.empty(d, np.complex128)
    for n in range(lo, hi):
        x, lcn = x1[n], lc[n]
        _matrices(blocks, x, lcn, H, Pt, s1, p0x)
        G[:] = 0
        gH[:] = 0
        gP[:] = 0
        gs1[:] = 0
        gp0x[:] = 0
        acc = 0.0
        for t in range(tau):
            sig = 0j
            for k in range(d):
                w[k] = W[n, t, k]
                u[k] = w[k] * inv_rho[t]
                sig += s1[k] * u[k]
            for i in range(d):
                c = 0j
                for j in range(d):
                    G[i, j] += w[i] * w[j].conjugate()
                    c += H[i, j] * u[j]
                a[i] = c
            for i in range(d):
                c = 0j
                for j in range(d):
                    c += G[i, j] * a[j]
                v[i] = c
            for i in range(d):
                c = p0x[i] * sig + dx[n, i] * w[i]
                for j in range(d):
                    c += Pt[i, j] * v[j]
                acc += c.real * c.real + c.imag * c.imag
                rb[i] = c.conjugate()
            if not need:
                continue
            gsig = 0j
            for i in range(d):
                gsig += p0x[i] * rb[i]
                gp0x[i] += rb[i] * sig
            for j in range(d):
                c = 0j
                for i in range(d):
                    gP[i, j] += rb[i] * v[j]
                    c += Pt[i, j] * rb[i]
                gv[j] = c
            for j in range(d):
                c = 0j  # (G'^T g_v)[j]: the adjoint of Ã u
                for i in range(d):
                    c += G[i, j] * gv[i]
                gs1[j] += gsig * u[j]
                for k in range(d):
                    gH[j, k] += c * u[k]
        loss[n] = 0.5 * acc
        if need:
            _to_blocks(x, lcn, gH, gP, gs1, gp0x, grad[n])


@_jit
def weighted_sum(c: _F, grad: _F, out: _F) -> None:  # pragma: no cover - compiled (numba)
    """``out = Σ_n c[n] grad[n]`` over the rows of ``grad`` (n, p), in a fixed order (the
    same bits on any number of threads)."""
    out[:] = 0.0
    for n in range(grad.shape[0]):
        cn = c[n]
        for p in range(grad.shape[1]):
            out[p] += cn * grad[n, p]
