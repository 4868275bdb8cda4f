"""Run the studies and claims of ``mesadyn reproduce``: resumable, atomic, with a progress bar.

Layout of ``OUT``::

    runs/<run>-<hash>.nc        one GD run or exact flow (netCDF, provenance, atomic)
    claims/<claim>-<hash>.json  one claim's rows (atomic)
    figures/<study>.png         the figures (atomic)
    report.md, report.html      the report (atomic); results.json, every number in it

Every file is written to a temporary name and renamed, so Ctrl-C never leaves a half-written
file.  A run or claim whose file exists is loaded, not recomputed: the file name carries a hash
of its configuration, the seed and the package version, so a changed configuration or version
recomputes and a re-run after an interruption continues where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xarray as xr

from ..errors import MesadynError, check_int
from ..io import atomic_write_text, load_run, save_run, to_json, version
from .studies import FlowRun, GDRun, Study, all_studies

SCHEMA = 1
Run = GDRun | FlowRun


def config_hash(config: dict[str, Any], seed: int | None) -> str:
    """12 hex digits of SHA-256 over the configuration, seed, version and schema."""
    key = to_json({"config": config, "seed": seed, "version": version(), "schema": SCHEMA})
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def family_of(name: str, param: float | None, d: int):
    """The process family of a run."""
    from ..process import family

    if name == "gaussian":
        return family(name, d, sigma=float(param))  # type: ignore[arg-type]
    if name == "sparse":
        return family(name, d, scale=float(param))  # type: ignore[arg-type]
    return family(name, d)


def theta0_of(init: tuple[Any, ...], d: int, seed: int) -> torch.Tensor:
    """θ_0 of a run: Assumption 3.1 ``("diagonal", a0, b0)`` or ``("gaussian", σ_w)``."""
    from ..model import diagonal_init, gaussian_init

    if init[0] == "diagonal":
        return diagonal_init(d, float(init[1]), float(init[2]))
    if init[0] == "gaussian":
        return gaussian_init(d, float(init[1]), seed)
    raise MesadynError(f"unknown init {init!r}")


#: Test context lengths of the in-context panels (Proposition 4.1, Theorem 4.2).
T_TE = (3, 5, 10, 20, 50, 100, 200)


def settle_time(fam, T: int, a0: float, b0: float, rel: float = 1e-9) -> float:
    """Reduced-flow time (Lemma 5.2) for ``|ab − ab*| <= rel·ab*``, by scipy (for t_end)."""
    from scipy.integrate import solve_ivp

    from ..reduced import ReducedSystem

    sys_ = ReducedSystem.from_family(fam, T)
    s_star = sys_.ab_star

    def f(_t, y):
        da, db = sys_.rhs(y[0], y[1])
        return [float(da), float(db)]

    def ev(_t, y):
        return abs(y[0] * y[1] - s_star) - rel * s_star

    if abs(a0 * b0 - s_star) <= rel * s_star:
        return 0.0  # starts on the hyperbola ab = ab*
    ev.terminal = True  # type: ignore[attr-defined]
    t_guess = 50.0 / sys_.c2 + 50.0 / (sys_.c1 * 2 * s_star)
    sol = solve_ivp(f, (0.0, 1e3 * t_guess), [a0, b0], events=ev, rtol=1e-10, atol=1e-14,
                    method="LSODA")
    if sol.t_events[0].size:
        return float(sol.t_events[0][0])
    return float(sol.t[-1])


# ---- computing one run ---------------------------------------------------------------
def compute_gd(run: GDRun, seed: int) -> xr.Dataset:
    """The paper's GD (:func:`mesadyn.train.train`) plus the in-context curve of its end point."""
    from ..analysis.incontext import context_curve, draw_test_set
    from ..train import TrainingDiverged, train

    fam = family_of(run.family, run.param, run.d)
    theta0 = theta0_of(run.init, run.d, seed)
    try:
        res = train(fam, run.T, m=run.m, steps=run.steps, theta0=theta0, seed=seed,
                    m_test=max(2000, min(run.m, 10_000)), mask=run.mask,
                    eval_every=run.eval_every)
    except TrainingDiverged as exc:
        res = exc.result
    ds = res.to_dataset()
    x1, lam = draw_test_set(fam, 2000, seed + 7919)
    curve = context_curve(torch.as_tensor(res.final_theta), x1, lam, T_TE)
    ds = ds.assign_coords(T_te=np.asarray(T_TE))
    for k in ("mse", "mse_se", "baseline", "ratio", "ratio_se"):
        ds[f"ctx_{k}"] = ("T_te", np.asarray(getattr(curve, k), dtype=np.float64))
    return ds


