"""The one-layer linear causal self-attention of Section 3.2 and its parameter blocks.

θ = (W^KQ, W^PV), both real 3d×3d, stored flat as ``concat(W^KQ.ravel(), W^PV.ravel())``
(row-major, length 18d²).  Only ``P = (W^PV_12 W^PV_13)`` and
``A = [[W^KQ_22, W^KQ_23], [W^KQ_32, W^KQ_33]]`` reach the prediction (Eq. 1):

    ŷ_t = P M_t A e^x_t,   M_t = (1/(t−1)) Σ_{i≤t} e^x_i e^x_i^*,   e^x_i = (x_i, x_{i−1}).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from enum import StrEnum
from functools import lru_cache
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import torch

from .errors import MesadynError, check_finite, check_int, check_positive

#: A flat θ (length 18d²) or a batch of them (..., 18d²), as numpy or torch.
ThetaT = TypeVar("ThetaT", np.ndarray, torch.Tensor)

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


def _take(theta: ThetaT, idx: np.ndarray) -> ThetaT:
    if isinstance(theta, torch.Tensor):
        return theta[..., torch.from_numpy(np.array(idx)).to(theta.device)]
    return np.asarray(theta)[..., idx]


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
    d = dim_of(theta)
    th = torch.as_tensor(theta, dtype=torch.float64) if isinstance(theta, np.ndarray) else theta
    n = 9 * d * d
    W_KQ = th[..., :n].reshape(*th.shape[:-1], 3 * d, 3 * d)
    W_PV = th[..., n:].reshape(*th.shape[:-1], 3 * d, 3 * d)
    A, P = W_KQ[..., d:, d:], W_PV[..., :d, d:]
    out = (A * A).sum((-2, -1)) - (P * P).sum((-2, -1))
    return out.numpy() if isinstance(theta, np.ndarray) else out


def diagonal_init(d: int, a0: float, b0: float) -> torch.Tensor:
    """Assumption 3.1: ``W^KQ_32 = a0 I``, ``W^PV_12 = b0 I``, every other entry 0."""
    d = check_int("d", d, 1)
    a0, b0 = check_finite("a0", a0), check_finite("b0", b0)
    W_KQ = torch.zeros(3 * d, 3 * d, dtype=torch.float64)
    W_PV = torch.zeros(3 * d, 3 * d, dtype=torch.float64)
    block(W_KQ, 3, 2).copy_(a0 * torch.eye(d, dtype=torch.float64))
    block(W_PV, 1, 2).copy_(b0 * torch.eye(d, dtype=torch.float64))
    return pack(W_KQ, W_PV)


def gaussian_init(d: int, sigma_w: float, seed: int = 1) -> torch.Tensor:
    """Every entry of θ iid ``N(0, σ_w²)`` (Section 6, Figs. 5–6), from a seeded generator."""
    d = check_int("d", d, 1)
    sigma_w = check_positive("sigma_w", sigma_w)
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
    prev = torch.nn.functional.pad(x, (0, 0, 1, 0))[:, :-1, :]
    return torch.cat([x, prev], dim=-1)


def predict(theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """ŷ_t for t = 2..T of every sequence (Eq. 1), in O(n·T·d²) by prefix sums.

    ``x`` is complex (n, T, d); the result is complex (n, T−1, d) and ``[:, k]`` is ŷ_{k+2}.
    Uses ``Z_t = Σ_{i≤t} (P e_i) e_i^*`` so that ``ŷ_t = Z_t A e_t / (t − 1)``.
    """
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
    powers = torch.arange(T, device=lam.device, dtype=torch.float64)
    angle = torch.angle(lam)[:, None, :] * powers[None, :, None]
    if unit_modulus(lam):
        return torch.polar(torch.ones_like(angle), angle)
    return torch.polar(lam.abs()[:, None, :] ** powers[None, :, None], angle)


def unit_modulus(lam: torch.Tensor) -> bool:
    """Whether every ``|λ_k|`` is within 1e-14 of 1 (the paper's rotations; a radius r ≠ 1 of
    DESIGN.md §6 is not), so ``λ^{-1} = λ̄`` exactly as :func:`~mesadyn.process.sequences`."""
    return bool(((lam.abs() - 1).abs() <= 1e-14).all())


def gram_prefix(w: torch.Tensor) -> torch.Tensor:
    """``G'_t = Σ_{i=2}^{t} w_i w_i^*`` for t = 2..T: complex (n, T−1, d, d), contiguous."""
    outer = w[:, 1:, :, None] * w[:, 1:, None, :].conj()
    return torch.cumsum(outer, dim=1)


