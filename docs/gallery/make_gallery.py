"""Regenerate the non-portrait images of docs/gallery.md from saved train runs.

    mesadyn train --x1 gaussian --sigma 0.5 --d 5 --T 100 --m 500 --steps 200 \\
        --a0 A --b0 B --eval-every 10 --out runs/g_A_B.nc     # for (A, B) in the paper's inits
    mesadyn train --x1 ones --d 5 --T 100 --m 200 --steps 200 --a0 0.5 --b0 1.5 \\
        --eval-every 20 --out runs/ones.nc
    python docs/gallery/make_gallery.py runs docs/gallery

The figures read the ``.nc`` run files directly (``mesadyn.io.load_run``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from mesadyn.analysis.incontext import context_curve, draw_test_set
from mesadyn.analysis.spectrum import classify
from mesadyn.field import FieldSpec, make_field
from mesadyn.io import load_run
from mesadyn.plots import (
    ab_convergence,
    incontext_curves,
    jacobian_spectrum,
    loss_curves,
    save,
    weight_heatmaps,
)
from mesadyn.process import gaussian
from mesadyn.theory import predicted_ratio

DPI = 110


def main(runs: Path, out: Path) -> None:
    fam = gaussian(5, 0.5)
    paths = [runs / f"g_{a}_{b}.nc" for a, b in (("0.1", "0.1"), ("0.5", "1.5"), ("2", "2"))]
    fig, _ = ab_convergence([str(p) for p in paths], family=fam, T=100)
    save(fig, out / "ab-convergence.png", dpi=DPI)
    fig, _ = loss_curves([str(p) for p in paths])
    save(fig, out / "loss-curves.png", dpi=DPI)
    fig, _ = weight_heatmaps(str(runs / "ones.nc"),
                             title=r"$x_1=\mathbf{1}_d$, $(a_0,b_0)=(0.5,1.5)$, after 200 GD steps")
    save(fig, out / "heatmaps-ones.png", dpi=DPI)
    # in-context: Proposition 4.1's ratio and the MSE against T_te at the trained θ
    theta = torch.as_tensor(load_run(paths[0])["theta"].values[-1])
    x1, lam = draw_test_set(fam, 2000, seed=7)
    curve = context_curve(theta, x1, lam, [5, 10, 20, 50, 100, 200])
    fig, _ = incontext_curves(curve, theory=predicted_ratio(fam, 100), limit=0.2)
    save(fig, out / "incontext.png", dpi=DPI)
    # Jacobian spectrum of −∇²L (exact field) at the trained θ of the (2, 2) run
    field = make_field(FieldSpec("exact", fam, 100))
    th = torch.as_tensor(load_run(paths[2])["theta"].values[-1])
    spec = classify(field.hessian(th).numpy(), th.numpy())
    fig, _ = jacobian_spectrum(spec, title=r"$-\nabla^2 L$ at the GD end point, $(a_0,b_0)=(2,2)$")
    save(fig, out / "spectrum.png", dpi=DPI)
    print("ratio at T_te:", dict(zip(curve.T_te.tolist(), np.round(curve.ratio, 4).tolist(),
                                     strict=True)))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
