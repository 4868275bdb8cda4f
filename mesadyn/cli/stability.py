"""``mesadyn stability``: fixed points, Jacobian spectra, the PL rate and Proposition 4.2.

For an Assumption 4.1 family the point is the balanced diagonal fixed point ``a = b = √ab*``
(Theorem 4.1), or the end of the flow from ``--a0 --b0``, or a θ read with ``--point``; the
command refines it by Newton, shows it is a fixed point of the *full* flow (off-diagonal
gradient ~0) and classifies the spectrum of ``−∇²L``.  For ``--x1 ones`` (Section 4.3) it shows
Proposition 4.2: the masked fixed point of Theorem 4.3 has a non-zero off-diagonal gradient,
and the unmasked flow from it reaches a dense fixed point (Appendix B.5).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from ..errors import MesadynError, check_int, check_positive
from ._common import (
    X1,
    Dim,
    Json,
    Length,
    Scale,
    Seed,
    Sigma,
    console,
    emit_json,
    table,
)

FIELDS = ("exact", "mc")


def make_stability_field(kind: str, fam: Any, T: int, samples: int, seed: int) -> Any:
    """A field that can give a Hessian: exact (analytic), or mc (finite differences of the
    common-random-numbers gradient, :class:`~mesadyn.analysis.spectrum.FiniteDifferenceHessian`).
    """
    from ..analysis.spectrum import FiniteDifferenceHessian

    if kind == "exact":
        from ..field.exact import ExactField

        try:
            return ExactField(fam, T)
        except MesadynError as exc:
            raise MesadynError(
                f"field 'exact' cannot give a Hessian for family {fam.name!r} ({exc}); "
                "use --field mc"
            ) from None
    if kind == "mc":
        from ..field.montecarlo import MonteCarloField

        samples = check_int("samples", samples, 64)
        return FiniteDifferenceHessian(MonteCarloField(fam, T, samples=samples, seed=seed))
    raise MesadynError(
        f"field {kind!r} cannot give a Hessian here; choose one of {', '.join(FIELDS)}"
    )


def load_point(path: str | Path, d: int) -> np.ndarray:
    """A flat θ (length 18d²) from ``.npy`` (no pickles) or a run ``.nc`` (variable ``theta``,
    last row if it is a trajectory); wrong shape or non-finite entries are errors."""
    path = Path(path)
    n = 18 * d * d
    if not path.is_file():
        raise MesadynError(f"point file not found: {str(path)!r}")
    if path.suffix == ".npy":
        try:
            arr = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise MesadynError(f"cannot read {str(path)!r} as a numpy array: {exc}") from None
    elif path.suffix in (".nc", ".nc4", ".netcdf"):
        from ..io import load_run

        ds = load_run(path)
        if "theta" not in ds:
            raise MesadynError(f"{str(path)!r} has no variable 'theta'")
        arr = np.asarray(ds["theta"].values)
        if arr.ndim == 2:
            arr = arr[-1]
    else:
        raise MesadynError(f"--point must be a .npy or .nc file, got {str(path)!r}")
    if arr.dtype.kind not in "fiu":
        raise MesadynError(f"the point in {str(path)!r} must be real numbers, got {arr.dtype}")
    arr = np.asarray(arr, np.float64)
    if arr.shape != (n,):
        raise MesadynError(
            f"the point in {str(path)!r} must have shape ({n},) for d={d}, got {arr.shape}"
        )
    if not np.isfinite(arr).all():
        raise MesadynError(f"the point in {str(path)!r} has {int((~np.isfinite(arr)).sum())} "
                           "non-finite entries")
    return arr


def _identity_distance(W: np.ndarray) -> float:
    """``‖W − (tr W/d) I‖_F / ‖W‖_F``: 0 for a multiple of the identity."""
    d = W.shape[0]
    nrm = np.linalg.norm(W)
    if nrm == 0:
        return 0.0
    return float(np.linalg.norm(W - np.trace(W) / d * np.eye(d)) / nrm)


def _blocks(theta: np.ndarray) -> dict[str, np.ndarray]:
    import torch

    from ..model import block, unpack

    W_KQ, W_PV = unpack(torch.as_tensor(theta))
    out = {}
    for m, W in (("KQ", W_KQ), ("PV", W_PV)):
        for i in (1, 2, 3):
            for j in (1, 2, 3):
                out[f"W_{m}_{i}{j}"] = block(W, i, j).numpy().copy()
    return out


def _analyse(field: Any, theta: np.ndarray, zero_rtol: float) -> tuple[Any, np.ndarray]:
    import torch

    from ..analysis.spectrum import classify

    H = field.hessian(torch.as_tensor(theta)).cpu().numpy()
    return classify(H, theta, rtol=zero_rtol, field=field), H


def _point_report(field: Any, fam: Any, c: Any, fp: Any, zero_rtol: float,
                  mask_note: str) -> tuple[dict[str, Any], Any]:
    from ..analysis.fixedpoint import gradient_split, offdiag_mask
    from ..analysis.pl import ab_mean, mean_diagonals
    from ..analysis.spectrum import reduced_spectrum, reduced_spectrum_analytic, restricted_spectrum
    from ..reduced import ReducedSystem

    sp, H = _analyse(field, fp.theta, zero_rtol)
    split = gradient_split(fp.grad)
    a, b = mean_diagonals(fp.theta)
    system = ReducedSystem(c.c1, c.c2)
    red_num = reduced_spectrum(system, a, b)
    red_an = reduced_spectrum_analytic(system, a, b)
    trans = restricted_spectrum(H, offdiag_mask(fam.d))
    tol = sp.tol
    mu_red = -c.c1 * (a * a + b * b)
    nearest = float(sp.eigenvalues[np.argmin(np.abs(sp.eigenvalues - mu_red))])
    out = {
        "ab": ab_mean(fp.theta),
        "ab_theory": c.ab_star,
        "a": a,
        "b": b,
        "loss": fp.loss,
        "newton_iterations": fp.iterations,
        "newton_residual": fp.residual,
        "newton_over": mask_note,
        **split,
        **sp.summary(),
        "reduced": {
            "c1": c.c1, "c2": c.c2,
            "eigenvalues_numeric": red_num.tolist(),
            "eigenvalues_analytic": red_an.tolist(),
            "max_abs_diff": float(np.abs(red_num - red_an).max()),
            "mu_hyperbola": mu_red,
            "nearest_full_eigenvalue": nearest,
        },
        "transverse": {
            "n": int(trans.size),
            "max_eigenvalue": float(trans.max()) if trans.size else float("nan"),
            "min_eigenvalue": float(trans.min()) if trans.size else float("nan"),
            "n_unstable": int((trans > tol).sum()),
            "n_zero": int((np.abs(trans) <= tol).sum()),
            "stable": bool((trans <= tol).all()),
        },
    }
    return out, sp


def _pl_report(field: Any, c: Any, end: Any, fp: Any, sp: Any) -> dict[str, Any]:
    from ..analysis.pl import dominant_rate, fitted_rate, mean_diagonals, pl_trace

    tr = pl_trace(field, end.t_series, end.theta_series, fp.loss, c.c1)
    a, b = mean_diagonals(fp.theta)
    lin, mode_blocks = dominant_rate(tr, end.theta_series, fp.theta, sp)
    return {
        **tr.summary(),
        "t_end": float(end.t),
        "flow_status": end.status,
        "flow_backend": end.backend,
        "measured_rate": fitted_rate(tr.t, tr.loss_gap),
        "linearised_rate": lin,
        "linearised_mode_blocks": mode_blocks,
        "lemma_rate": 2 * c.c1 * (a * a + b * b),
        "t": tr.t.tolist(),
        "ratio": [None if not math.isfinite(x) else x for x in tr.ratio.tolist()],
        "lemma": tr.lemma.tolist(),
    }


def compute(x1: str = "gaussian", sigma: float = 1.0, scale: float = 1.0, d: int = 5,
            T: int = 100, seed: int = 1, a0: float | None = None, b0: float | None = None,
            field: str = "exact", samples: int = 4000, point: str | None = None,
            t_end: float = 1e4, zero_rtol: float = 1e-8, pl: bool = True,
            plot: str | None = None) -> dict[str, Any]:
    """The JSON result of ``mesadyn stability`` (also used in-process by ``mesadyn sweep``)."""
    import torch

    from ..analysis.fixedpoint import balanced_point, flow_to_fixed_point, refine
    from ..model import active_mask, diagonal_init, diagonal_mask
    from ..theory import constants
    from ._common import make_family

    fam = make_family(x1, d, sigma, scale)
    c = constants(fam, T)
    t_end = check_positive("t_end", t_end)
    zero_rtol = check_positive("zero_rtol", zero_rtol)
    if plot is not None and Path(plot).suffix.lower() not in (".pdf", ".png", ".svg"):
        raise MesadynError(f"--plot must end in .pdf, .png or .svg, got {plot!r}")
    if (a0 is None) != (b0 is None):
        raise MesadynError("give both --a0 and --b0, or neither")
    if point is not None and a0 is not None:
        raise MesadynError("give either --point or --a0/--b0, not both")
    fld = make_stability_field(field, fam, T, samples, seed)
    ones = not fam.assumption_41  # the diagonal is invariant only under the mask (Lemma A.5)
    mask = diagonal_mask(d) if ones else None
    mask_note = "diagonal mask (Theorem 4.3)" if ones else "all active entries"
    end = None
    # Monte-Carlo: evaluate at the point as given (Newton would chase the sampled loss's own
    # critical point, which differs from the population one by the Monte-Carlo error).
    newton = 30 if field == "exact" else 0
    # the Monte-Carlo gradient has an explicit-solver noise floor well above 1e-8
    steady_tol = 1e-8 if field == "exact" else 1e-6
    if point is not None:
        th0 = load_point(point, d)
        source = f"file {point}"
        # a given θ may be dense: refine over every active entry, whatever the family
        mask, mask_note = None, "all active entries"
        fp = refine(fld, th0, max_iter=newton)
    elif a0 is not None:
        source = f"flow from diagonal init a0={a0}, b0={b0}"
        fp, end = flow_to_fixed_point(fld, diagonal_init(d, a0, b0).numpy(), t_end=t_end,
                                      mask=mask, steady_tol=steady_tol, max_iter=newton)
    else:
        source = "balanced point a = b = sqrt(ab*) (Theorem 4.3)" if ones else \
            "balanced point a = b = sqrt(ab*) (Theorem 4.1)"
        fp = refine(fld, balanced_point(fam, T), mask=mask, max_iter=newton)
    report, sp = _point_report(fld, fam, c, fp, zero_rtol, mask_note)
    out: dict[str, Any] = {
        "family": fam.name,
        "d": d,
        "T": c.T,
        "field": fld.describe(),
        "source": source,
        "n_params": 18 * d * d,
        "n_active": int(active_mask(d).sum()),
        "fixed_point": report,
    }
    if field == "mc":
        est = fld.base.estimate(torch.as_tensor(fp.theta))
        g, se = est.grad.numpy(), est.grad_se.numpy()
        act = active_mask(d)
        z = np.abs(g[act]) / np.where(se[act] > 0, se[act], np.inf)
        out["monte_carlo"] = {
            "samples": est.samples, "batches": est.batches,
            "loss": float(est.loss), "loss_se": float(est.loss_se),
            "grad_max": float(np.abs(g).max()), "grad_se_max": float(se.max()),
            "max_z": float(z.max()),
            "hessian": "central differences of the common-random-numbers gradient",
        }
    spectra = {("masked fixed point" if ones else "fixed point"): sp}
    if ones:
        rel_fp, rel_end = flow_to_fixed_point(fld, fp.theta, t_end=t_end,
                                              steady_tol=steady_tol, max_iter=newton)
        rel_report, rel_sp = _point_report(fld, fam, c, rel_fp, zero_rtol, "all active entries")
        blocks = _blocks(rel_fp.theta)
        W1, W2 = blocks["W_KQ_32"], blocks["W_PV_12"]
        others = max(float(np.abs(blocks[k]).max()) for k in
                     ("W_KQ_22", "W_KQ_23", "W_KQ_33", "W_PV_13"))
        out["released"] = {
            "W_KQ_32": W1.tolist(),
            "W_PV_12": W2.tolist(),
            "loss": rel_fp.loss,
            "loss_drop": fp.loss - rel_fp.loss,
            "grad_norm": rel_fp.grad_norm,
            "eigenvalues": rel_report["eigenvalues"],
            "n_zero": rel_report["n_zero"],
            "n_unstable": rel_report["n_unstable"],
            "stable": rel_report["stable"],
            "stiffness": rel_report["stiffness"],
            "zero_modes": rel_report["zero_modes"],
            "zero_gap": rel_report["zero_gap"],
            "leading": rel_report["leading"],
            "ab": rel_report["ab"],
            "newton_iterations": rel_fp.iterations,
            "flow": {"t": rel_end.t, "status": rel_end.status, "backend": rel_end.backend,
                     "wall_s": rel_end.wall_s},
            "one_step_gd": {
                "W1_identity_distance": _identity_distance(W1),
                "W2_identity_distance": _identity_distance(W2),
                "W1_diag_mean": float(np.diag(W1).mean()),
                "W1_offdiag_mean": float((W1.sum() - np.trace(W1)) / (d * d - d))
                if d > 1 else 0.0,
                "W2_diag_mean": float(np.diag(W2).mean()),
                "W2_offdiag_mean": float((W2.sum() - np.trace(W2)) / (d * d - d))
                if d > 1 else 0.0,
                "other_active_blocks_max": others,
            },
        }
        spectra["dense fixed point (released)"] = rel_sp
        pl_end, pl_fp, pl_sp = rel_end, rel_fp, rel_sp
    else:
        pl_end, pl_fp, pl_sp = end, fp, sp
    if pl and field == "exact":
        if pl_end is None:
            start = diagonal_init(d, 0.1, 0.1).numpy()
            pl_fp, pl_end = flow_to_fixed_point(fld, start, t_end=t_end)
            pl_sp = _analyse(fld, pl_fp.theta, zero_rtol)[0]
        out["pl"] = _pl_report(fld, c, pl_end, pl_fp, pl_sp)
        out["pl"]["trajectory"] = "release flow (unmasked)" if ones else (
            source if end is not None else "flow from diagonal init a0 = b0 = 0.1")
    if plot is not None:
        out["plot"] = str(_plot(spectra, d, plot, fam.name))
    return out


def _plot(spectra: dict[str, Any], d: int, path: str, name: str) -> Path:
    """Eigenvalues of −∇²L (symlog), one panel per point, coloured by the dominant block."""
    from ..analysis.spectrum import block_weights

    try:
        from ..plots import _style as st
    except ImportError:  # pragma: no cover - the plots helper's module is part of the package
        st = None
    suffix = Path(path).suffix.lower()
    if suffix not in (".pdf", ".png", ".svg"):
        raise MesadynError(f"--plot must end in .pdf, .png or .svg, got {path!r}")
    palette = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#999999"]
    groups = ["W_KQ_22", "W_KQ_23", "W_KQ_32", "W_KQ_33", "W_PV_12", "W_PV_13", "inactive"]
    from matplotlib.figure import Figure

    def draw() -> Figure:
        fig = Figure(figsize=(7.0, 2.8), layout="constrained")
        axes = fig.subplots(1, len(spectra), squeeze=False)[0]
        for ax, (title, sp) in zip(axes, spectra.items(), strict=True):
            w = block_weights(sp.eigenvectors, d)
            names = list(w)
            W = np.stack([w[n] for n in names])
            dom = [names[i] for i in W.argmax(axis=0)]
            dom = [g if g in groups else "inactive" for g in dom]
            idx = np.arange(sp.eigenvalues.size)
            zero = sp.kinds == "zero"
            for g, col in zip(groups, palette, strict=True):
                sel = np.array([x == g for x in dom]) & ~zero
                if sel.any():
                    ax.scatter(idx[sel], sp.eigenvalues[sel], s=6, color=col,
                               label=g.replace("W_", "").replace("_", " "))
            if zero.any():
                ax.scatter(idx[zero], np.zeros(int(zero.sum())), s=4, color="#BBBBBB",
                           label="zero modes")
            nz = np.abs(sp.eigenvalues[~zero])
            ax.set_yscale("symlog", linthresh=float(nz.min()) / 2 if nz.size else 1.0)
            ax.axhline(0.0, color="black", lw=0.5)
            ax.set_xlabel("mode (ascending)")
            ax.set_ylabel(r"eigenvalue of $-\nabla^2 L$")
            ax.set_title(f"{name}: {title} "
                         f"({sp.n_unstable} unstable, {sp.n_zero} zero)", fontsize=8)
        axes[-1].legend(fontsize=6, markerscale=2, loc="lower right", title="dominant block",
                        title_fontsize=6)
        return fig

    if st is not None:
        with st.style():
            fig = draw()
        return st.save(fig, path)
    import io

    from ..io import atomic_write_bytes

    fig = draw()
    buf = io.BytesIO()
    fig.savefig(buf, format=suffix.lstrip("."))
    return atomic_write_bytes(path, buf.getvalue())


FieldOpt = Annotated[str, typer.Option("--field", help="Field: exact (default) or mc.")]
Samples = Annotated[int, typer.Option("--samples", help="Monte-Carlo samples (--field mc).")]
PointOpt = Annotated[
    str | None, typer.Option("--point", help="Start point θ from a .npy (flat, 18d²) or run .nc.")
]
A0Opt = Annotated[float | None, typer.Option("--a0", help="Find the point by the flow from "
                                             "the diagonal init W^KQ_32 = a0 I ...")]
B0Opt = Annotated[float | None, typer.Option("--b0", help="... and W^PV_12 = b0 I.")]
TEnd = Annotated[float, typer.Option("--t-end", help="Longest flow time.")]
ZeroRtol = Annotated[float, typer.Option("--zero-rtol",
                                         help="Zero-mode threshold, relative to max |eigenvalue|.")]
PlOpt = Annotated[bool, typer.Option("--pl/--no-pl", help="PL diagnostics along a trajectory.")]
PlotOpt = Annotated[str | None, typer.Option("--plot", help="Write the spectra to FILE "
                                             "(.pdf, .png or .svg).")]


def stability(
    x1: X1 = "gaussian",
    sigma: Sigma = 1.0,
    scale: Scale = 1.0,
    d: Dim = 5,
    T: Length = 100,
    seed: Seed = 1,
    a0: A0Opt = None,
    b0: B0Opt = None,
    field: FieldOpt = "exact",
    samples: Samples = 4000,
    point: PointOpt = None,
    t_end: TEnd = 1e4,
    zero_rtol: ZeroRtol = 1e-8,
    pl: PlOpt = True,
    plot: PlotOpt = None,
    json: Json = False,
) -> None:
    """Fixed points, spectra of −∇²L, the PL rate; for --x1 ones, Proposition 4.2."""
    out = compute(x1, sigma, scale, d, T, seed, a0, b0, field, samples, point, t_end,
                  zero_rtol, pl, plot)
    if json:
        emit_json(out)
        return
    _print(out)


def _print(out: dict[str, Any]) -> None:
    fp = out["fixed_point"]
    ones = "released" in out
    title = (f"mesadyn stability — {out['family']}, d={out['d']}, T={out['T']}: "
             + ("1. masked fixed point (Theorem 4.3)" if ones else "fixed point"))
    zm = fp["zero_modes"]
    rows = [
        ("point", out["source"]),
        ("ab (mean) / ab* theory", f"{fp['ab']:.12g} / {fp['ab_theory']:.12g}"),
        ("loss", fp["loss"]),
        (f"Newton residual ({fp['newton_over']})", fp["newton_residual"]),
        ("max|∇L| (grad_norm)", fp["grad_norm"]),
        ("max|∇L| off diag W^KQ_32, W^PV_12", fp["offdiag_grad_norm"]),
        ("  of which off-diagonal of W^KQ_32, W^PV_12", fp["offdiag_32_12_grad_norm"]),
        ("  of which other active blocks", fp["rest_grad_norm"]),
        ("fixed point of the full flow", fp["grad_norm"] < 1e-9),
        ("modes: zero / stable / unstable",
         f"{fp['n_zero']} / {fp['n_stable']} / {fp['n_unstable']}"),
        ("zero modes: inactive + symmetry", f"{zm['inactive']} + {zm['symmetry']}"),
        ("zero modes: unused / coordinate sym. / higher-order / unexplained",
         f"{zm['unused']} / {zm['coordinate_symmetry']} / {zm['higher_order']} / "
         f"{zm['unexplained']}"),
        ("zero gap |μ|/max|μ|: largest zero, smallest non-zero",
         f"{fp['zero_gap'][0]:.2e}, {fp['zero_gap'][1]:.2e}"),
        ("‖H·(P,−A)‖ (symmetry direction)", fp["symmetry_residual"]),
        ("stiffness ratio", fp["stiffness"]),
        ("transverse spectrum: unstable / max eigenvalue",
         f"{fp['transverse']['n_unstable']} / {fp['transverse']['max_eigenvalue']:.6g}"),
        ("reduced spectrum numeric", str(np.round(fp["reduced"]["eigenvalues_numeric"], 10))),
        ("reduced spectrum analytic", str(np.round(fp["reduced"]["eigenvalues_analytic"], 10))),
        ("−c1(a²+b²) vs nearest full eigenvalue",
         f"{fp['reduced']['mu_hyperbola']:.10g} vs "
         f"{fp['reduced']['nearest_full_eigenvalue']:.10g}"),
        ("stable (no unstable direction)", fp["stable"]),
    ]
    console.print(table(title, rows))
    console.print(_leading_table("leading modes", fp["leading"]))
    if ones:
        r = out["released"]
        g = r["one_step_gd"]
        rows = [
            ("flow", f"τ = {r['flow']['t']:.4g} ({r['flow']['status']}, {r['flow']['backend']})"),
            ("loss: masked → dense (drop)",
             f"{fp['loss']:.10g} → {r['loss']:.10g} ({r['loss_drop']:.6g})"),
            ("max|∇L| at the dense point", r["grad_norm"]),
            ("modes: zero / unstable", f"{r['n_zero']} / {r['n_unstable']}"),
            ("zero modes: inactive + symmetry + unexplained",
             f"{r['zero_modes']['inactive']} + {r['zero_modes']['symmetry']} + "
             f"{r['zero_modes']['unexplained']}"),
            ("stiffness ratio", r["stiffness"]),
            ("stable", r["stable"]),
            ("W1 = W^KQ_32: diag / off-diag mean", f"{g['W1_diag_mean']:.6g} / "
             f"{g['W1_offdiag_mean']:.6g}"),
            ("W2 = W^PV_12: diag / off-diag mean", f"{g['W2_diag_mean']:.6g} / "
             f"{g['W2_offdiag_mean']:.6g}"),
            ("‖W1 − (tr W1/d) I‖/‖W1‖", g["W1_identity_distance"]),
            ("‖W2 − (tr W2/d) I‖/‖W2‖", g["W2_identity_distance"]),
            ("max|entry| of W^KQ_22, _23, _33, W^PV_13", g["other_active_blocks_max"]),
        ]
        console.print(table("3.–4. full flow from it → dense fixed point (Prop. 4.2, App. B.5)",
                            rows))
        console.print(_matrix_table("W1 = W^KQ_32", r["W_KQ_32"]))
        console.print(_matrix_table("W2 = W^PV_12", r["W_PV_12"]))
        console.print(
            "ŷ_t = (1/ρ_t) Σ_i W2 x_i x_{i−1}^* W1 x_t: one step of GD on the OLS problem "
            "preconditioned by W1, W2 — not vanilla GD (W1, W2 are not multiples of I)."
        )
    if "pl" in out:
        p = out["pl"]
        rows = [
            ("trajectory", p["trajectory"]),
            ("‖∇L‖²/(L−L*) first / last", f"{p['ratio_first']:.8g} / {p['ratio_last']:.8g}"),
            ("Lemma 5.4 2c1(a²+b²) first / last", f"{p['lemma_first']:.8g} / "
             f"{p['lemma_last']:.8g}"),
            ("max relative deviation from Lemma 5.4", p["max_rel_dev_from_lemma"]),
            ("measured rate of L − L*", p["measured_rate"]),
            ("linearised rate 2|μ| (dominant late mode)", p["linearised_rate"]),
            ("Lemma 5.4 at the end point 2c1(a*²+b*²)", p["lemma_rate"]),
        ]
        console.print(table("PL diagnostics (Lemma 5.4)", rows))
    if "monte_carlo" in out:
        m = out["monte_carlo"]
        rows = [
            ("samples / batches", f"{m['samples']} / {m['batches']}"),
            ("loss ± SE", f"{m['loss']:.8g} ± {m['loss_se']:.2g}"),
            ("max|∇L| / largest SE", f"{m['grad_max']:.3g} / {m['grad_se_max']:.3g}"),
            ("max |∇L_i| / SE_i over active entries", m["max_z"]),
            ("Hessian", m["hessian"]),
        ]
        console.print(table("Monte-Carlo gradient at the point (batch-means SE)", rows))
    if "plot" in out:
        console.print(f"wrote {out['plot']}")


def _leading_table(title: str, modes: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    t = Table(title=title, header_style="bold")
    for col in ("mode", "eigenvalue of −∇²L", "dominant blocks (share of ‖v‖²)"):
        t.add_column(col)
    for m in modes:
        blocks = ", ".join(f"{k} {v:.2f}" for k, v in m["blocks"].items())
        t.add_row(m["mode"], f"{m['eigenvalue']:.8g}", blocks)
    return t


def _matrix_table(title: str, W: list[list[float]]) -> Any:
    from rich.table import Table

    t = Table(title=title, show_header=False)
    for _ in W[0]:
        t.add_column(justify="right")
    for row in W:
        t.add_row(*(f"{x:.5f}" for x in row))
    return t


def register(app: typer.Typer) -> None:
    app.command("stability")(stability)
