"""Sampled fields over general sequences: Eq. 2 with E replaced by the mean over fixed draws
of whole sequences ``x_1..x_T``.

The fields of :mod:`mesadyn.field._sampled` hold draws ``(x_1, λ)`` of the paper's diagonal
``W = r·diag(λ)``.  The processes beyond it (DESIGN.md §6) — block-diagonal real rotations
(d even), Haar-random unitary ``W`` and the noisy AR process ``x_{t+1} = W x_t + ε_t`` — are
known only by their sampler :func:`mesadyn.process.sample_sequences`.  :class:`SequenceField`
averages the per-sequence loss (:func:`mesadyn.model.sequence_loss`, Eq. 2) over ``m`` such
sequences, with common random numbers: the draws are fixed by the seed (block ``b`` of
:data:`DRAW_BLOCK` sequences from its own generator), kept in memory while they fit
(:data:`KEEP_BYTES`) and regenerated from the seed block by block otherwise, so every
evaluation sees the same sequences.

Like :class:`~mesadyn.field.SampledField` it evaluates in one of two forms (the same cost model,
:func:`~mesadyn.field.choose_form`):

* **polynomial** — the empirical moment tensors Ĝ, Ĉ, ĉ built once from the sequences
  (:func:`mesadyn.field._empirical.build_sequence_moments`: the rows
  ``u^t_{αβγ} = (1/(t−1)) Σ_{i≤t} e_{iα} ē_{iβ} e_{tγ}`` hold for any sequence), then
  :class:`~mesadyn.field.ExactField`'s contractions for loss, gradient, HVP and Hessian;
* **direct** — Eq. 1 by prefix sums, ``O(m T d²)``: through the θ-independent prefix Grams of
  each chunk (:class:`SequenceBatch`, cached while they fit in :data:`BATCH_CACHE_BYTES`), else
  :func:`mesadyn.model.sequence_loss` on the sequences; the backward passes run chunk by chunk in
  bounded memory.

Both are exact for the given draws (they agree to rounding, tested), so ``has_exact_hessian``
is True.  :class:`MonteCarloSequenceField` estimates the population loss with batch-means
standard errors (as :class:`~mesadyn.field.MonteCarloField`); :class:`FiniteSequenceField` is a
training set (Section 6's protocol on these processes).  On the paper's process (diagonal W, no
noise) and ``m <= DRAW_BLOCK`` the draws are those of :class:`~mesadyn.field.FiniteField` and
:class:`~mesadyn.field.MonteCarloField` with the same seed, and the numbers agree to rounding.
"""

from __future__ import annotations

import functools
from abc import abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, final

import numpy as np
import torch

from ..errors import MesadynError, check_int
from ..model import P_and_A, active_mask, embed, sequence_loss
from ..process import (
    Family,
    Rotation,
    check_noise,
    check_radius,
    check_rotation,
    default_device,
    make_generator,
    sample_sequences,
)
from ..theory import check_T
from ._base import Field
from ._memory import memory_budget
from ._sampled import HVP_BATCH, Form, FormChoice, choose_form
from .montecarlo import Estimate

if TYPE_CHECKING:
    from ._empirical import EmpiricalPolynomial

#: Sequences drawn from one generator: block 0 from ``seed`` itself (so a set of at most this
#: many is the diagonal fields' draws), block ``b >= 1`` from :func:`block_seed`.  Part of the
#: numbers: changing it changes the draws of larger sets.
DRAW_BLOCK = 8192
#: The draws are kept in memory up to this many bytes (and half the memory budget); beyond it
#: they are regenerated from the seed, block by block, on every pass.
KEEP_BYTES = 2**30
#: Bytes of one chunk of the direct path's autograd graph (bounds its memory).
CHUNK_GRAPH_BYTES = 2**27
#: The direct path keeps every sequence's θ-independent prefix Grams (:class:`SequenceBatch`)
#: up to this many bytes (and a quarter of the memory budget); beyond it each evaluation runs
#: :func:`mesadyn.model.sequence_loss` on the sequences instead.
BATCH_CACHE_BYTES = 2**31

#: A per-sequence loss ``θ ↦ (Eq. 2 summand of each sequence of a chunk)``.
PieceLoss = Callable[[torch.Tensor], torch.Tensor]


