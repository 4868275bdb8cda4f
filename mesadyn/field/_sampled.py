"""The abstract sampled field: Eq. 2 with E replaced by the mean over fixed draws.

:class:`SampledField` holds ``m`` draws ``(x_1, λ)`` and evaluates the mean per-sequence loss by
the AR fast path :meth:`mesadyn.model.ARBatch.sequence_loss`, with the backward pass run chunk
by chunk in bounded memory.  The final subclasses differ in what the draws mean:
:class:`~mesadyn.field.FiniteField` (the paper's training set, Section 6) and
:class:`~mesadyn.field.MonteCarloField` (an estimate of the population loss, with standard
errors).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator

import torch

from ..errors import MesadynError
from ..model import ARBatch
from ..process import Family
from ..theory import check_T
from ._base import Field

#: Precomputed θ-independent data (:class:`~mesadyn.model.ARBatch`) is kept up to this size.
CACHE_BYTES = 2**31


class SampledField(Field):
    """Mean of the per-sequence loss over fixed draws ``(x_1, λ)``, in polynomial or direct form.

    Attributes: ``x1`` (m, d) float64, ``lam`` (m, d) complex128, ``m``, ``chunk`` (sequences
    per chunk of the direct path), ``device``, ``form`` (:class:`Form`, never AUTO once built)
    and ``form_choice`` (the cost model's :class:`FormChoice`).  The direct path keeps its
    θ-independent prefix Gram matrices while they fit in :data:`CACHE_BYTES`; the polynomial
    form builds Ĝ, Ĉ on first use (or :meth:`build`).
    """

    has_exact_hessian = True

    def __init__(self, family: Family, T: int, x1: torch.Tensor, lam: torch.Tensor,
                 device: torch.device | str | None = None, chunk: int | None = None,
                 form: Form | str = Form.AUTO) -> None:
        self.family = family
        self.T = check_T(T)
        self.device = torch.device(device) if device is not None else x1.device
        self.x1 = x1.to(self.device, torch.float64)
        self.lam = lam.to(self.device, torch.complex128)
        self.m = int(self.x1.shape[0])
        d = family.d
        per_seq = 16 * (self.T * d * d + 3 * self.T * d)
        self.chunk = chunk or max(1, min(self.m, 2**27 // per_seq))
        self._batches: list[ARBatch] | None = [] if per_seq * self.m <= CACHE_BYTES else None
        try:
            want = Form(form)
        except ValueError:
            raise MesadynError(
                f"unknown form {form!r}; choose one of {', '.join(Form)}") from None
        self.form_choice = choose_form(d, self.T, self.m)
        if want is Form.POLYNOMIAL and self.form_choice.build_bytes > memory_budget().bytes:
            b = memory_budget()
            raise MesadynError(
                f"the polynomial form of the sampled field for d={d} needs about "
                f"{self.form_choice.build_bytes / 2**30:.2g} GiB, more than the "
                f"{b.bytes / 2**30:.2g} GiB available ({b.source}); use form='direct'")
        self.form = self.form_choice.form if want is Form.AUTO else want
        self._poly: EmpiricalPolynomial | None = None

    # ---- the polynomial form ---------------------------------------------------------------
    def build(self, progress: Callable[[float], None] | None = None) -> EmpiricalPolynomial:
        """The polynomial form (Ĝ, Ĉ built from the draws on first call, then kept).

        Arguments:
            progress: called with the fraction of draws processed (for a progress bar).

        Returns:
            The :class:`~mesadyn.field._empirical.EmpiricalPolynomial` this field delegates to
            when ``form`` is POLYNOMIAL (it may be built for a DIRECT field too, e.g. to
            compare).
        """
        if self._poly is None:
            from ._empirical import EmpiricalPolynomial, build_moments

            moments = build_moments(self.x1, self.lam, self.T, progress=progress)
            self._poly = EmpiricalPolynomial(self.family, self.T, moments)
        return self._poly

    @property
    def built(self) -> bool:
        """Whether the polynomial form has been built."""
        return self._poly is not None

    def _polynomial(self) -> EmpiricalPolynomial | None:
        return self.build() if self.form is Form.POLYNOMIAL else None

    @abstractmethod
    def options(self) -> dict[str, object]:
        """The options that fixed the draws (for :meth:`describe`)."""

    def _batch(self, start: int, stop: int) -> ARBatch:
        if self._batches is not None and start % self.chunk == 0 and stop - start == min(
            self.chunk, self.m - start
        ):
            k = start // self.chunk
            while len(self._batches) <= k:
                lo = len(self._batches) * self.chunk
                hi = min(lo + self.chunk, self.m)
                self._batches.append(ARBatch(self.x1[lo:hi], self.lam[lo:hi], self.T))
            return self._batches[k]
        return ARBatch(self.x1[start:stop], self.lam[start:stop], self.T)

    def _chunks(self, lo: int = 0, hi: int | None = None) -> Iterator[ARBatch]:
        hi = self.m if hi is None else hi
        for start in range(lo, hi, self.chunk):
            yield self._batch(start, min(start + self.chunk, hi))

    def per_sequence_loss(self, theta: torch.Tensor) -> torch.Tensor:
        """The Eq. 2 summand of every sequence: shape (m,), or (k, m) for a batch of θ."""
        th = theta.to(self.device)
        return torch.cat([b.sequence_loss(th) for b in self._chunks()], dim=-1)

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        """The mean of :meth:`per_sequence_loss` (Eq. 2 with the sample mean for E)."""
        return self.per_sequence_loss(theta).mean().to(theta.device)

    def batch_loss(self, thetas: torch.Tensor) -> torch.Tensor:
        """``L(θ_i)`` for a batch of θ, shape (k, 18d²) -> (k,), reading the data once."""
        return self.per_sequence_loss(thetas).mean(-1).to(thetas.device)

    def loss_and_grad(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L, ∇L)`` with the backward pass run chunk by chunk (bounded memory)."""
        theta = self.check_theta(theta)
        loss, grad = self.batch_loss_and_grad(theta[None])
        return loss[0], grad[0]

    def batch_loss_and_grad(self, thetas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L(θ_i), ∇L(θ_i))`` for a batch of θ (k, 18d²), chunk by chunk: the θ-independent
        prefix Grams of each chunk are read once for all k (GD runs on one training set)."""
        thetas = torch.as_tensor(thetas, dtype=torch.float64)
        if thetas.ndim != 2 or thetas.shape[0] < 1:
            raise MesadynError(f"a batch of θ must have shape (k, {self.n_params}), k >= 1, "
                               f"got {tuple(thetas.shape)}")
        for theta in thetas:
            self.check_theta(theta)
        th = thetas.detach().to(self.device).requires_grad_(True)
        total = torch.zeros(th.shape[0], dtype=torch.float64, device=self.device)
        grad = torch.zeros_like(th)
        with torch.enable_grad():
            for b in self._chunks():
                part = b.sequence_loss(th).sum(-1) / self.m
                (g,) = torch.autograd.grad(part.sum(), th)
                total += part.detach()
                grad += g
        return total.to(thetas.device), grad.to(thetas.device)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), **self.options(), "form": str(self.form)}
