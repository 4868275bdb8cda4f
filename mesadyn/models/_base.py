"""The abstract model: what every attention model of mesadyn declares.

A :class:`Model` is a small frozen value (its kind and, for the deep model, its number of
layers); everything about θ is a method of the dimension ``d``.  It declares

* its **parameter layout**: named real blocks stored flat in one θ (:meth:`Model.blocks`,
  :meth:`Model.block_labels`, :meth:`Model.n_params`), the entries that reach ŷ
  (:meth:`Model.active_mask`) and the per-layer diagonals of Assumption 3.1
  (:meth:`Model.diagonal_mask`);
* its **forward pass**: ŷ_t for t = 2..T of a batch of sequences (:meth:`Model.predict`) and the
  Eq. 2 summand of each sequence (:meth:`Model.sequence_loss`), differentiable in θ and usable
  under ``torch.func`` transforms (no in-place update of a tensor that depends on θ);
* its **initialisations**: Assumption 3.1 per layer (:meth:`Model.diagonal_init`) and iid
  ``N(0, σ_w²)`` entries (:meth:`Model.gaussian_init`);
* its **known continuous symmetries**: tangent vectors at θ of orbits of equal loss
  (:meth:`Model.symmetries`), which the zero-mode classifier of
  :mod:`mesadyn.analysis.spectrum` uses, and the quantities the gradient flow conserves
  (:meth:`Model.invariants`);
* its **capabilities**: whether ŷ is a polynomial in the tokens and of which degree
  (:attr:`Model.token_degree`, :attr:`Model.theta_degree`), from which the exact field by
  quadrature sizes its rules, and whether the moment-tensor exact field applies
  (:attr:`Model.moment_exact`: the paper's model only).

torch is imported inside the methods that use it, so a model costs numpy only.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from ..errors import MesadynError, check_finite, check_int, check_positive

if TYPE_CHECKING:
    import torch

    from ..process import CoordinateGroup

__all__ = ["Block", "Model"]


@dataclass(frozen=True)
class Block:
    """One named real matrix of θ: ``rows × cols`` entries from ``start``, row-major."""

    name: str
    start: int
    rows: int
    cols: int

    @property
    def size(self) -> int:
        return self.rows * self.cols

    @property
    def stop(self) -> int:
        return self.start + self.size


def _is_tensor(value: object) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


class Model(ABC):
    """An attention model of the AR process of Section 3.1 (see the module docstring).

    Subclasses are final, frozen and hashable; ``name`` is the CLI's ``--model`` value and
    :meth:`describe` what a field's description records.
    """

    #: The ``--model`` value of this kind.
    name: ClassVar[str]
    #: Whether ŷ is a polynomial in the tokens (then :attr:`token_degree` is its degree).
    polynomial: ClassVar[bool] = True
    #: Whether the moment-tensor exact field (:class:`~mesadyn.field.ExactField`) applies.
    moment_exact: ClassVar[bool] = False
    #: Whether ŷ is odd in the tokens (``ŷ(−x) = −ŷ(x)``), so the loss is even in ``x_1``.
    odd_in_tokens: ClassVar[bool] = True
    #: Whether ``ŷ(x̄) = conj ŷ(x)`` for real θ, so the loss is even in the phases.
    conjugation_symmetric: ClassVar[bool] = True
    #: Whether ŷ is equivariant under every real orthogonal ``D`` acting on the tokens:
    #: ``ŷ(g·θ, D x) = D ŷ(θ, x)`` with ``g·θ`` every block ``(I_3 ⊗ D) M (I_3 ⊗ D)ᵀ``
    #: (:meth:`fixed_subspace`).
    equivariant: ClassVar[bool] = True
    #: Whether each layer is linear attention, ``u_t = Σ_{i≤t} P s_i (s_i^* K s_t)/ρ_t``, on
    #: the three-block stream: then the phase reflection ``λ ↦ −λ`` grades θ
    #: (:meth:`phase_parity_mask`).
    phase_graded: ClassVar[bool] = True

    @property
    def layers(self) -> int:
        """The number of attention layers."""
        return 1

    # ---- identity ------------------------------------------------------------------------
    @property
    def is_paper(self) -> bool:
        """Whether this is the paper's one-layer linear model (Section 3.2)."""
        return False

    def describe(self) -> dict[str, object]:
        """JSON-ready: ``{"model": name}`` and ``layers`` where the kind has several."""
        return {"model": self.name}

    def key(self) -> tuple[object, ...]:
        return (self.name, self.layers)

    def __str__(self) -> str:
        return self.name if self.layers == 1 and self.name != "deep" else (
            f"{self.name}(layers={self.layers})")

    # ---- capabilities ----------------------------------------------------------------------
    @property
    def token_degree(self) -> int | None:
        """The degree of ŷ in the tokens (``None``: not a polynomial)."""
        return None

    @property
    def theta_degree(self) -> int | None:
        """The degree of ŷ in θ (``None``: not a polynomial)."""
        return None

    @property
    def loss_degree(self) -> int | None:
        """The degree of the Eq. 2 summand in ``x_1``: ``2 · token_degree``."""
        n = self.token_degree
        return None if n is None else 2 * n

    def phase_degree(self, T: int) -> int | None:
        """A bound on the trigonometric degree of the Eq. 2 summand in each phase ``φ_k``.

        Every monomial of ŷ_t has one more unconjugated token than conjugated ones (each layer
        maps ``e ↦ e + W(Σ e e^*)W e``), so ``|ŷ_t|²`` has ``token_degree`` unconjugated
        factors; each contributes an exponent ``≤ t − 1 ≤ T − 2`` of ``λ_k`` (``t ≤ T − 1``).
        The cross term ``ŷ_t x̄_{t+1}`` stays within the same bound for ``T ≥ 3``.
        """
        n = self.token_degree
        return None if n is None else n * (T - 2)

    # ---- layout ------------------------------------------------------------------------------
    @abstractmethod
    def blocks(self, d: int) -> tuple[Block, ...]:
        """The named matrices of θ, in storage order."""

    def n_params(self, d: int) -> int:
        """The length of the flat θ."""
        return self.blocks(check_int("d", d, 1))[-1].stop

    def dim_of(self, theta: Any) -> int:
        """d of a flat θ (or a batch (..., n)) of this model."""
        shape = np.shape(theta)
        n = int(shape[-1]) if shape else 0
        per = self.n_params(1)
        d = int(round((n / per) ** 0.5))
        if d < 1 or self.n_params(d) != n:
            raise MesadynError(f"θ of the {self} model must have length {per}·d² for some "
                               f"d >= 1, got length {n}")
        return d

    def block_labels(self, d: int) -> np.ndarray:
        """The block name of every entry of θ (e.g. ``"L2.W_KQ_32"``)."""
        labels: list[np.ndarray] = []
        for blk in self.blocks(d):
            rb = np.arange(blk.rows) // d + 1
            cb = np.arange(blk.cols) // d + 1
            grid = np.char.add(rb[:, None].astype(str), cb[None, :].astype(str))
            labels.append(np.char.add(f"{blk.name}_", grid).ravel())
        return np.concatenate(labels)

    def matrices(self, theta: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The blocks of θ as matrices (views), in :meth:`blocks` order; a batch
        (..., n) gives (..., rows, cols) views."""
        d = self.dim_of(theta)
        return tuple(theta[..., b.start:b.stop].reshape(*theta.shape[:-1], b.rows, b.cols)
                     for b in self.blocks(d))

    def pack(self, *mats: torch.Tensor) -> torch.Tensor:
        """The flat θ of matrices given in :meth:`blocks` order."""
        import torch

        return torch.cat([m.reshape(-1) for m in mats])

    def check_theta(self, theta: Any, d: int) -> None:
        """Refuse a θ that is not one flat vector of this model for ``d`` (naming it)."""
        shape = tuple(np.shape(theta))
        if len(shape) != 1 or shape[0] != self.n_params(d):
            raise MesadynError(f"θ must be a flat vector of length {self.n_params(d)} (the {self} "
                               f"model, d={d}), got shape {shape}")

    @abstractmethod
    def active_mask(self, d: int) -> npt.NDArray[np.bool_]:
        """True on the entries of θ that can reach ŷ (every other entry has zero gradient)."""

    @abstractmethod
    def diagonal_mask(self, d: int) -> npt.NDArray[np.bool_]:
        """True on the diagonals of every layer's ``W^KQ_32`` and ``W^PV_12``."""

    def free_mask(self, mask: Any, d: int) -> npt.NDArray[np.bool_]:
        """The entries a (masked) flow moves: active ∧ ``mask`` (a
        :class:`~mesadyn.model.Mask`, its name, ``None`` or a boolean array of length
        :meth:`n_params`)."""
        from ..model import Mask

        d = check_int("d", d, 1)
        active = self.active_mask(d)
        if mask is None or isinstance(mask, str):
            try:
                kind = Mask(mask or "none")
            except ValueError:
                raise MesadynError(f"unknown mask {mask!r}; choose none or diagonal") from None
            free = active if kind is Mask.none else self.diagonal_mask(d) & active
        else:
            arr = np.asarray(mask)
            if arr.dtype != bool or arr.shape != (self.n_params(d),):
                raise MesadynError(f"mask must be a boolean array of length "
                                   f"{self.n_params(d)}, got {arr.dtype} {arr.shape}")
            free = active & arr
        if not free.any():
            raise MesadynError("the mask leaves no trainable entry of θ")
        return free.copy()

    # ---- forward -------------------------------------------------------------------------------
    @abstractmethod
    def predict(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """ŷ_t for t = 2..T of every sequence: ``x`` complex (n, T, d), result complex
        (n, T−1, d) with ``[:, k]`` = ŷ_{k+2}."""

    def sequence_loss(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The per-sequence Eq. 2 summand ``Σ_{t=2}^{T−1} ½‖ŷ_t − x_{t+1}‖²``, shape (n,)."""
        import torch

        y = self.predict(theta, x[:, :-1])
        r = torch.view_as_real(y - x[:, 2:])
        return 0.5 * r.square().sum(dim=(-3, -2, -1))

    def graph_bytes(self, d: int, T: int) -> int:
        """Bytes of one sequence's autograd graph in the direct form (an estimate: the prefix
        sums of every layer, 3d×3d complex per token, and a few stream vectors, about four
        times over: values, saved tensors, gradients)."""
        return 16 * 4 * T * (9 * d * d * self.layers + 12 * d)

    def _check_x(self, theta: torch.Tensor, x: torch.Tensor) -> int:
        if x.ndim != 3:
            raise MesadynError(f"x must have shape (n, T, d), got {tuple(x.shape)}")
        d = int(x.shape[-1])
        if self.dim_of(theta) != d:
            raise MesadynError(f"θ is for d={self.dim_of(theta)} but x has d={d}")
        return d

    # ---- initialisations -----------------------------------------------------------------------
    def diagonal_init(self, d: int, a0: float, b0: float) -> torch.Tensor:
        """Assumption 3.1 in every layer: ``W^KQ_32 = a0 I``, ``W^PV_12 = b0 I``, all else 0."""
        import torch

        d = check_int("d", d, 1)
        self._check_fits(d)
        a0, b0 = check_finite("a0", a0), check_finite("b0", b0)
        theta = torch.zeros(self.n_params(d), dtype=torch.float64)
        a, b = self._diagonal_index(d)
        theta[torch.from_numpy(np.array(a).ravel())] = a0
        theta[torch.from_numpy(np.array(b).ravel())] = b0
        return theta

    def gaussian_init(self, d: int, sigma_w: float, seed: int = 1) -> torch.Tensor:
        """Every entry of θ iid ``N(0, σ_w²)`` from a seeded generator."""
        import torch

        d = check_int("d", d, 1)
        sigma_w = check_positive("sigma_w", sigma_w)
        self._check_fits(d)
        gen = torch.Generator().manual_seed(int(seed))
        return sigma_w * torch.randn(self.n_params(d), generator=gen, dtype=torch.float64)

    def _check_fits(self, d: int) -> None:
        from ..budget import Estimate, check

        n = self.n_params(d)
        if 64 * n > 2**26:
            check(Estimate(f"θ of the {self} model at d={d} ({n} entries)", 64 * n,
                           advice="use a smaller d"))

    # ---- geometry ------------------------------------------------------------------------------
    @abstractmethod
    def _diagonal_index(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Flat indices (layers, d) of diag(W^KQ_32) and diag(W^PV_12) of every layer."""

    def diagonal_entries(self, theta: Any) -> tuple[Any, Any]:
        """``(diag W^KQ_32, diag W^PV_12)`` of every layer: arrays (..., layers, d) of θ's
        kind."""
        a, b = self._diagonal_index(self.dim_of(theta))
        return _take(theta, a), _take(theta, b)

    def ab(self, theta: Any) -> Any:
        """The per-coordinate step ``Σ_l a_l b_l`` of the layered diagonal manifold, where ŷ is
        one GD step of size ``Σ_l a_l b_l / (t − 1)`` (Corollary 4.1 for one layer): (..., d)."""
        a, b = self.diagonal_entries(theta)
        return (a * b).sum(-2)

    def invariants(self, theta: Any) -> Any:
        """The quantities the gradient flow conserves, one per layer: (..., layers)."""
        import torch

        th = torch.as_tensor(np.asarray(theta, np.float64)) if not _is_tensor(theta) else theta
        out = torch.stack([self._layer_invariant(th, layer) for layer in range(self.layers)],
                          dim=-1)
        return out.numpy() if not _is_tensor(theta) else out

    def invariant(self, theta: Any) -> Any:
        """The sum of :meth:`invariants` (a conserved scalar per θ, as the flow records)."""
        return self.invariants(theta).sum(-1)

    def _layer_invariant(self, theta: torch.Tensor, layer: int) -> torch.Tensor:
        """``‖W^KQ_l‖² − ‖W^PV_l‖²`` over the active entries (conserved by the scaling
        symmetry of layer l, when the model has it)."""
        import torch

        d = self.dim_of(theta)
        act = torch.from_numpy(self.active_mask(d)).to(theta.device)
        kq, pv = self._layer_slices(d, layer)
        return ((theta[..., kq] ** 2 * act[kq]).sum(-1)
                - (theta[..., pv] ** 2 * act[pv]).sum(-1))

    def _layer_slices(self, d: int, layer: int) -> tuple[slice, slice]:
        """The slices of θ holding layer l's ``W^KQ`` and ``W^PV``."""
        blks = self.blocks(d)
        kq, pv = blks[2 * layer], blks[2 * layer + 1]
        return slice(kq.start, kq.stop), slice(pv.start, pv.stop)

    def fixed_subspace(self, d: int, group: CoordinateGroup,
                       free: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64] | None:
        """Orthonormal columns (n_params × m) spanning the θ fixed by ``group`` acting as
        ``(I_3 ⊗ D) M (I_3 ⊗ D)ᵀ`` on every 3d×3d block, supported on ``free``.

        Every d×d sub-block of a fixed θ is ``c I_d`` (signed permutations) or
        ``c I_d + c' (J_d − I_d)`` (permutations).  When the loss is invariant under the
        group (an :attr:`equivariant` model on a process with that group, exactly integrated),
        its gradient at a fixed θ is fixed too, so the gradient flow from a fixed θ stays in
        this subspace.  ``None``: the group is trivial, the model is not equivariant, a block
        is not 3d×3d, or ``free`` is not a union of the group's orbits of entries.
        """
        import numpy as np

        from ..process import CoordinateGroup

        if group is CoordinateGroup.TRIVIAL or not self.equivariant:
            return None
        n = self.n_params(d)
        eye = np.eye(d)
        patterns = [eye] if group is CoordinateGroup.SIGNED_PERMUTATIONS or d == 1 \
            else [eye, np.ones((d, d)) - eye]
        cols = []
        for blk in self.blocks(d):
            if blk.rows != 3 * d or blk.cols != 3 * d:
                return None
            for r in range(3):
                for c in range(3):
                    for pattern in patterns:
                        M = np.zeros((3 * d, 3 * d))
                        M[r * d:(r + 1) * d, c * d:(c + 1) * d] = pattern
                        v = np.zeros(n)
                        v[blk.start:blk.stop] = M.ravel()
                        on = v != 0
                        if free[on].all():
                            cols.append(v / np.linalg.norm(v))
                        elif free[on].any():
                            return None
        return np.stack(cols, axis=1) if cols else None

    def phase_parity_mask(self, d: int) -> npt.NDArray[np.bool_] | None:
        """The entries of θ that are odd under the phase reflection, or ``None`` when the model
        is not :attr:`phase_graded` or a block is not 3d×3d.

        ``λ ↦ −λ`` maps ``x_t`` to ``(−1)^{t−1} x_t`` and leaves every process's distribution
        unchanged (uniform phases, a Haar or rotation W, symmetric noise).  Give the stream's
        blocks the parities ``p = (1, 0, 1)`` (block 1 predicts ``x_{t+1}``, block 2 holds
        ``x_t``, block 3 ``x_{t−1}``) and call entry ``(r, c)`` of any ``W^KQ`` or ``W^PV``
        odd when ``p_r + p_c`` is.  Each term of ``u_t`` then carries the parity of its output
        block once the even entries change sign, so the exact loss is invariant under
        ``θ ↦ Rθ`` (``R`` negates the even entries, composed with each layer's scaling by −1
        it negates the odd ones), its gradient at a θ without even entries has none, and the
        gradient flow from such a θ (the layered diagonal init) keeps them at zero.  A sampled
        field is not invariant: its draws are not.
        """
        import numpy as np

        if not self.phase_graded:
            return None
        parity = np.repeat(np.array([1, 0, 1]), d)
        odd = (parity[:, None] + parity[None, :]) % 2 == 1
        out = []
        for blk in self.blocks(d):
            if blk.rows != 3 * d or blk.cols != 3 * d:
                return None
            out.append(odd.ravel())
        return np.concatenate(out)

    def symmetries(self, theta: Any) -> np.ndarray:
        """Tangent vectors at θ of the model's known continuous symmetries (orbits of equal
        loss for every data distribution), as columns (n_params × k); none by default."""
        return np.zeros((int(np.shape(theta)[-1]), 0))

    def symmetry_names(self, d: int) -> tuple[str, ...]:
        """One name per column of :meth:`symmetries`."""
        return ()


def _take(theta: Any, idx: np.ndarray) -> Any:
    if _is_tensor(theta):
        import torch

        return theta[..., torch.from_numpy(np.array(idx)).to(theta.device)]
    return np.asarray(theta)[..., idx]