def flow_t_end(run: FlowRun) -> float:
    """Integration horizon: 3× the reduced settle time (Theorem 4.3 system for ones).

    At least ``1/c2`` (a flow starting on the minimum still gets a non-empty horizon).
    """
    from ..theory import constants

    fam = family_of(run.family, run.param, run.d)
    a0, b0 = float(run.init[1]), float(run.init[2])
    return max(3.0 * settle_time(fam, run.T, a0, b0), 1.0 / constants(fam, run.T).c2)


def exact_field(fam, T: int, out: Path | None = None):
    """:class:`ExactField` with its moment cache in ``OUT/cache`` (self-contained output)."""
    from ..field import FieldSpec, make_field

    return make_field(FieldSpec("exact", fam, T),
                      cache_dir=None if out is None else Path(out) / "cache")


def compute_flow(run: FlowRun, seed: int, out: Path | None = None) -> xr.Dataset:
    """The exact gradient flow (ExactField, all 18d² parameters) to convergence."""
    from ..flow import integrate

    fam = family_of(run.family, run.param, run.d)
    field_ = exact_field(fam, run.T, out)
    theta0 = theta0_of(run.init, run.d, seed)
    t_end = flow_t_end(run)
    if run.family == "ones" and run.mask == "none":
        t_end *= 20.0  # off the diagonal structure; slower directions (Proposition 4.2)
    res = integrate(field_, theta0, t_end=t_end, solver="dopri5", rtol=1e-10, atol=1e-12,
                    n_save=400, mask=run.mask)
    ds = res.to_dataset()
    ds.attrs["t_end"] = t_end
    ds.attrs["status"] = str(res.status)
    return ds


# ---- the run context -------------------------------------------------------------------
@dataclass
class Context:
    """What a claim or a figure needs: the output folder, the settings, the runs."""

    out: Path
    quick: bool
    seed: int
    tick: Callable[[str], None] = lambda _s: None
    _cache: dict[str, xr.Dataset] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    def run_path(self, run: Run) -> Path:
        seed = self.seed if isinstance(run, GDRun) or run.init[0] == "gaussian" else None
        return self.out / "runs" / f"{run.name}-{config_hash(run.config(), seed)}.nc"

    def has(self, run: Run) -> bool:
        return self.run_path(run).is_file()

    def load(self, run: Run) -> xr.Dataset:
        """The run's dataset: from disk if done, else computed now and saved atomically."""
        path = self.run_path(run)
        key = str(path)
        if key in self._cache:
            return self._cache[key]
        if run.name in self.failed:
            raise MesadynError(f"run {run.name} failed: {self.failed[run.name]}")
        if path.is_file():
            try:
                ds = load_run(path, kind=f"reproduce-{run.config()['kind']}")
                self._cache[key] = ds
                return ds
            except MesadynError:
                path.unlink(missing_ok=True)  # unreadable: recompute
        self.tick(f"{run.name}")
        t0 = time.perf_counter()
        if isinstance(run, GDRun):
            ds = compute_gd(run, self.seed)
        else:
            ds = compute_flow(run, self.seed, self.out)
        wall = time.perf_counter() - t0
        ds.attrs["reproduce_wall_s"] = wall
        self.timings[run.name] = wall
        save_run(ds, path, kind=f"reproduce-{run.config()['kind']}", config=run.config(),
                 seed=self.seed)
        ds = load_run(path)
        self._cache[key] = ds
        return ds


