"""Regenerate every image of docs/gallery.md with one command.

    python docs/gallery/make_gallery.py [--out docs/gallery] [--runs DIR] [--only WHAT]

It runs the commands that docs/gallery.md shows, in order: the four ``mesadyn portrait``
figures; the ``mesadyn train`` runs behind the paper's figures (``--m 500`` / ``--m 200``
instead of the paper's 10 000, to keep the gallery cheap; written to ``--runs``, a temporary
folder by default, and reused when they are already there); then the figures drawn from those
runs through the Python API (``mesadyn.plots``), which read the ``.nc`` run files directly; the
spectrum is taken at the fixed point of the finite-sample loss the (2, 2) run descends
(``mesadyn.workflows.stability`` with ``field="finite"``, from the run's end point).
``--only portraits`` or ``--only figures`` does one half.  About a minute on two cores.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from mesadyn.analysis.incontext import context_curve, draw_test_set
from mesadyn.field import FieldSpec, make_field
from mesadyn.io import load_run, run_config
from mesadyn.plots import (
    ab_convergence,
    family_title,
    incontext_curves,
    jacobian_spectrum,
    loss_curves,
    save,
    weight_heatmaps,
)
from mesadyn.process import gaussian, ones
from mesadyn.theory import constants, predicted_ratio
from mesadyn.workflows import stability

DPI = 110
#: ``mesadyn portrait`` arguments of each portrait in docs/gallery.md (``--out`` is added).
PORTRAITS: dict[str, list[str]] = {
    "portrait-gaussian.png": ["--x1", "gaussian", "--sigma", "0.5", "--d", "5", "--T", "100"],
    "portrait-panels.png": ["--x1", "gaussian", "--sigma", "0.5", "--d", "5", "--T", "100",
                            "--inset-ab", "--inset-pl"],
    "portrait-sparse.png": ["--x1", "sparse", "--scale", "0.5", "--d", "5", "--T", "100",
                            "--init", "0.1,0.1", "--init", "0.5,1.5", "--init", "2,2",
                            "--init", "-1.5,0.4"],
    "ones-fullflow.png": ["--x1", "ones", "--d", "5", "--T", "100", "--full-flow"],
}
#: ``mesadyn train`` arguments of each run behind the paper's figures (``--out`` is added).
RUNS: dict[str, list[str]] = {
    **{f"g_{a}_{b}.nc": ["--x1", "gaussian", "--sigma", "0.5", "--d", "5", "--T", "100",
                         "--m", "500", "--steps", "200", "--a0", a, "--b0", b,
                         "--eval-every", "10"]
       for a, b in (("0.1", "0.1"), ("0.5", "1.5"), ("2", "2"))},
    "ones.nc": ["--x1", "ones", "--d", "5", "--T", "100", "--m", "200", "--steps", "200",
                "--a0", "0.5", "--b0", "1.5", "--eval-every", "20"],
}


def _mesadyn(*args: str) -> None:
    """Run ``mesadyn ARGS`` (the command as docs/gallery.md shows it); stop on failure."""
    cmd = [sys.executable, "-m", "mesadyn", *args]
    print("$ mesadyn " + " ".join(args), flush=True)
    subprocess.run(cmd, check=True)


def portraits(out: Path) -> None:
    """The four phase portraits, by ``mesadyn portrait``."""
    for name, args in PORTRAITS.items():
        _mesadyn("portrait", *args, "--out", str(out / name), "--dpi", str(DPI))


def train_runs(runs: Path) -> None:
    """The GD runs the paper's figures are drawn from (skipped when already there)."""
    runs.mkdir(parents=True, exist_ok=True)
    for name, args in RUNS.items():
        if not (runs / name).exists():
            _mesadyn("train", *args, "--out", str(runs / name))


