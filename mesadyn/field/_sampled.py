"""The abstract sampled fields: Eq. 2 with E replaced by the mean over fixed draws.

:class:`DrawnField` is what every sampled field shares; a subclass says only how its draws are
stored and chunked.  :class:`SampledField` holds ``m`` draws ``(x_1, λ)`` of the paper's process;
:class:`~mesadyn.field.SequenceField` (:mod:`mesadyn.field._sequences`) whole sequences of the
processes beyond it.  Either evaluates the sampled loss in one of two forms, chosen once per field
by a cost model (:func:`._forms.choose_form`, ``docs/sampled-fields.md``):

* **polynomial** — the empirical moment tensors Ĝ, Ĉ are built once from the draws
  (:mod:`mesadyn.field._empirical`); loss, gradient, HVP and Hessian are then
  :class:`~mesadyn.field.ExactField`'s contractions, in ``O((2d)⁶)`` whatever ``m`` and T;
* **direct** — the per-sequence loss chunk by chunk (for :class:`SampledField` the AR fast path
  :meth:`._ar_kernels.ARBatch.sequence_loss`: prefix sums, ``O(m T d²)`` per evaluation), with
  backward passes and Hessian-vector products run chunk by chunk in bounded memory.

Both are exact for the given draws (they agree to rounding, tested to 1e-12), so the Hessian is
exact either way and ``has_exact_hessian`` is True.  The final subclasses differ in what the
draws mean: :class:`~mesadyn.field.FiniteField` (the paper's training set, Section 6) and
:class:`~mesadyn.field.MonteCarloField` (an estimate of the population loss, with batch-means
standard errors, :meth:`DrawnField.batch_means`).  The batch methods (several θ at once, for GD
runs on one training set) always use the direct path.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ..budget import CACHE_BYTES as _CACHE_BYTES
from ..budget import Estimate as _Estimate
from ..budget import check as _check_size
from ..budget import sampled_field as _sampled_field_estimate
from ..errors import MesadynError, check_int
from ..model import active_mask
from ..process import Family
from ..progress import ProgressCallback
from ..theory import check_T
from ._ar_kernels import ARBatch, single_coordinate
from ._base import Field
from ._device import check_device, check_fits, device_free_bytes
from ._forms import (
    Form,
    FormChoice,
    choose_form,
    default_chunk,
    device_bytes,
    sequence_bytes,
)
from ._memory import memory_budget

if TYPE_CHECKING:
    from ._empirical import EmpiricalMoments, EmpiricalPolynomial

#: Precomputed θ-independent data (:class:`~._ar_kernels.ARBatch`) is kept up to this size
#: (and half the memory budget: :data:`mesadyn.budget.CACHE_BYTES`).
CACHE_BYTES = _CACHE_BYTES
#: Hessian-vector products batched together (vmap over the backward pass) in the direct path.
HVP_BATCH = 16

__all__ = ["CACHE_BYTES", "HVP_BATCH", "DrawnField", "Estimate", "MonteCarloDraws", "PieceLoss",
           "SampledField", "check_batches", "check_draws_fit"]


def check_draws_fit(d: int, n: int, *, what: str = "draws", T: int | None = None,
                    device: torch.device | str | None = None) -> None:
    """Refuse, before allocating, ``n`` draws ``(x_1, λ)`` that do not fit in memory: the one
    size guard (:func:`mesadyn.budget.check`) on the field's estimate.

    Raises:
        MesadynError: the draws (``24 n d`` bytes: x_1 float64, λ complex128) and, given ``T``,
            two chunks of the direct path (:func:`mesadyn.budget.sampled_field_bytes`) exceed
            the memory budget (:func:`~mesadyn.field.memory_budget`: machine, ``ulimit -v``,
            cgroup) or, on a device other than the CPU, the device's free memory.
    """
    dev = check_device(device)
    if T is None:
        est = _Estimate(f"{n} {what} at d={d}", 0, 24 * n * d, str(dev),
                        advice=f"use fewer {what}")
    else:
        est = _sampled_field_estimate(d, T, n, what=what, device=str(dev), cached=False)
    _check_size(est)


#: A chunk's per-sequence loss ``θ ↦ (Eq. 2 summand of each of its sequences)``, shape (n,).
PieceLoss = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Estimate:
    """A Monte-Carlo estimate with its standard errors (batch means)."""

    loss: torch.Tensor
    loss_se: torch.Tensor
    grad: torch.Tensor
    grad_se: torch.Tensor
    samples: int
    batches: int


def check_batches(samples: int, batches: int) -> tuple[int, int]:
    """``(samples, batches)`` of a Monte-Carlo field, checked: both >= 2, samples >= batches.

    Raises:
        MesadynError: either is not an integer >= 2, or there are fewer samples than batches.
    """
    samples = check_int("samples", samples, 2)
    batches = check_int("batches", batches, 2)
    if samples < batches:
        raise MesadynError(f"samples must be >= batches={batches}, got samples={samples}")
    return samples, batches


class DrawnField(Field):
    """Mean of the Eq. 2 summand over ``m`` fixed draws, in polynomial or direct form.

    The shared part of :class:`SampledField` (draws ``(x_1, λ)``) and
    :class:`~mesadyn.field.SequenceField` (whole sequences): the dispatch between the polynomial
    form (:class:`~mesadyn.field._empirical.EmpiricalPolynomial`) and the direct path, and the
    direct path itself (loss, gradient, Hessian-vector products, Hessian, the batch methods and
    batch-means estimates), backward chunk by chunk in bounded memory.  A subclass says how its
    draws are stored and chunked:

    * :meth:`_pieces` — the per-sequence losses, one callable per chunk (the direct path);
    * :meth:`_moments` — the empirical moments Ĝ, Ĉ, ĉ of the draws (the polynomial form);
    * :meth:`options` — the options that fixed the draws (for :meth:`describe`);

    and, after this constructor (``family``, ``T``, ``m``), sets ``chunk``, ``device`` and, by
    :meth:`_set_form`, ``form`` and ``form_choice``.
    """

    has_exact_hessian = True
    #: The number of draws (sequences).
    m: int
    #: Sequences per chunk of the direct path.
    chunk: int
    #: The form in use (never AUTO once built) and the cost model's choice.
    form: Form
    form_choice: FormChoice
    _poly: EmpiricalPolynomial | None = None

    def __init__(self, family: Family, T: int, m: int) -> None:
        self.family = family
        self.T = check_T(T)
        self.m = m

    # ---- to implement --------------------------------------------------------------------
    @abstractmethod
    def _pieces(self, lo: int = 0, hi: int | None = None) -> Iterator[PieceLoss]:
        """The per-sequence losses of sequences ``lo..hi−1`` (default all), chunk by chunk."""

    @abstractmethod
    def _moments(self, progress: ProgressCallback | None) -> EmpiricalMoments:
        """Ĝ, Ĉ, ĉ of the draws (:mod:`mesadyn.field._empirical`), reporting to ``progress``."""

    @abstractmethod
    def options(self) -> dict[str, object]:
        """The options that fixed the draws (for :meth:`describe`)."""

    def process(self) -> dict[str, object]:
        """The process beyond the family, for :meth:`describe` (none here)."""
        return {}

    # ---- the form ------------------------------------------------------------------------
    def _set_form(self, form: Form | str, free: int | None = None, single: int = 0) -> None:
        """Set ``form_choice`` (:func:`choose_form` for ``m`` draws, ``single`` of them with one
        nonzero entry of ``x_1``, within ``free`` device bytes off the CPU) and ``form``
        (``form``, or the choice where it is AUTO).

        Raises:
            MesadynError: an unknown form, or (on the CPU) the polynomial form asked for where
                its tensors exceed the memory budget.
        """
        try:
            want = Form(form)
        except ValueError:
            raise MesadynError(
                f"unknown form {form!r}; choose one of {', '.join(Form)}") from None
        self.form_choice = choose_form(self.d, self.T, self.m, single=single,
                                       budget_bytes=free)
        if want is Form.POLYNOMIAL and free is None and (
                self.form_choice.build_bytes > memory_budget().bytes):
            b = memory_budget()
            raise MesadynError(
                f"the polynomial form of the sampled field for d={self.d} needs about "
                f"{self.form_choice.build_bytes / 2**30:.2g} GiB, more than the "
                f"{b.bytes / 2**30:.2g} GiB available ({b.source}); use form='direct'")
        self.form = self.form_choice.form if want is Form.AUTO else want

    # ---- the polynomial form ---------------------------------------------------------------
    def build(self, progress: ProgressCallback | None = None) -> EmpiricalPolynomial:
        """The polynomial form (Ĝ, Ĉ, ĉ built from the draws on first call, then kept).

        Arguments:
            progress: called with the fraction of draws processed (for a progress bar).

        Returns:
            The :class:`~mesadyn.field._empirical.EmpiricalPolynomial` this field delegates to
            when ``form`` is POLYNOMIAL (it may be built for a DIRECT field too, e.g. to
            compare).
        """
        if self._poly is None:
            from ._empirical import EmpiricalPolynomial

            self._poly = EmpiricalPolynomial(self.family, self.T, self._moments(progress))
        return self._poly

    def prepare(self, progress: ProgressCallback | None = None) -> None:
        """Build the polynomial form now if this field uses it (with ``progress``)."""
        if self.form is Form.POLYNOMIAL:
            self.build(progress)

    @property
    def built(self) -> bool:
        """Whether the polynomial form has been built."""
        return self._poly is not None

    def _polynomial(self) -> EmpiricalPolynomial | None:
        return self.build() if self.form is Form.POLYNOMIAL else None

    # ---- the loss and its derivatives: polynomial or direct --------------------------------
    def per_sequence_loss(self, theta: torch.Tensor) -> torch.Tensor:
        """The Eq. 2 summand of every sequence, shape (m,)."""
        th = theta.to(self.device)
        return torch.cat([piece(th) for piece in self._pieces()])

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        """The sampled loss (Eq. 2 with the sample mean for E), differentiable in θ."""
        poly = self._polynomial()
        if poly is not None:
            return poly.loss(theta)
        return self.per_sequence_loss(theta).mean().to(theta.device)

    def loss_and_grad(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L, ∇L)``: the polynomial's closed forms, or the direct path with the backward pass
        run chunk by chunk (bounded memory)."""
        poly = self._polynomial()
        if poly is not None:
            return poly.loss_and_grad(theta)
        return self.direct_loss_and_grad(theta)

    def hvp(self, theta: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``∇²L v``: the polynomial's closed form, or chunked double backward (direct)."""
        poly = self._polynomial()
        if poly is not None:
            return poly.hvp(theta, v)
        return self.direct_hvp(theta, v)

    def hessian(self, theta: torch.Tensor) -> torch.Tensor:
        """The full Hessian (18d² × 18d²): the polynomial's closed-form blocks, or (direct) the
        active rows by batched Hessian-vector products, chunk by chunk."""
        poly = self._polynomial()
        if poly is not None:
            return poly.hessian(theta)
        return self.direct_hessian(theta)

    # ---- the direct path -----------------------------------------------------------------
    def _mean_part(self, part: torch.Tensor, n: int) -> torch.Tensor:
        """A chunk's share ``part / n`` of the mean over ``n`` sequences in
        :meth:`_range_loss_and_grad`."""
        return part / n

    def _range_loss_and_grad(self, th: torch.Tensor, lo: int, hi: int
                             ) -> tuple[torch.Tensor, torch.Tensor]:
        """The mean of the summands of sequences ``lo..hi−1`` and its gradient at ``th`` (on
        the field's device), backward chunk by chunk."""
        th = th.detach().requires_grad_(True)
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        grad = torch.zeros_like(th)
        with torch.enable_grad():
            for piece in self._pieces(lo, hi):
                part = self._mean_part(piece(th).sum(), hi - lo)
                (g,) = torch.autograd.grad(part, th)
                total += part.detach()
                grad += g
        return total, grad

    def direct_loss_and_grad(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L, ∇L)`` by the direct path, the backward pass chunk by chunk (bounded memory)."""
        theta = self.check_theta(theta)
        value, grad = self._range_loss_and_grad(theta.to(self.device), 0, self.m)
        return value.to(theta.device), grad.to(theta.device)

    def direct_hvp(self, theta: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``∇²L v`` by double backward through the direct path, chunk by chunk."""
        theta = self.check_theta(theta)
        vv = torch.as_tensor(v, dtype=torch.float64).to(self.device)
        if vv.shape != theta.shape:
            raise MesadynError(f"v must have shape {tuple(theta.shape)}, got {tuple(vv.shape)}")
        th = theta.detach().to(self.device).requires_grad_(True)
        out = torch.zeros_like(th)
        with torch.enable_grad():
            for piece in self._pieces():
                (g,) = torch.autograd.grad(piece(th).sum() / self.m, th, create_graph=True)
                (hv,) = torch.autograd.grad(g, th, grad_outputs=vv)
                out += hv
        return out.detach().to(theta.device)

    def direct_hessian(self, theta: torch.Tensor) -> torch.Tensor:
        """The Hessian through the direct path: the rows of the active entries by batched
        double backward per chunk (inactive rows and columns are exactly 0)."""
        theta = self.check_theta(theta)
        th = theta.detach().to(self.device).requires_grad_(True)
        idx = torch.from_numpy(active_mask(self.d)).nonzero().squeeze(1).to(self.device)
        E = torch.zeros(idx.numel(), th.numel(), dtype=torch.float64, device=self.device)
        E[torch.arange(idx.numel(), device=self.device), idx] = 1.0
        rows = torch.zeros_like(E)
        with torch.enable_grad():
            for piece in self._pieces():
                (g,) = torch.autograd.grad(piece(th).sum() / self.m, th, create_graph=True)
                for lo in range(0, idx.numel(), HVP_BATCH):  # bounded: HVP_BATCH graphs at once
                    hi = min(lo + HVP_BATCH, idx.numel())
                    (h,) = torch.autograd.grad(g, th, grad_outputs=E[lo:hi],
                                               is_grads_batched=True, retain_graph=True)
                    rows[lo:hi] += h
        H = torch.zeros(th.numel(), th.numel(), dtype=torch.float64, device=self.device)
        H[idx] = rows
        H = 0.5 * (H + H.T)  # symmetrised; rows and columns of inactive entries stay 0
        return H.to(theta.device)

    # ---- several θ at once (the GD protocol), always the direct path -------------------------
    def batch_loss(self, thetas: torch.Tensor) -> torch.Tensor:
        """``L(θ_i)`` for a batch of θ on the same draws, shape (k, 18d²) -> (k,), by the direct
        path whatever the form (the GD protocol's numbers do not depend on the cost model)."""
        with torch.no_grad():
            return torch.stack([self.per_sequence_loss(t).mean() for t in thetas]
                               ).to(thetas.device)

    def batch_loss_and_grad(self, thetas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L(θ_i), ∇L(θ_i))`` for a batch of θ (k, 18d²) on the same draws, chunk by chunk,
        by the direct path whatever the form (GD runs on one training set share the draws and
        their prefix Grams)."""
        thetas = torch.as_tensor(thetas, dtype=torch.float64)
        if thetas.ndim != 2 or thetas.shape[0] < 1:
            raise MesadynError(f"a batch of θ must have shape (k, {self.n_params}), k >= 1, "
                               f"got {tuple(thetas.shape)}")
        for theta in thetas:
            self.check_theta(theta)
        ths = [t.detach().to(self.device).requires_grad_(True) for t in thetas]
        total = torch.zeros(len(ths), dtype=torch.float64, device=self.device)
        grad = torch.zeros(thetas.shape, dtype=torch.float64, device=self.device)
        with torch.enable_grad():
            for piece in self._pieces():  # each chunk once for all θ of the batch
                # one θ at a time: broadcasting the batch through the small per-sequence
                # matrix products costs more than it saves on the CPU (measured: 0.7x)
                for i, th in enumerate(ths):
                    part = piece(th).sum() / self.m
                    (g,) = torch.autograd.grad(part, th)
                    total[i] += part.detach()
                    grad[i] += g
        return total.to(thetas.device), grad.to(thetas.device)

    def batch_means(self, theta: torch.Tensor, batches: int) -> Estimate:
        """Loss and gradient with standard errors from ``batches`` batch means (direct path):
        the draws split into ``batches`` near-equal consecutive batches, ``se = std / √B``."""
        theta = self.check_theta(theta)
        th = theta.detach().to(self.device)
        edges = torch.linspace(0, self.m, batches + 1).round().long().tolist()
        spans = list(zip(edges[:-1], edges[1:], strict=True))
        parts = [self._range_loss_and_grad(th, lo, hi) for lo, hi in spans]
        L = torch.stack([p[0] for p in parts])
        G = torch.stack([p[1] for p in parts])
        w = torch.tensor([hi - lo for lo, hi in spans], dtype=torch.float64,
                         device=self.device) / self.m
        dev = theta.device
        return Estimate((w * L).sum().to(dev), (L.std(unbiased=True) / batches**0.5).to(dev),
                        (w[:, None] * G).sum(0).to(dev),
                        (G.std(dim=0, unbiased=True) / batches**0.5).to(dev), self.m, batches)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), **self.options(), **self.process(),
                "form": str(self.form)}


class MonteCarloDraws(DrawnField):
    """A drawn field read as a Monte-Carlo estimate of the population loss: its ``m`` draws
    are ``samples`` from ``seed``, and :meth:`estimate` gives standard errors from ``batches``
    batch means.  Mixed into :class:`~mesadyn.field.MonteCarloField` and
    :class:`~mesadyn.field.MonteCarloSequenceField` (which set ``seed`` and ``batches``)."""

    name = "mc"
    seed: int
    batches: int

    def estimate(self, theta: torch.Tensor) -> Estimate:
        """Loss and gradient with standard errors from ``batches`` batch means (direct path)."""
        return self.batch_means(theta, self.batches)

    def options(self) -> dict[str, object]:
        return {"samples": self.m, "seed": self.seed, "batches": self.batches}


class SampledField(DrawnField):
    """Mean of the per-sequence loss over fixed draws ``(x_1, λ)``, in polynomial or direct form.

    Attributes: ``x1`` (m, d) float64, ``lam`` (m, d) complex128, ``m``, ``chunk`` (sequences
    per chunk of the direct path), ``device``, ``form`` (:class:`Form`, never AUTO once built),
    ``form_choice`` (the cost model's :class:`FormChoice`) and ``device_estimate`` (bytes on the
    device, :func:`device_bytes`).  The direct path keeps its θ-independent prefix Gram
    matrices while they fit in :data:`CACHE_BYTES` and in half the memory budget (off the CPU,
    in the device's free memory); the polynomial form builds Ĝ, Ĉ on first use (or :meth:`build`).

    Raises:
        MesadynError: an unknown form, a device this machine does not have, or, off the CPU, a
            field whose estimate exceeds the device's free memory (the message gives both),
            before the draws are moved or a chunk is built.
    """

    def __init__(self, family: Family, T: int, x1: torch.Tensor, lam: torch.Tensor,
                 device: torch.device | str | None = None, chunk: int | None = None,
                 form: Form | str = Form.AUTO) -> None:
        super().__init__(family, T, int(x1.shape[0]))
        self.device = check_device(device) if device is not None else x1.device
        d = family.d
        per_seq = sequence_bytes(d, self.T)
        self.chunk = chunk or default_chunk(d, self.T, self.m)
        # off the CPU the polynomial's build and the cached batches must fit the device
        free = None if self.device.type == "cpu" else device_free_bytes(self.device)[0]
        self._set_form(form, free, single=int(single_coordinate(x1).sum()))
        room = memory_budget().bytes // 2 if free is None else free
        cached = per_seq * self.m <= CACHE_BYTES and device_bytes(
            d, self.T, self.m, chunk=self.chunk, form=self.form, cached=True) <= room
        self.device_estimate = device_bytes(d, self.T, self.m, chunk=self.chunk,
                                            form=self.form, cached=cached)
        check_fits(self.device_estimate, self.device,
                   f"the {self.name} field for {family.name} d={d} T={self.T} with m={self.m} "
                   f"draws ({self.form} form, chunks of {self.chunk})",
                   "use fewer draws, form='direct' or device='cpu'")
        self.x1 = x1.to(self.device, torch.float64)
        self.lam = lam.to(self.device, torch.complex128)
        self._batches: list[ARBatch] | None = [] if cached else None

    def _moments(self, progress: ProgressCallback | None) -> EmpiricalMoments:
        from ._empirical import build_moments

        return build_moments(self.x1, self.lam, self.T, progress=progress)

    def memory_bytes(self) -> int:
        """The draws, the cached prefix Grams of the direct path and the polynomial's tensors."""
        total = self.x1.numel() * 8 + self.lam.numel() * 16
        total += sum(b.nbytes() for b in self._batches or [])
        return total + (self._poly.nbytes if self._poly is not None else 0)

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
        """The :class:`~._ar_kernels.ARBatch` of each chunk of draws ``lo..hi−1``."""
        hi = self.m if hi is None else hi
        for start in range(lo, hi, self.chunk):
            yield self._batch(start, min(start + self.chunk, hi))

    def _pieces(self, lo: int = 0, hi: int | None = None) -> Iterator[PieceLoss]:
        """The AR fast path :meth:`~._ar_kernels.ARBatch.sequence_loss` of each chunk."""
        for b in self._chunks(lo, hi):
            yield b.sequence_loss
