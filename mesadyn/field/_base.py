"""One interface for every population-loss vector field.

A field is the loss ``L(θ)`` of Eq. 2 over the flat θ (length 18d², see :mod:`mesadyn.model`)
together with its derivatives.  Subclasses implement :meth:`Field.loss` as a differentiable
torch function; the base class supplies the gradient, Hessian-vector products, the full Hessian
and the gradient-flow right-hand side ``−∇L`` by autodiff.  Subclasses may override any of them
with something faster.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from ..errors import MesadynError
from ..model import dim_of, n_params
from ..process import Family


class Field(ABC):
    """The population loss ``L(θ)`` and its derivatives (Eq. 2) for one process and T.

    Attributes: ``family`` (the initial-token distribution), ``d``, ``T`` and ``name``
    (``"exact"``, ``"mc"`` or ``"finite"``).
    """

    name: str = "field"
    family: Family
    T: int

    @property
    def d(self) -> int:
        return self.family.d

    @property
    def n_params(self) -> int:
        return n_params(self.d)

    # ---- to implement --------------------------------------------------------------
    @abstractmethod
    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        """``L(θ)`` as a 0-d float64 tensor, differentiable in θ."""

    # ---- derived ---------------------------------------------------------------------
    def check_theta(self, theta: torch.Tensor) -> torch.Tensor:
        """θ as a float64 tensor of the right length with finite entries, else an error."""
        theta = torch.as_tensor(theta, dtype=torch.float64)
        if theta.ndim != 1 or dim_of(theta) != self.d:
            raise MesadynError(
                f"θ must be a flat vector of length {self.n_params} (d={self.d}), "
                f"got shape {tuple(theta.shape)}"
            )
        if not torch.isfinite(theta).all():
            raise MesadynError("θ has non-finite entries")
        return theta

    def loss_and_grad(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L(θ), ∇L(θ))``, both detached."""
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
        theta = self.check_theta(theta).detach().requires_grad_(True)
        v = torch.as_tensor(v, dtype=torch.float64)
        with torch.enable_grad():
            (g,) = torch.autograd.grad(self.loss(theta), theta, create_graph=True)
            (hv,) = torch.autograd.grad(g, theta, grad_outputs=v)
        return hv.detach()

    def hessian(self, theta: torch.Tensor) -> torch.Tensor:
        """The full Hessian ``∇²L(θ)`` (18d² × 18d²), symmetrised."""
        theta = self.check_theta(theta).detach()
        H = torch.autograd.functional.hessian(self.loss, theta, vectorize=True)
        return 0.5 * (H + H.T)

    def rhs(self, t: float, theta: torch.Tensor) -> torch.Tensor:
        """Gradient-flow right-hand side ``dθ/dτ = −∇L(θ)``."""
        return -self.grad(theta)

    def describe(self) -> dict[str, object]:
        """JSON-ready configuration of this field (for provenance)."""
        return {"field": self.name, "T": self.T, **self.family.describe()}
