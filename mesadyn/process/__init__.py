"""The AR process of Section 3.1 and the data models beyond it (docs/design.md §6).

``x_1 ~ D`` (real), ``W = r·diag(λ_1..λ_d)`` with ``λ_k = exp(iθ_k)``, ``θ_k ~ U[0, 2π)``
independent and fresh for every sequence, ``x_{t+1} = W x_t``; the radius ``r = 1`` is the
paper.  Sequences are complex128.

One job per module:

- :mod:`.families` — the abstract :class:`Family` and the final iid, sparse, fixed and
  sampler-only kinds; :mod:`.moments` (:class:`Shifted`, :class:`Moments`, the Hankel atoms)
  and :mod:`.mixture` (:class:`Mixture`); :mod:`.samplers`, the built-in samplers;
- :mod:`.constructors` — :func:`gaussian`, :func:`sparse`, …, each checking its arguments;
- :mod:`.parse` — the CLI's family grammar (:func:`family`, :func:`parse_mixture`);
- :mod:`.sequences` — rotations (:class:`Rotation`) and sequence sampling (:func:`sample`,
  :func:`sequences`, :func:`sample_sequences`).

torch and numpy are imported inside the functions that use them, so that ``mesadyn theory``
loads neither.  :func:`make_generator` lives in :mod:`mesadyn.device`; it is re-exported here
for the callers that draw sequences.
"""

from __future__ import annotations

from ..device import make_generator as make_generator
from .constructors import SCALE_RANGE as SCALE_RANGE
from .constructors import check_scale as check_scale
from .constructors import fixed as fixed
from .constructors import gaussian as gaussian
from .constructors import iid as iid
from .constructors import mixture as mixture
from .constructors import moments as moments
from .constructors import ones as ones
from .constructors import rademacher as rademacher
from .constructors import sampled as sampled
from .constructors import shifted as shifted
from .constructors import sparse as sparse
from .constructors import uniform as uniform
from .families import IID as IID
from .families import MAX_ORDER as MAX_ORDER
from .families import CoordinateGroup as CoordinateGroup
from .families import Family as Family
from .families import Fixed as Fixed
from .families import NoExactMoments as NoExactMoments
from .families import NoReducedSystem as NoReducedSystem
from .families import Sampled as Sampled
from .families import Sampler as Sampler
from .families import Sparse as Sparse
from .mixture import Mixture as Mixture
from .moments import Moments as Moments
from .moments import Shifted as Shifted
from .moments import gaussian_raw_moments as gaussian_raw_moments
from .moments import hankel_atoms as hankel_atoms
from .parse import FAMILIES as FAMILIES
from .parse import FamilyName as FamilyName
from .parse import family as family
from .parse import parse_mixture as parse_mixture
from .parse import parse_moments as parse_moments
from .samplers import AtomDraw as AtomDraw
from .samplers import GaussianDraw as GaussianDraw
from .samplers import RademacherDraw as RademacherDraw
from .samplers import UniformDraw as UniformDraw
from .sequences import Rotation as Rotation
from .sequences import check_noise as check_noise
from .sequences import check_radius as check_radius
from .sequences import check_rotation as check_rotation
from .sequences import sample as sample
from .sequences import sample_lambdas as sample_lambdas
from .sequences import sample_sequences as sample_sequences
from .sequences import sample_transitions as sample_transitions
from .sequences import sequences as sequences

__all__ = [
    "FAMILIES", "IID", "MAX_ORDER", "SCALE_RANGE", "AtomDraw", "CoordinateGroup", "Family",
    "FamilyName", "Fixed", "GaussianDraw", "Mixture", "Moments", "NoExactMoments",
    "NoReducedSystem", "RademacherDraw", "Rotation", "Sampled", "Sampler", "Shifted",
    "Sparse", "UniformDraw",
    "check_noise", "check_radius", "check_rotation", "check_scale", "family", "fixed",
    "gaussian", "gaussian_raw_moments", "hankel_atoms", "iid", "make_generator", "mixture",
    "moments", "ones", "parse_mixture", "parse_moments", "rademacher", "sample",
    "sample_lambdas", "sample_sequences", "sample_transitions", "sampled", "sequences",
    "shifted", "sparse", "uniform",
]