# ---- selection ---------------------------------------------------------------------------
def select(only: str | None, quick: bool,
           m: int | None = None) -> tuple[list[Study], list[str]]:
    """The studies and claim ids selected by ``--only`` (a claim id or a study name)."""
    from .claims import CLAIMS

    studies = all_studies(quick, m)
    if only is None:
        return list(studies.values()), list(CLAIMS)
    if only in CLAIMS:
        return [], [only]
    if only in studies:
        return [studies[only]], []
    if only in all_studies(False):
        raise MesadynError(f"study {only!r} is not part of --quick; run it without --quick")
    known = ", ".join([*CLAIMS, *studies])
    raise MesadynError(f"unknown --only {only!r}; choose one of: {known}")


@dataclass
class Outcome:
    """What :func:`run` did."""

    out: Path
    claims: list[dict[str, Any]]
    figures: list[str]
    runs: int
    computed: list[str]
    wall_s: float
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def all_pass(self) -> bool:
        """Every claim row PASS and no run or figure failed."""
        return all(c["status"] == "PASS" for c in self.claims) and not self.failed

    def summary(self) -> dict[str, Any]:
        return {
            "out": str(self.out), "all_pass": self.all_pass, "runs": self.runs,
            "computed": self.computed, "figures": self.figures, "wall_s": self.wall_s,
            "failed_runs": self.failed,
            "claims": [{k: c[k] for k in ("id", "label", "predicted", "measured", "error",
                                          "tolerance", "status")} for c in self.claims],
        }


def run(out: str | Path, *, quick: bool = False, seed: int = 1, only: str | None = None,
        m: int | None = None, show_progress: bool = True) -> Outcome:
    """Run the selected studies and claims into ``out`` and write the report.

    ``m`` overrides the training-set size of every GD run (the paper's is 10 000).
    """
    from ..progress import progress
    from .claims import CLAIMS, claim_hash_config, run_claim
    from .figures import draw_study
    from .report import write_report

    seed = check_int("seed", seed, 0)
    if m is not None:
        m = check_int("m", m, 2)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    studies, claim_ids = select(only, quick, m)
    ctx = Context(out, quick, seed)
    runs: dict[str, Run] = {}
    for st in studies:
        for r in st.runs():
            runs.setdefault(r.name, r)
    for cid in claim_ids:
        for r in CLAIMS[cid].runs(quick):
            runs.setdefault(r.name, r)
    computed: list[str] = []
    n_tasks = len(runs) + len(claim_ids) + len(studies) + 1
    with progress(show_progress) as bar:
        task = bar.add_task("reproduce", total=n_tasks)

        def tick(label: str) -> None:
            bar.update(task, description=f"reproduce: {label}")

        ctx.tick = tick
        # cheap (flow) runs first, then GD ordered by size, so early results appear early
        order = sorted(runs.values(), key=lambda r: (isinstance(r, GDRun),
                                                      getattr(r, "m", 0) * r.T))
        for r in order:
            if not ctx.has(r):
                computed.append(r.name)
            try:
                ctx.load(r)
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:  # noqa: BLE001 - recorded; dependent claims show ERROR
                ctx.failed[r.name] = f"{type(exc).__name__}: {exc}"
            bar.advance(task)
        claim_rows: list[dict[str, Any]] = []
        for cid in claim_ids:
            tick(cid)
            spec = CLAIMS[cid]
            cfg = claim_hash_config(spec, ctx)
            path = out / "claims" / f"{cid}-{config_hash(cfg, seed)}.json"
            if path.is_file():
                rows = json.loads(path.read_text())["rows"]
            else:
                computed.append(cid)
                rows = run_claim(spec, ctx)
                atomic_write_text(path, to_json({"config": cfg, "rows": rows}))
            claim_rows.extend(rows)
            bar.advance(task)
        figures: list[str] = []
        for st in studies:
            tick(f"figure {st.name}")
            try:
                figures.extend(draw_study(st, ctx))
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:  # noqa: BLE001 - recorded, shown in the report
                ctx.failed[f"figure {st.name}"] = f"{type(exc).__name__}: {exc}"
            bar.advance(task)
        tick("report")
        wall = time.perf_counter() - t0
        outcome = Outcome(out, claim_rows, figures, len(runs), computed, wall,
                          dict(ctx.failed))
        write_report(outcome, studies, ctx)
        bar.advance(task)
    return outcome


def finite_or_nan(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v
