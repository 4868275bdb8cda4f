"""One interface for every population-loss vector field.

A field is the loss ``L(θ)`` of Eq. 2 over the flat θ (length 18d², see :mod:`mesadyn.model`)
together with its derivatives.  Subclasses implement :meth:`Field.loss` as a differentiable
torch function; the base class supplies the gradient, Hessian-vector products, the full Hessian
and the gradient-flow right-hand side ``−∇L`` by autodiff.  Subclasses may override any of them
with something faster.

Capabilities are declared, never probed: :attr:`Field.has_exact_hessian` says whether
:meth:`Field.hessian` is the exact Hessian at a cost fit for an implicit solver's Jacobian, and
:attr:`Field.has_jax_loss` whether :meth:`Field.jax_loss` gives a native JAX loss (otherwise it
raises :class:`CapabilityError`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from ..errors import MesadynError
from ..model import dim_of, n_params
from ..models import PAPER, Model
from ..process import Family
from ..progress import ProgressCallback

if TYPE_CHECKING:
    import jax
    import torch

#: A JAX loss ``θ ↦ L(θ)`` (float64 arrays).
JaxLoss = Callable[["jax.Array"], "jax.Array"]


class CapabilityError(MesadynError):
    """A field was asked for something it does not declare (e.g. a JAX loss)."""


class Field(ABC):
    """The population loss ``L(θ)`` and its derivatives (Eq. 2) for one process and T.

    Attributes: ``family`` (the initial-token distribution), ``d``, ``T``, ``device`` (where it
    evaluates; the CPU unless a subclass says otherwise) and ``name`` (``"exact"``, ``"mc"`` or
    ``"finite"``, for :meth:`describe`).

    Capabilities (class attributes): ``has_exact_hessian`` — :meth:`hessian` is exact and cheap
    enough to serve as the Jacobian of a stiff solver (the autodiff default is exact but holds
    the whole graph, so the base class says no); ``has_jax_loss`` — :meth:`jax_loss` works.
    """

    name: str = "field"
    has_exact_hessian: ClassVar[bool] = False
    has_jax_loss: ClassVar[bool] = False
    family: Family
    T: int
    #: The attention model whose loss this is (:mod:`mesadyn.models`; the paper's by default).
    model: Model = PAPER

    @property
    def device(self) -> torch.device:
        """Where the field's tensors live and its evaluations run: the CPU unless the subclass
        set another (a field that builds tensors on a device sets it; results come back on θ's
        device)."""
        import torch

        return self.__dict__.get("_device") or torch.device("cpu")

    @device.setter
    def device(self, value: torch.device) -> None:
        self.__dict__["_device"] = value

    @property
    def d(self) -> int:
        return self.family.d

    @property
    def n_params(self) -> int:
        return n_params(self.d) if self.model.is_paper else self.model.n_params(self.d)

    # ---- to implement --------------------------------------------------------------
    @abstractmethod
    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        """``L(θ)`` as a 0-d float64 tensor, differentiable in θ."""

    # ---- derived ---------------------------------------------------------------------
    def check_theta(self, theta: torch.Tensor) -> torch.Tensor:
        """θ as a float64 tensor of the right length with finite entries, else an error."""
        import torch

        theta = torch.as_tensor(theta, dtype=torch.float64)
        if not self.model.is_paper:
            self.model.check_theta(theta, self.d)
        elif theta.ndim != 1 or dim_of(theta) != self.d:
            raise MesadynError(
                f"θ must be a flat vector of length {self.n_params} (d={self.d}), "
                f"got shape {tuple(theta.shape)}"
            )
        if not torch.isfinite(theta).all():
            raise MesadynError("θ has non-finite entries")
        return theta

    def loss_and_grad(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L(θ), ∇L(θ))``, both detached."""
        import torch

        theta = self.check_theta(theta).detach().requires_grad_(True)
        with torch.enable_grad():
            value = self.loss(theta)
            (g,) = torch.autograd.grad(value, theta)
        return value.detach(), g.detach()

    def grad(self, theta: torch.Tensor) -> torch.Tensor:
        """``∇L(θ)``."""
        return self.loss_and_grad(theta)[1]

    def hvp(self, theta: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Hessian-vector product ``∇²L(θ) v`` by double backward."""
        import torch

        theta = self.check_theta(theta).detach().requires_grad_(True)
        v = torch.as_tensor(v, dtype=torch.float64)
        with torch.enable_grad():
            (g,) = torch.autograd.grad(self.loss(theta), theta, create_graph=True)
            (hv,) = torch.autograd.grad(g, theta, grad_outputs=v)
        return hv.detach()

    def batched_hvp(self, theta: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        """``∇²L(θ) v`` for every row ``v`` of ``V`` (r, n): :meth:`hvp` row by row (fields
        with a faster batched form override it)."""
        import torch

        return torch.stack([self.hvp(theta, v) for v in torch.as_tensor(V)])

    def hessian(self, theta: torch.Tensor) -> torch.Tensor:
        """The full Hessian ``∇²L(θ)`` (n × n for θ of n entries), symmetrised."""
        import torch

        theta = self.check_theta(theta).detach()
        H = torch.autograd.functional.hessian(self.loss, theta, vectorize=True)
        return 0.5 * (H + H.T)

    def rhs(self, t: float, theta: torch.Tensor) -> torch.Tensor:
        """Gradient-flow right-hand side ``dθ/dτ = −∇L(θ)``."""
        return -self.grad(theta)

    def prepare(self, progress: ProgressCallback | None = None) -> None:
        """Do any costly θ-independent work now rather than on first use (a sampled field's
        polynomial build), reporting the fraction done to ``progress``; nothing by default."""
        return None

    def memory_bytes(self) -> int:
        """Bytes this field holds (tensors, caches); what the reuse cache counts (0 here)."""
        return 0

    def jax_loss(self) -> JaxLoss:
        """A jit-compiled JAX function ``θ ↦ L(θ)`` (only where ``has_jax_loss``).

        Raises:
            CapabilityError: this field has no native JAX loss.
        """
        raise CapabilityError(f"the {self.name} field has no JAX loss")

    def describe(self) -> dict[str, object]:
        """JSON-ready configuration of this field (for provenance); the model's description
        (``model``, ``layers``) when it is not the paper's."""
        out = {"field": self.name, "T": self.T, **self.family.describe()}
        return out if self.model.is_paper else {**out, **self.model.describe()}
