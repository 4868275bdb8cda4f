"""The exact population field: L, ∇L and ∇²L of Eq. 2 from exact moment tensors.

``L(P, A) = ½ Σ G_{αβγ,α'β'γ'} Q_{αα'} A_{βγ} A_{β'γ'} − Σ C_{j,αβγ} P_{jα} A_{βγ}
+ ½(T−2) E‖x_1‖²`` with ``Q = PᵀP`` (see :mod:`mesadyn.field._moments` for G and C).  The
tensors are counted exactly once per process and T, cached on disk, and contracted here.
Everything goes through ``K = G·a`` (``a = vec A``), an (n², n²) matrix with ``n = 2d``:

    L = ½ q·(K a) − (C:P)·a + const,   ∇_A L = Kᵀq − C:P,   ∇_P L = P R − C·a,

where ``q = vec Q`` and ``R = mat(K a)``; the Hessian blocks are ``∇²_{AA} = Σ_q q G_q``,
``∇²_{PP} = I ⊗ R`` and ``∇²_{PA}`` from ``K`` (symmetry ``G_{J,J'} = G_{J',J}`` is used and
tested).  Entries of θ outside P and A have zero gradient and zero Hessian rows.

The closed forms run in one of two ways (:class:`Contractions`): scipy.sparse/numpy on the host
(the CPU default: single-threaded, and it fixes the golden outputs' last digits) or torch on the
field's device (CSR sparse–dense products, threaded on the CPU, cuSPARSE on CUDA), with every
tensor moved to the device once, at construction.  See ``docs/exact-field.md``, "Devices and
threads", for the measurements behind the default.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from scipy import sparse

from ..errors import MesadynError
from ..process import Family, Rotation, check_noise, check_radius, check_rotation
from ..theory import check_T
from . import _cache
from ._base import Field, JaxLoss
from ._device import check_device as check_device
from ._device import check_fits
from ._device import fmt_bytes as _fmt_bytes
from ._exact_plan import process_plan
from ._exact_support import DEFAULT_CPU_CONTRACTIONS as DEFAULT_CPU_CONTRACTIONS
from ._exact_support import Contractions as Contractions
from ._exact_support import _active_indices, _choose_contractions, _sum_r2t, _torch_csr_bytes
from ._exact_support import _csr_to as _csr_to
from ._exact_support import _zeros as _zeros
from ._exact_support import device_bytes as device_bytes
from ._memory import memory_budget
from ._moments import build as build
from ._moments import plan as plan
from ._moments_rotation import noise_constant

if TYPE_CHECKING:
    import jax

#: The arrays a cache file must hold (an older layout is rebuilt, not used).
_REQUIRED = frozenset({"C", "g_q", "g_a1", "g_a2", "g_val"})


class ExactField(Field):
    """Exact population loss of Eq. 2 and its derivatives, for families with exact moments.

    ``cache_dir`` overrides ``$MESADYN_CACHE_DIR`` (default ``~/.cache/mesadyn``);
    ``cache=False`` skips the disk cache; ``max_bytes`` caps the memory the build may use
    (default: what the machine has available).  ``device`` is where the tensors live and the
    contractions run (``None``: the CPU, :func:`mesadyn.device.resolve_device`);
    ``contractions`` picks the closed forms' engine (:class:`Contractions`; default torch off
    the CPU, :data:`DEFAULT_CPU_CONTRACTIONS` on it).  Results come back on θ's device.
    ``rotation`` and ``noise`` choose the process (docs/design.md §6): ``W = r·diag(λ)`` (the
    paper), ``real`` block rotations (d even) or ``haar`` (within the reach of
    :mod:`mesadyn.field._haar`), and the AR noise scale s of ``x_{t+1} = W x_t + ε_t``
    (:mod:`mesadyn.field._exact_plan` says which counting builds the tensors).
    Attributes: ``build_seconds``, ``cache_status`` (``"hit"`` or why a build happened),
    ``nbytes``, ``nnz`` (stored entries of G), ``memory_estimate`` (the build's host bytes) and
    ``device_estimate`` (bytes on the device), both computed before anything large is
    allocated.

    Raises:
        MesadynError: no exact moments, T or radius out of range, an odd d with real rotations,
            a noise < 0 or not finite, Haar W beyond its reach, a device this machine does
            not have (``device 'cuda' requested but CUDA is not available ...``), or a build
            that would not fit the host's memory budget or the device's free memory (the
            message gives the estimate).
    """

    name = "exact"
    has_exact_hessian = True
    has_jax_loss = True
    #: The engine of the closed forms (set per field; subclasses building their own tensors
    #: get scipy).
    _contractions: Contractions = Contractions.SCIPY

    def __init__(self, family: Family, T: int, *, cache_dir: str | os.PathLike[str] | None = None,
                 cache: bool = True, device: torch.device | str | None = None,
                 max_bytes: int | None = None, radius: float = 1.0,
                 contractions: Contractions | str | None = None,
                 rotation: Rotation | str = Rotation.DIAGONAL, noise: float = 0.0):
        self.family = family
        self.T = check_T(T)
        self.radius = check_radius(radius)
        self.rotation = check_rotation(rotation)
        self.noise = check_noise(noise)
        if not family.exact_moments:
            raise MesadynError(
                f"family {family.name!r} has no exact moments, so it has no exact field; "
                "use the Monte-Carlo field (--field mc)"
            )
        self.device = check_device(device)
        self._contractions = _choose_contractions(self.device, contractions)
        d = family.d
        n = 2 * d
        self._n = n
        t0 = time.perf_counter()
        pl = process_plan(family, self.T, self.radius, self.rotation, self.noise, build)
        budget = memory_budget()
        limit, source = (budget.bytes, budget.source) if max_bytes is None else (
            int(max_bytes), "max_bytes")
        host = pl.bytes
        if self.device.type == "cpu" and self._contractions is Contractions.TORCH:
            host += _torch_csr_bytes(d, pl.nnz)
        too_big = (
            f"the exact field for {family.name} d={d} T={self.T} needs about "
            f"{_fmt_bytes(host)} (estimate), more than the {_fmt_bytes(limit)} "
            f"available ({source}); use the Monte-Carlo field (--field mc)"
        )
        if host > limit:
            raise MesadynError(too_big)
        self.memory_estimate = host
        self.device_estimate = device_bytes(d, pl.nnz, self._contractions)
        check_fits(self.device_estimate, self.device,
                   f"the exact field for {family.name} d={d} T={self.T}",
                   "use device='cpu' or the Monte-Carlo field (--field mc)")
        arrays = None
        self.cache_path: Path | None = None
        key = _cache.key_of(self._process_description(), self.T)
        if cache:
            self.cache_path = _cache.path_for(key, _cache.cache_dir(cache_dir))
            arrays, status = _cache.load(self.cache_path, key)
            if arrays is not None and not _REQUIRED <= set(arrays):
                arrays, status = None, "wrong layout"
            self.cache_status = status if arrays is not None else f"built ({status})"
        else:
            self.cache_status = "built (cache off)"
        if arrays is None:
            try:
                arrays = pl.build()
            except MemoryError:  # the estimate was too low for this machine's limits
                raise MesadynError(
                    f"ran out of memory building the exact field for {family.name} d={d} "
                    f"T={self.T} (estimate {_fmt_bytes(pl.bytes)}, {_fmt_bytes(limit)} "
                    f"available ({source})); use the Monte-Carlo field (--field mc)"
                ) from None
            if self.cache_path is not None:
                try:
                    _cache.save(self.cache_path, key, arrays)
                except OSError as exc:  # an unwritable cache is not fatal
                    self.cache_status += f"; not saved ({exc.__class__.__name__})"
        self.build_seconds = time.perf_counter() - t0
        self._to_torch(arrays)
        del arrays  # the field keeps the torch COO and the two CSR copies only
        self.const = (0.5 * _sum_r2t(self.T, self.radius) * family.mean_sq_norm
                      + noise_constant(self.T, self.radius, self.noise, d))
        self._iP, self._iA = (i.to(self.device) for i in _active_indices(d))

    # ---- storage ---------------------------------------------------------------------
    def _to_torch(self, arrays: dict[str, np.ndarray]) -> None:
        n, d, dev = self._n, self.family.d, self.device
        n2 = n * n
        self._Cnp = np.ascontiguousarray(arrays["C"].reshape(d * n, n2))
        self._C = torch.as_tensor(self._Cnp, device=dev).reshape(d, n, n2)
        q = arrays["g_q"].astype(np.int64)
        a1 = arrays["g_a1"].astype(np.int64)
        a2 = arrays["g_a2"].astype(np.int64)
        val = arrays["g_val"]
        self.nnz = int(val.size)
        # torch COO (differentiable path, any device)
        self._iqa = torch.as_tensor(q * n2 + a1, device=dev)
        self._ia2 = torch.as_tensor(a2, device=dev)
        self._val = torch.as_tensor(val, dtype=torch.float64, device=dev)
        # scipy CSR (the closed-form CPU path): K = G1 a and HAA = mat(G2 q)
        self._G1 = sparse.csr_matrix((val, (q * n2 + a1, a2)), shape=(n2 * n2, n2))
        self._G2 = sparse.csr_matrix((val, (a1 * n2 + a2, q)), shape=(n2 * n2, n2))
        self.nbytes = int(self.nnz * 16 + self._Cnp.nbytes + sum(
            m.data.nbytes + m.indices.nbytes + m.indptr.nbytes for m in (self._G1, self._G2)))
        self._iPnp, self._iAnp = (i.numpy() for i in _active_indices(d))
        if self._contractions is Contractions.TORCH:  # the same CSR matrices, on the device
            self._G1t, self._G2t = (_csr_to(m, dev) for m in (self._G1, self._G2))
            self.nbytes += _torch_csr_bytes(d, self.nnz)

    def tensors(self) -> dict[str, np.ndarray]:
        """The moment tensors (numpy): ``C`` (d, 2d, 2d, 2d) and G's nonzeros as COO
        ``g_q, g_a1, g_a2, g_val`` indexed ``[α n + α', β n + γ, β' n + γ']``."""
        n, d = self._n, self.family.d
        iqa = self._iqa.cpu().numpy()
        return {"C": self._Cnp.reshape(d, n, n, n).copy(), "g_q": iqa // (n * n),
                "g_a1": iqa % (n * n), "g_a2": self._ia2.cpu().numpy().copy(),
                "g_val": self._val.cpu().numpy().copy()}

    def G_dense(self) -> np.ndarray:
        """G as a dense array indexed ``[α, β, γ, α', β', γ']`` (small d only)."""
        n = self._n
        a = self.tensors()
        G = np.zeros((n * n, n * n, n * n))
        G[a["g_q"], a["g_a1"], a["g_a2"]] = a["g_val"]
        return G.reshape(n, n, n, n, n, n).transpose(0, 2, 3, 1, 4, 5)

    # ---- the differentiable torch path ---------------------------------------------------
    def _K(self, a: torch.Tensor) -> torch.Tensor:
        """``K[q, i1] = Σ_{i2} G[q, i1, i2] a[i2]``, shape (n², n²); differentiable."""
        n2 = self._n**2
        src = self._val * a.index_select(0, self._ia2)
        return torch.zeros(n2 * n2, dtype=a.dtype, device=a.device).index_add(
            0, self._iqa, src).reshape(n2, n2)

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        """``L(θ)`` (Eq. 2, exact) as a differentiable torch function of θ."""
        dev = theta.device
        th = theta.to(self.device)
        d, n = self.family.d, self._n
        P = th.index_select(0, self._iP).reshape(d, n)
        a = th.index_select(0, self._iA)
        q = (P.T @ P).reshape(-1)
        value = 0.5 * (q @ (self._K(a) @ a)) - P.reshape(-1) @ (self._C.reshape(d * n, -1) @ a)
        return (value + self.const).to(dev)

    # ---- closed forms (scipy/numpy on the host, or torch on the device) ------------------
    def _np(self, theta: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        th = self.check_theta(theta).detach().cpu().numpy()
        return th, th[self._iPnp].reshape(self.family.d, self._n), th[self._iAnp]

    def _pieces(self, P: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, ...]:
        n = self._n
        q = (P.T @ P).reshape(-1)
        K = (self._G1 @ a).reshape(n * n, n * n)
        R = K @ a
        Rm = R.reshape(n, n)
        return q, K, R, 0.5 * (Rm + Rm.T)

    def loss_and_grad(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L, ∇L)`` by the closed-form contractions: ``∇_P = P R − C·a``, ``∇_A = Kᵀq − C:P``."""
        if self._contractions is Contractions.TORCH:
            return self._torch_loss_and_grad(theta)
        dev = torch.as_tensor(theta).device
        th, P, a = self._np(theta)
        q, K, R, Rs = self._pieces(P, a)
        Cp = P.reshape(-1) @ self._Cnp  # (n²,)
        Ca = (self._Cnp @ a).reshape(P.shape)
        value = 0.5 * (q @ R) - Cp @ a + self.const
        g = np.zeros_like(th)
        g[self._iPnp] = (P @ Rs - Ca).reshape(-1)
        g[self._iAnp] = q @ K - Cp
        return (torch.tensor(value, dtype=torch.float64, device=dev),
                torch.from_numpy(g).to(dev))

    def hvp(self, theta: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``∇²L(θ) v`` in closed form (two sparse products; no Hessian is formed)."""
        if self._contractions is Contractions.TORCH:
            return self._torch_hvp(theta, v)
        dev = torch.as_tensor(theta).device
        th, P, a = self._np(theta)
        vv = torch.as_tensor(v, dtype=torch.float64).detach().cpu().numpy()
        if vv.shape != th.shape:
            raise MesadynError(f"v must have shape {th.shape}, got {vv.shape}")
        n = self._n
        vP, vA = vv[self._iPnp].reshape(P.shape), vv[self._iAnp]
        q, K, R, Rs = self._pieces(P, a)
        M = (K @ vA).reshape(n, n)
        Z = vP.T @ P
        out = np.zeros_like(th)
        out[self._iPnp] = (vP @ Rs + P @ (M + M.T) - (self._Cnp @ vA).reshape(P.shape)
                           ).reshape(-1)
        KvA = (self._G1 @ vA).reshape(n * n, n * n)
        out[self._iAnp] = q @ KvA + (Z + Z.T).reshape(-1) @ K - vP.reshape(-1) @ self._Cnp
        return torch.from_numpy(out).to(dev)

    def hessian(self, theta: torch.Tensor) -> torch.Tensor:
        """The full Hessian ``∇²L(θ)`` (18d² × 18d²) from closed-form blocks:
        ``∇²_AA = Σ_q q_q G_q``, ``∇²_PP = I_d ⊗ R``, ``∇²_PA`` from ``K``."""
        if self._contractions is Contractions.TORCH:
            return self._torch_hessian(theta)
        dev = torch.as_tensor(theta).device
        th, P, a = self._np(theta)
        d, n = self.family.d, self._n
        n2 = n * n
        q, K, R, Rs = self._pieces(P, a)
        HAA = (self._G2 @ q).reshape(n2, n2)
        HAA = 0.5 * (HAA + HAA.T)
        HPP = np.kron(np.eye(d), Rs)
        K4 = K.reshape(n, n, n2)
        HPA = (np.einsum("jb,abi->jai", P, K4) + np.einsum("jb,bai->jai", P, K4)
               ).reshape(d * n, n2) - self._Cnp
        N = th.size
        H = np.zeros((N, N))
        iP, iA = self._iPnp, self._iAnp
        H[np.ix_(iP, iP)] = HPP
        H[np.ix_(iA, iA)] = HAA
        H[np.ix_(iP, iA)] = HPA
        H[np.ix_(iA, iP)] = HPA.T
        return torch.from_numpy(H).to(dev)

    # ---- closed forms in torch on the field's device ---------------------------------------
    def _t(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """θ checked and on the field's device (no copy when it is there already), P and a."""
        th = self.check_theta(theta).detach().to(self.device)
        return th, th.index_select(0, self._iP).reshape(self.family.d, self._n), \
            th.index_select(0, self._iA)

    def _tpieces(self, P: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, ...]:
        n = self._n
        q = (P.T @ P).reshape(-1)
        K = (self._G1t @ a).reshape(n * n, n * n)
        R = K @ a
        Rm = R.reshape(n, n)
        return q, K, R, 0.5 * (Rm + Rm.T)

    def _torch_loss_and_grad(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        dev = torch.as_tensor(theta).device
        th, P, a = self._t(theta)
        C = self._C.reshape(P.numel(), -1)
        q, K, R, Rs = self._tpieces(P, a)
        Cp = P.reshape(-1) @ C
        Ca = (C @ a).reshape(P.shape)
        value = 0.5 * (q @ R) - Cp @ a + self.const
        g = torch.zeros_like(th)
        g[self._iP] = (P @ Rs - Ca).reshape(-1)
        g[self._iA] = q @ K - Cp
        return value.to(dev), g.to(dev)

    def _torch_hvp(self, theta: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        dev = torch.as_tensor(theta).device
        th, P, a = self._t(theta)
        vv = torch.as_tensor(v, dtype=torch.float64).detach().to(self.device)
        if vv.shape != th.shape:
            raise MesadynError(f"v must have shape {tuple(th.shape)}, got {tuple(vv.shape)}")
        n = self._n
        C = self._C.reshape(P.numel(), -1)
        vP, vA = vv.index_select(0, self._iP).reshape(P.shape), vv.index_select(0, self._iA)
        q, K, R, Rs = self._tpieces(P, a)
        M = (K @ vA).reshape(n, n)
        Z = vP.T @ P
        out = torch.zeros_like(th)
        out[self._iP] = (vP @ Rs + P @ (M + M.T) - (C @ vA).reshape(P.shape)).reshape(-1)
        KvA = (self._G1t @ vA).reshape(n * n, n * n)
        out[self._iA] = q @ KvA + (Z + Z.T).reshape(-1) @ K - vP.reshape(-1) @ C
        return out.to(dev)

    def _torch_hessian(self, theta: torch.Tensor) -> torch.Tensor:
        dev = torch.as_tensor(theta).device
        th, P, a = self._t(theta)
        d, n = self.family.d, self._n
        n2 = n * n
        C = self._C.reshape(d * n, n2)
        q, K, R, Rs = self._tpieces(P, a)
        HAA = (self._G2t @ q).reshape(n2, n2)
        HAA = 0.5 * (HAA + HAA.T)
        HPP = torch.kron(torch.eye(d, dtype=th.dtype, device=self.device), Rs)
        K4 = K.reshape(n, n, n2)
        HPA = (torch.einsum("jb,abi->jai", P, K4) + torch.einsum("jb,bai->jai", P, K4)
               ).reshape(d * n, n2) - C
        N = th.numel()
        H = _zeros((N, N), self.device)
        iP, iA = self._iP, self._iA
        H[iP[:, None], iP[None, :]] = HPP
        H[iA[:, None], iA[None, :]] = HAA
        H[iP[:, None], iA[None, :]] = HPA
        H[iA[:, None], iP[None, :]] = HPA.T
        return H.to(dev)

    # ---- JAX ---------------------------------------------------------------------------
    def jax_loss(self) -> JaxLoss:
        """A jit-compiled JAX function ``θ ↦ L(θ)`` (float64) with the same numbers as torch.

        ``jax.grad`` / ``jax.hessian`` of it give ∇L and ∇²L (e.g. for diffrax).
        """
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        d, n = self.family.d, self._n
        n2 = n * n
        iP = jnp.asarray(self._iP.cpu().numpy())
        iA = jnp.asarray(self._iA.cpu().numpy())
        C = jnp.asarray(self._Cnp)
        const = float(self.const)
        iqa = jnp.asarray(self._iqa.cpu().numpy())
        ia2 = jnp.asarray(self._ia2.cpu().numpy())
        val = jnp.asarray(self._val.cpu().numpy())

        def K_of(a: Any) -> Any:
            return jnp.zeros(n2 * n2, dtype=jnp.float64).at[iqa].add(
                val * a[ia2]).reshape(n2, n2)

        def loss(theta: Any) -> Any:
            theta = jnp.asarray(theta, dtype=jnp.float64)
            P = theta[iP].reshape(d, n)
            a = theta[iA]
            q = (P.T @ P).reshape(-1)
            return 0.5 * (q @ (K_of(a) @ a)) - P.reshape(-1) @ (C @ a) + const

        return jax.jit(loss)

    def jax_loss_and_grad(self) -> Callable[[jax.Array], tuple[jax.Array, jax.Array]]:
        """A jit-compiled JAX ``θ ↦ (L, ∇L)``."""
        import jax

        return jax.jit(jax.value_and_grad(self.jax_loss()))

    def process(self) -> dict[str, object]:
        """What differs from the paper's process: ``radius`` when not 1, ``rotation`` and
        ``noise`` when W is not the noiseless diagonal."""
        out: dict[str, object] = {} if self.radius == 1 else {"radius": self.radius}
        if self.rotation is not Rotation.DIAGONAL or self.noise != 0:
            out.update(rotation=str(self.rotation), noise=self.noise)
        return out

    def _process_description(self) -> dict[str, object]:
        """The family's description, plus :meth:`process` (empty for the paper's process)."""
        return {**self.family.describe(), **self.process()}

    def memory_bytes(self) -> int:
        """The moment tensors' bytes (:attr:`nbytes`)."""
        return self.nbytes

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "nnz": self.nnz, **self.process()}
