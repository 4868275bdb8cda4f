"""Which counting builds an exact field's tensors, for each process (docs/design.md §6).

* the paper's ``W = r·diag(λ)`` without noise: :mod:`mesadyn.field._moments` (unchanged, so
  the paper's numbers keep every digit);
* real block rotations, and AR noise on diagonal or real W:
  :mod:`mesadyn.field._moments_rotation`;
* Haar-unitary W (noiseless, small d and T): :mod:`mesadyn.field._haar`.

:func:`process_plan` checks the process and returns a plan whose ``nnz`` and ``bytes`` are
known before anything large is allocated, and whose ``build()`` makes the arrays of
:func:`mesadyn.field._moments.build`'s layout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import MesadynError
from ..process import Family, Rotation, check_noise, check_rotation


@dataclass
class ProcessPlan:
    """A plan of one exact build: entries (``nnz``, an upper bound), bytes and the builder."""

    nnz: int
    bytes: int
    build: Callable[[], dict[str, np.ndarray]]


def process_plan(family: Family, T: int, radius: float, rotation: Rotation | str,
                 noise: float, build_paper: Callable[..., dict[str, np.ndarray]] | None = None
                 ) -> ProcessPlan:
    """The plan for ``family``, T and the process (``rotation``, ``noise``, ``radius``).

    ``build_paper`` is the paper's builder (:func:`mesadyn.field._moments.build`; passed in so
    that a caller's replacement of it is honoured).

    Raises:
        MesadynError: an odd d with real rotations, a negative or non-finite noise, Haar beyond
            the exact field's reach (naming d or T), T or r out of range, no exact moments.
    """
    rot = check_rotation(rotation)
    s = check_noise(noise)
    if rot is Rotation.DIAGONAL and s == 0:
        from ._moments import build, plan

        pl = plan(family, T, radius)
        builder = build if build_paper is None else build_paper
        return ProcessPlan(pl.nnz, pl.bytes, lambda: builder(family, pl))
    if rot is Rotation.HAAR:
        from ._haar import plan_haar

        hp = plan_haar(family, T, radius=radius, noise=s)
        return ProcessPlan(hp.nnz, hp.bytes, hp.build)
    if rot is Rotation.REAL and family.d % 2:
        raise MesadynError(f"real rotations need an even d, got d={family.d}")
    from ._moments_rotation import build_rotation, plan_rotation

    rp = plan_rotation(family, T, block=2 if rot is Rotation.REAL else 1, radius=radius,
                       noise=s)
    return ProcessPlan(rp.nnz, rp.bytes, lambda: build_rotation(family, rp))
