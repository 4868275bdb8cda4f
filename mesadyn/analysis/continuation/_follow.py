"""Following a fixed point of the exact field through a data parameter, and what each point
of the branch says about the paper's objects.

* :func:`start_point` — Theorem 4.1's balanced point (or a given θ) refined by Newton.  A
  model other than the paper's has no balanced point: it starts from a given θ (the end of
  its flow, :mod:`mesadyn.workflows.continuation`).
* :func:`follow` — the primary branch from ``start`` to ``stop``, its located folds and branch
  points, and the branches that emerge there (the engine: :func:`~._engine.run_branch`,
  :func:`~._engine.switch_branch`).
* :func:`follow_discrete` — natural continuation in a discrete parameter (T).
* :func:`analyse_point` — loss, ab (Theorem 4.1), off-diagonal mass, the invariant and the full
  classified spectrum of ``−∇²L`` (:class:`PointAnalysis`); for another model the same
  quantities through its :class:`~mesadyn.models.Model` API (:mod:`._models`).
* :class:`Continuation` — every branch of one run, with :meth:`~Continuation.to_dataset` and
  :meth:`~Continuation.from_dataset` (the run file and checkpoint of ``mesadyn continue``).

Both followers report ``|p − start|`` of each accepted point to a
:data:`~mesadyn.progress.ProgressCallback` and hand the growing :class:`Continuation` to a
``checkpoint`` hook, so that a caller can save it and resume it later (``resume``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from ...errors import MesadynError
from ...model import P_and_A, active_mask, diagonal_mask
from ...model import ab as model_ab
from ...outcome import Outcome
from ...progress import ProgressCallback
from ._detect import Bifurcation, Special
from ._engine import Branch, run_branch, switch_branch
from ._parameters import Parameter
from ._problem import ParametricField
from ._system import Options, Point, _System, count_unstable

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["Checkpoint", "Continuation", "PointAnalysis", "analyse_point", "follow",
           "follow_discrete", "start_point"]


# ---- start points --------------------------------------------------------------------------
def start_point(problem: ParametricField, p0: float, theta: np.ndarray | None = None, *,
                tol: float = 1e-11) -> np.ndarray:
    """A converged fixed point at ``p0``: Newton (:func:`~mesadyn.analysis.fixedpoint.refine`)
    from ``theta`` or from Theorem 4.1's balanced point ``a = b = √ab*``.

    A model other than the paper's is refined by
    :func:`mesadyn.analysis.model_fixedpoint.newton_polish` on its own layout.

    ## Raises
    - `MesadynError`: no balanced point for this family or model, or the start is not near a
      fixed point (Newton does not converge, or moves θ by more than 5% of its norm).
    """
    from ..fixedpoint import refine

    fam = problem.parameter.spec(p0).family
    if theta is None and not problem.model.is_paper:
        raise MesadynError(f"model={problem.model} has no balanced start point (Theorem 4.1 is "
                           "the paper's one-layer model's); give a start point, e.g. the end of "
                           "its flow")
    if theta is None:
        try:
            theta = problem.parameter.balanced_point(p0)
        except MesadynError as exc:
            raise MesadynError(f"no balanced start point for family {fam.name!r} ({exc}); "
                               "give a start point") from None
    theta = np.asarray(theta, np.float64)
    if not problem.model.is_paper:
        problem.model.check_theta(theta, problem.d)
    field = problem.field(p0)
    r0 = float(np.abs(problem.grad(theta, p0)).max())
    if problem.model.is_paper:
        fp = refine(field, theta, mask=problem.free, tol=tol, max_iter=30)
        end, residual, converged = fp.theta, fp.residual, fp.converged
    else:
        from ..model_fixedpoint import newton_polish

        nt = newton_polish(field, problem.model, theta, problem.free, tol=tol, max_iter=30)
        assert nt.theta is not None
        end, residual, converged = nt.theta, nt.residual, nt.converged
    moved = float(np.linalg.norm(end - theta))
    size = max(float(np.linalg.norm(theta)), 1e-12)
    if not converged or moved > 0.05 * size:
        raise MesadynError(
            f"the start is not near a fixed point at {problem.parameter.name}={p0:g}: "
            f"max|∇L| = {r0:.3g} there and Newton reached {residual:.3g} after moving θ by "
            f"{moved / size:.1%} of its norm; start from a fixed point (e.g. a flow end point)")
    out: np.ndarray = np.asarray(end, np.float64)
    return out


# ---- what a point says about the paper's objects -----------------------------------------
@dataclass(frozen=True)
class PointAnalysis:
    """The paper's quantities at one point of a branch (a model other than the paper's: ``ab``
    is ``Σ_l a_l b_l``, the diagonals are every layer's, ``invariants`` one per layer and
    ``invariant`` their sum)."""

    loss: float
    residual: float  # max|∇L| of the field built at p
    ab: np.ndarray  # per coordinate: diag(W^KQ_32) ⊙ diag(W^PV_12)
    offdiag_mass: float  # ‖θ off the diagonals of W^KQ_32, W^PV_12‖² / ‖θ active‖²
    invariant: float  # ‖A‖_F² − ‖P‖_F², conserved by the flow
    eigenvalues: np.ndarray  # all eigenvalues of −∇²L (18d² for the paper's), ascending
    n_zero: int
    n_stable: int
    n_unstable: int
    zero_modes: dict[str, object]
    invariants: tuple[float, ...] = ()  # per layer (the paper's: its one invariant)

    @property
    def ab_mean(self) -> float:
        return float(self.ab.mean())


def analyse_point(problem: ParametricField, theta: np.ndarray, p: float) -> PointAnalysis:
    """Loss, ab, the off-diagonal mass, the invariant and the classified spectrum of ``−∇²L``
    (as ``mesadyn stability`` classifies it: :func:`~mesadyn.analysis.spectrum.classify`; for
    another model :func:`._models.analyse_model_point`)."""
    from ..spectrum import classify

    if not problem.model.is_paper:
        from ._models import analyse_model_point

        return analyse_model_point(problem, theta, p)
    th = np.asarray(theta, np.float64)
    d = problem.d
    field = problem.field(p)
    tth = torch.as_tensor(th)
    L, g = field.loss_and_grad(tth)
    H = field.hessian(tth).numpy()
    sp = classify(H, th, field=field)
    s = sp.to_dict()
    act = active_mask(d)
    off = act & ~diagonal_mask(d)
    na = float(th[act] @ th[act])
    P, A = P_and_A(torch.as_tensor(th))
    zm = s["zero_modes"]
    assert isinstance(zm, dict)
    invariant = float((A**2).sum() - (P**2).sum())
    return PointAnalysis(
        loss=float(L), residual=float(g.abs().max()),
        ab=model_ab(torch.as_tensor(th)).numpy().copy(),
        offdiag_mass=float(th[off] @ th[off]) / na if na > 0 else 0.0,
        invariant=invariant,
        eigenvalues=sp.eigenvalues.copy(), n_zero=sp.n_zero, n_stable=sp.n_stable,
        n_unstable=sp.n_unstable, zero_modes=dict(zm), invariants=(invariant,),
    )


# ---- the whole continuation ----------------------------------------------------------------
@dataclass
class Continuation:
    """Every branch followed from one start: ``branches[0]`` is the primary branch; the others
    emerged at its branch points (``origin`` = index of the special point on branch 0).

    ``analyses[i][j]`` is the :class:`PointAnalysis` of point ``j`` of branch ``i`` (filled by
    ``follow(..., analyse=True)``); ``n_free`` and ``n_symmetries`` describe the problem (its
    free coordinates and declared symmetries).
    """

    parameter: Parameter
    start: float
    stop: float
    branches: list[Branch] = field(default_factory=list)
    analyses: list[list[PointAnalysis]] = field(default_factory=list)
    n_free: int = 0
    n_symmetries: int = 0

    @property
    def specials(self) -> list[Special]:
        """The located points of every branch, branch by branch."""
        return [s for b in self.branches for s in b.specials]

    def analyses_of(self, i: int) -> list[PointAnalysis]:
        """The analyses of branch ``i`` (a list filled in place; empty until analysed)."""
        while len(self.analyses) <= i:
            self.analyses.append([])
        return self.analyses[i]

    def to_dataset(self) -> xr.Dataset:
        """Every analysed point of every branch in one Dataset (the run file and checkpoint of
        ``mesadyn continue``; :mod:`mesadyn.plots.bifurcation` draws it).

        Dimension ``point`` runs over all points of all branches (``point_branch`` says
        which), ``special`` over the located points, ``branch`` over the branches; the
        driver's state (tangent, step) is kept so that :meth:`from_dataset` can resume.

        ## Raises
        `MesadynError`: the branches have points but no analyses (``follow(...,
        analyse=True)`` fills them).
        """
        from ._dataset import to_dataset

        return to_dataset(self)

    @classmethod
    def from_dataset(cls, ds: xr.Dataset, parameter: Parameter) -> Continuation:
        """The continuation a Dataset of :meth:`to_dataset` holds, for ``parameter`` (the one
        it was followed in): branches, points with their driver state, analyses and located
        points, ready to be resumed by :func:`follow` or :func:`follow_discrete`.

        ## Raises
        `MesadynError`: the Dataset is not a continuation of this form (a variable missing
        or malformed, named), or of another parameter.
        """
        from ._dataset import from_dataset

        return from_dataset(cls, ds, parameter)


#: Called with the growing :class:`Continuation` after each accepted (and analysed) point,
#: e.g. to save it (``Continuation.to_dataset``) as a checkpoint.
Checkpoint = Callable[[Continuation], None]


def _hooks(result: Continuation, problem: ParametricField, *, analyse: bool,
           progress: ProgressCallback | None,
           checkpoint: Checkpoint | None) -> Callable[[int], Callable[[Branch], None]]:
    """The per-branch hook of the engine: analyse the new points (``analyse``), hand the
    continuation to ``checkpoint``, report ``|p − start|`` to ``progress``."""

    def for_branch(i: int) -> Callable[[Branch], None]:
        def on_point(br: Branch) -> None:
            if len(result.branches) == i:  # a switched branch joins the run as it grows
                result.branches.append(br)
            if analyse:
                ans = result.analyses_of(i)
                for pt in br.points[len(ans):]:
                    ans.append(analyse_point(problem, pt.theta, pt.p))
            if checkpoint is not None:
                checkpoint(result)
            if progress is not None and br.points:
                progress(abs(br.points[-1].p - result.start))
        return on_point

    return for_branch


def _resumed(resume: Continuation | None, parameter: Parameter, start: float,
             stop: float) -> Continuation | None:
    if resume is None:
        return None
    if (resume.parameter.name != parameter.name or resume.start != start
            or resume.stop != stop):
        raise MesadynError(
            f"the continuation to resume runs {resume.parameter.name} from {resume.start:g} to "
            f"{resume.stop:g}, not {parameter.name} from {start:g} to {stop:g}")
    resume.parameter = parameter
    return resume


def follow(parameter: Parameter, start: float, stop: float, *, theta0: np.ndarray | None = None,
           options: Options | None = None, switch: bool = True,
           resume: Continuation | None = None, problem: ParametricField | None = None,
           mask: np.ndarray | None = None, analyse: bool = False,
           progress: ProgressCallback | None = None,
           checkpoint: Checkpoint | None = None) -> Continuation:
    """Continue the fixed point at ``p = start`` to ``p = stop`` and switch at branch points.

    ## Arguments
    - `parameter`: what varies (:func:`make_parameter <._parameters.make_parameter>`);
      `start`, `stop` must lie in its domain.
    - `theta0`: a point near a fixed point at ``start`` (default: Theorem 4.1's balanced point).
    - `options`: step control (:class:`~._system.Options`); `switch`: follow emerging branches
      (both directions) from every pitchfork or transcritical point of the primary branch.
    - `resume`: an interrupted run (:meth:`Continuation.from_dataset`): its finished branches
      are kept and the unfinished one continued, point for point as without the interruption.
    - `problem`: the :class:`~._problem.ParametricField` on ``[start, stop]`` (default: built
      here, with `mask` restricting the free coordinates, e.g.
      :func:`mesadyn.model.diagonal_mask`, the clipping of Theorem 4.3; masked-out entries keep
      their start values).
    - `analyse`: fill :attr:`Continuation.analyses` (:func:`analyse_point` at every point).
    - `progress`: called with ``|p − start|`` after each accepted point of any branch.
    - `checkpoint`: called with the continuation after each accepted (and analysed) point.

    ## Raises
    - `MesadynError`: a value outside the domain, a discrete parameter (use
      :func:`follow_discrete`), a start that is not near a fixed point, or a ``resume`` of
      another range.
    """
    if parameter.discrete:
        raise MesadynError(f"{parameter.name} is discrete; use follow_discrete")
    start = parameter.check(start, "start")
    stop = parameter.check(stop, "stop")
    if start == stop:
        raise MesadynError(f"start and stop are both {start:g}; give a range")
    opt = options or Options()
    lo, hi = min(start, stop), max(start, stop)
    pb = problem or ParametricField(parameter, lo, hi, mask=mask)
    result = _resumed(resume, parameter, start, stop) or Continuation(parameter, start, stop)
    if result.branches and result.branches[0].points:
        th0 = result.branches[0].points[0].theta
    else:
        th0 = start_point(pb, start, theta0, tol=opt.tol)
    pb.restrict_symmetries(th0)
    result.n_free, result.n_symmetries = int(pb.free.sum()), len(pb.symmetries)
    hook = _hooks(result, pb, analyse=analyse, progress=progress, checkpoint=checkpoint)
    if not result.branches:
        result.branches.append(Branch())
    primary = result.branches[0]
    if primary.status is Outcome.MAX_STEPS and primary.steps < opt.max_steps:
        run_branch(pb, th0, start, stop, opt, lo=lo, hi=hi, branch=primary, on_point=hook(0),
                   gauge_theta=th0)
    if switch:
        jobs = [(k, direction) for k, sp in enumerate(primary.specials)
                if sp.kind in (Bifurcation.PITCHFORK, Bifurcation.TRANSCRITICAL)
                for direction in (1, -1)]
        for n, (k, direction) in enumerate(jobs, start=1):
            if n < len(result.branches):
                br = result.branches[n]
                if br.status is Outcome.MAX_STEPS and br.points and br.steps < opt.max_steps:
                    run_branch(pb, th0, br.points[-1].p, stop, opt, lo=lo, hi=hi, branch=br,
                               on_point=hook(n), gauge_theta=th0)
                continue
            br = switch_branch(pb, primary.specials[k], stop, opt, lo=lo, hi=hi,
                               direction=direction, gauge_theta=th0, on_point=hook(n), origin=k)
            if len(result.branches) == n:
                result.branches.append(br)
    if analyse:  # a branch that stopped at its first point never reached the hook
        for i, br in enumerate(result.branches):
            if len(result.analyses_of(i)) < len(br.points):
                hook(i)(br)
    return result


def follow_discrete(parameter: Parameter, values: list[int], *,
                    theta0: np.ndarray | None = None, options: Options | None = None,
                    resume: Continuation | None = None, problem: ParametricField | None = None,
                    analyse: bool = False, progress: ProgressCallback | None = None,
                    checkpoint: Checkpoint | None = None) -> Continuation:
    """Natural continuation in a discrete parameter (T): Newton at each value from the last
    point (the pseudo-inverse step never moves along the orbit).  A change in the number of
    unstable non-symmetry eigenvalues between two values is reported as an
    :attr:`~._detect.Bifurcation.UNLOCATED` special point at the second value.

    ``resume`` (an interrupted run over the same values), ``problem`` (on ``[min, max]`` of
    the values), ``analyse``, ``progress`` and ``checkpoint`` are as in :func:`follow`.

    ## Raises
    - `MesadynError`: no values, a value outside the domain, a start that is not near a fixed
      point, or a ``resume`` of other values.
    """
    from ..fixedpoint import refine
    from ..model_fixedpoint import newton_polish

    if not values:
        raise MesadynError("give at least one value of the discrete parameter")
    vals = [int(parameter.check(v, "value")) for v in values]
    opt = options or Options()
    pb = problem or ParametricField(parameter, min(vals), max(vals))
    result = (_resumed(resume, parameter, vals[0], vals[-1])
              or Continuation(parameter, vals[0], vals[-1]))
    if not result.branches:
        result.branches.append(Branch())
    br = result.branches[0]
    done = [int(pt.p) for pt in br.points]
    if done != vals[:len(done)]:
        raise MesadynError(f"the continuation to resume holds {parameter.name} = {done}, not "
                           f"the first values of {vals}")
    if br.status is not Outcome.MAX_STEPS:  # finished
        return result
    theta = (br.points[-1].theta if br.points
             else start_point(pb, vals[0], theta0, tol=opt.tol))
    pb.restrict_symmetries(br.points[0].theta if br.points else theta)
    result.n_free, result.n_symmetries = int(pb.free.sum()), len(pb.symmetries)
    sysm = _System(pb, br.points[0].theta if br.points else theta, opt)
    on_point = _hooks(result, pb, analyse=analyse, progress=progress, checkpoint=checkpoint)(0)
    for T in vals[len(done):]:
        if br.points:
            if pb.model.is_paper:
                fp = refine(pb.field(T), theta, mask=pb.free, tol=opt.tol, max_iter=30)
                new, converged = fp.theta, fp.converged
            else:
                nt = newton_polish(pb.field(T), pb.model, theta, pb.free, tol=opt.tol,
                                   max_iter=30)
                assert nt.theta is not None
                new, converged = nt.theta, nt.converged
            if not converged:
                br.status = Outcome.STEP_FAILED
                br.message = f"Newton did not converge at {parameter.name}={T}"
                return result
            theta = np.asarray(new, np.float64)
        mu, _, _ = sysm.reduced_eigh(pb.hessian(theta, T), theta)
        pt = Point(theta=theta, p=float(T), residual=float(np.abs(pb.grad(theta, T)).max()),
                   iterations=0, eigenvalues=mu, n_unstable=count_unstable(mu),
                   tangent=np.zeros(sysm.nf + 1), ds=1.0)
        if br.points and br.points[-1].n_unstable != pt.n_unstable:
            br.specials.append(Special(
                kind=Bifurcation.UNLOCATED, p=float(T), theta=theta, after=len(br.points) - 1,
                eigenvalue=float("nan"), null_vector=np.zeros(sysm.nf), tangent=pt.tangent,
                fold_test=float("nan"), cubic=float("nan"), bracket=1.0,
                residual=pt.residual))
        br.points.append(pt)
        br.steps += 1
        on_point(br)
    br.status = Outcome.REACHED_END
    br.message = f"reached {parameter.name}={vals[-1]}"
    return result