class _HermitianMatvec(torch.autograd.Function):
    """``V = G U`` for Hermitian ``G`` (the prefix Grams ``G'_t = Σ w_i w_i^*``, exactly
    Hermitian in floating point), whose backward ``G^H V̄ = G V̄`` reuses ``G`` as stored instead
    of materialising a conjugate transpose: about half the cost of a fast-path GD step.
    ``U`` has one column per θ of a batch, so ``G`` is read once for all of them."""

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


def _yhat_ar(theta: torch.Tensor, x: torch.Tensor, lam: torch.Tensor, w: torch.Tensor,
             G: torch.Tensor, unit: bool) -> torch.Tensor:
    """Core of :func:`predict_ar` given ``w_t/ρ_t`` and ``G'_t`` (ŷ is linear in ``w_t``).

    ``theta`` is one flat θ (result (n, τ, d)) or a batch (k, 18d²) sharing the data (result
    (k, n, τ, d)); the batch reads the θ-independent ``G'_t`` once for all k.
    """
    batched = theta.ndim == 2
    th = theta if batched else theta[None]
    d = x.shape[1]
    Atil, Ptil, _, s1 = _ar_matrices(th, x, lam, unit)
    P0 = unpack_batch(th)[1][:, None, :d, d : 2 * d]  # (k, 1, d, d)
    first = (x[:, None, :] @ P0.transpose(-1, -2)).to(torch.complex128) * (w @ s1[..., None])
    u = w @ Atil.transpose(-1, -2)  # Ã w_t, (k, n, τ, d)
    v = _HermitianMatvec.apply(G, u.permute(1, 2, 3, 0))  # G'_t Ã w_t, (n, τ, d, k)
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
    of a fixed dataset (:class:`ARBatch`) never stores it but uses its closed form
    (:class:`_ClosedForm`).  Returns complex (n, T−1, d), ``[:, k]`` = ŷ_{k+2}.
    """
    w = phase_powers(lam, T)
    rho = torch.arange(1, T, device=lam.device, dtype=torch.float64)
    w_rho = w[:, 1:] / rho[None, :, None]
    return _yhat_ar(theta, x1.to(torch.float64), lam, w_rho, gram_prefix(w), unit_modulus(lam))


def predict_ar_at(theta: torch.Tensor, x1: torch.Tensor, lam: torch.Tensor,
                  ts: torch.Tensor | np.ndarray | list[int]) -> torch.Tensor:
    """ŷ_t at the times ``ts`` only (each >= 2) on AR sequences ``x_t = λ^{t−1} x_1`` (Eq. 1):
    complex (n, len(ts), d), equal to ``predict_ar(theta, x1, lam, max(ts))[:, ts − 2]``.

    Uses the closed form of the prefix Gram, ``G'_t[l, j] = K_lj (1 − w_t[l] w̄_t[j])`` with
    ``K = z/(1 − z)``, ``z = λ_l λ̄_j`` (``t − 1`` where ``z = 1``), so a time costs O(d²) per
    sequence whatever t; sequences with a ratio within :data:`NEAR_ONE` of 1 (not 1) sum their
    prefix Grams instead (O(t d²)), where the closed form would lose digits.
    """
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
    Atil, Ptil, p0x, s1 = (v[0] for v in _ar_matrices(theta[None], x1, lam, unit))
    h = (Atil[:, None] @ w[..., None]).squeeze(-1)  # Ã w_t
    y = (Ptil[:, None] @ (G @ h[..., None])).squeeze(-1)  # P̃ G'_t Ã w_t
    y = y + p0x[:, None, :] * (w * s1[:, None, :]).sum(-1, keepdim=True)  # the i = 1 token
    return y / rho[None, :, None]


class ARBatch:
    """Precomputed, θ-independent parts of Eq. 2 for fixed draws ``(x_1, λ)`` (t = 2..T−1).

    A sequence whose ``x_1`` has at most one nonzero entry (Example 4.1's sparse
    ``x_1 = ±c e_i``) takes :class:`_SingleCoordinate`, whose sum over t is closed.  Every other
    sequence takes the closed form (:class:`_ClosedForm`, two d×d matrices instead of the prefix
    Grams) unless two of its ratios ``z_lj = λ_l λ̄_j`` come closer to 1 than :data:`NEAR_ONE`
    without being 1; those few take the prefix-Gram path (:class:`_PrefixGram`) so that the
    cancellation in ``(z − z^t)/(1 − z)`` never costs accuracy.  Below :data:`CLOSED_FORM_MIN_T`
    those take the prefix-Gram path too (cheaper there).  The
    split is fixed here; :meth:`sequence_loss` returns the sequences in the order given.
    ``kernel`` picks the :class:`Kernel` of the closed form and the prefix Grams (``None``: the
    fastest that fits each).
    """

    def __init__(self, x1: torch.Tensor, lam: torch.Tensor, T: int,
                 kernel: Kernel | None = None):
        self.x1 = x1.to(torch.float64)
        self.lam = lam
        self.T = T
        self.unit = unit_modulus(lam)  # |λ| = 1: checked once here, not per call
        z = ratios(lam, self.unit)
        single = single_coordinate(self.x1)
        near = (near_one(z).any(dim=(1, 2)) | (T < CLOSED_FORM_MIN_T)) & ~single
        groups = (single, ~single & ~near, near)
        index = [g.nonzero().squeeze(1) for g in groups]
        self.n_single, _, self.n_prefix_gram = (int(i.numel()) for i in index)
        self._parts: list[_SingleCoordinate | _ClosedForm | _PrefixGram] = []
        one, fast, slow = index
        if one.numel():
            self._parts.append(_SingleCoordinate(self.x1[one], lam[one], T, self.unit))
        if fast.numel():
            self._parts.append(_ClosedForm(self.x1[fast], lam[fast], T, self.unit, z[fast],
                                           kernel))
        if slow.numel():
            self._parts.append(_PrefixGram(self.x1[slow], lam[slow], T, self.unit, kernel))
        mixed = len(self._parts) > 1
        self._order = torch.argsort(torch.cat(index)) if mixed else None

    def nbytes(self) -> int:
        return sum(p.nbytes() for p in self._parts)

    def sequence_loss(self, theta: torch.Tensor) -> torch.Tensor:
        """Per-sequence ``Σ_{t=2}^{T−1} ½‖ŷ_t − x_{t+1}‖²``: shape (n,), or (k, n) for a batch
        of θ of shape (k, 18d²)."""
        parts = [p.sequence_loss(theta) for p in self._parts]
        if self._order is None:
            return parts[0]
        return torch.cat(parts, dim=-1)[..., self._order]


class _SingleCoordinate:
    """Sequences with ``x_1 = c e_k`` (at most one nonzero entry; Example 4.1): Eq. 2 in O(d).

    Every token lies in ``span(f_1, f_2)`` (``f_1 = (e_k, 0)``, ``f_2 = (0, e_k)``):
    ``e_1 = c f_1`` and ``e_i = c λ^{i−2} v`` for i >= 2, ``v = λ f_1 + f_2``, ``λ = λ_k``.  So
    ``Σ_{i=2}^t e_i e_i^* = c² S_t v v^*`` with ``S_t = Σ_{j<t−1} |λ|^{2j}`` and

        ŷ_t − x_{t+1} = λ^{t−2} [ (1/ρ_t) a + (S_t/ρ_t) g + h ],
        a = c³ (f_1^T A v) P f_1,   g = c³ (v^* A v) P v,   h = −c λ² e_k,

    whose squared norm, summed over t = 2..T−1 with the weights ``|λ|^{2(t−2)}``, is the
    quadratic form ``½ Σ_ij Q_ij Re⟨u_i, u_j⟩`` of ``u = (a, g, h)`` with the θ-independent 3×3
    ``Q = Σ_t |λ|^{2(t−2)} φ_t φ_t^T``, ``φ_t = (1/ρ_t, S_t/ρ_t, 1)``: no sum over t per call.
    """

    def __init__(self, x1: torch.Tensor, lam: torch.Tensor, T: int, unit: bool):
        nz = x1 != 0
        self.k = nz.to(torch.int64).argmax(dim=1)  # the nonzero entry (0 where x_1 = 0)
        rows = torch.arange(x1.shape[0], device=x1.device)
        self.c = x1[rows, self.k]
        lk = lam[rows, self.k]
        self.lam = torch.polar(torch.ones_like(lk.real), torch.angle(lk)) if unit else lk
        self.onehot = torch.nn.functional.one_hot(self.k, x1.shape[1]).to(torch.float64)
        mod2 = self.lam.abs().square()[:, None]  # |λ|², (n, 1)
        j = torch.arange(T - 2, device=x1.device, dtype=torch.float64)
        w = mod2**j  # |λ|^{2(t−2)} for t = 2..T−1, (n, τ)
        S = torch.cumsum(w, dim=1)  # S_t = Σ_{j=0}^{t−2} |λ|^{2j}
        rho = j + 1
        phi = torch.stack([1 / rho.expand_as(S), S / rho, torch.ones_like(S)], dim=1)
        self.Q = torch.einsum("nit,njt,nt->nij", phi, phi, w)  # (n, 3, 3)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size()
                   for t in (self.k, self.c, self.lam, self.onehot, self.Q))

    def sequence_loss(self, theta: torch.Tensor) -> torch.Tensor:
        batched = theta.ndim == 2
        th = theta if batched else theta[None]
        W_KQ, W_PV = unpack_batch(th)
        d = self.onehot.shape[1]
        k = self.k
        P0 = W_PV[:, :d, d : 2 * d][:, :, k].transpose(1, 2)  # P f_1: (k, n, d)
        P1 = W_PV[:, :d, 2 * d :][:, :, k].transpose(1, 2)
        A = W_KQ[:, d:, d:]
        a00, a01 = A[:, k, k], A[:, k, d + k]  # (k, n)
        a10, a11 = A[:, d + k, k], A[:, d + k, d + k]
        lam = self.lam
        alpha = lam * a00 + a01  # f_1^T A v
        beta = lam.abs().square() * a00 + lam.conj() * a01 + lam * a10 + a11  # v^* A v
        c3 = self.c**3
        a = (c3 * alpha)[..., None] * P0
        g = (c3 * beta)[..., None] * (lam[:, None] * P0 + P1)
        h = (-self.c * lam.square())[:, None] * self.onehot
        u = torch.stack([a, g, h.expand_as(g)], dim=-2)  # (k, n, 3, d)
        gram = (u @ u.conj().transpose(-1, -2)).real
        out = 0.5 * (self.Q * gram).sum(dim=(-2, -1))
        return out if batched else out[0]


#: Sequences with a ratio ``z = λ_l λ̄_j ≠ 1`` closer to 1 than this take the prefix-Gram path.
#: The closed form subtracts two terms of size ``|h|/|1 − z|`` whose difference is at most
#: ``(t−1)|h|``, so its relative rounding error grows like ``ε/|1 − z|``.  Measured against the
#: prefix-Gram path (d = 5, T = 100, 400 sequences, two phases ``gap`` apart), the worst
#: per-sequence loss error is 2e-15, 1.7e-14, 8.7e-14, 3.0e-13, 3.3e-12 at gaps 1e-1, 3e-3, 1e-3,
#: 1e-4, 1e-5 (gradient 10x smaller), so 1e-3 keeps every sequence within ~1e-13
#: (``tests/test_model.py::test_closed_form_error_at_the_threshold``).
NEAR_ONE = 1e-3
#: Shorter sequences take the prefix-Gram path: its (m, T, d, d) tensor is small there and the
#: closed form's fixed per-sequence work (its d×d matrices and their gradients) dominates.
#: Measured crossover (loss + gradient, m = 10⁴, d = 5, one thread, paired runs): the
#: prefix-Gram path is 1.6x faster at T = 10 and 1.1x at T = 20, the closed form 1.3x faster at
#: T = 30 and 1.5x at T = 100.  With the fused kernels (n = 4000): prefix Grams 0.4–0.9x the
#: closed form's time at T = 8–20, 1.2–2.1x at T = 26–50.
CLOSED_FORM_MIN_T = 26


def ratios(lam: torch.Tensor, unit: bool) -> torch.Tensor:
    """``z_lj = λ_l λ̄_j`` for every sequence: complex (n, d, d), exactly 1 where ``λ_l = λ_j``
    (modulus taken as 1 when ``unit``, as :func:`phase_powers` does)."""
    ang = torch.angle(lam)
    r = torch.ones_like(ang) if unit else lam.abs()
    return torch.polar(r[:, :, None] * r[:, None, :], ang[:, :, None] - ang[:, None, :])


def gram_kernel(z: torch.Tensor) -> torch.Tensor:
    """``K = z/(1 − z)`` of the prefix Grams' closed form ``G'_t = K (1 − z^{t−1})``, 0 where
    ``z = 1`` (those entries are ``t − 1`` instead)."""
    one = z == 1
    return torch.where(one, 0, z / torch.where(one, 1, 1 - z))


def single_coordinate(x1: torch.Tensor) -> torch.Tensor:
    """True for the draws whose ``x_1`` has at most one nonzero entry (:class:`ARBatch` sums
    their t in closed form)."""
    return (x1 != 0).sum(dim=-1) <= 1


def near_one(z: torch.Tensor) -> torch.Tensor:
    """True where ``0 < |1 − z| < NEAR_ONE`` (the closed form would lose digits there)."""
    gap = (1 - z).abs()
    return (gap > 0) & (gap < NEAR_ONE)


class Kernel(StrEnum):
    """How :class:`ARBatch` evaluates its closed-form and prefix-Gram parts (the numbers agree
    to rounding).

    ``fused``: one compiled loop per sequence from θ to its loss and gradient
    (:mod:`mesadyn._fused`, numba), on the CPU in complex128 (the closed form also needs ``E``
    the identity or zero: no exactly equal pair of phases off the diagonal).  ``batched``:
    torch's batched products; any device and dtype, and the path of every double backward.
    """

    fused = "fused"
    batched = "batched"


class _FusablePart(ABC):
    """A part of :class:`ARBatch` that :class:`_FusedLoss` can evaluate (the closed form and
    the prefix Grams).

    A subclass provides the torch path (:meth:`torch_loss`: differentiable twice; every device)
    and the fused one (:meth:`fused_loss`: one call of :mod:`mesadyn._fused`), sets
    :attr:`x1`, :attr:`lam` and :attr:`unit`, then calls :meth:`_set_kernel` (which sets
    :attr:`kernel`, :attr:`lc` and :attr:`dx`); :meth:`sequence_loss` picks the path.
    """

    x1: torch.Tensor  # (n, d) real
    lam: torch.Tensor  # (n, d) complex
    unit: bool  # every |λ| = 1
    kernel: Kernel
    lc: torch.Tensor  # Λ^{-1} (n, d): λ̄ when |λ| = 1, else 1/λ
    dx: torch.Tensor  # −x_1 ∘ λ (n, d): the target is x_{t+1} = −dx ∘ W_t

    def _set_kernel(self, kernel: Kernel | None, fusable: bool, why: str) -> None:
        """Resolve ``kernel`` (``None``: fused where it applies) and the fused inputs."""
        if kernel is Kernel.fused and not fusable:
            raise MesadynError(f"the fused kernel needs {why}")
        self.kernel = kernel or (Kernel.fused if fusable else Kernel.batched)
        self.lc = (self.lam.conj() if self.unit else 1 / self.lam).resolve_conj().contiguous()
        self.dx = -(self.lam * self.x1).contiguous()

    @property
    @abstractmethod
    def tau(self) -> int:
        """The number of steps t summed (T − 2)."""

    @abstractmethod
    def torch_loss(self, theta: torch.Tensor) -> torch.Tensor:
        """Per-sequence loss by torch operations: (n,) for a flat θ, (k, n) for a batch."""

    @abstractmethod
    def fused_loss(self, blocks: np.ndarray, lo: int, hi: int, loss: np.ndarray,
                   grad: np.ndarray, need: bool) -> None:
        """Rows ``lo..hi−1`` of the loss and (when ``need``) its gradient in θ's blocks
        (:data:`mesadyn._fused.BLOCKS`), in place, without the GIL."""

    def sequence_loss(self, theta: torch.Tensor) -> torch.Tensor:
        """Per-sequence ``Σ_t ½‖ŷ_t − x_{t+1}‖²`` by :attr:`kernel`: (n,) or (k, n)."""
        if self.kernel is Kernel.batched:
            return self.torch_loss(theta)
        batched = theta.ndim == 2
        out = torch.stack([_FusedLoss.apply(th, self)
                           for th in (theta if batched else theta[None])])
        return out if batched else out[0]


class _PrefixGram(_FusablePart):
    """The prefix-Gram path: stores ``G'_t = Σ_{i=2}^t w_i w_i^*`` (n, T−2, d, d)."""

    def __init__(self, x1: torch.Tensor, lam: torch.Tensor, T: int, unit: bool,
                 kernel: Kernel | None = None):
        self.x1, self.lam, self.unit = x1.contiguous(), lam, unit
        w = phase_powers(lam, T)
        self.rho = torch.arange(1, T - 1, device=lam.device, dtype=torch.float64)
        self.inv_rho = 1 / self.rho
        self.W = w[:, 1 : T - 1].contiguous()  # W_t = w_t for t = 2..T−1, (n, T − 2, d)
        self.G = gram_prefix(w[:, : T - 1])
        self.target = (w[:, 2:] * x1.to(torch.complex128)[:, None, :]).contiguous()
        self._set_kernel(kernel, lam.device.type == "cpu" and w.dtype == torch.complex128,
                         "CPU complex128 draws")

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size()
                   for t in (self.W, self.G, self.target, self.lc, self.dx))

    @property
    def tau(self) -> int:
        return int(self.W.shape[1])

    def torch_loss(self, theta: torch.Tensor) -> torch.Tensor:
        w = self.W / self.rho[None, :, None]  # w_t / ρ_t
        r = _yhat_ar(theta, self.x1, self.lam, w, self.G, self.unit) - self.target
        return 0.5 * torch.view_as_real(r).square().sum(dim=(-3, -2, -1))

    def fused_loss(self, blocks: np.ndarray, lo: int, hi: int, loss: np.ndarray,
                   grad: np.ndarray, need: bool) -> None:
        from . import _fused

        _fused.prefix_gram_loss(blocks, self.x1.numpy(), self.lc.numpy(), self.dx.numpy(),
                                self.W.numpy(), self.inv_rho.numpy(), lo, hi, loss, grad, need)


