"""Sampled fields over general sequences: Eq. 2 with E replaced by the mean over fixed draws
of whole sequences ``x_1..x_T``.

The fields of :mod:`mesadyn.field._sampled` hold draws ``(x_1, λ)`` of the paper's diagonal
``W = r·diag(λ)``.  The processes beyond it (docs/design.md §6) — block-diagonal real rotations
(d even), Haar-random unitary ``W`` and the noisy AR process ``x_{t+1} = W x_t + ε_t`` — are
drawn here by their sampler :func:`mesadyn.process.sample_sequences` (their exact fields are in
:mod:`mesadyn.field.exact`; these draws are their Monte-Carlo check).  :class:`SequenceField`
averages the per-sequence loss (:func:`mesadyn.model.sequence_loss`, Eq. 2) over ``m`` such
sequences, with common random numbers: the draws are fixed by the seed (block ``b`` of
:data:`DRAW_BLOCK` sequences from its own generator), kept in memory while they fit
(:data:`KEEP_BYTES`) and regenerated from the seed block by block otherwise, so every
evaluation sees the same sequences.

Like :class:`~mesadyn.field.SampledField` it is a :class:`~mesadyn.field._sampled.DrawnField`
(which implements both forms and the direct path once; this module says only how the sequences
are drawn, kept and chunked) and evaluates in one of two forms (the same cost model,
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
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, final

import numpy as np
import torch

from ..device import make_generator
from ..errors import MesadynError, check_int
from ..model import P_and_A, embed, sequence_loss
from ..process import (
    Family,
    Rotation,
    check_noise,
    check_radius,
    check_rotation,
    sample_sequences,
)
from ..progress import ProgressCallback
from ._device import check_device
from ._forms import Form
from ._memory import memory_budget
from ._sampled import DrawnField, MonteCarloDraws, PieceLoss, check_batches

if TYPE_CHECKING:
    from ._empirical import EmpiricalMoments

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


class SequenceField(DrawnField):
    """Mean of the Eq. 2 summand over ``m`` fixed sequences of ``x_{t+1} = W x_t + ε_t``.

    Arguments:
        family: the initial-token distribution; T: the training length (>= 3).
        m: the number of sequences; seed: their seed (block by block, :data:`DRAW_BLOCK`).
        radius, rotation, noise: ``W = r·R`` with ``R`` a :class:`~mesadyn.process.Rotation`,
            and the noise scale ``s`` (:func:`~mesadyn.process.sample_sequences`).
        device: where the draws live and the direct path runs (``None``: the CPU;
            :func:`mesadyn.device.resolve_device`).
        chunk: sequences per chunk of the direct path (does not change the numbers beyond
            rounding); form: ``"polynomial"``, ``"direct"`` or ``"auto"`` (the cost model).

    Attributes: ``m``, ``seed``, ``radius``, ``rotation``, ``noise``, ``device``, ``chunk``,
    ``form`` (never AUTO once built) and ``form_choice`` (:class:`~mesadyn.field.FormChoice`).

    Raises:
        MesadynError: a bad m, T, radius, rotation (``real`` with an odd d) or noise, or the
            polynomial form asked for where its tensors do not fit.
    """

    def __init__(self, family: Family, T: int, m: int, seed: int, *, radius: float = 1.0,
                 rotation: Rotation | str = Rotation.DIAGONAL, noise: float = 0.0,
                 device: torch.device | str | None = None, chunk: int | None = None,
                 form: Form | str = Form.AUTO) -> None:
        super().__init__(family, T, check_int("m", m, 1))
        self.seed = check_int("seed", seed, 0)
        self.radius = check_radius(radius)
        self.rotation = check_rotation(rotation)
        self.noise = check_noise(noise)
        d = family.d
        if self.rotation is Rotation.REAL and d % 2:
            raise MesadynError(f"real rotations need an even d, got d={d}")
        self.device = check_device(device)
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
        self._set_form(form)

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

    def _moments(self, progress: ProgressCallback | None) -> EmpiricalMoments:
        from ._empirical import build_sequence_moments

        return build_sequence_moments(self.sequences(chunk=DRAW_BLOCK), self.m, self.T,
                                      progress=progress)

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

    def _mean_part(self, part: torch.Tensor, n: int) -> torch.Tensor:
        """``part · (1/n)``: rounds (in the last bit) unlike the diagonal fields' ``part / n``;
        kept so this field's numbers stay what they were."""
        return part * (1 / n)

    # ---- description ---------------------------------------------------------------------
    def process(self) -> dict[str, object]:
        """The process beyond the family: ``rotation`` and ``noise``, and ``radius`` when it
        is not the paper's 1."""
        out: dict[str, object] = {"rotation": str(self.rotation), "noise": self.noise}
        return out if self.radius == 1 else {**out, "radius": self.radius}


@final
class FiniteSequenceField(SequenceField):
    """The finite-sample loss on ``m`` sequences drawn once from ``seed`` (Section 6's training
    set, for any :class:`~mesadyn.process.Rotation` and noise)."""

    name = "finite"

    def options(self) -> dict[str, object]:
        return {"m": self.m, "seed": self.seed}


@final
class MonteCarloSequenceField(SequenceField, MonteCarloDraws):
    """``L`` and ``∇L`` estimated from ``samples`` fixed sequences, with batch-means standard
    errors (:meth:`estimate`, as :class:`~mesadyn.field.MonteCarloField`)."""

    def __init__(self, family: Family, T: int, samples: int = 100_000, seed: int = 0,
                 batches: int = 32, *, radius: float = 1.0,
                 rotation: Rotation | str = Rotation.DIAGONAL, noise: float = 0.0,
                 device: torch.device | str | None = None, chunk: int | None = None,
                 form: Form | str = Form.AUTO) -> None:
        samples, batches = check_batches(samples, batches)
        super().__init__(family, T, samples, seed, radius=radius, rotation=rotation,
                         noise=noise, device=device, chunk=chunk, form=form)
        self.batches = batches
