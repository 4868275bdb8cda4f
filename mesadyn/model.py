"""The one-layer linear causal self-attention of Section 3.2 and its parameter blocks.

θ = (W^KQ, W^PV), both real 3d×3d, stored flat as ``concat(W^KQ.ravel(), W^PV.ravel())``
(row-major, length 18d²).  Only ``P = (W^PV_12 W^PV_13)`` and
``A = [[W^KQ_22, W^KQ_23], [W^KQ_32, W^KQ_33]]`` reach the prediction (Eq. 1):

    ŷ_t = P M_t A e^x_t,   M_t = (1/(t−1)) Σ_{i≤t} e^x_i e^x_i^*,   e^x_i = (x_i, x_{i−1}).

The module holds the θ layout (:func:`pack`, :func:`unpack`, :func:`block`), the masks and
inits, the geometry of θ (:func:`diagonal_entries`, :func:`invariant`) and the model's forward
pass (:func:`predict`; on AR sequences :func:`predict_ar` and :func:`predict_ar_at`).  The
sampled fields' AR-batch loss kernels build on the last and live with them in
:mod:`mesadyn.field`.  torch is imported inside the functions that use it: the layout and the
masks cost numpy only, so ``import mesadyn.flow`` loads no torch.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from .errors import MesadynError, check_finite, check_int, check_positive

if TYPE_CHECKING:
    import torch

#: A flat θ (length 18d²) or a batch of them (..., 18d²), as numpy or torch.
ThetaT = TypeVar("ThetaT", np.ndarray, "torch.Tensor")

BLOCK_NAMES = tuple(f"W_{m}_{i}{j}" for m in ("KQ", "PV") for i in (1, 2, 3) for j in (1, 2, 3))
#: The blocks that reach ŷ (Eq. 1); every other entry of θ has zero gradient forever.
ACTIVE_BLOCKS = ("W_KQ_22", "W_KQ_23", "W_KQ_32", "W_KQ_33", "W_PV_12", "W_PV_13")


def n_params(d: int) -> int:
    """Length of the flat θ: 2·(3d)²."""
    return 18 * d * d


def dim_of(theta: torch.Tensor | np.ndarray) -> int:
    """Recover d from a flat θ of length 18d² (or a batch (..., 18d²))."""
    shape = np.shape(theta)
    n = int(shape[-1]) if shape else 0
    d = int(round((n / 18) ** 0.5))
    if d < 1 or 18 * d * d != n:
        raise MesadynError(f"θ must have length 18·d² for some d >= 1, got length {n}")
    return d


def pack(W_KQ: torch.Tensor, W_PV: torch.Tensor) -> torch.Tensor:
    """Flat θ from the two 3d×3d matrices."""
    import torch

    return torch.cat([W_KQ.reshape(-1), W_PV.reshape(-1)])


def unpack(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(W^KQ, W^PV)`` as 3d×3d views of a flat θ."""
    d = dim_of(theta)
    n = 9 * d * d
    return theta[:n].reshape(3 * d, 3 * d), theta[n:].reshape(3 * d, 3 * d)


