"""Follow a fixed point of the gradient flow through a data parameter (``mesadyn continue``).

The fixed point at ``p = start`` (Theorem 4.1's balanced point, or the θ in ``point``) is
continued to ``p = stop`` by :func:`mesadyn.analysis.continuation.follow`; at every point the
loss, ab, the off-diagonal mass, the conserved quantity ``‖A‖² − ‖P‖²`` and the spectrum of
``−∇²L`` (zero modes classified as ``mesadyn stability`` does) are recorded; folds and branch
points are located and the emerging branches followed.  The whole run (every branch, every
spectrum, the special points) goes to a netCDF run file; with ``out`` given, a checkpoint is
written atomically as the branch grows, and ``resume=True`` continues an interrupted run.

Example:
    >>> from mesadyn.workflows import continuation
    >>> res = continuation.run(continuation.Config(parameter="sigma", start=0.5, stop=2.0,
    ...                                            d=2, T=8, points=20))  # doctest: +SKIP
    >>> res.branches[0].status, res.max_residual  # doctest: +SKIP
"""

from __future__ import annotations

import enum
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MesadynError, check_int, check_positive
from ..progress import ProgressCallback
from ..tolerances import ZERO_RTOL
from ._common import choice, optional_path, set_fields
from ._device import DeviceOptions

if TYPE_CHECKING:
    import numpy as np
    import xarray as xr

    from ..analysis.continuation import (
        Branch,
        Continuation,
        Parameter,
        ParametricField,
        PointAnalysis,
    )
    from ..field import Field

__all__ = ["BranchResult", "Config", "Result", "run"]

#: ``kind`` attribute of the run files this workflow writes.
KIND = "continuation"
#: The checkpoint is rewritten (atomically) at most this often, in seconds.
CHECKPOINT_SECONDS = 2.0
#: Options that may differ between a checkpoint and the run that resumes it.
_NOT_CHECKED = ("resume", "device")


@dataclass(frozen=True)
class Config(DeviceOptions):
    """Options of ``mesadyn continue`` (process options first, see ``ProcessOptions``).

    ``parameter``: what varies (sigma, scale, m2, m4, m6, mu, weight, radius, T); ``start``
    (default:
    the family's own value) and ``stop``: the range, inside the parameter's domain;
    ``points``: at least this many points on a branch that is monotone in p (the largest step
    is ``|stop − start|/(points − 1)``; for T, the number of integer values); ``point``: the
    start θ (``.npy``/``.nc``), default the balanced point; ``mask``: ``none`` or ``diagonal``
    (Theorem 4.3's clipping); ``gauge``: ``invariant`` (hold ``‖A‖² − ‖P‖²``) or ``slice``;
    ``switch``: follow branches emerging at branch points; ``tol``: Newton tolerance on
    ``max|∇L|``; ``out``: the run file (``.nc``); ``resume``: continue the checkpoint of an
    interrupted run with the same options (on any ``device``: cpu, cuda or auto, where the
    exact fields are evaluated, :class:`DeviceOptions`).
    """

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
    out: str | None = None
    resume: bool = False

    def __post_init__(self) -> None:
        from ..analysis.continuation import Gauge, ParameterName
        from ..io import NETCDF_SUFFIXES, check_writable
        from ..model import Mask

        super().__post_init__()
        name = choice("parameter", self.parameter, ParameterName)
        self.check_diagonal("continuation (it follows the exact field)")
        if self.radius != 1 and name is not ParameterName.RADIUS:
            raise MesadynError(f"radius={self.radius!r}: continuation in {name} runs at the "
                               "paper's r = 1 (continue in radius instead)")
        set_fields(self, points=check_int("points", self.points, 2),
                   tol=check_positive("tol", self.tol), mask=choice("mask", self.mask, Mask),
                   gauge=choice("gauge", self.gauge, Gauge),
                   point=optional_path("point", self.point),
                   out=optional_path("out", self.out), switch=bool(self.switch),
                   detect=bool(self.detect), resume=bool(self.resume))
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
        if self.out is not None:
            check_writable(self.out, suffixes=NETCDF_SUFFIXES)
        if self.resume and self.out is None:
            raise MesadynError("resume needs the run file of the interrupted run: give --out")

    def make_parameter(self) -> Parameter:
        from ..analysis.continuation import make_parameter

        return make_parameter(self.parameter, self.family(), self.T)

    def to_dict(self) -> dict[str, Any]:
        """The options as JSON-ready values (stored in the run file)."""
        out: dict[str, Any] = {}
        for k in self.__dataclass_fields__:
            v = getattr(self, k)
            out[k] = str(v) if isinstance(v, enum.Enum) else v
        return out