def _sequence_loss_of(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """:func:`mesadyn.model.sequence_loss` with the sequences first (for ``partial``)."""
    return sequence_loss(theta, x)


@dataclass(frozen=True)
class SequenceBatch:
    """The θ-independent parts of Eq. 2 for fixed sequences, t = 2..T−1: the prefix Grams
    ``M_t = Σ_{i≤t} e_i e_iᴴ`` (``M``, complex (n, T−2, 2d, 2d)), ``e_t / (t−1)`` (``et``,
    (n, T−2, 2d)) and the targets ``x_{t+1}`` (``target``, (n, T−2, d)); then
    ``ŷ_t = P M_t A e_t / (t−1)`` (Eq. 1) costs ``O(d²)`` per token and the backward pass never
    differentiates through the prefix sums (about twice as fast as
    :func:`mesadyn.model.sequence_loss`, which recomputes them with θ; measured at d = 5,
    T = 100)."""

    M: torch.Tensor
    et: torch.Tensor
    target: torch.Tensor

    @classmethod
    def of(cls, x: torch.Tensor, T: int) -> SequenceBatch:
        """The batch of sequences ``x`` (complex (n, T', d), T' >= T; x_1..x_T used)."""
        e = embed(x[:, : T - 1].to(torch.complex128))
        M = torch.cumsum(e[..., :, None] * e.conj()[..., None, :], dim=1)[:, 1:]
        rho = torch.arange(1, T - 1, device=x.device, dtype=torch.float64)
        return cls(M.contiguous(), (e[:, 1:] / rho[None, :, None]).contiguous(),
                   x[:, 2:T].to(torch.complex128).contiguous())

    @property
    def n(self) -> int:
        return int(self.M.shape[0])

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.M, self.et, self.target))

    def slice(self, lo: int, hi: int) -> SequenceBatch:
        """Sequences ``lo..hi−1`` of this batch (views)."""
        return SequenceBatch(self.M[lo:hi], self.et[lo:hi], self.target[lo:hi])

    def sequence_loss(self, theta: torch.Tensor) -> torch.Tensor:
        """Per-sequence ``Σ_{t=2}^{T−1} ½‖ŷ_t − x_{t+1}‖²``, shape (n,); differentiable in θ."""
        P, A = P_and_A(theta)
        q = self.et @ A.T.to(torch.complex128)  # A e_t / (t−1)
        v = (self.M @ q[..., None]).squeeze(-1)  # M_t A e_t / (t−1)
        r = v @ P.T.to(torch.complex128) - self.target
        return 0.5 * torch.view_as_real(r).square().sum(dim=(-3, -2, -1))


def block_seed(seed: int, block: int) -> int:
    """The seed of draw block ``block``: ``seed`` for block 0, an independent stream after."""
    if block == 0:
        return int(seed)
    state = np.random.SeedSequence([int(seed), int(block), 0x5E9]).generate_state(1, np.uint64)
    return int(state[0] >> 1)