def figures(runs: Path, out: Path) -> None:
    """The paper's figures, drawn from the runs through the Python API."""
    fam = gaussian(5, 0.5)
    paths = [runs / f"g_{a}_{b}.nc" for a, b in (("0.1", "0.1"), ("0.5", "1.5"), ("2", "2"))]
    fig, _ = ab_convergence([str(p) for p in paths], family=fam, T=100)
    save(fig, out / "ab-convergence.png", dpi=DPI)
    fig, _ = loss_curves([str(p) for p in paths])
    save(fig, out / "loss-curves.png", dpi=DPI)
    fig, _ = weight_heatmaps(str(runs / "ones.nc"), title=family_title(ones(5), T=100, m=200)
                             + r", $(a_0,b_0)=(0.5,1.5)$, after 200 GD steps")
    save(fig, out / "heatmaps-ones.png", dpi=DPI)
    # in-context: Proposition 4.1's ratio and the MSE against T_te at the GD end point of the
    # (0.1, 0.1) run, which has not reached ab* in 200 steps: the ratio there is σ²·ab
    run = load_run(paths[0])
    theta = torch.as_tensor(run["theta"].values[-1])
    ab_end = float(run["ab_mean"].values[-1])
    x1, lam = draw_test_set(fam, 2000, seed=7)
    curve = context_curve(theta, x1, lam, [5, 10, 20, 50, 100, 200])
    fig, _ = incontext_curves(
        curve, theory=predicted_ratio(fam, 100), limit=0.2, at_point=fam.second_moment * ab_end,
        title=family_title(fam, T=100, m=500) + rf": GD end point from $(0.1,0.1)$, "
        rf"$ab={ab_end:.4g}$ ($ab^*={constants(fam, 100).ab_star:.4g}$)")
    save(fig, out / "incontext.png", dpi=DPI)
    print(f"in-context at ab = {ab_end:.4f}: ratio at T_te",
          dict(zip(curve.T_te.tolist(), np.round(curve.ratio, 4).tolist(), strict=True)))
    spectrum(runs / "g_2_2.nc", out)


def spectrum(path: Path, out: Path) -> None:
    """The Jacobian spectrum where GD is heading: the fixed point of the finite-sample loss
    ``L_m`` GD descends (m = 500, seed 1), reached by its flow from GD's end point, as
    ``mesadyn stability --field finite --m 500 --point run.nc`` does."""
    cfg = run_config(load_run(path))
    fam = gaussian(5, 0.5)
    ab_star = constants(fam, 100).ab_star
    res = stability.run(stability.Config(
        x1="gaussian", sigma=0.5, d=5, T=100, seed=int(cfg["seed"]), field="finite",
        m=int(cfg["m"]), point=str(path), pl=False))
    report = res.fixed_point
    if report is None:
        raise SystemExit(f"no fixed point of L_m from {path}: {res.failure}")
    end = torch.as_tensor(load_run(path)["theta"].values[-1])
    finite = make_field(FieldSpec("finite", fam, 100, m=int(cfg["m"]), seed=int(cfg["seed"])))
    exact = make_field(FieldSpec("exact", fam, 100))
    g_end = float(finite.loss_and_grad(end)[1].abs().max())
    g_pop = float(exact.loss_and_grad(end)[1].abs().max())
    sp = report.spectrum
    gd_ab = float(load_run(path)["ab_mean"].values[-1])
    title = (family_title(fam, T=100, m=int(cfg["m"])) + ":\n"
             + r"$-\nabla^2 L_m$ at the fixed point of $L_m$ that its flow" "\n"
             + r"reaches from the GD end point of $(a_0,b_0)=(2,2)$")
    note = (rf"fixed point: $\max|\nabla L_m|={_sci(report.point.residual)}$" "\n"
            rf"$ab={report.ab:.4f}$ (GD end: {gd_ab:.4f}, "
            rf"$\max|\nabla L_m|={g_end:.2g}$)" "\n"
            rf"{sp.n_unstable} unstable, {sp.n_stable} stable, {sp.n_zero} zero modes")
    fig, _ = jacobian_spectrum(sp, title=title, loss="L_m", width=4.0, note=note)
    save(fig, out / "spectrum.png", dpi=DPI)
    print(f"spectrum: fixed point of L_m: max|grad L_m| = {report.point.residual:.2e}, "
          f"ab = {report.ab:.6f}, {sp.n_unstable} unstable, {sp.n_stable} stable, "
          f"{sp.n_zero} zero; GD end: max|grad L_m| = {g_end:.3g}, population "
          f"max|grad L| = {g_pop:.3g}, ab* = {ab_star:.6f}")


def _sci(x: float) -> str:
    """``x`` as mathtext ``1.8\\times10^{-14}``."""
    m, e = f"{x:.1e}".split("e")
    return rf"{m}\times10^{{{int(e)}}}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent,
                    help="where the images go (default: docs/gallery)")
    ap.add_argument("--runs", type=Path, help="keep the train runs here (default: a temp dir)")
    ap.add_argument("--only", choices=("portraits", "figures"), help="do one half only")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only != "figures":
        portraits(args.out)
    if args.only == "portraits":
        return
    with tempfile.TemporaryDirectory(prefix="mesadyn-gallery-") as tmp:
        runs = args.runs or Path(tmp)
        train_runs(runs)
        figures(runs, args.out)


if __name__ == "__main__":
    main()