@dataclass(frozen=True)
class BranchResult:
    """One followed branch with the paper's quantities at each point (arrays over points)."""

    index: int
    origin: int  # index of the special point of branch 0 it emerged at (-1: primary)
    direction: int
    status: str
    message: str
    p: np.ndarray
    theta: np.ndarray  # (points, 18d²)
    loss: np.ndarray
    ab: np.ndarray  # (points, d)
    offdiag_mass: np.ndarray
    invariant: np.ndarray
    residual: np.ndarray  # max|∇L| of the field built at each p
    n_unstable: np.ndarray
    n_zero: np.ndarray
    eigenvalues: np.ndarray  # (points, 18d²) of −∇²L, ascending
    reduced_eigenvalues: np.ndarray  # (points, k) the non-symmetry ones
    specials: tuple[dict[str, Any], ...]

    @property
    def stable(self) -> np.ndarray:
        out: np.ndarray = self.n_unstable == 0
        return out

    def summary(self) -> dict[str, Any]:
        import numpy as np

        n = int(self.p.size)
        return {
            "index": self.index, "origin": self.origin, "direction": self.direction,
            "status": self.status, "message": self.message, "n_points": n,
            "p_first": float(self.p[0]) if n else None,
            "p_last": float(self.p[-1]) if n else None,
            "p_min": float(self.p.min()) if n else None,
            "p_max": float(self.p.max()) if n else None,
            "max_residual": float(self.residual.max()) if n else None,
            "ab_first": float(self.ab[0].mean()) if n else None,
            "ab_last": float(self.ab[-1].mean()) if n else None,
            "max_offdiag_mass": float(self.offdiag_mass.max()) if n else None,
            "invariant_drift": float(np.ptp(self.invariant)) if n else None,
            "stable_points": int(self.stable.sum()),
            "unstable_points": int((~self.stable).sum()),
            "n_specials": len(self.specials),
        }


@dataclass(frozen=True)
class Result:
    """The continuation: every branch and the special points (the ``--json`` object is
    :meth:`to_dict`; arrays are in :attr:`branches` and in the run file)."""

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
    dataset: xr.Dataset

    def to_dataset(self) -> xr.Dataset:
        """The run as written to the run file (for :mod:`mesadyn.plots.bifurcation`)."""
        return self.dataset

    @property
    def status(self) -> str:
        """The primary branch's status (``reached_end`` when it got to ``stop``)."""
        return self.branches[0].status if self.branches else "failed"

    @property
    def max_residual(self) -> float:
        return max((float(b.residual.max()) for b in self.branches if b.p.size),
                   default=math.nan)

    @property
    def specials(self) -> list[dict[str, Any]]:
        return [s for b in self.branches for s in b.specials]

    def to_dict(self) -> dict[str, Any]:
        """The ``mesadyn continue --json`` object (summaries; arrays are in the run file)."""
        return {
            "parameter": self.parameter, "start": self.start, "stop": self.stop,
            "family": self.family, "d": self.d, "T": self.T, "gauge": self.gauge,
            "mask": self.mask, "n_free": self.n_free, "n_symmetries": self.n_symmetries,
            "status": self.status, "n_branches": len(self.branches),
            "n_points": int(sum(b.p.size for b in self.branches)),
            "max_residual": self.max_residual,
            "branches": [b.summary() for b in self.branches],
            "specials": self.specials, "wall_s": self.wall_s, "out": self.out,
            "resumed": self.resumed,
        }


# ---- building results -------------------------------------------------------------------------
def _special_dict(sp: Any, branch: int, an: PointAnalysis | None) -> dict[str, Any]:
    out = {"branch": branch, "kind": str(sp.kind), "p": float(sp.p), "after": int(sp.after),
           "eigenvalue": float(sp.eigenvalue), "fold_test": float(sp.fold_test),
           "cubic": float(sp.cubic), "bracket": float(sp.bracket),
           "residual": float(sp.residual)}
    if an is not None:
        out.update(ab=float(an.ab_mean), offdiag_mass=float(an.offdiag_mass),
                   loss=float(an.loss))
    return out