def unpack_batch(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(W^KQ, W^PV)`` of a batch of flat θ (k, 18d²), as (k, 3d, 3d) views."""
    d = dim_of(theta)
    n = 9 * d * d
    k = theta.shape[0]
    return theta[:, :n].reshape(k, 3 * d, 3 * d), theta[:, n:].reshape(k, 3 * d, 3 * d)


def block(W: torch.Tensor, i: int, j: int) -> torch.Tensor:
    """Block ``W_{ij}`` (1-indexed, d×d) of a 3d×3d matrix, as a view."""
    d = W.shape[-1] // 3
    return W[..., (i - 1) * d : i * d, (j - 1) * d : j * d]


def P_and_A(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``P = (W^PV_12 W^PV_13)`` (d×2d) and ``A`` (2d×2d), the parameters that reach ŷ."""
    W_KQ, W_PV = unpack(theta)
    d = W_KQ.shape[0] // 3
    return W_PV[:d, d:], W_KQ[d:, d:]


def block_labels(d: int) -> np.ndarray:
    """The block name (e.g. ``"W_KQ_32"``) of every entry of the flat θ."""
    d = check_int("d", d, 1)
    idx = np.arange(3 * d) // d + 1
    grid = np.char.add(idx[:, None].astype(str), idx[None, :].astype(str))
    return np.concatenate([np.char.add("W_KQ_", grid).ravel(), np.char.add("W_PV_", grid).ravel()])


def active_mask(d: int) -> np.ndarray:
    """True on the entries of θ that reach ŷ (the blocks of P and A)."""
    return np.isin(block_labels(d), ACTIVE_BLOCKS)


def diagonal_mask(d: int) -> np.ndarray:
    """True on the diagonals of W^KQ_32 and W^PV_12 only (Theorem 4.3's clipping)."""
    labels = block_labels(d)
    r, c = np.divmod(np.arange(9 * d * d), 3 * d)
    on_diag = np.concatenate([r % d == c % d] * 2)
    return on_diag & np.isin(labels, ("W_KQ_32", "W_PV_12"))


class Mask(StrEnum):
    """Which entries of θ a flow may move (besides the inactive ones, which never move).

    ``none``: every active entry (the blocks of P and A); ``diagonal``: only the diagonals of
    W^KQ_32 and W^PV_12 (Theorem 4.3's clipping, Lemma A.5).
    """

    none = "none"
    diagonal = "diagonal"


#: What :func:`free_mask` accepts: a :class:`Mask` (or its string), ``None`` (= ``none``) or a
#: boolean selection of length 18d² (intersected with the active entries).
MaskLike = Mask | str | None | npt.NDArray[np.bool_]


def free_mask(mask: MaskLike, d: int) -> npt.NDArray[np.bool_]:
    """True on the entries of θ that evolve under the (masked) flow: active ∧ ``mask``.

    # Arguments
    - `mask`: a :class:`Mask` or its name, ``None`` (all active entries), or a boolean array of
      length 18d² (entries outside it are held fixed).
    - `d`: the dimension.

    # Returns
    A new boolean array of length 18d²; inactive entries (Eq. 1) are always False.

    # Raises
    `MesadynError` for an unknown mask name, a wrongly shaped or non-boolean array, or a mask
    that leaves no entry free.
    """
    d = check_int("d", d, 1)
    active = active_mask(d)
    if mask is None or isinstance(mask, str):
        try:
            kind = Mask(mask or "none")
        except ValueError:
            raise MesadynError(f"unknown mask {mask!r}; choose none or diagonal") from None
        free = active if kind is Mask.none else diagonal_mask(d)
    else:
        arr = np.asarray(mask)
        if arr.dtype != bool or arr.shape != (n_params(d),):
            raise MesadynError(f"mask must be a boolean array of length {n_params(d)}, got "
                               f"{arr.dtype} {arr.shape}")
        free = active & arr
    if not free.any():
        raise MesadynError("the mask leaves no trainable entry of θ")
    return free.copy()


@lru_cache(maxsize=32)
def _diagonal_index(d: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat indices of diag(W^KQ_32) and diag(W^PV_12) in θ."""
    i = np.arange(d)
    kq = (2 * d + i) * 3 * d + d + i
    pv = 9 * d * d + i * 3 * d + d + i
    kq.setflags(write=False)
    pv.setflags(write=False)
    return kq, pv


def _is_tensor(value: object) -> bool:
    """Whether ``value`` is a torch tensor (without importing torch: none exists before)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _take(theta: ThetaT, idx: np.ndarray) -> ThetaT:
    out: Any
    if _is_tensor(theta):
        import torch

        out = theta[..., torch.from_numpy(np.array(idx)).to(theta.device)]
    else:
        out = np.asarray(theta)[..., idx]
    return cast(ThetaT, out)


def diagonal_entries(theta: ThetaT) -> tuple[ThetaT, ThetaT]:
    """``(diag W^KQ_32, diag W^PV_12)`` of θ: the per-coordinate ``(a, b)`` of Assumption 3.1.

    # Arguments
    - `theta`: a flat θ (length 18d²) or a batch (..., 18d²), numpy or torch.

    # Returns
    Two arrays of shape (..., d), of θ's kind (copies for numpy, gathered for torch).
    """
    kq, pv = _diagonal_index(dim_of(theta))
    return _take(theta, kq), _take(theta, pv)


def invariant(theta: ThetaT) -> ThetaT:
    """``‖A‖_F² − ‖P‖_F²``, conserved by the full gradient flow (L depends on (P, A) only
    through a bilinear form, so ``d/dτ (‖A‖² − ‖P‖²) = 0``; its 2-D shadow is ``a² − b²``).

    # Arguments
    - `theta`: a flat θ (length 18d²) or a batch (..., 18d²), numpy or torch.

    # Returns
    An array of shape ``theta.shape[:-1]`` (0-d for one θ; ``float(...)`` gives the number),
    of θ's kind.  Summed as torch sums the (P, A) blocks, for numpy input too.
    """
    import torch

    d = dim_of(theta)
    th = torch.as_tensor(theta, dtype=torch.float64) if isinstance(theta, np.ndarray) else theta
    n = 9 * d * d
    W_KQ = th[..., :n].reshape(*th.shape[:-1], 3 * d, 3 * d)
    W_PV = th[..., n:].reshape(*th.shape[:-1], 3 * d, 3 * d)
    A, P = W_KQ[..., d:, d:], W_PV[..., :d, d:]
    out = (A * A).sum((-2, -1)) - (P * P).sum((-2, -1))
    return out.numpy() if isinstance(theta, np.ndarray) else out


def check_theta_fits(d: int) -> None:
    """Refuse a θ of ``18d²`` entries that does not fit, before it is allocated: the one size
    guard (:func:`mesadyn.budget.check`) on :func:`mesadyn.budget.theta` (θ, its gradient and
    their working copies); nothing is checked below 64 MiB."""
    from .budget import check, theta

    est = theta(d)
    if est.host_bytes > 2**26:
        check(est)


def diagonal_init(d: int, a0: float, b0: float) -> torch.Tensor:
    """Assumption 3.1: ``W^KQ_32 = a0 I``, ``W^PV_12 = b0 I``, every other entry 0."""
    import torch

    d = check_int("d", d, 1)
    check_theta_fits(d)
    a0, b0 = check_finite("a0", a0), check_finite("b0", b0)
    W_KQ = torch.zeros(3 * d, 3 * d, dtype=torch.float64)
    W_PV = torch.zeros(3 * d, 3 * d, dtype=torch.float64)
    block(W_KQ, 3, 2).copy_(a0 * torch.eye(d, dtype=torch.float64))
    block(W_PV, 1, 2).copy_(b0 * torch.eye(d, dtype=torch.float64))
    return pack(W_KQ, W_PV)


def gaussian_init(d: int, sigma_w: float, seed: int = 1) -> torch.Tensor:
    """Every entry of θ iid ``N(0, σ_w²)`` (Section 6, Figs. 5–6), from a seeded generator."""
    import torch

    d = check_int("d", d, 1)
    sigma_w = check_positive("sigma_w", sigma_w)
    check_theta_fits(d)
    gen = torch.Generator().manual_seed(int(seed))
    return sigma_w * torch.randn(n_params(d), generator=gen, dtype=torch.float64)


def ab(theta: ThetaT) -> ThetaT:
    """``diag(W^KQ_32) ⊙ diag(W^PV_12)``, the per-coordinate product (Theorem 4.1's ab).

    Accepts one θ or a batch (..., 18d²), numpy or torch; returns shape (..., d).
    """
    a, b = diagonal_entries(theta)
    return a * b


def embed(x: torch.Tensor) -> torch.Tensor:
    """``e^x_t = (x_t, x_{t−1})`` with ``x_0 = 0``: shape (n, T, 2d)."""
    import torch

    prev = torch.nn.functional.pad(x, (0, 0, 1, 0))[:, :-1, :]
    return torch.cat([x, prev], dim=-1)


def predict(theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """ŷ_t for t = 2..T of every sequence (Eq. 1), in O(n·T·d²) by prefix sums.

    ``x`` is complex (n, T, d); the result is complex (n, T−1, d) and ``[:, k]`` is ŷ_{k+2}.
    Uses ``Z_t = Σ_{i≤t} (P e_i) e_i^*`` so that ``ŷ_t = Z_t A e_t / (t − 1)``.
    """
    import torch
    if x.ndim != 3:
        raise MesadynError(f"x must have shape (n, T, d), got {tuple(x.shape)}")
    n, T, d = x.shape
    if dim_of(theta) != d:
        raise MesadynError(f"θ is for d={dim_of(theta)} but x has d={d}")
    P, A = P_and_A(theta)
    P = P.to(x.dtype)
    A = A.to(x.dtype)
    e = embed(x)
    pe = e @ P.T  # (n, T, d)
    Z = torch.cumsum(pe[..., :, None] * e.conj()[..., None, :], dim=1)  # (n, T, d, 2d)
    q = e @ A.T  # (n, T, 2d)
    y = (Z[:, 1:] @ q[:, 1:, :, None]).squeeze(-1)
    rho = torch.arange(1, T, device=x.device, dtype=torch.float64)  # ρ_t = t − 1
    return y / rho[None, :, None]


def sequence_loss(theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Per-sequence Eq. 2 summand ``Σ_{t=2}^{T−1} ½‖ŷ_t − x_{t+1}‖²``, shape (n,)."""
    y = predict(theta, x[:, :-1])  # ŷ_2..ŷ_{T−1}
    r = y - x[:, 2:]
    return 0.5 * (r.real**2 + r.imag**2).sum(dim=(1, 2))


# ---- the AR fast path ----------------------------------------------------------------
def phase_powers(lam: torch.Tensor, T: int) -> torch.Tensor:
    """``w_t = λ^{t−1}`` for t = 1..T: complex (n, T, d)."""
    import torch

    powers = torch.arange(T, device=lam.device, dtype=torch.float64)
    angle = torch.angle(lam)[:, None, :] * powers[None, :, None]
    if unit_modulus(lam):
        return torch.polar(torch.ones_like(angle), angle)
    return torch.polar(lam.abs()[:, None, :] ** powers[None, :, None], angle)


def unit_modulus(lam: torch.Tensor) -> bool:
    """Whether every ``|λ_k|`` is within 1e-14 of 1 (the paper's rotations; a radius r ≠ 1 of
    docs/design.md §6 is not), so ``λ^{-1} = λ̄`` exactly as :func:`~mesadyn.process.sequences`."""
    return bool(((lam.abs() - 1).abs() <= 1e-14).all())


def gram_prefix(w: torch.Tensor) -> torch.Tensor:
    """``G'_t = Σ_{i=2}^{t} w_i w_i^*`` for t = 2..T: complex (n, T−1, d, d), contiguous."""
    import torch

    outer = w[:, 1:, :, None] * w[:, 1:, None, :].conj()
    return torch.cumsum(outer, dim=1)


@cache
def _hermitian_matvec() -> Any:
    """``V = G U`` for Hermitian ``G`` (the prefix Grams ``G'_t = Σ w_i w_i^*``, exactly
    Hermitian in floating point), whose backward ``G^H V̄ = G V̄`` reuses ``G`` as stored instead
    of materialising a conjugate transpose: about half the cost of a fast-path GD step.
    ``U`` has one column per θ of a batch, so ``G`` is read once for all of them.

    The autograd function is built on first use (torch is imported then, not with the module).
    """
    import torch

    class HermitianMatvec(torch.autograd.Function):
        @staticmethod
        def forward(ctx: torch.autograd.function.FunctionCtx, G: torch.Tensor,
                    u: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(G)
            return torch.matmul(G, u)

        @staticmethod
        def backward(ctx: torch.autograd.function.FunctionCtx,
                     grad: torch.Tensor) -> tuple[None, torch.Tensor]:
            (G,) = ctx.saved_tensors  # type: ignore[attr-defined]
            return None, torch.matmul(G, grad)

    return HermitianMatvec


def yhat_ar(theta: torch.Tensor, x: torch.Tensor, lam: torch.Tensor, w: torch.Tensor,
            G: torch.Tensor, unit: bool) -> torch.Tensor:
    """Core of :func:`predict_ar` given ``w_t/ρ_t`` and ``G'_t`` (ŷ is linear in ``w_t``).

    ``theta`` is one flat θ (result (n, τ, d)) or a batch (k, 18d²) sharing the data (result
    (k, n, τ, d)); the batch reads the θ-independent ``G'_t`` once for all k.
    """
    import torch
    batched = theta.ndim == 2
    th = theta if batched else theta[None]
    d = x.shape[1]
    Atil, Ptil, _, s1 = ar_matrices(th, x, lam, unit)
    P0 = unpack_batch(th)[1][:, None, :d, d : 2 * d]  # (k, 1, d, d)
    first = (x[:, None, :] @ P0.transpose(-1, -2)).to(torch.complex128) * (w @ s1[..., None])
    u = w @ Atil.transpose(-1, -2)  # Ã w_t, (k, n, τ, d)
    v = _hermitian_matvec().apply(G, u.permute(1, 2, 3, 0))  # G'_t Ã w_t, (n, τ, d, k)
    y = first + v.permute(3, 0, 1, 2) @ Ptil.transpose(-1, -2)  # + P̃ G'_t Ã w_t
    return y if batched else y[0]


def predict_ar(theta: torch.Tensor, x1: torch.Tensor, lam: torch.Tensor, T: int) -> torch.Tensor:
    """ŷ_t for t = 2..T on AR sequences ``x_t = λ^{t−1} x_1``, in O(n·T·d²) (Eq. 1).

    Same values as :func:`predict` on :func:`~mesadyn.process.sequences` (tested), but uses
    the structure ``e_i = (X w_i, X Λ̄ w_i)`` (i >= 2) with ``w_i = λ^{i−1}``, ``X = diag(x_1)``:

        (t−1) ŷ_t = (P_0 x_1)(x_1^T B_0 X w_t) + P̃ G'_t Ã w_t,   G'_t = Σ_{i=2}^t w_i w_i^*,
        B_0 = A_00 + A_01 Λ̄,  P̃ = (P_0 + P_1 Λ̄) X,  Ã = X [B_0 + Λ (A_10 + A_11 Λ̄)] X,

    where ``P = (P_0 P_1)`` and ``A = [[A_00, A_01], [A_10, A_11]]`` in d×d blocks.
    The first term is the i = 1 token (``x_0 = 0``).  ``G'_t`` does not depend on θ; the loss
    of a fixed dataset (the sampled fields' AR-batch kernels) never stores it but uses its
    closed form (:func:`gram_kernel`).  Returns complex (n, T−1, d), ``[:, k]`` = ŷ_{k+2}.
    """
    import torch
    w = phase_powers(lam, T)
    rho = torch.arange(1, T, device=lam.device, dtype=torch.float64)
    w_rho = w[:, 1:] / rho[None, :, None]
    return yhat_ar(theta, x1.to(torch.float64), lam, w_rho, gram_prefix(w), unit_modulus(lam))


def predict_ar_at(theta: torch.Tensor, x1: torch.Tensor, lam: torch.Tensor,
                  ts: torch.Tensor | np.ndarray | list[int]) -> torch.Tensor:
    """ŷ_t at the times ``ts`` only (each >= 2) on AR sequences ``x_t = λ^{t−1} x_1`` (Eq. 1):
    complex (n, len(ts), d), equal to ``predict_ar(theta, x1, lam, max(ts))[:, ts − 2]``.

    Uses the closed form of the prefix Gram, ``G'_t[l, j] = K_lj (1 − w_t[l] w̄_t[j])`` with
    ``K = z/(1 − z)``, ``z = λ_l λ̄_j`` (``t − 1`` where ``z = 1``), so a time costs O(d²) per
    sequence whatever t; sequences with a ratio within :data:`NEAR_ONE` of 1 (not 1) sum their
    prefix Grams instead (O(t d²)), where the closed form would lose digits.
    """
    import torch
    t = torch.as_tensor(np.asarray(ts, dtype=np.int64), device=lam.device)
    if t.ndim != 1 or t.numel() == 0 or int(t.min()) < 2:
        raise MesadynError(f"ts must be a non-empty list of times >= 2, got {t.tolist()}")
    if theta.ndim != 1 or dim_of(theta) != x1.shape[-1]:
        raise MesadynError(f"θ must be one flat θ for d={x1.shape[-1]}, got shape "
                           f"{tuple(theta.shape)}")
    unit = unit_modulus(lam)
    x1 = x1.to(torch.float64)
    ang = torch.angle(lam)[:, None, :] * (t - 1).to(torch.float64)[None, :, None]
    mod = torch.ones_like(ang) if unit else lam.abs()[:, None, :] ** (t - 1)[None, :, None]
    w = torch.polar(mod, ang)  # w_t = λ^{t−1}, (n, K, d)
    z = ratios(lam, unit)
    one = z == 1
    K = gram_kernel(z)[:, None]  # (n, 1, d, d)
    rho = (t - 1).to(torch.float64)
    G = K * (1 - w[..., :, None] * w.conj()[..., None, :])
    G = G + one[:, None].to(G.dtype) * rho[None, :, None, None]  # (t − 1) where z = 1
    near = near_one(z).any(dim=(1, 2))
    if bool(near.any()):  # the few sequences with nearly equal phases: sum the prefix Grams
        rows = near.nonzero().squeeze(1)
        G[rows] = gram_prefix(phase_powers(lam[rows], int(t.max())))[:, t - 2]
    Atil, Ptil, p0x, s1 = (v[0] for v in ar_matrices(theta[None], x1, lam, unit))
    h = (Atil[:, None] @ w[..., None]).squeeze(-1)  # Ã w_t
    y = (Ptil[:, None] @ (G @ h[..., None])).squeeze(-1)  # P̃ G'_t Ã w_t
    y = y + p0x[:, None, :] * (w * s1[:, None, :]).sum(-1, keepdim=True)  # the i = 1 token
    return y / rho[None, :, None]


#: Sequences with a ratio ``z = λ_l λ̄_j ≠ 1`` closer to 1 than this take the prefix-Gram path
#: (in :func:`predict_ar_at` and the sampled fields' AR-batch kernels).
#: The closed form subtracts two terms of size ``|h|/|1 − z|`` whose difference is at most
#: ``(t−1)|h|``, so its relative rounding error grows like ``ε/|1 − z|``.  Measured against the
#: prefix-Gram path (d = 5, T = 100, 400 sequences, two phases ``gap`` apart), the worst
#: per-sequence loss error is 2e-15, 1.7e-14, 8.7e-14, 3.0e-13, 3.3e-12 at gaps 1e-1, 3e-3, 1e-3,
#: 1e-4, 1e-5 (gradient 10x smaller), so 1e-3 keeps every sequence within ~1e-13
#: (``tests/test_model.py::test_closed_form_error_at_the_threshold``).
NEAR_ONE = 1e-3


def ratios(lam: torch.Tensor, unit: bool) -> torch.Tensor:
    """``z_lj = λ_l λ̄_j`` for every sequence: complex (n, d, d), exactly 1 where ``λ_l = λ_j``
    (modulus taken as 1 when ``unit``, as :func:`phase_powers` does)."""
    import torch
    ang = torch.angle(lam)
    r = torch.ones_like(ang) if unit else lam.abs()
    return torch.polar(r[:, :, None] * r[:, None, :], ang[:, :, None] - ang[:, None, :])


def gram_kernel(z: torch.Tensor) -> torch.Tensor:
    """``K = z/(1 − z)`` of the prefix Grams' closed form ``G'_t = K (1 − z^{t−1})``, 0 where
    ``z = 1`` (those entries are ``t − 1`` instead)."""
    import torch
    one = z == 1
    return torch.where(one, 0, z / torch.where(one, 1, 1 - z))


def near_one(z: torch.Tensor) -> torch.Tensor:
    """True where ``0 < |1 − z| < NEAR_ONE`` (the closed form would lose digits there)."""
    gap = (1 - z).abs()
    return (gap > 0) & (gap < NEAR_ONE)


def ar_matrices(theta: torch.Tensor, x1: torch.Tensor, lam: torch.Tensor,
                unit: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sequence ``(Ã, P̃, P_0 x_1, s_1)`` of :func:`predict_ar`, (k, n, d, d) and (k, n, d)."""
    d = x1.shape[1]
    W_KQ, W_PV = unpack_batch(theta)
    P = W_PV[:, None, :d, d:]  # (k, 1, d, 2d): broadcasts over the n sequences
    A = W_KQ[:, None, d:, d:]
    P0, P1 = P[..., :d], P[..., d:]
    A00, A01, A10, A11 = A[..., :d, :d], A[..., :d, d:], A[..., d:, :d], A[..., d:, d:]
    lc = lam.conj() if unit else 1 / lam  # Λ^{-1}: x_{i-1} = Λ^{-1} x_i (Λ̄ when |λ| = 1)
    B0 = A00 + A01 * lc[:, None, :]  # (k, n, d, d): A_00 + A_01 Λ^{-1}
    B1 = A10 + A11 * lc[:, None, :]
    Atil = x1[:, :, None] * (B0 + lc.conj()[:, :, None] * B1) * x1[:, None, :]
    Ptil = (P0 + P1 * lc[:, None, :]) * x1[:, None, :]
    s1 = (x1[:, :, None] * B0).sum(-2) * x1  # x_1^T B_0 X, (k, n, d)
    p0x = (P0 * x1[:, None, :]).sum(-1)  # P_0 x_1, (k, n, d)
    return Atil, Ptil, p0x, s1
