"""Sampled fields of any model: Eq. 2 with E replaced by the mean over fixed sequences, in
direct form through the model's forward pass (:meth:`mesadyn.models.Model.sequence_loss`).

:class:`ModelSequenceField` draws its ``m`` sequences as :class:`~mesadyn.field.SequenceField`
does (block by block from the seed, :func:`mesadyn.process.sample_sequences`, for any rotation
and noise; on the paper's process with ``m <= DRAW_BLOCK`` they are the draws of
:class:`~mesadyn.field.FiniteField` with the same seed), and evaluates the mean of the model's
per-sequence loss chunk by chunk: the gradient by one backward pass per chunk, Hessian-vector
products and the Hessian by ``torch.func`` (:class:`~._direct.WeightedSequences`), on the
device of its draws.  The moment-tensor (polynomial) form is the paper's model's alone: these
fields are always direct.  :class:`FiniteModelField` is a training set (Section 6's protocol
for any model); :class:`MonteCarloModelField` estimates the population loss with batch-means
standard errors (:meth:`~._sampled.MonteCarloDraws.estimate`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, final

import torch

from ..errors import check_int
from ..models import Model
from ..process import Family, Rotation
from ..progress import ProgressCallback
from ._base import CapabilityError
from ._direct import HVP_CHUNK_DIVISOR, WeightedSequences
from ._forms import Form
from ._sampled import MonteCarloDraws, PieceLoss, check_batches
from ._sequences import CHUNK_GRAPH_BYTES, SequenceField

if TYPE_CHECKING:
    from ._empirical import EmpiricalMoments, EmpiricalPolynomial

__all__ = ["FiniteModelField", "ModelSequenceField", "MonteCarloModelField", "model_chunk"]


def model_chunk(model: Model, d: int, T: int, m: int) -> int:
    """Sequences per chunk of a model's direct path: :data:`CHUNK_GRAPH_BYTES` of its graph
    (:meth:`~mesadyn.models.Model.graph_bytes`), one at least."""
    return max(1, min(m, CHUNK_GRAPH_BYTES // model.graph_bytes(d, T)))


def _model_loss(model: Model, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    return model.sequence_loss(theta, x)


class ModelSequenceField(WeightedSequences, SequenceField):
    """The mean of a model's Eq. 2 summand over ``m`` fixed sequences (direct form).

    Arguments: ``model`` (:class:`~mesadyn.models.Model`), then those of
    :class:`~mesadyn.field.SequenceField` (``family``, ``T``, ``m``, ``seed``, ``radius``,
    ``rotation``, ``noise``, ``device``, ``chunk``); the form is always direct.
    """

    def __init__(self, model: Model, family: Family, T: int, m: int, seed: int, *,
                 radius: float = 1.0, rotation: Rotation | str = Rotation.DIAGONAL,
                 noise: float = 0.0, device: torch.device | str | None = None,
                 chunk: int | None = None) -> None:
        self.model = model
        m = check_int("m", m, 1)
        chunk = model_chunk(model, family.d, check_int("T", T, 3), m) if chunk is None else chunk
        super().__init__(family, T, m, seed, radius=radius, rotation=rotation, noise=noise,
                         device=device, chunk=chunk, form=Form.DIRECT)
        self._batches = None  # the one-layer prefix Grams of SequenceField are not this model's

    # ---- the direct path ---------------------------------------------------------------------
    def _pieces(self, lo: int = 0, hi: int | None = None) -> Iterator[PieceLoss]:
        for x in self.sequences(lo, hi):
            yield functools.partial(_model_loss, self.model, x)

    def _weighted(self, chunk: int | None = None
                  ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for x in self.sequences(chunk=chunk):
            yield x, torch.full((x.shape[0],), 1.0 / self.m, dtype=torch.float64,
                                device=x.device)

    def _hvp_chunk(self) -> int:
        return max(1, self.chunk // HVP_CHUNK_DIVISOR)

    # ---- no polynomial form --------------------------------------------------------------------
    def _moments(self, progress: ProgressCallback | None) -> EmpiricalMoments:
        raise CapabilityError(f"the {self.model} model has no polynomial form (the moment "
                              "tensors are the paper's model's)")

    def build(self, progress: ProgressCallback | None = None) -> EmpiricalPolynomial:
        """Refused: the polynomial form is the paper's model's alone."""
        raise CapabilityError(f"the {self.model} model has no polynomial form (the moment "
                              "tensors are the paper's model's)")


@final
class FiniteModelField(ModelSequenceField):
    """The finite-sample loss of a model on ``m`` sequences drawn once from ``seed``."""

    name = "finite"

    def options(self) -> dict[str, object]:
        return {"m": self.m, "seed": self.seed}


@final
class MonteCarloModelField(ModelSequenceField, MonteCarloDraws):
    """A model's ``L`` and ``∇L`` estimated from ``samples`` fixed sequences, with batch-means
    standard errors (:meth:`estimate`)."""

    def __init__(self, model: Model, family: Family, T: int, samples: int = 100_000,
                 seed: int = 0, batches: int = 32, *, radius: float = 1.0,
                 rotation: Rotation | str = Rotation.DIAGONAL, noise: float = 0.0,
                 device: torch.device | str | None = None, chunk: int | None = None) -> None:
        samples, batches = check_batches(samples, batches)
        super().__init__(model, family, T, samples, seed, radius=radius, rotation=rotation,
                         noise=noise, device=device, chunk=chunk)
        self.batches = batches