def _branch_result(i: int, br: Branch, ans: list[PointAnalysis],
                   sp_ans: list[PointAnalysis | None]) -> BranchResult:
    import numpy as np

    pts = br.points
    n = len(ans)
    pts = pts[:n]

    def arr(f: Any, empty_shape: tuple[int, ...] = (0,)) -> np.ndarray:
        return np.array([f(a) for a in ans]) if n else np.zeros(empty_shape)

    return BranchResult(
        index=i, origin=br.origin, direction=br.direction, status=str(br.status),
        message=br.message, p=np.array([pt.p for pt in pts]),
        theta=np.array([pt.theta for pt in pts]) if n else np.zeros((0, 0)),
        loss=arr(lambda a: a.loss), ab=arr(lambda a: a.ab, (0, 0)),
        offdiag_mass=arr(lambda a: a.offdiag_mass), invariant=arr(lambda a: a.invariant),
        residual=arr(lambda a: a.residual), n_unstable=arr(lambda a: a.n_unstable),
        n_zero=arr(lambda a: a.n_zero), eigenvalues=arr(lambda a: a.eigenvalues, (0, 0)),
        reduced_eigenvalues=np.array([pt.eigenvalues for pt in pts]) if n else np.zeros((0, 0)),
        specials=tuple(_special_dict(sp, i, a)
                       for sp, a in zip(br.specials, sp_ans, strict=False)),
    )


