"""The autograd functions of the AR-batch kernels (:mod:`._ar_kernels`): the blocked
closed-form loss (:class:`_ClosedFormLoss`) and the fused numba loss (:class:`_FusedLoss`),
each running its blocks of (sequence, t) pairs in :func:`_run_blocks`'s threads."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import TYPE_CHECKING

import torch

from ..model import unpack

if TYPE_CHECKING:
    from ._ar_kernels import _ClosedForm, _FusablePart

#: (sequence, t) pairs per block inside :class:`_ClosedFormLoss` (48 sequences at T = 100):
#: a block's temporaries (≈ 1.5 MB at d = 5) stay in cache, and short sequences still make
#: blocks large enough that the per-operation overhead does not dominate.  Measured at d = 5,
#: T = 100, m = 10⁴ (``benchmarks/bench_block_rows.py``, CPU-s per loss+gradient in
#: alternating rounds, min / lower quartile, one thread): 12 544 rows 0.36–0.41 / 0.43–0.51,
#: 4704 rows 0.32–0.36 / 0.34–0.38, 3136 rows 0.33–0.38 / 0.35–0.44 in four of five series
#: (two threads: 0.55 / 0.56 against 0.46 / 0.49); the fifth, on this noisy shared machine,
#: had 12 544 ahead (0.38 / 0.43 against 0.46 / 0.48).
BLOCK_ROWS = 4704


_POOL: ThreadPoolExecutor | None = None


def _run_blocks(work: Callable[[list[int]], None], starts: list[int],
                device: torch.device) -> None:
    """``work`` over the blocks starting at ``starts``: on a CPU with k > 1 torch threads, as
    k interleaved groups in k Python threads running one torch thread each (a block's
    operations are too small for the intra-op threads to pay), else in order.  Each group
    writes disjoint rows of the outputs, so the numbers do not depend on the split."""
    global _POOL
    k = torch.get_num_threads()
    if device.type != "cpu" or k < 2 or len(starts) < 2:
        work(starts)
        return
    k = min(k, len(starts))
    if _POOL is None or _POOL._max_workers < k:  # noqa: SLF001 - grow the shared pool
        _POOL = ThreadPoolExecutor(max_workers=k, thread_name_prefix="mesadyn-ar")
    grad = torch.is_grad_enabled()  # thread-local: the workers take the caller's mode

    def run(group: list[int]) -> None:
        with torch.set_grad_enabled(grad):
            work(group)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        list(_POOL.map(run, [starts[i::k] for i in range(k)]))
    finally:
        torch.set_num_threads(threads)


class _ClosedFormLoss(torch.autograd.Function):
    """Per-sequence ``½ Σ_t ‖ŷ_t − x_{t+1}‖²`` from ``(Ã, P̃, C)`` (n, d, d) each.

    Runs block by block (:data:`BLOCK_ROWS` (sequence, t) pairs): each block reads its ``W``
    once and works in cache.  When a gradient is wanted the block's adjoints are formed at once
    (seven batched products per block in all, forward included), so backward only scales them.
    A double backward (Hessian-vector products) recomputes through
    :meth:`_ClosedForm.residual`, so autograd sees every dependence on θ.
    """

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, H: torch.Tensor, Ptil: torch.Tensor,
                C: torch.Tensor, data: _ClosedForm) -> torch.Tensor:
        n, d, tau = data.W.shape
        need = any(ctx.needs_input_grad[:3])  # type: ignore[attr-defined]
        cdt, dev = H.dtype, H.device
        loss = torch.empty(n, dtype=torch.float64, device=dev)
        g_cp = torch.empty(n if need else 0, d, 2 * d, dtype=cdt, device=dev)  # conj of ∇[C, P̃]
        g_h = torch.empty(n if need else 0, d, d, dtype=cdt, device=dev)  # conj of ∇Ã
        CP = torch.cat([C, Ptil], dim=2)  # [C, P̃] against the rows [W/ρ; s]
        PtT = Ptil.transpose(1, 2)
        block = max(1, BLOCK_ROWS // tau)

        def blocks(starts: list[int]) -> None:
            c = min(n, block)
            S = torch.empty(c, 2 * d, tau, dtype=cdt, device=dev)  # rows [W/ρ; s]
            B = torch.empty(c, 2 * d, tau, dtype=cdt, device=dev)  # rows [r̄; (adjoint of h)‾]
            Wc = torch.empty(c, d, tau, dtype=cdt, device=dev)
            for lo in starts:
                hi = min(lo + block, n)
                m = hi - lo
                s, b, wc = S[:m], B[:m], Wc[:m]
                W = data.W[lo:hi]
                E = data.E[lo:hi] if data.E is not None else None
                hw = torch.bmm(H[lo:hi], W)
                torch.mul(W, data.inv_rho, out=s[:, :d])
                torch.conj_physical(W, out=wc)
                kg = torch.bmm(data.K[lo:hi], wc * hw)
                torch.addcmul(data.eh(hw, E), s[:, :d], kg, value=-1, out=s[:, d:])
                r = torch.bmm(CP[lo:hi], s).addcmul_(data.dx[lo:hi, :, None], W)  # − x_{t+1}
                loss[lo:hi] = torch.linalg.vector_norm(
                    torch.view_as_real(r).reshape(m, -1), dim=1)
                if not need:
                    continue
                rb = b[:, :d]
                torch.conj_physical(r, out=rb)
                gs = torch.bmm(PtT[lo:hi], rb)  # conj of P̃^H r
                t2 = torch.bmm(data.KT[lo:hi], s[:, :d] * gs)  # conj of K^H (conj(W/ρ) ∘ P̃^H r)
                ghw = data.eh(gs, None if E is None else E.transpose(1, 2))
                torch.addcmul(ghw, wc, t2, value=-1, out=b[:, d:])
                # (r [W/ρ; s]^H)‾ and ((adjoint of h) W^H)‾; bmm into fresh (contiguous)
                # results, which take MKL's batched product rather than a loop over the batch
                g_cp[lo:hi] = torch.bmm(rb, s.transpose(1, 2))
                g_h[lo:hi] = torch.bmm(b[:, d:], W.transpose(1, 2))

        _run_blocks(blocks, list(range(0, n, block)), dev)
        ctx.save_for_backward(H, Ptil, C, g_cp, g_h)
        ctx.data = data  # type: ignore[attr-defined]
        return 0.5 * loss.square()

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx,
                 c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None]:
        H, Ptil, C, g_cp, g_h = ctx.saved_tensors  # type: ignore[attr-defined]
        data: _ClosedForm = ctx.data  # type: ignore[attr-defined]
        if torch.is_grad_enabled():  # create_graph: differentiate a recomputation
            res = data.residual(H, Ptil, C)
            loss = 0.5 * torch.view_as_real(res).square().sum(dim=(-3, -2, -1))
            gH, gP, gC = torch.autograd.grad(loss, (H, Ptil, C), c, create_graph=True)
            return gH, gP, gC, None
        d = H.shape[1]
        cc = c.to(g_h.dtype)[:, None, None]  # conj_physical: a conj view would slow the products
        gcp = torch.conj_physical(g_cp).mul_(cc)
        return torch.conj_physical(g_h).mul_(cc), gcp[..., d:], gcp[..., :d], None


@lru_cache(maxsize=8)
def _fused_index(d: int) -> torch.Tensor:
    """Positions in a flat θ of the blocks :data:`._fused.BLOCKS`, (6d²,)."""
    idx = torch.arange(18 * d * d)
    W_KQ, W_PV = unpack(idx)
    A = [W_KQ[d + d * i : 2 * d + d * i, d + d * j : 2 * d + d * j] for i in (0, 1) for j in (0, 1)]
    P = [W_PV[:d, d:2 * d], W_PV[:d, 2 * d:]]
    return torch.cat([b.reshape(-1) for b in A + P])


class _FusedLoss(torch.autograd.Function):
    """A :class:`_FusablePart`'s per-sequence loss for one θ by its fused kernel
    (:mod:`._fused`), from θ's blocks to the loss and its gradient in θ.

    The forward pass runs the blocks of :data:`BLOCK_ROWS` (sequence, t) pairs in
    :func:`_run_blocks`'s threads and keeps each sequence's gradient in θ's six blocks
    (n × 6d² numbers), so the backward pass is one weighted sum in a fixed order.  A double
    backward (Hessian-vector products) differentiates the part's torch path instead.
    """

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, theta: torch.Tensor,
                data: _FusablePart) -> torch.Tensor:
        n, d = data.x1.shape
        need = bool(ctx.needs_input_grad[0])  # type: ignore[attr-defined]
        blocks = theta.detach().to(torch.float64)[_fused_index(d)].reshape(6, d, d).numpy()
        loss = torch.empty(n, dtype=torch.float64)
        grad = torch.empty(n if need else 0, 6 * d * d, dtype=torch.float64)
        out = (loss.numpy(), grad.reshape(-1, 6, d, d).numpy())
        block = max(1, BLOCK_ROWS // max(data.tau, 1))

        def work(starts: list[int]) -> None:
            for lo in starts:
                data.fused_loss(blocks, lo, min(lo + block, n), *out, need)

        _run_blocks(work, list(range(0, n, block)), theta.device)
        ctx.save_for_backward(theta, grad)
        ctx.data = data  # type: ignore[attr-defined]
        return loss.to(theta.dtype)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx,
                 c: torch.Tensor) -> tuple[torch.Tensor, None]:
        from . import _fused

        theta, grad = ctx.saved_tensors  # type: ignore[attr-defined]
        data: _FusablePart = ctx.data  # type: ignore[attr-defined]
        if torch.is_grad_enabled():  # create_graph: differentiate the torch path
            (g,) = torch.autograd.grad(data.torch_loss(theta), theta, c, create_graph=True)
            return g, None
        total = torch.empty(grad.shape[1], dtype=torch.float64)
        _fused.weighted_sum(c.detach().to(torch.float64).numpy(), grad.numpy(), total.numpy())
        out = torch.zeros_like(theta)
        out[_fused_index(data.x1.shape[1])] = total.to(theta.dtype)
        return out, None
