"""Follow fixed points of the gradient flow through a data parameter (pseudo-arclength).

``∇L(θ; p) = 0`` is continued in one scalar parameter ``p`` of the data — the token scale σ,
the sparse scale c, a moment of an iid family (m2, m4, m6), the token mean μ, a mixture
weight, the radius r of ``W``, or T in discrete steps — for the exact field of Eq. 2 at every
p.  The engine works transverse to the continuous symmetries the field has: the 12d² inactive
entries of θ (Eq. 1) and the entries the data never reach are dropped, and each scaling
symmetry ``(P, A) ↦ (αP, A/α)`` (one global, or one per coordinate when the data decouple,
e.g. sparse ``x_1``) gets a phase condition — by default the flow's conserved quantity
``‖A‖² − ‖P‖²`` is held at its start value, so the branch is the fixed point the gradient flow
reaches from initialisations with that invariant.  A model other than the paper's
(``make_parameter(..., model=...)``: k-layer linear attention) is continued on its exact field
by quadrature rebuilt at every p, through its :class:`~mesadyn.models.Model` API: its active
entries, its per-layer invariants held, its residual-stream shears cut by slices.

One job per module (all private; this list is the API):

- **parameters** — :class:`Parameter` and its subclasses, :class:`Domain`,
  :class:`ParameterName`, :func:`make_parameter`: ``p`` to a
  :class:`~mesadyn.field.FieldSpec`, the domain, whether ``L`` is a polynomial in ``p``.
- **the problem** — :class:`ParametricField`: the :class:`Problem` of a parameter (fields
  rebuilt at every p or combined from Chebyshev nodes, exact Hessian, ``∂∇L/∂p``, free
  coordinates and symmetries detected at random points; a model's read through its API).
- **following** — :func:`follow`, :func:`follow_discrete`, :func:`start_point`,
  :func:`analyse_point` and the result :class:`Continuation` (with ``to_dataset`` /
  ``from_dataset``: the run file of ``mesadyn continue``).
- **the engine** — :func:`run_branch`, :func:`switch_branch` and their types
  (:class:`Problem`, :class:`Symmetry`, :class:`Options`, :class:`Point`, :class:`Special`,
  :class:`Branch`): pseudo-arclength continuation of any :class:`Problem`, knowing nothing of
  transformers.  A branch ends with an :class:`~mesadyn.outcome.Outcome`.
"""

from ._detect import Bifurcation as Bifurcation
from ._detect import Special as Special
from ._engine import Branch as Branch
from ._engine import BranchHook as BranchHook
from ._engine import run_branch as run_branch
from ._engine import switch_branch as switch_branch
from ._follow import Checkpoint as Checkpoint
from ._follow import Continuation as Continuation
from ._follow import PointAnalysis as PointAnalysis
from ._follow import analyse_point as analyse_point
from ._follow import follow as follow
from ._follow import follow_discrete as follow_discrete
from ._follow import start_point as start_point
from ._parameters import Domain as Domain
from ._parameters import IIDMoment as IIDMoment
from ._parameters import MixtureWeight as MixtureWeight
from ._parameters import NoiseScale as NoiseScale
from ._parameters import Parameter as Parameter
from ._parameters import ParameterName as ParameterName
from ._parameters import Process as Process
from ._parameters import Radius as Radius
from ._parameters import ShiftedMean as ShiftedMean
from ._parameters import Sigma as Sigma
from ._parameters import SparseScale as SparseScale
from ._parameters import TrainingLength as TrainingLength
from ._parameters import make_parameter as make_parameter
from ._problem import ParametricField as ParametricField
from ._problem import lagrange_weights as lagrange_weights
from ._problem import scaling_generators as scaling_generators
from ._system import Gauge as Gauge
from ._system import Options as Options
from ._system import Point as Point
from ._system import Problem as Problem
from ._system import Symmetry as Symmetry
from ._system import count_unstable as count_unstable

__all__ = [
    # parameters
    "Domain", "IIDMoment", "MixtureWeight", "NoiseScale", "Parameter", "ParameterName", "Process",
    "Radius", "ShiftedMean", "Sigma", "SparseScale", "TrainingLength", "make_parameter",
    # the problem
    "ParametricField", "lagrange_weights", "scaling_generators",
    # following
    "Checkpoint", "Continuation", "PointAnalysis", "analyse_point", "follow",
    "follow_discrete", "start_point",
    # the engine
    "Bifurcation", "Branch", "BranchHook", "Gauge", "Options", "Point", "Problem", "Special",
    "Symmetry", "count_unstable", "run_branch", "switch_branch",
]