def _dataset(config: Config, cont: Continuation, analyses: list[list[PointAnalysis]],
             extra: dict[str, Any]) -> xr.Dataset:
    """Every branch in one Dataset: dimension ``point`` runs over all points of all branches
    (``point_branch`` says which), ``special`` over the located points, ``branch`` over the
    branches; the driver's state (tangent, step) is kept so that a run can resume."""
    import numpy as np
    import xarray as xr

    rows: dict[str, list[Any]] = {k: [] for k in (
        "branch", "p", "theta", "loss", "ab", "offdiag_mass", "invariant", "residual",
        "n_unstable", "n_zero", "eigenvalues", "reduced_eigenvalues", "tangent", "ds",
        "iterations", "zero_modes")}
    for i, (br, ans) in enumerate(zip(cont.branches, analyses, strict=True)):
        for pt, an in zip(br.points, ans, strict=False):
            rows["branch"].append(i)
            rows["p"].append(pt.p)
            rows["theta"].append(pt.theta)
            rows["loss"].append(an.loss)
            rows["ab"].append(an.ab)
            rows["offdiag_mass"].append(an.offdiag_mass)
            rows["invariant"].append(an.invariant)
            rows["residual"].append(an.residual)
            rows["n_unstable"].append(an.n_unstable)
            rows["n_zero"].append(an.n_zero)
            rows["eigenvalues"].append(an.eigenvalues)
            rows["reduced_eigenvalues"].append(pt.eigenvalues)
            rows["tangent"].append(pt.tangent)
            rows["ds"].append(pt.ds)
            rows["iterations"].append(pt.iterations)
            rows["zero_modes"].append(json.dumps(an.zero_modes, sort_keys=True))
    d = config.d
    n = 18 * d * d
    npts = len(rows["p"])

    def mat(key: str, width: int) -> np.ndarray:
        return np.array(rows[key], dtype=float) if npts else np.zeros((0, width))

    k = len(rows["reduced_eigenvalues"][0]) if npts else 0
    nt = len(rows["tangent"][0]) if npts else 0
    specials = [(i, sp) for i, br in enumerate(cont.branches) for sp in br.specials]
    ds = xr.Dataset(
        {
            "point_branch": ("point", np.array(rows["branch"], dtype=np.int64)),
            "p": ("point", np.array(rows["p"], dtype=float)),
            "theta": (("point", "param"), mat("theta", n)),
            "loss": ("point", np.array(rows["loss"], dtype=float)),
            "ab": (("point", "coord"), mat("ab", d)),
            "ab_mean": ("point", mat("ab", d).mean(axis=1) if npts else np.zeros(0)),
            "offdiag_mass": ("point", np.array(rows["offdiag_mass"], dtype=float)),
            "invariant": ("point", np.array(rows["invariant"], dtype=float)),
            "residual": ("point", np.array(rows["residual"], dtype=float)),
            "n_unstable": ("point", np.array(rows["n_unstable"], dtype=np.int64)),
            "n_zero": ("point", np.array(rows["n_zero"], dtype=np.int64)),
            "stable": ("point", np.array(rows["n_unstable"], dtype=np.int64) == 0),
            "eigenvalues": (("point", "mode"), mat("eigenvalues", n)),
            "reduced_eigenvalues": (("point", "rmode"), mat("reduced_eigenvalues", k)),
            "tangent": (("point", "tdim"), mat("tangent", nt)),
            "ds": ("point", np.array(rows["ds"], dtype=float)),
            "iterations": ("point", np.array(rows["iterations"], dtype=np.int64)),
            "zero_modes": ("point", np.array(rows["zero_modes"], dtype=str)),
            "special_branch": ("special", np.array([i for i, _ in specials], dtype=np.int64)),
            "special_kind": ("special", np.array([str(s.kind) for _, s in specials], dtype=str)),
            "special_p": ("special", np.array([s.p for _, s in specials], dtype=float)),
            "special_after": ("special", np.array([s.after for _, s in specials],
                                                  dtype=np.int64)),
            "special_theta": (("special", "param"),
                              np.array([s.theta for _, s in specials], dtype=float)
                              if specials else np.zeros((0, n))),
            "special_eigenvalue": ("special", np.array([s.eigenvalue for _, s in specials],
                                                       dtype=float)),
            "special_fold_test": ("special", np.array([s.fold_test for _, s in specials],
                                                      dtype=float)),
            "special_cubic": ("special", np.array([s.cubic for _, s in specials], dtype=float)),
            "special_bracket": ("special", np.array([s.bracket for _, s in specials],
                                                    dtype=float)),
            "special_residual": ("special", np.array([s.residual for _, s in specials],
                                                     dtype=float)),
            "special_null_vector": (("special", "free"),
                                    np.array([s.null_vector for _, s in specials], dtype=float)
                                    if specials else np.zeros((0, 0))),
            "special_tangent": (("special", "tdim"),
                                np.array([s.tangent for _, s in specials], dtype=float)
                                if specials else np.zeros((0, nt))),
            "branch_status": ("branch", np.array([str(b.status) for b in cont.branches],
                                                 dtype=str)),
            "branch_message": ("branch", np.array([b.message for b in cont.branches],
                                                  dtype=str)),
            "branch_origin": ("branch", np.array([b.origin for b in cont.branches],
                                                 dtype=np.int64)),
            "branch_direction": ("branch", np.array([b.direction for b in cont.branches],
                                                    dtype=np.int64)),
            "branch_steps": ("branch", np.array([b.steps for b in cont.branches],
                                                dtype=np.int64)),
            "branch_rejected": ("branch", np.array([b.rejected for b in cont.branches],
                                                   dtype=np.int64)),
        },
        attrs={"parameter": str(config.parameter), "symbol": cont.parameter.symbol,
               **{k: v for k, v in extra.items() if isinstance(v, (int, float, str))}},
    )
    return ds