class SequenceField(Field):
    """Mean of the Eq. 2 summand over ``m`` fixed sequences of ``x_{t+1} = W x_t + ε_t``.

    Arguments:
        family: the initial-token distribution; T: the training length (>= 3).
        m: the number of sequences; seed: their seed (block by block, :data:`DRAW_BLOCK`).
        radius, rotation, noise: ``W = r·R`` with ``R`` a :class:`~mesadyn.process.Rotation`,
            and the noise scale ``s`` (:func:`~mesadyn.process.sample_sequences`).
        device: where the draws live and the direct path runs (default: CUDA if available).
        chunk: sequences per chunk of the direct path (does not change the numbers beyond
            rounding); form: ``"polynomial"``, ``"direct"`` or ``"auto"`` (the cost model).

    Attributes: ``m``, ``seed``, ``radius``, ``rotation``, ``noise``, ``device``, ``chunk``,
    ``form`` (never AUTO once built) and ``form_choice`` (:class:`~mesadyn.field.FormChoice`).

    Raises:
        MesadynError: a bad m, T, radius, rotation (``real`` with an odd d) or noise, or the
            polynomial form asked for where its tensors do not fit.
    """

    has_exact_hessian = True

    def __init__(self, family: Family, T: int, m: int, seed: int, *, radius: float = 1.0,
                 rotation: Rotation | str = Rotation.DIAGONAL, noise: float = 0.0,
                 device: torch.device | str | None = None, chunk: int | None = None,
                 form: Form | str = Form.AUTO) -> None:
        self.family = family
        self.T = check_T(T)
        self.m = check_int("m", m, 1)
        self.seed = check_int("seed", seed, 0)
        self.radius = check_radius(radius)
        self.rotation = check_rotation(rotation)
        self.noise = check_noise(noise)
        d = family.d
        if self.rotation is Rotation.REAL and d % 2:
            raise MesadynError(f"real rotations need an even d, got d={d}")
        self.device = torch.device(device) if device is not None else default_device()
        # the direct path's graph per sequence: the prefix sums Z (T, d, 2d) and a few (T, 2d)
        # complex arrays, about three times over (forward values, saved tensors, gradients)
        per_seq = 16 * 3 * self.T * (2 * d * d + 6 * d)
        self.chunk = check_int("chunk", chunk, 1) if chunk is not None else max(
            1, min(self.m, CHUNK_GRAPH_BYTES // per_seq))
        draw_bytes = 16 * self.m * self.T * d
        block_bytes = 2 * 16 * min(self.m, DRAW_BLOCK) * self.T * d  # one block and its copy
        budget = memory_budget()
        if block_bytes > budget.bytes // 2:
            raise MesadynError(
                f"one block of {min(self.m, DRAW_BLOCK)} sequences at d={d} T={self.T} needs "
                f"about {block_bytes / 2**30:.3g} GiB, more than half the "
                f"{budget.bytes / 2**30:.3g} GiB available ({budget.source}); use a smaller T")
        self._keep = draw_bytes <= min(KEEP_BYTES, memory_budget().bytes // 2)
        self._blocks: dict[int, torch.Tensor] = {}
        gram_bytes = 16 * self.m * (self.T - 2) * (4 * d * d + 3 * d)
        self._batches: dict[int, SequenceBatch] | None = (
            {} if gram_bytes <= min(BATCH_CACHE_BYTES, memory_budget().bytes // 4) else None)
        try:
            want = Form(form)
        except ValueError:
            raise MesadynError(
                f"unknown form {form!r}; choose one of {', '.join(Form)}") from None
        self.form_choice: FormChoice = choose_form(d, self.T, self.m)
        if want is Form.POLYNOMIAL and self.form_choice.build_bytes > memory_budget().bytes:
            b = memory_budget()
            raise MesadynError(
                f"the polynomial form of the sampled field for d={d} needs about "
                f"{self.form_choice.build_bytes / 2**30:.2g} GiB, more than the "
                f"{b.bytes / 2**30:.2g} GiB available ({b.source}); use form='direct'")
        self.form = self.form_choice.form if want is Form.AUTO else want
        self._poly: EmpiricalPolynomial | None = None

    # ---- the draws -----------------------------------------------------------------------
    def _block(self, b: int) -> torch.Tensor:
        """Draw block ``b``: sequences ``b·DRAW_BLOCK ..`` (at most DRAW_BLOCK), (k, T, d)."""
        hit = self._blocks.get(b)
        if hit is not None:
            return hit
        k = min(DRAW_BLOCK, self.m - b * DRAW_BLOCK)
        gen = make_generator(block_seed(self.seed, b), self.device)
        x = sample_sequences(self.family, k, self.T, gen, self.device, radius=self.radius,
                             rotation=self.rotation, noise=self.noise)
        if self._keep:
            self._blocks[b] = x
        return x

    def sequences(self, lo: int = 0, hi: int | None = None,
                  chunk: int | None = None) -> Iterator[torch.Tensor]:
        """The sequences ``lo..hi−1`` (complex (k, T, d)), in pieces of at most ``chunk``
        (default :attr:`chunk`); the same numbers on every call."""
        hi = self.m if hi is None else hi
        chunk = self.chunk if chunk is None else chunk
        pos = lo
        held, x = -1, None
        while pos < hi:
            b = pos // DRAW_BLOCK
            if b != held or x is None:  # each block drawn once per pass, kept or not
                held, x = b, self._block(b)
            start = pos - b * DRAW_BLOCK
            stop = min(hi - b * DRAW_BLOCK, x.shape[0], start + chunk)
            yield x[start:stop]
            pos = b * DRAW_BLOCK + stop

    # ---- the polynomial form -------------------------------------------------------------
    def build(self, progress: Callable[[float], None] | None = None) -> EmpiricalPolynomial:
        """The polynomial form (Ĝ, Ĉ, ĉ of the sequences, built on first call, then kept).

        Arguments:
            progress: called with the fraction of sequences processed.
        """
        if self._poly is None:
            from ._empirical import EmpiricalPolynomial, build_sequence_moments

            moments = build_sequence_moments(self.sequences(chunk=DRAW_BLOCK), self.m,
                                             self.T, progress=progress)
            self._poly = EmpiricalPolynomial(self.family, self.T, moments)
        return self._poly

    def prepare(self, progress: Callable[[float], None] | None = None) -> None:
        """Build the polynomial form now if this field uses it (with ``progress``)."""
        if self.form is Form.POLYNOMIAL:
            self.build(progress)

    @property
    def built(self) -> bool:
        """Whether the polynomial form has been built."""
        return self._poly is not None

    def memory_bytes(self) -> int:
        """The kept draws, the direct path's cached prefix Grams and the polynomial's tensors."""
        total = sum(x.numel() * x.element_size() for x in self._blocks.values())
        total += sum(b.nbytes() for b in (self._batches or {}).values())
        return total + (self._poly.nbytes if self._poly is not None else 0)

    def _pieces(self, lo: int = 0, hi: int | None = None) -> Iterator[PieceLoss]:
        """The per-sequence losses of sequences ``lo..hi−1``, chunk by chunk: through the cached
        :class:`SequenceBatch` of each chunk while they fit, else
        :func:`mesadyn.model.sequence_loss` on the (kept or regenerated) sequences."""
        hi = self.m if hi is None else hi
        if self._batches is None:
            for x in self.sequences(lo, hi):
                yield functools.partial(_sequence_loss_of, x)
            return
        c = self.chunk
        for k in range(lo // c, (hi - 1) // c + 1):
            batch = self._batches.get(k)
            if batch is None:
                x = torch.cat(list(self.sequences(k * c, min(self.m, (k + 1) * c), chunk=c)))
                batch = self._batches[k] = SequenceBatch.of(x, self.T)
            a, b = max(lo, k * c) - k * c, min(hi, (k + 1) * c) - k * c
            yield (batch if (a, b) == (0, batch.n) else batch.slice(a, b)).sequence_loss

    def _polynomial(self) -> EmpiricalPolynomial | None:
        return self.build() if self.form is Form.POLYNOMIAL else None

    # ---- the loss ------------------------------------------------------------------------
    def per_sequence_loss(self, theta: torch.Tensor) -> torch.Tensor:
        """The Eq. 2 summand of every sequence (:func:`mesadyn.model.sequence_loss`), (m,)."""
        th = theta.to(self.device)
        return torch.cat([piece(th) for piece in self._pieces()])

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        """The sampled loss (Eq. 2 with the sample mean for E), differentiable in θ."""
        poly = self._polynomial()
        if poly is not None:
            return poly.loss(theta)
        return self.per_sequence_loss(theta).mean().to(theta.device)

    def loss_and_grad(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L, ∇L)``: the polynomial's closed forms, or the direct path chunk by chunk."""
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
        """The full Hessian: the polynomial's closed-form blocks, or (direct) the active rows
        by batched Hessian-vector products, chunk by chunk."""
        poly = self._polynomial()
        if poly is not None:
            return poly.hessian(theta)
        return self.direct_hessian(theta)

    # ---- the direct path -----------------------------------------------------------------
    def _range_loss_and_grad(self, th: torch.Tensor, lo: int, hi: int, scale: float
                             ) -> tuple[torch.Tensor, torch.Tensor]:
        """``scale·Σ`` of the summands of sequences ``lo..hi−1`` and its gradient at ``th``
        (on the field's device), backward chunk by chunk."""
        th = th.detach().requires_grad_(True)
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        grad = torch.zeros_like(th)
        with torch.enable_grad():
            for piece in self._pieces(lo, hi):
                part = piece(th).sum() * scale
                (g,) = torch.autograd.grad(part, th)
                total += part.detach()
                grad += g
        return total, grad

    def direct_loss_and_grad(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L, ∇L)`` by the direct path, the backward pass chunk by chunk (bounded memory)."""
        theta = self.check_theta(theta)
        value, grad = self._range_loss_and_grad(theta.to(self.device), 0, self.m, 1 / self.m)
        return value.to(theta.device), grad.to(theta.device)

    def batch_loss(self, thetas: torch.Tensor) -> torch.Tensor:
        """``L(θ_i)`` for a batch of θ (k, 18d²) -> (k,), by the direct path."""
        with torch.no_grad():
            return torch.stack([self.per_sequence_loss(t).mean() for t in thetas]
                               ).to(thetas.device)

    def batch_loss_and_grad(self, thetas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L(θ_i), ∇L(θ_i))`` for a batch of θ (k, 18d²) on the same draws, by the direct
        path whatever the form (a GD run's numbers do not depend on the cost model)."""
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
                for i, th in enumerate(ths):
                    part = piece(th).sum() / self.m
                    (g,) = torch.autograd.grad(part, th)
                    total[i] += part.detach()
                    grad[i] += g
        return total.to(thetas.device), grad.to(thetas.device)

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
                (g,) = torch.autograd.grad(piece(th).sum() / self.m, th,
                                           create_graph=True)
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
                (g,) = torch.autograd.grad(piece(th).sum() / self.m, th,
                                           create_graph=True)
                for lo in range(0, idx.numel(), HVP_BATCH):  # bounded: HVP_BATCH graphs at once
                    hi = min(lo + HVP_BATCH, idx.numel())
                    (h,) = torch.autograd.grad(g, th, grad_outputs=E[lo:hi],
                                               is_grads_batched=True, retain_graph=True)
                    rows[lo:hi] += h
        H = torch.zeros(th.numel(), th.numel(), dtype=torch.float64, device=self.device)
        H[idx] = rows
        H = 0.5 * (H + H.T)  # symmetrised; rows and columns of inactive entries stay 0
        return H.to(theta.device)

    # ---- description ---------------------------------------------------------------------
    @abstractmethod
    def options(self) -> dict[str, object]:
        """The options that fixed the draws (for :meth:`describe`)."""

    def process(self) -> dict[str, object]:
        """The process beyond the family: ``rotation`` and ``noise``, and ``radius`` when it
        is not the paper's 1."""
        out: dict[str, object] = {"rotation": str(self.rotation), "noise": self.noise}
        return out if self.radius == 1 else {**out, "radius": self.radius}

    def describe(self) -> dict[str, object]:
        return {**super().describe(), **self.options(), **self.process(),
                "form": str(self.form)}


@final
class FiniteSequenceField(SequenceField):
    """The finite-sample loss on ``m`` sequences drawn once from ``seed`` (Section 6's training
    set, for any :class:`~mesadyn.process.Rotation` and noise)."""

    name = "finite"

    def options(self) -> dict[str, object]:
        return {"m": self.m, "seed": self.seed}


@final
class MonteCarloSequenceField(SequenceField):
    """``L`` and ``∇L`` estimated from ``samples`` fixed sequences, with batch-means standard
    errors (:meth:`estimate`, as :class:`~mesadyn.field.MonteCarloField`)."""

    name = "mc"

    def __init__(self, family: Family, T: int, samples: int = 100_000, seed: int = 0,
                 batches: int = 32, *, radius: float = 1.0,
                 rotation: Rotation | str = Rotation.DIAGONAL, noise: float = 0.0,
                 device: torch.device | str | None = None, chunk: int | None = None,
                 form: Form | str = Form.AUTO) -> None:
        samples = check_int("samples", samples, 2)
        batches = check_int("batches", batches, 2)
        if samples < batches:
            raise MesadynError(f"samples must be >= batches={batches}, got samples={samples}")
        super().__init__(family, T, samples, seed, radius=radius, rotation=rotation,
                         noise=noise, device=device, chunk=chunk, form=form)
        self.batches = batches

    def estimate(self, theta: torch.Tensor) -> Estimate:
        """Loss and gradient with standard errors from ``batches`` batch means (direct path)."""
        theta = self.check_theta(theta)
        th = theta.detach().to(self.device)
        edges = torch.linspace(0, self.m, self.batches + 1).round().long().tolist()
        parts = [self._range_loss_and_grad(th, lo, hi, 1 / (hi - lo))
                 for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
        L = torch.stack([p[0] for p in parts])
        G = torch.stack([p[1] for p in parts])
        w = torch.tensor([hi - lo for lo, hi in zip(edges[:-1], edges[1:], strict=True)],
                         dtype=torch.float64, device=self.device) / self.m
        B = self.batches
        dev = theta.device
        return Estimate((w * L).sum().to(dev), (L.std(unbiased=True) / B**0.5).to(dev),
                        (w[:, None] * G).sum(0).to(dev),
                        (G.std(dim=0, unbiased=True) / B**0.5).to(dev), self.m, B)

    def options(self) -> dict[str, object]:
        return {"samples": self.m, "seed": self.seed, "batches": self.batches}