def _ar_matrices(theta: torch.Tensor, x1: torch.Tensor, lam: torch.Tensor,
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


#: (sequence, t) pairs per block inside :class:`_ClosedFormLoss` (48 sequences at T = 100):
#: a block's temporaries (≈ 1.5 MB at d = 5) stay in cache, and short sequences still make
#: blocks large enough that the per-operation overhead does not dominate.  Measured at d = 5,
#: T = 100, m = 10⁴ (``benchmarks/bench_block_rows.py``, CPU-s per loss+gradient in
#: alternating rounds, min / lower quartile, one thread): 12 544 rows 0.36–0.41 / 0.43–0.51,
#: 4704 rows 0.32–0.36 / 0.34–0.38, 3136 rows 0.33–0.38 / 0.35–0.44 in four of five series
#: (two threads: 0.55 / 0.56 against 0.46 / 0.49); the fifth, on this noisy shared machine,
#: had 12 544 ahead (0.38 / 0.43 against 0.46 / 0.48).
BLOCK_ROWS = 4704


class _ClosedForm(_FusablePart):
    """The closed-form path: ``G'_t`` through two θ-independent d×d matrices per sequence.

    With ``z_lj = λ_l λ̄_j`` and ``W_t = λ^{t−1}``, ``G'_t[l, j] = Σ_{s=1}^{t−1} z_lj^s`` is
    ``K_lj (1 − W_t[l] W̄_t[j])`` with ``K = z/(1 − z)`` where ``z ≠ 1`` and ``(t−1) E_lj``
    where ``z = 1`` (``E``: the diagonal when ``|λ| = 1``, and any exactly equal pair).  So

        ŷ_t − x_{t+1} = C W_t/ρ_t + P̃ s_t − X Λ W_t,
        s_t = E h_t − (W_t/ρ_t) ∘ K (W̄_t ∘ h_t),   h_t = Ã W_t,   C = (P_0 x_1) s_1^T + P̃ K Ã:

    per (sequence, t) three d×d products, and only ``W`` (n, d, τ), τ = T − 2, is stored
    (time-last, which the batched products prefer), besides ``K`` and ``E``.
    """

    def __init__(self, x1: torch.Tensor, lam: torch.Tensor, T: int, unit: bool,
                 z: torch.Tensor, kernel: Kernel | None = None):
        self.x1, self.lam, self.unit = x1.contiguous(), lam, unit
        d = x1.shape[1]
        self.W = phase_powers(lam, T)[:, 1 : T - 1].transpose(1, 2).contiguous()
        self.inv_rho = 1 / torch.arange(1, T - 1, device=lam.device, dtype=torch.float64)
        one = z == 1
        self.K = gram_kernel(z)
        self.KT = self.K.transpose(1, 2).contiguous()
        eye = torch.eye(d, dtype=torch.bool, device=lam.device)
        #: E as a matrix, or None when it is the identity (|λ| = 1, distinct λ) or zero (|λ| ≠ 1)
        self.E: torch.Tensor | None = None
        self.E_is_eye = bool((one == eye).all())
        if not self.E_is_eye and bool(one.any()):
            self.E = one.to(torch.complex128)
        self._set_kernel(kernel, (lam.device.type == "cpu" and self.W.dtype == torch.complex128
                                  and self.E is None),
                         "CPU complex128 draws whose E is the identity or zero (no exactly "
                         "equal pair of phases off the diagonal)")

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size()
                   for t in (self.W, self.dx, self.lc, self.K, self.KT))

    def matrices(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(Ã, P̃, C)`` for a batch of θ (k, 18d²): each (k, n, d, d), differentiable."""
        Atil, Ptil, p0x, s1 = _ar_matrices(theta, self.x1, self.lam, self.unit)
        C = p0x[..., :, None] * s1[..., None, :] + Ptil @ (self.K @ Atil)
        return Atil, Ptil, C

    def eh(self, hw: torch.Tensor, E: torch.Tensor | None) -> torch.Tensor:
        """``E h`` for ``h`` (n, d, τ) (``E`` the block's rows, or None)."""
        if self.E_is_eye:
            return hw
        if E is None:
            return torch.zeros_like(hw)
        return E @ hw

    def residual(self, H: torch.Tensor, Ptil: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
        """``ŷ_t − x_{t+1}`` (n, d, τ) by plain differentiable operations (the reference and
        the double-backward path of :class:`_ClosedFormLoss`)."""
        W = self.W
        Wr = W * self.inv_rho
        hw = H @ W
        s = self.eh(hw, self.E) - Wr * (self.K @ (W.conj() * hw))
        return C @ Wr + Ptil @ s + self.dx[..., None] * W

    @property
    def tau(self) -> int:
        return int(self.W.shape[2])

    def fused_loss(self, blocks: np.ndarray, lo: int, hi: int, loss: np.ndarray,
                   grad: np.ndarray, need: bool) -> None:
        from . import _fused

        _fused.closed_form_loss(blocks, self.x1.numpy(), self.lc.numpy(), self.dx.numpy(),
                                self.K.numpy(), self.W.numpy(), self.inv_rho.numpy(),
                                1.0 if self.E_is_eye else 0.0, lo, hi, loss, grad, need)

    def torch_loss(self, theta: torch.Tensor) -> torch.Tensor:
        batched = theta.ndim == 2
        H, Ptil, C = self.matrices(theta if batched else theta[None])
        out = torch.stack([_ClosedFormLoss.apply(H[i], Ptil[i], C[i], self)
                           for i in range(H.shape[0])])
        return out if batched else out[0]


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
    """Positions in a flat θ of the blocks :data:`mesadyn._fused.BLOCKS`, (6d²,)."""
    idx = torch.arange(18 * d * d)
    W_KQ, W_PV = unpack(idx)
    A = [W_KQ[d + d * i : 2 * d + d * i, d + d * j : 2 * d + d * j] for i in (0, 1) for j in (0, 1)]
    P = [W_PV[:d, d:2 * d], W_PV[:d, 2 * d:]]
    return torch.cat([b.reshape(-1) for b in A + P])


class _FusedLoss(torch.autograd.Function):
    """A :class:`_FusablePart`'s per-sequence loss for one θ by its fused kernel
    (:mod:`mesadyn._fused`), from θ's blocks to the loss and its gradient in θ.

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


def sequence_loss_ar(theta: torch.Tensor, x1: torch.Tensor, lam: torch.Tensor,
                     T: int) -> torch.Tensor:
    """:func:`sequence_loss` on AR sequences via :func:`predict_ar`, shape (n,)."""
    return ARBatch(x1, lam, T).sequence_loss(theta)