def _restore(ds: xr.Dataset) -> tuple[list[Branch], list[list[PointAnalysis]]]:
    """Branches and analyses from a checkpoint (the inverse of :func:`_dataset`)."""
    import numpy as np

    from ..analysis.continuation import (
        Bifurcation,
        Branch,
        Point,
        PointAnalysis,
        Special,
        Status,
    )

    nb = int(ds.sizes.get("branch", 0))
    branches: list[Branch] = []
    analyses: list[list[PointAnalysis]] = []
    pb = ds["point_branch"].values
    for i in range(nb):
        br = Branch(status=Status(str(ds["branch_status"].values[i])),
                    message=str(ds["branch_message"].values[i]),
                    origin=int(ds["branch_origin"].values[i]),
                    direction=int(ds["branch_direction"].values[i]),
                    steps=int(ds["branch_steps"].values[i]),
                    rejected=int(ds["branch_rejected"].values[i]))
        ans = []
        for j in np.flatnonzero(pb == i):
            red = ds["reduced_eigenvalues"].values[j]
            tol = ZERO_RTOL * float(np.abs(red).max()) if red.size else 0.0
            br.points.append(Point(
                theta=ds["theta"].values[j].copy(), p=float(ds["p"].values[j]),
                residual=float(ds["residual"].values[j]),
                iterations=int(ds["iterations"].values[j]), eigenvalues=red.copy(),
                n_unstable=int((red > tol).sum()), tangent=ds["tangent"].values[j].copy(),
                ds=float(ds["ds"].values[j])))
            ans.append(PointAnalysis(
                loss=float(ds["loss"].values[j]), residual=float(ds["residual"].values[j]),
                ab=ds["ab"].values[j].copy(), offdiag_mass=float(ds["offdiag_mass"].values[j]),
                invariant=float(ds["invariant"].values[j]),
                eigenvalues=ds["eigenvalues"].values[j].copy(),
                n_zero=int(ds["n_zero"].values[j]),
                n_stable=int(ds["eigenvalues"].values[j].size - ds["n_zero"].values[j]
                             - ds["n_unstable"].values[j]),
                n_unstable=int(ds["n_unstable"].values[j]),
                zero_modes=json.loads(str(ds["zero_modes"].values[j]))))
        branches.append(br)
        analyses.append(ans)
    for s in range(int(ds.sizes.get("special", 0))):
        i = int(ds["special_branch"].values[s])
        branches[i].specials.append(Special(
            kind=Bifurcation(str(ds["special_kind"].values[s])),
            p=float(ds["special_p"].values[s]), theta=ds["special_theta"].values[s].copy(),
            after=int(ds["special_after"].values[s]),
            eigenvalue=float(ds["special_eigenvalue"].values[s]),
            null_vector=ds["special_null_vector"].values[s].copy(),
            tangent=ds["special_tangent"].values[s].copy(),
            fold_test=float(ds["special_fold_test"].values[s]),
            cubic=float(ds["special_cubic"].values[s]),
            bracket=float(ds["special_bracket"].values[s]),
            residual=float(ds["special_residual"].values[s])))
    return branches, analyses


def checkpoint_path(out: str | Path) -> Path:
    """Where the checkpoint of the run file ``out`` lives (``RUN.partial.nc``)."""
    p = Path(out)
    return p.with_name(p.stem + ".partial" + p.suffix)


# ---- the workflow -----------------------------------------------------------------------------
def _parametric_field(par: Parameter, lo: float, hi: float, mask: np.ndarray | None,
                      device: str) -> ParametricField:
    """The continuation problem of ``par`` on ``[lo, hi]`` with its exact fields on ``device``
    (each built as :meth:`Parameter.build <mesadyn.analysis.continuation.Parameter.build>`
    does, from ``par.spec(p)`` with the device; on the CPU the same field as without)."""
    import dataclasses

    from ..analysis.continuation import ParametricField
    from ..field import make_field

    class OnDevice(ParametricField):
        def _build(self, p: float) -> Field:
            spec = dataclasses.replace(self.parameter.spec(p), device=device)
            return make_field(spec, disk_cache=False, reuse=False)

    return OnDevice(par, lo, hi, mask=mask)


