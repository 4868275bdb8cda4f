"""The claim registry of ``mesadyn reproduce``: every claim of the paper, predicted vs measured.

Each claim yields one or more *rows* (:mod:`mesadyn.reproduce.rows`: predicted, measured,
error, tolerance and its justification, PASS / FAIL / ERROR).

Tolerances are fixed before measuring and come from the measurement itself: ``4·se`` for
Monte-Carlo estimates (batch means or the cluster-robust ratio estimator; a 4σ band has a
6·10⁻⁵ two-sided false-alarm rate), the ODE solver's tolerances for flow end points and
trajectories, and float64 rounding for identities that hold exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..model import diagonal_entries
from .context import Context
from .rows import ERROR as ERROR
from .rows import FAIL as FAIL
from .rows import PASS as PASS
from .rows import ClaimSpec as ClaimSpec
from .rows import ClaimStatus as ClaimStatus
from .rows import claim_hash as claim_hash
from .rows import claim_hash_config as claim_hash_config
from .rows import row as _row
from .rows import run_claim as run_claim
from .studies import DIAG_INITS, T_TRAIN, FlowRun, process

if TYPE_CHECKING:
    import xarray as xr

    from ..field import Field
    from ..process import Family


#: Relative tolerance on flow end points: LSODA at rtol 1e-10 run to the integrate workflow's
#: horizon (:func:`mesadyn.analysis.horizon.full_flow_horizon`: 3× the reduced settle time to
#: within 1e-12, at least 50/c2), so the end point is within ~1e-12 relative; 1e-6 leaves
#: room for the 18d²-dimensional flow's slower transverse directions, and is still 10⁴× smaller
#: than the finite-T correction that Theorem 4.1 predicts (ab* vs κ1/κ2 differ by ~4%).
FLOW_RTOL = 1e-6
#: Trajectory agreement (Lemma 5.3): local error <= 1e-10 per step over ~10³ accepted steps of
#: a contracting flow gives a global error below ~1e-7.
TRAJ_TOL = 1e-7
#: Identities in float64 (Lemma 5.2, 5.4): sums of ~10³ O(1) terms, rounding ~1e-13 relative.
ROUND_TOL = 1e-10
#: Corollary 4.1: the issue's tolerance on predictions (|ŷ| ~ 1).
MESA_TOL = 1e-10
NSIG = 4.0


# ---- shared pieces ----------------------------------------------------------------------------
def _fam(name: str, p: float | None, d: int = 5) -> Family:
    return process(name, p, d=d).family()


def _exact(name: str, p: float | None, T: int) -> Field:
    """The exact field of ``(name, p)`` at T (:func:`mesadyn.field.make_field`: the one the
    flows used, when this process built it)."""
    from ..field import make_field

    return make_field(process(name, p, T).field_spec("exact"))


def _final_theta(ds: xr.Dataset) -> torch.Tensor:
    return torch.as_tensor(np.asarray(ds["theta"].values)[-1], dtype=torch.float64)


def _fams(quick: bool) -> list[tuple[str, float]]:
    ps = (0.5,) if quick else (0.5, 1.0, 2.0)
    return [("gaussian", p) for p in ps] + [("sparse", p) for p in ps]


def _flows(fams: Sequence[tuple[str, float | None]],
           inits: tuple[tuple[float, float], ...] = DIAG_INITS, T: int = T_TRAIN,
           mask: str = "none") -> list[FlowRun]:
    return [FlowRun(f, p, T, ("diagonal", a, b), mask=mask) for f, p in fams for a, b in inits]


# ---- Theorem 4.1 --------------------------------------------------------------------------
def _runs_41(quick: bool) -> list[FlowRun]:
    runs = _flows(_fams(quick))
    if not quick:
        runs += _flows([("gaussian", 1.0)], T=5)
    return runs


def _check_41(ctx: Context) -> list[dict[str, Any]]:
    from ..analysis.mesa import ab_per_coordinate, structure_residual
    from ..theory import constants

    rows = []
    groups: dict[tuple[str, float | None, int], list[FlowRun]] = {}
    for r in _runs_41(ctx.quick):
        groups.setdefault((r.family, r.param, r.T), []).append(r)
    for (f, p, T), runs in groups.items():
        fam = _fam(f, p)
        c = constants(fam, T)
        errs, res, abs_, status = [], [], [], []
        for r in runs:
            ds = ctx.load(r)
            th = _final_theta(ds)
            ab = ab_per_coordinate(th)
            abs_.append(float(ab.mean()))
            errs.append(float(np.max(np.abs(ab / c.ab_star - 1))))
            res.append(structure_residual(th))
            status.append(str(ds.attrs.get("status", "")))
        worst = int(np.argmax(errs))
        ok = max(errs) <= FLOW_RTOL and max(res) <= 1e-9
        key = "σ" if f == "gaussian" else "c"
        rows.append(_row(
            "thm4.1", f"{f} {key}={p:g}, T={T}: ab at the end of the exact flow "
            f"(worst of {len(runs)} inits)", "Theorem 4.1", c.ab_star, abs_[worst],
            max(errs), FLOW_RTOL,
            "relative; LSODA rtol 1e-10 to 3× the reduced settle time (see FLOW_RTOL); the "
            "other active blocks must stay below 1e-9 (they start at 0 and have zero gradient "
            "under Assumption 4.1)", ok,
            {"ab_per_init": abs_, "rel_err_per_init": errs, "structure_residual": max(res),
             "flow_status": status, "ab_limit_T_inf": c.ab_limit,
             "paper_figure_line": c.ab_limit,
             "finite_T_vs_limit": c.ab_star / c.ab_limit - 1,
             "inits": [list(r.init[1:]) for r in runs]}))
    return rows


# ---- Theorem 4.3 --------------------------------------------------------------------------
def _runs_43(quick: bool) -> list[FlowRun]:
    return _flows([("ones", None)], mask="diagonal")


def _check_43(ctx: Context) -> list[dict[str, Any]]:
    from ..analysis.mesa import ab_per_coordinate
    from ..theory import constants, harmonic

    fam = _fam("ones", None)
    T, d = T_TRAIN, 5
    pred = 1.0 / (1.0 + (d - 1) / (T - 2) * harmonic(T - 2))
    c = constants(fam, T)
    errs, abs_ = [], []
    for r in _runs_43(ctx.quick):
        ab = ab_per_coordinate(_final_theta(ctx.load(r)))
        abs_.append(float(ab.mean()))
        errs.append(float(np.max(np.abs(ab / pred - 1))))
    worst = int(np.argmax(errs))
    return [_row("thm4.3", "x_1 = 1_d, diagonal gradients only: ab at the end of the exact flow "
                 "(worst of 3 inits)", "Theorem 4.3", pred, abs_[worst], max(errs), FLOW_RTOL,
                 "relative; as for Theorem 4.1", max(errs) <= FLOW_RTOL,
                 {"ab_per_init": abs_, "c2_over_c1": c.ab_star, "ab_limit_T_inf": 1.0})]


# ---- Proposition 4.2 ----------------------------------------------------------------------
def _runs_42(quick: bool) -> list[FlowRun]:
    return [FlowRun("ones", None, T_TRAIN, ("diagonal", 0.5, 1.5))]


def _offdiag_index(d: int) -> np.ndarray:
    """The off-diagonal entries of W^KQ_32 and W^PV_12 (Proposition 4.2's gradient)."""
    from ..model import block_labels, diagonal_mask

    return np.isin(block_labels(d), ("W_KQ_32", "W_PV_12")) & ~diagonal_mask(d)


def _check_p42(ctx: Context) -> list[dict[str, Any]]:
    from ..field import MonteCarloField, make_field
    from ..model import diagonal_init
    from ..theory import constants

    d, T = 5, T_TRAIN
    fam = _fam("ones", None)
    s = constants(fam, T).ab_star  # Theorem 4.3's fixed point
    theta = diagonal_init(d, math.sqrt(s), math.sqrt(s))
    idx = torch.as_tensor(_offdiag_index(d))
    g_exact = _exact("ones", None, T).grad(theta)[idx]
    n = 4000 if ctx.quick else 20000
    mc = make_field(process("ones", None, T).field_spec("mc", samples=n, seed=ctx.seed,
                                                        batches=20))
    assert isinstance(mc, MonteCarloField)
    est = mc.estimate(theta)
    g_mc, se = est.grad[idx], est.grad_se[idx]
    # x_1 = 1_d is deterministic, so the MC spread is from W only.
    k = int(torch.argmax(g_exact.abs()))
    diff = float((g_mc[k] - g_exact[k]).abs())
    tol = NSIG * float(se[k]) + ROUND_TOL * float(g_exact.abs().max())
    ok1 = diff <= tol and float(g_exact.abs()[k]) > NSIG * float(se[k])
    rows = [_row("prop4.2", "x_1 = 1_d at Theorem 4.3's diagonal fixed point: largest "
                 "off-diagonal gradient of W^KQ_32 / W^PV_12 (exact field vs Monte-Carlo)",
                 "Proposition 4.2 (Appendix A.8)", float(g_exact[k]), float(g_mc[k]), diff, tol,
                 f"4·se of the Monte-Carlo gradient ({n} sequences, 20 batch means); and the "
                 "exact value must be > 4·se, i.e. distinguishably non-zero", ok1,
                 {"max_abs_offdiag_grad_exact": float(g_exact.abs().max()),
                  "mc_se": float(se[k])})]
    ds = ctx.load(_runs_42(ctx.quick)[0])
    th = _final_theta(ds)
    off = float(th[idx].abs().max())
    rows.append(_row("prop4.2", "x_1 = 1_d, no mask: largest off-diagonal |entry| of "
                     "W^KQ_32 / W^PV_12 at the end of the exact flow (predicted: not 0)",
                     "Proposition 4.2, Appendix B.5", math.nan, off, math.nan, 1e-6,
                     "must exceed 1e-6 (10⁶× the solver's atol 1e-12; it starts at exactly 0)",
                     off > 1e-6, {"flow_status": str(ds.attrs.get("status", ""))}))
    rows[-1]["status"] = PASS if off > 1e-6 else FAIL
    rows[-1]["predicted_text"] = "> 0 (dense W_1, W_2)"
    return rows


# ---- Corollary 4.1 ----------------------------------------------------------------------
def _runs_c41(quick: bool) -> list[FlowRun]:
    return _flows([("gaussian", 0.5), ("sparse", 0.5)], inits=DIAG_INITS[1:2])


def _check_c41(ctx: Context) -> list[dict[str, Any]]:
    from ..analysis.mesa import mesa_check
    from ..process import make_generator, sample, sequences

    rows = []
    for r in _runs_c41(ctx.quick):
        fam = _fam(r.family, r.param)
        th = _final_theta(ctx.load(r))
        x1, lam = sample(fam, 64, r.T, make_generator(ctx.seed + 101))
        res = mesa_check(th, sequences(x1, lam, r.T))
        key = "σ" if r.family == "gaussian" else "c"
        rows.append(_row("cor4.1", f"{r.family} {key}={r.param:g}: max |ŷ_t − Ŵ_t x_t| over "
                         f"t = 2..{r.T}, 64 sequences (Ŵ_t = one OLS GD step, size ab/(t−1))",
                         "Corollary 4.1 (Appendix A.3)", 0.0, res.max_abs_err, res.max_abs_err,
                         MESA_TOL, "absolute, float64 (|ŷ| = O(1)); the GD step is taken by "
                         "autodiff of L_OLS, independently of the model's forward pass",
                         res.max_abs_err <= MESA_TOL, res.to_dict() | {"t_checked": r.T - 1}))
    return rows


# ---- Proposition 4.1 ----------------------------------------------------------------------
def _runs_p41(quick: bool) -> list[FlowRun]:
    ps = (0.5,) if quick else (0.5, 1.0, 2.0)
    return _flows([("gaussian", p) for p in ps], inits=DIAG_INITS[1:2])


def _check_p41(ctx: Context) -> list[dict[str, Any]]:
    from ..analysis.incontext import ContextBatch, draw_test_set
    from ..theory import constants

    rows = []
    n = 5000 if ctx.quick else 20000
    for r in _runs_p41(ctx.quick):
        fam = _fam(r.family, r.param)
        th = _final_theta(ctx.load(r))
        c = constants(fam, r.T)
        x1, lam = draw_test_set(fam, n, ctx.seed + 202)
        est = ContextBatch(x1, lam, r.T).ratio(th)
        pred = fam.second_moment * c.ab_star
        err = abs(est.value - pred)
        tol = NSIG * est.se
        rows.append(_row("prop4.1", f"gaussian σ={r.param:g}: E[(ŷ_T)_j/(W x_T)_j] at "
                         f"T_te = {r.T} (σ²·ab*; → 1/5 as T → ∞)", "Proposition 4.1",
                         pred, est.value, err, tol,
                         f"4·se (cluster-robust ratio estimator, {n} test sequences)",
                         err <= tol, est.to_dict() | {"T_inf_value": 0.2}))
    return rows


def _zero(v: float, scale: float) -> str:
    """``v`` to 4 digits, or ``0`` when it is float64 rounding relative to ``scale``."""
    return "0 (to rounding)" if abs(v) <= 1e-12 * scale else f"{v:.4g}"


# ---- Theorem 4.2 --------------------------------------------------------------------------
def _runs_t42(quick: bool) -> list[FlowRun]:
    ps = (0.5,) if quick else (0.5, 1.0, 2.0)
    return _flows([("sparse", p) for p in ps] + [("gaussian", p) for p in ps],
                  inits=DIAG_INITS[1:2])


def _check_t42(ctx: Context) -> list[dict[str, Any]]:
    from ..analysis.assumption42 import exact_mse, limit_mse
    from ..analysis.incontext import context_curve, draw_test_set
    from ..analysis.mesa import ab_per_coordinate

    rows = []
    n = 2000 if ctx.quick else 10000
    T_te = (10, 200)
    for r in _runs_t42(ctx.quick):
        fam = _fam(r.family, r.param)
        th = _final_theta(ctx.load(r))
        s = float(ab_per_coordinate(th).mean())
        x1, lam = draw_test_set(fam, n, ctx.seed + 303)
        cur = context_curve(th, x1, lam, T_te)
        key = "σ" if r.family == "gaussian" else "c"
        for k, t in enumerate(T_te):
            pred = max(exact_mse(fam, t, s=s), 0.0)  # an MSE; < 0 only by rounding
            err = abs(float(cur.mse[k]) - pred)
            tol = NSIG * float(cur.mse_se[k]) + 1e-12 * float(cur.baseline[k])
            rows.append(_row(
                "thm4.2", f"{r.family} {key}={r.param:g}: E‖ŷ − W x‖² at T_te = {t} "
                f"(limit T_te → ∞: {_zero(limit_mse(fam, s), fam.mean_sq_norm)})",
                "Theorem 4.2 / Assumption 4.2",
                pred, float(cur.mse[k]), err, tol,
                f"4·se ({n} test sequences) + 1e-12·E‖Wx‖² (float64 rounding); predicted by "
                "the exact formula of mesadyn.analysis.assumption42", err <= tol,
                {"ab": s, "baseline": float(cur.baseline[k]), "mse_se": float(cur.mse_se[k]),
                 "limit": limit_mse(fam, s), "goes_to_zero": limit_mse(fam, s)
                 <= 1e-12 * fam.mean_sq_norm}))
    return rows


# ---- Lemma 5.2 ----------------------------------------------------------------------------
def _check_l52(ctx: Context) -> list[dict[str, Any]]:
    from ..model import diagonal_init, diagonal_mask
    from ..reduced import ReducedSystem

    rows = []
    gen = np.random.default_rng(ctx.seed)
    cases: list[tuple[str, float | None, int]] = [
        ("gaussian", 1.0, T_TRAIN), ("sparse", 1.0, T_TRAIN), ("gaussian", 0.5, 5)]
    if not ctx.quick:
        cases += [("uniform", None, T_TRAIN), ("rademacher", None, T_TRAIN),
                  ("sparse", 2.0, 5)]
    for f, p, T in cases:
        fam = _fam(f, p)
        field_ = _exact(f, p, T)
        red = ReducedSystem.from_family(fam, T)
        worst, worst_other, worst_loss = 0.0, 0.0, 0.0
        dm = torch.as_tensor(diagonal_mask(5))
        kq = torch.zeros_like(dm)
        kq[: 225] = dm[:225]
        for _ in range(3):
            a, b = gen.uniform(-2, 2, size=2)
            th = diagonal_init(5, a, b)
            L, g = field_.loss_and_grad(th)
            da, db = red.rhs(a, b)
            f64 = torch.float64
            expect = torch.where(kq, torch.tensor(-float(da), dtype=f64),
                                 torch.tensor(-float(db), dtype=f64))
            # rounding is relative to the summands of ȧ, ḃ (they can cancel)
            scale = max(abs(a * b * b * red.c1), abs(b * red.c2), abs(a * a * b * red.c1),
                        abs(a * red.c2), 1e-300)
            worst = max(worst, float((g[dm] - expect[dm]).abs().max()) / scale)
            worst_other = max(worst_other, float(g[~dm].abs().max()) / scale)
            s = a * b
            Lr = 5 * (0.5 * red.c1 * s * s - red.c2 * s + 0.5 * (T - 2) * fam.second_moment)
            worst_loss = max(worst_loss, abs(float(L) - Lr) / abs(Lr))
        err = max(worst, worst_other, worst_loss)
        key = "" if p is None else (f" σ={p:g}" if f == "gaussian" else f" c={p:g}")
        rows.append(_row("lem5.2", f"{f}{key}, T={T}: exact ∇L at 3 random diagonal points vs "
                         "(−ȧ, −ḃ) of the reduced ODE (relative to the largest summand of "
                         "ȧ, ḃ)", "Lemma 5.2", 0.0, err, err,
                         ROUND_TOL, "float64 rounding of the exact moment contraction; every "
                         "other entry of ∇L must vanish to the same relative level, and "
                         "L = d(½c1 s² − c2 s + ½(T−2)E x²)", err <= ROUND_TOL,
                         {"diag_rel": worst, "offdiag_rel": worst_other, "loss_rel": worst_loss}))
    return rows


# ---- Lemmas 5.3 and 5.4 ---------------------------------------------------------------------
def _runs_l53(quick: bool) -> list[FlowRun]:
    return _flows([("gaussian", 0.5), ("sparse", 0.5)])


def _check_l53(ctx: Context) -> list[dict[str, Any]]:
    from ..reduced import ReducedSystem

    rows = []
    for r in _runs_l53(ctx.quick):
        fam = _fam(r.family, r.param)
        ds = ctx.load(r)
        t = np.asarray(ds["tau"].values)
        a_full, b_full = diagonal_entries(np.asarray(ds["theta"].values))
        red = ReducedSystem.from_family(fam, r.T)
        a_ref, b_ref = red.solution(float(r.init[1]), float(r.init[2]), t)
        scale = max(np.abs(a_ref).max(), np.abs(b_ref).max())
        err = max(np.abs(a_full - a_ref[:, None]).max(),
                  np.abs(b_full - b_ref[:, None]).max()) / scale
        key = "σ" if r.family == "gaussian" else "c"
        rows.append(_row("lem5.3", f"{r.family} {key}={r.param:g}, init {r.init[1:]}: full "
                         f"exact flow (a_j, b_j)(τ) vs the closed form of ℓ̃'s flow, "
                         f"{t.size} times", "Lemma 5.3", 0.0, float(err), float(err), TRAJ_TOL,
                         "max abs error / max |a|,|b|; see TRAJ_TOL (solver rtol 1e-10)",
                         float(err) <= TRAJ_TOL, {"t_end": float(t[-1])}))
    return rows


def _check_l54(ctx: Context) -> list[dict[str, Any]]:
    from ..model import diagonal_init
    from ..reduced import ReducedSystem

    rows = []
    for r in _runs_l53(ctx.quick):
        fam = _fam(r.family, r.param)
        field_ = _exact(r.family, r.param, r.T)
        red = ReducedSystem.from_family(fam, r.T)
        ds = ctx.load(r)
        th = np.asarray(ds["theta"].values)
        s = red.ab_star
        L_star = float(field_.loss(diagonal_init(5, math.sqrt(s), math.sqrt(s))))
        L0 = float(field_.loss(torch.as_tensor(th[0])))
        worst, used = 0.0, 0
        for k in np.linspace(0, len(th) - 1, 25).astype(int):
            theta = torch.as_tensor(th[k])
            L, g = field_.loss_and_grad(theta)
            gap = float(L) - L_star
            if gap <= 1e-6 * max(L0 - L_star, 1e-300):
                continue  # cancellation would dominate: L − L* below 1e-6 of its start
            aa, bb = diagonal_entries(th[k])
            pl = float(np.sum(2 * red.c1 * (aa**2 + bb**2) * (
                red.c2 - red.c1 * aa * bb) ** 2 / (2 * red.c1)))
            ratio = float(g.square().sum()) / pl
            worst = max(worst, abs(ratio - 1))
            used += 1
        key = "σ" if r.family == "gaussian" else "c"
        if used == 0:  # the init lies on the minimum (a0·b0 = ab*): nothing to test
            continue
        rows.append(_row("lem5.4", f"{r.family} {key}={r.param:g}, init {r.init[1:]}: "
                         f"‖∇L‖² / Σ_j 2c1(a_j²+b_j²)ℓ̃(a_j,b_j) along the exact flow "
                         f"({used} points)", "Lemma 5.4 (PL, with equality on the diagonal "
                         "manifold)", 1.0, 1.0 + worst, worst, 1e-8,
                         "relative; float64 rounding amplified by the cancellation in L − L* "
                         "(points with L − L* < 1e-6 of its start are skipped)",
                         worst <= 1e-8 and used > 0, {"points": used}))
    return rows


# ---- Assumption 4.2 (beyond the paper) ------------------------------------------------------
def _check_a42(ctx: Context) -> list[dict[str, Any]]:
    from ..analysis.assumption42 import check, exact_mse, mc_mse

    rows = []
    T_te = 200
    n = 2000 if ctx.quick else 10000
    for name in ("rademacher", "uniform", "gaussian", "sparse"):
        fam = _fam(name, 1.0 if name in ("gaussian", "sparse") else None)
        res = check(fam)
        pred = exact_mse(fam, T_te)
        mean, se = mc_mse(fam, T_te, n=n, seed=ctx.seed + 404)
        err = abs(mean - pred)
        tol = NSIG * se + 1e-12 * fam.mean_sq_norm
        rows.append(_row("asm4.2", f"{name}: E‖(κ1/κ2)M x_T − x_T‖² at T_te = {T_te}; "
                         f"Assumption 4.2 {'HOLDS' if res.satisfied else 'FAILS'} "
                         f"(limit {res.limit_mse:.4g})", "Assumption 4.2 (beyond the paper)",
                         pred, mean, err, tol, f"4·se ({n} sequences, 20 batch means)",
                         err <= tol, res.to_dict()))
    return rows


CLAIMS: dict[str, ClaimSpec] = {
    c.id: c for c in (
        ClaimSpec("thm4.1", "Theorem 4.1: the flow converges to ab* = κ1/(κ2 + κ3 H_{T−2}/(T−2))",
                  "Theorem 4.1", "Under Assumptions 3.1 and 4.1 the gradient flow converges to "
                  "W^KQ_32 = ãI, W^PV_12 = b̃I (all else 0) with ãb̃ = ab*.", _runs_41,
                  _check_41),
        ClaimSpec("thm4.2", "Theorem 4.2: MSE → 0 as T_te → ∞ iff Assumption 4.2",
                  "Theorem 4.2", "ŷ_{T_te} → W x_{T_te} for sparse (Example 4.1); not for "
                  "gaussian.", _runs_t42, _check_t42),
        ClaimSpec("thm4.3", "Theorem 4.3: x_1 = 1_d with diagonal masking",
                  "Theorem 4.3", "ãb̃ = 1/(1 + (d−1)H_{T−2}/(T−2)).", _runs_43, _check_43),
        ClaimSpec("prop4.1", "Proposition 4.1: gaussian ratio σ²ab* → 1/5", "Proposition 4.1",
                  "E[(ŷ_{T_te})_j/(W x_{T_te})_j] = σ² ab* (→ 1/5).", _runs_p41, _check_p41),
        ClaimSpec("prop4.2", "Proposition 4.2: x_1 = 1_d leaves the diagonal structure",
                  "Proposition 4.2", "Off-diagonal gradients of W^KQ_32, W^PV_12 are non-zero "
                  "at the diagonal structure; the limit is dense.", _runs_42, _check_p42),
        ClaimSpec("cor4.1", "Corollary 4.1: the trained model is one OLS GD step",
                  "Corollary 4.1", "ŷ_t = Ŵ_t x_t with Ŵ_t one GD step from 0, size ab/(t−1).  "
                  "Measured at the end point of the exact flow (Theorem 4.1's structure, "
                  "exactly diagonal); a finite-sample GD end point carries O(1/√m) "
                  "off-diagonal entries, so for it the identity holds only to that level.",
                  _runs_c41, _check_c41),
        ClaimSpec("lem5.2", "Lemma 5.2: the exact gradient at diagonal points is the reduced "
                  "field", "Lemma 5.2", "ȧ = −ab²c1 + bc2, ḃ = −a²bc1 + ac2.",
                  lambda q: [], _check_l52),
        ClaimSpec("lem5.3", "Lemma 5.3: the flow is the gradient flow of ℓ̃", "Lemma 5.3",
                  "(a, b)(τ) of the full flow equals the flow of ℓ̃ = (c2 − c1ab)²/(2c1).",
                  _runs_l53, _check_l53),
        ClaimSpec("lem5.4", "Lemma 5.4: PL inequality along trajectories", "Lemma 5.4",
                  "‖∇ℓ̃‖² >= 2c1(a²+b²)(ℓ̃ − min ℓ̃).", _runs_l53, _check_l54),
        ClaimSpec("asm4.2", "Assumption 4.2 for rademacher and uniform (beyond the paper)",
                  "Assumption 4.2", "Holds iff x_j² = κ2/κ1 a.s. on {x_j ≠ 0}.",
                  lambda q: [], _check_a42, beyond_paper=True),
    )
}
