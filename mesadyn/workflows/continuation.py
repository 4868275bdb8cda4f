"""Follow a fixed point of the gradient flow through a data parameter (``mesadyn continue``).

The fixed point at ``p = start`` (Theorem 4.1's balanced point, or the θ in ``point``) is
continued to ``p = stop`` by :func:`mesadyn.analysis.continuation.follow` (or, for T,
:func:`~mesadyn.analysis.continuation.follow_discrete`); at every point the loss, ab, the
off-diagonal mass, the conserved quantity ``‖A‖² − ‖P‖²`` and the spectrum of ``−∇²L`` (zero
modes classified as ``mesadyn stability`` does) are recorded; folds and branch points are
located and the emerging branches followed.  The whole run (every branch, every spectrum, the
special points: :meth:`Continuation.to_dataset
<mesadyn.analysis.continuation.Continuation.to_dataset>`) goes to the run file ``out``.  With
``out`` given, a checkpoint ``RUN.partial.nc`` is written atomically as the branches grow (at
most every :data:`CHECKPOINT_SECONDS`, for every parameter), and ``resume=True`` continues it
when it holds this run (:func:`~mesadyn.workflows._run.stored_run`, the one reuse rule).

A model other than the paper's (``model="deep", layers=k``; softmax has no exact field and is
refused) is continued on its exact field by quadrature, rebuilt at each ``p``: it starts from
the fixed point its flow reaches from the layered diagonal init (or the θ in ``point``), holds
its per-layer invariants and cuts its stream shears by slices, and records ``Σ_l a_l b_l``,
the per-layer invariants, the mass off the layered diagonals and the spectrum with its zero
modes explained at every point (:mod:`._model_continuation`); the run is priced before it
starts and refused above a minute unless ``force`` (``--yes``).

Example:
    >>> from mesadyn.workflows import continuation
    >>> res = continuation.run(continuation.Config(parameter="sigma", start=0.5, stop=2.0,
    ...                                            d=2, T=8, points=20))  # doctest: +SKIP
    >>> res.status, res.max_residual  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import MesadynError, check_bool, check_choice, check_int, check_positive
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..record import Record, hidden, omitted_if
from ._common import optional_path, set_fields
from ._run import NOT_RECORDED, DeviceOptions, RunResult, stored_run, write_run

if TYPE_CHECKING:
    import numpy as np
    import xarray as xr

    from ..analysis.continuation import (
        Branch,
        Continuation,
        Parameter,
        ParametricField,
        PointAnalysis,
        Special,
    )

__all__ = ["CHECKPOINT_SECONDS", "BranchResult", "Config", "Result", "checkpoint_path", "run"]

#: The checkpoint is rewritten (atomically) at most this often, in seconds.
CHECKPOINT_SECONDS = 2.0


@dataclass(frozen=True)
class Config(DeviceOptions):
    """Options of ``mesadyn continue`` (process options first, see ``ProcessOptions``).

    ``parameter``: what varies (sigma, scale, m2, m4, m6, mu, weight, radius, noise, T) within
    the process (``radius``, ``rotation``, ``noise``); ``start`` (default: the family's own
    value; for radius and noise the process's ``radius``, ``noise``) and ``stop``: the
    range, inside the parameter's domain; ``points``: at least this many points on a branch
    that is monotone in p (the largest step is ``|stop − start|/(points − 1)``; for T, the
    number of integer values); ``point``: the start θ (``.npy``/``.nc``), default the balanced
    point; ``mask``: ``none`` or ``diagonal`` (Theorem 4.3's clipping); ``gauge``:
    ``invariant`` (hold ``‖A‖² − ‖P‖²``) or ``slice``; ``switch``: follow branches emerging at
    branch points; ``detect``: locate zero crossings; ``tol``: Newton tolerance on
    ``max|∇L|``; ``max_steps``: attempted steps per branch (default ``20·points``); ``out``:
    the run file (``.nc``); ``resume``: continue the checkpoint of an interrupted run with the
    same recorded options (it changes no number, so it is not recorded); ``device`` (cpu,
    cuda, auto: :class:`~mesadyn.workflows._run.DeviceOptions`): where the exact fields are
    evaluated; ``force``: run a model other than the paper's even when it is expected to take
    more than a minute (not recorded).
    """

    COMMAND: ClassVar[str] = "continuation"

    parameter: str = "sigma"
    start: float | None = None
    stop: float | None = None
    points: int = 200
    point: str | None = None
    mask: str = "none"
    gauge: str = "invariant"
    switch: bool = True
    detect: bool = True
    tol: float = 1e-11
    max_steps: int | None = None
    resume: bool = dataclasses.field(default=False, metadata=NOT_RECORDED)
    force: bool = dataclasses.field(default=False, metadata=NOT_RECORDED)

    def __post_init__(self) -> None:
        from ..analysis.continuation import Gauge, ParameterName
        from ..model import Mask

        super().__post_init__()
        name = check_choice("parameter", self.parameter, ParameterName)
        if not self.paper_model:  # before the exact field's own refusal, naming the command
            model = self.attention()
            if not model.polynomial:
                raise MesadynError(f"model={model} is not supported by mesadyn continue: it "
                                   "follows fixed points of the exact field, and ŷ of this "
                                   "model is not a polynomial in the tokens (no exact field)")
            set_fields(self, parameter=name)
            self.make_parameter()  # names a parameter or process its exact field lacks
        self.check_exact_reach()
        set_fields(self, parameter=name, points=check_int("points", self.points, 2),
                   tol=check_positive("tol", self.tol), mask=check_choice("mask", self.mask, Mask),
                   gauge=check_choice("gauge", self.gauge, Gauge),
                   point=optional_path("point", self.point),
                   switch=check_bool("switch", self.switch),
                   detect=check_bool("detect", self.detect),
                   resume=check_bool("resume", self.resume),
                   force=check_bool("force", self.force))
        if self.max_steps is not None:
            set_fields(self, max_steps=check_int("max_steps", self.max_steps, 1))
        if self.stop is None:
            raise MesadynError("give the end of the range: stop (--stop)")
        par = self.make_parameter()
        s0 = par.check(par.value() if self.start is None else self.start, "start")
        s1 = par.check(self.stop, "stop")
        set_fields(self, start=s0, stop=s1)
        if s0 == s1:
            raise MesadynError(f"start and stop are both {s0:g}; give a range")
        if par.discrete and (s0 != int(s0) or s1 != int(s1)):
            raise MesadynError(f"{par.name} takes integer values, got start={self.start!r}, "
                               f"stop={self.stop!r}")
        if self.resume and self.out is None:
            raise MesadynError("resume needs the run file of the interrupted run: give --out")

    def make_parameter(self) -> Parameter:
        """The :class:`~mesadyn.analysis.continuation.Parameter` these options follow."""
        from ..analysis.continuation import make_parameter

        return make_parameter(self.parameter, self.family(), self.T, radius=self.radius,
                              rotation=self.rotation, noise=self.noise,
                              model=None if self.paper_model else self.attention())


@dataclass(frozen=True)
class BranchResult(Record):
    """One followed branch with the paper's quantities at each point (arrays over points);
    its ``to_dict()`` is the branch's summary in ``--json`` (the arrays are in the run
    file).  A model other than the paper's adds ``invariants`` (points, layers) and their
    spread along the branch, ``layer_invariant_drift``."""

    DERIVED: ClassVar[tuple[str, ...]] = (
        "n_points", "p_first", "p_last", "p_min", "p_max", "max_residual", "ab_first",
        "ab_last", "max_offdiag_mass", "invariant_drift", "stable_points", "unstable_points",
        "n_specials")

    index: int
    origin: int  # index of the special point of branch 0 it emerged at (-1: primary)
    direction: int
    status: Outcome
    message: str
    p: np.ndarray = hidden()
    theta: np.ndarray = hidden()  # (points, 18d²)
    loss: np.ndarray = hidden()
    ab: np.ndarray = hidden()  # (points, d)
    offdiag_mass: np.ndarray = hidden()
    invariant: np.ndarray = hidden()
    residual: np.ndarray = hidden()  # max|∇L| of the field built at each p
    n_unstable: np.ndarray = hidden()
    n_zero: np.ndarray = hidden()
    eigenvalues: np.ndarray = hidden()  # (points, 18d²) of −∇²L, ascending
    reduced_eigenvalues: np.ndarray = hidden()  # (points, k) the non-symmetry ones
    specials: tuple[dict[str, Any], ...] = hidden(())
    invariants: np.ndarray | None = hidden()  # (points, layers): a model's, else None
    layer_invariant_drift: list[float] | None = omitted_if(None)

    @property
    def stable(self) -> np.ndarray:
        """Whether each point has no unstable direction."""
        out: np.ndarray = self.n_unstable == 0
        return out

    @property
    def n_points(self) -> int:
        return int(self.p.size)

    def _first_last(self, values: np.ndarray, index: int) -> float | None:
        return float(values[index].mean()) if self.p.size else None

    @property
    def p_first(self) -> float | None:
        return self._first_last(self.p, 0)

    @property
    def p_last(self) -> float | None:
        return self._first_last(self.p, -1)

    @property
    def p_min(self) -> float | None:
        return float(self.p.min()) if self.p.size else None

    @property
    def p_max(self) -> float | None:
        return float(self.p.max()) if self.p.size else None

    @property
    def max_residual(self) -> float | None:
        return float(self.residual.max()) if self.p.size else None

    @property
    def ab_first(self) -> float | None:
        """The mean over coordinates of ab at the first point."""
        return self._first_last(self.ab, 0)

    @property
    def ab_last(self) -> float | None:
        return self._first_last(self.ab, -1)

    @property
    def max_offdiag_mass(self) -> float | None:
        return float(self.offdiag_mass.max()) if self.p.size else None

    @property
    def invariant_drift(self) -> float | None:
        """The spread (max − min) of ``‖A‖² − ‖P‖²`` along the branch."""
        import numpy as np

        return float(np.ptp(self.invariant)) if self.p.size else None

    @property
    def stable_points(self) -> int:
        return int(self.stable.sum())

    @property
    def unstable_points(self) -> int:
        return int((~self.stable).sum())

    @property
    def n_specials(self) -> int:
        return len(self.specials)


@dataclass(frozen=True)
class Result(RunResult):
    """The continuation: every branch and the special points.  ``status`` and ``message`` are
    the primary branch's; the ``--json`` object is :meth:`to_dict` (summaries), the arrays are
    in :attr:`branches` and in the run file (:meth:`to_dataset`).  A model other than the
    paper's adds ``model``, ``layers`` and where the start came from (``source``)."""

    DERIVED: ClassVar[tuple[str, ...]] = ("n_branches", "n_points", "max_residual", "specials")

    parameter: str
    start: float
    stop: float
    family: str
    d: int
    T: int
    gauge: str
    mask: str
    n_free: int
    n_symmetries: int
    branches: tuple[BranchResult, ...]
    wall_s: float
    out: str | None
    resumed: bool
    continuation: Continuation = hidden()
    model: str | None = omitted_if(None)
    layers: int | None = omitted_if(None)
    source: str | None = omitted_if(None)

    def to_dataset(self) -> xr.Dataset:
        """The run as written to the run file (for :mod:`mesadyn.plots.bifurcation`):
        :meth:`Continuation.to_dataset <mesadyn.analysis.continuation.Continuation.to_dataset>`."""
        return self.continuation.to_dataset()

    @property
    def n_branches(self) -> int:
        return len(self.branches)

    @property
    def n_points(self) -> int:
        return int(sum(b.p.size for b in self.branches))

    @property
    def max_residual(self) -> float:
        """The largest ``max|∇L|`` over every point of every branch."""
        return max((float(b.residual.max()) for b in self.branches if b.p.size),
                   default=math.nan)

    @property
    def specials(self) -> list[dict[str, Any]]:
        """The located points of every branch (kind, p, tests; ab, loss there)."""
        return [s for b in self.branches for s in b.specials]


# ---- building results -------------------------------------------------------------------------
def _special_dict(sp: Special, branch: int, an: PointAnalysis | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "branch": branch, "kind": str(sp.kind), "p": float(sp.p), "after": int(sp.after),
        "eigenvalue": float(sp.eigenvalue), "fold_test": float(sp.fold_test),
        "cubic": float(sp.cubic), "bracket": float(sp.bracket),
        "residual": float(sp.residual)}
    if an is not None:
        out.update(ab=float(an.ab_mean), offdiag_mass=float(an.offdiag_mass),
                   loss=float(an.loss))
    return out


def _branch_result(i: int, br: Branch, ans: list[PointAnalysis],
                   sp_ans: list[PointAnalysis | None], layered: bool) -> BranchResult:
    import numpy as np

    n = len(ans)
    pts = br.points[:n]
    inv = np.array([a.invariants for a in ans]) if layered and n else None

    def arr(f: Any, empty_shape: tuple[int, ...] = (0,)) -> np.ndarray:
        return np.array([f(a) for a in ans]) if n else np.zeros(empty_shape)

    return BranchResult(
        index=i, origin=br.origin, direction=br.direction, status=br.status,
        message=br.message, p=np.array([pt.p for pt in pts]),
        theta=np.array([pt.theta for pt in pts]) if n else np.zeros((0, 0)),
        loss=arr(lambda a: a.loss), ab=arr(lambda a: a.ab, (0, 0)),
        offdiag_mass=arr(lambda a: a.offdiag_mass), invariant=arr(lambda a: a.invariant),
        residual=arr(lambda a: a.residual), n_unstable=arr(lambda a: a.n_unstable),
        n_zero=arr(lambda a: a.n_zero), eigenvalues=arr(lambda a: a.eigenvalues, (0, 0)),
        reduced_eigenvalues=np.array([pt.eigenvalues for pt in pts]) if n else np.zeros((0, 0)),
        specials=tuple(_special_dict(sp, i, a)
                       for sp, a in zip(br.specials, sp_ans, strict=False)),
        invariants=inv,
        layer_invariant_drift=None if inv is None else [float(v) for v in np.ptp(inv, axis=0)],
    )


def checkpoint_path(out: str | Path) -> Path:
    """Where the checkpoint of the run file ``out`` lives (``RUN.partial.nc``)."""
    p = Path(out)
    return p.with_name(p.stem + ".partial" + p.suffix)


# ---- the workflow -----------------------------------------------------------------------------
def _parametric_field(par: Parameter, lo: float, hi: float, mask: np.ndarray | None,
                      device: str) -> ParametricField:
    """The continuation problem of ``par`` on ``[lo, hi]`` with its exact fields on ``device``
    (each built by :meth:`Parameter.build
    <mesadyn.analysis.continuation.Parameter.build>` on the device)."""
    from ..analysis.continuation import ParametricField

    return ParametricField(par, lo, hi, mask=mask, device=device)


def _resumed(config: Config, ck: Path | None, par: Parameter) -> Continuation | None:
    """The continuation the checkpoint ``ck`` holds, when ``config.resume`` asks for it and
    the checkpoint is of this run (:func:`stored_run`); ``None`` when there is none."""
    from ..analysis.continuation import Continuation

    if not config.resume or ck is None:
        return None
    try:
        stored = stored_run(ck, config)
        return None if stored is None else Continuation.from_dataset(stored, par)
    except MesadynError as exc:
        raise MesadynError(f"cannot resume: {exc}; delete the checkpoint or run without "
                           "--resume") from None


def _values(start: float, stop: float, points: int) -> list[int]:
    """The integer values a discrete continuation visits: about ``points`` from start to
    stop, both included."""
    step = max(1, round(abs(stop - start) / (points - 1)))
    sign = 1 if stop > start else -1
    values = list(range(int(start), int(stop) + sign, sign * step))
    if values[-1] != int(stop):
        values.append(int(stop))
    return values


def run(config: Config, progress: ProgressCallback | None = None) -> Result:
    """Continue the fixed point from ``start`` to ``stop``; write the run file if asked.

    ## Arguments
    - `config`: the validated options.
    - `progress`: called with ``|p − start|`` (the distance travelled in p on the primary
      branch; emerging branches report theirs) after each accepted point.

    ## Returns
    A :class:`Result` (its ``status`` is the primary branch's outcome).

    ## Raises
    - `MesadynError`: no start point near a fixed point, a point file of the wrong shape, a
      resume whose checkpoint holds another run or is malformed (the message names the first
      difference or what is missing); for a model other than the paper's, a run expected above
      a minute without ``force`` or whose quadrature rule does not fit, or a start flow that
      finds no fixed point.
    """
    from ..analysis.continuation import Gauge, Options, analyse_point, follow, follow_discrete
    from ..io import check_writable, save_run
    from ..model import free_mask
    from ._model_continuation import (
        check_model_cost,
        model_start,
        start_source,
    )
    from ._run import load_point

    if config.out is not None:  # at the start of the run (a sweep resolves it under --out)
        check_writable(config.out, suffixes=config.OUT_SUFFIXES)
    t0 = time.perf_counter()
    par = config.make_parameter()
    model = par.model
    assert config.start is not None and config.stop is not None
    start, stop = float(config.start), float(config.stop)
    if model.is_paper:
        theta0 = load_point(config.point, config.d) if config.point else None
        mask = free_mask(config.mask, config.d) if str(config.mask) != "none" else None
    else:
        ck_exists = config.resume and config.out is not None and checkpoint_path(
            config.out).is_file()
        check_model_cost(config, par, model, start_flow=not (config.point or ck_exists))
        theta0 = load_point(config.point, config.d, model) if config.point else None
        mask = (model.free_mask(str(config.mask), config.d) if str(config.mask) != "none"
                else None)
    span = abs(stop - start)
    opt = Options(ds=span / (config.points - 1), ds_max=span / (config.points - 1),
                  ds_min=1e-9 * max(1.0, span), tol=config.tol, gauge=Gauge(config.gauge),
                  detect=config.detect, max_steps=config.max_steps or 20 * config.points)
    ck = checkpoint_path(config.out) if config.out else None
    resume = _resumed(config, ck, par)
    pb = _parametric_field(par, min(start, stop), max(start, stop), mask, config.torch_device)
    source = None
    if not model.is_paper:
        source = (f"the point in {config.point!r}" if config.point
                  else start_source(par, start))
        if theta0 is None and resume is None:
            theta0 = model_start(par, start, model.free_mask(str(config.mask), config.d),
                                 config.torch_device)
    last_save = time.perf_counter()

    def checkpoint(cont: Continuation) -> None:
        nonlocal last_save
        if ck is not None and time.perf_counter() - last_save >= CHECKPOINT_SECONDS:
            save_run(cont.to_dataset(), ck, kind=config.COMMAND, config=config.run_config(),
                     seed=config.seed)
            last_save = time.perf_counter()

    if par.discrete:
        cont = follow_discrete(par, _values(start, stop, config.points), theta0=theta0,
                               options=opt, resume=resume, problem=pb, analyse=True,
                               progress=progress, checkpoint=checkpoint)
    else:
        cont = follow(par, start, stop, theta0=theta0, options=opt, switch=config.switch,
                      resume=resume, problem=pb, analyse=True, progress=progress,
                      checkpoint=checkpoint)
    sp_ans: list[list[PointAnalysis | None]] = [
        [analyse_point(pb, sp.theta, sp.p) for sp in br.specials] for br in cont.branches]
    branches = tuple(_branch_result(i, br, cont.analyses_of(i), sp_ans[i], not model.is_paper)
                     for i, br in enumerate(cont.branches))
    primary = cont.branches[0] if cont.branches else None
    result = Result(
        parameter=str(config.parameter), start=start, stop=stop,
        family=par.spec(start).family.name, d=config.d, T=config.T, gauge=str(config.gauge),
        mask=str(config.mask), n_free=cont.n_free, n_symmetries=cont.n_symmetries,
        branches=branches, wall_s=time.perf_counter() - t0, out=config.out,
        resumed=resume is not None, continuation=cont,
        model=None if model.is_paper else model.name,
        layers=None if model.is_paper else model.layers, source=source,
        status=primary.status if primary is not None else Outcome.FAILED,
        message=primary.message if primary is not None else "no branch was followed")
    written = write_run(config, result)
    if ck is not None:
        ck.unlink(missing_ok=True)  # the run file now holds everything the checkpoint did
    return written