def run(config: Config, progress: ProgressCallback | None = None) -> Result:
    """Continue the fixed point from ``start`` to ``stop``; write the run file if asked.

    ## Arguments
    - `config`: the validated options.
    - `progress`: called with ``|p − start|`` (the distance travelled in p on the primary
      branch; emerging branches report theirs) after each accepted point.

    ## Returns
    A :class:`Result`.

    ## Raises
    - `MesadynError`: no start point near a fixed point, a point file of the wrong shape, a
      resume whose checkpoint holds another run.
    """

    from ..analysis.continuation import (
        Continuation,
        Gauge,
        Options,
        analyse_point,
        follow,
        follow_discrete,
    )
    from ..analysis.stability import load_point
    from ..io import load_run, save_run
    from ..model import free_mask

    t0 = time.perf_counter()
    par = config.make_parameter()
    assert config.start is not None and config.stop is not None
    start, stop = float(config.start), float(config.stop)
    cfg = config.to_dict()
    cfg_key = {k: v for k, v in cfg.items() if k not in _NOT_CHECKED}
    theta0 = load_point(config.point, config.d) if config.point else None
    mask = free_mask(config.mask, config.d) if str(config.mask) != "none" else None
    span = abs(stop - start)
    opt = Options(ds=span / (config.points - 1), ds_max=span / (config.points - 1),
                  ds_min=1e-9 * max(1.0, span), tol=config.tol, gauge=Gauge(config.gauge),
                  detect=config.detect,
                  max_steps=config.max_steps or 20 * config.points)
    ck = checkpoint_path(config.out) if config.out else None
    resume_branches: list[Branch] | None = None
    analyses: list[list[PointAnalysis]] = []
    resumed = False
    if config.resume and ck is not None and ck.is_file():
        from ..io import run_config

        old = load_run(ck, KIND)
        stored = {k: v for k, v in run_config(old).items() if k not in _NOT_CHECKED}
        if json.dumps(stored, sort_keys=True, default=str) != json.dumps(
                cfg_key, sort_keys=True, default=str):
            raise MesadynError(f"the checkpoint {str(ck)!r} holds a run with other options; "
                               "delete it or run without --resume")
        resume_branches, analyses = _restore(old)
        resumed = True
    pb = _parametric_field(par, min(start, stop), max(start, stop), mask, config.torch_device)
    extra = {"n_free": int(pb.free.sum()), "n_symmetries": len(pb.symmetries)}
    last_save = [time.perf_counter()]
    holder: list[Continuation] = []

    def analyses_for(i: int) -> list[PointAnalysis]:
        while len(analyses) <= i:
            analyses.append([])
        return analyses[i]

    def save(cont: Continuation, path: Path) -> None:
        save_run(_dataset(config, cont, analyses, extra), path, kind=KIND, config=cfg,
                 seed=config.seed)

    def on_point(i: int, br: Branch) -> None:
        ans = analyses_for(i)
        for pt in br.points[len(ans):]:
            ans.append(analyse_point(pb, pt.theta, pt.p))
        if progress is not None and br.points:
            progress(abs(br.points[-1].p - start))
        if ck is not None and holder and time.perf_counter() - last_save[0] >= CHECKPOINT_SECONDS:
            save(holder[0], ck)
            last_save[0] = time.perf_counter()

    if par.discrete:
        step = max(1, round(span / (config.points - 1)))
        sign = 1 if stop > start else -1
        values = list(range(int(start), int(stop) + sign, sign * step))
        if values[-1] != int(stop):
            values.append(int(stop))
        cont = follow_discrete(par, values, theta0=theta0, options=opt, on_point=on_point)
    else:
        # the Continuation object exists only once follow() returns; checkpoints need it
        # earlier, so follow() is given the branch list it fills in place
        live = Continuation(par, start, stop, list(resume_branches or []))
        holder.append(live)
        cont = follow(par, start, stop, theta0=theta0, options=opt, switch=config.switch,
                      on_point=on_point, resume=live.branches, problem=pb)
        holder[0] = cont
    for i, br in enumerate(cont.branches):  # a branch that stopped at its first point
        if len(analyses_for(i)) < len(br.points):
            on_point(i, br)
    sp_ans: list[list[PointAnalysis | None]] = [
        [analyse_point(pb, sp.theta, sp.p) for sp in br.specials] for br in cont.branches]
    branches = tuple(_branch_result(i, br, analyses_for(i), sp_ans[i])
                     for i, br in enumerate(cont.branches))
    dataset = _dataset(config, cont, analyses, extra)
    if config.out is not None:
        save_run(dataset, Path(config.out), kind=KIND, config=cfg, seed=config.seed)
        if ck is not None:
            ck.unlink(missing_ok=True)
    fam = par.spec(start).family
    return Result(
        parameter=str(config.parameter), start=start, stop=stop, family=fam.name,
        d=config.d, T=config.T, gauge=str(config.gauge), mask=str(config.mask),
        n_free=int(pb.free.sum()), n_symmetries=len(pb.symmetries), branches=branches,
        wall_s=time.perf_counter() - t0, out=config.out, resumed=resumed, dataset=dataset)
