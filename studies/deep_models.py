"""Study: what two- and three-layer linear attention and softmax attention learn (docs/models.md).

    python studies/deep_models.py [--out runs/deep_models] [--quick]

For each case the exact flow (quadrature, :class:`mesadyn.field.QuadratureField`) runs from the
layered diagonal init ``a = b = √(ab*/k)`` to ``max|∇L| < 1e-10`` (``mesadyn stability
--model deep --layers k``), and the fixed point is analysed:

1. **where the flow goes**: the loss there against the one-layer model's fixed point on the
   same data (``--model deep --layers 1``, the paper's model through the same quadrature), the
   spectrum (minimum or saddle, every zero mode explained by a declared symmetry);
2. **the diagonal structure of Theorem 4.1**: the largest entry off the layered diagonals, and
   which blocks of θ are nonzero;
3. **k steps of GD**: the step sizes ``η_1..η_k`` of k GD steps on ``½Σ‖x_{i+1} − W x_i‖²`` that
   best match the trained model's ŷ_t, and the relative residual, against the one-step fit
   (:func:`mesadyn.analysis.model_mesa.fit_gd_steps`);
4. **Proposition 4.1's ratio** ``E[(ŷ_T)_j/(W x_T)_j]`` (standard error over 1000 test
   sequences) against the one-layer model's;
5. **from a Gaussian init** (σ_w = 0.1, the cheap cases): where the full flow ends;
6. **d = 5 by the finite-sample loss**: full-batch GD (m = 2000, T = 20) for one and two
   layers, and the same in-context analyses (left out by ``--quick``);
7. **softmax attention** on the finite-sample loss (m sequences, its loss is not a polynomial):
   where the flow goes and the same in-context analyses.

Writes ``OUT/deep_models.json``, ``OUT/deep_models.md`` and ``OUT/deep_models.svg``.  Every
number is computed by the run; ``--quick`` keeps the cases that take seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

#: (layers, family, d, T) of the exact cases; the slow ones are left out by --quick.
EXACT_CASES = [
    (2, "sparse", 3, 6, True), (2, "ones", 2, 6, True), (2, "gaussian", 1, 6, True),
    (2, "gaussian", 2, 6, False), (3, "sparse", 3, 5, True), (3, "gaussian", 1, 4, True),
]
#: (family, d, T) of the Gaussian-init flows (full space: cheap fields only).
GAUSSIAN_INIT_CASES = [("sparse", 3, 6), ("ones", 2, 6)]
#: The flow time allowed to reach max|∇L| < 1e-10 (the slowest exact case, two layers on
#: gaussian d = 1, needs τ ≈ 1.4e4; softmax on its finite loss τ ≈ 1.6e4).
T_END = 1e6
#: The flow time of the Gaussian-init flows, which approach a minimum with L → 0 only
#: algebraically (they end by time, and the table says so).
GAUSSIAN_INIT_T_END = 1e5
#: (family, d, T, m, lr, steps) of the finite-sample GD runs at d = 5, for one and two
#: layers (lr 5e-3 diverges for two layers here; 2e-3 does not).
FINITE_GD_CASE = ("gaussian", 5, 20, 2000, 2e-3, 4000)


def _stability(layers: int, x1: str, d: int, T: int, **kw: Any) -> dict[str, Any]:
    from mesadyn.workflows import stability

    t0 = time.perf_counter()
    res = stability.run(stability.Config(model="deep", layers=layers, x1=x1, d=d, T=T,
                                         t_end=T_END, **kw))
    out = res.to_dict()
    out["wall_s"] = time.perf_counter() - t0
    theta = res.theta
    out["nonzero_blocks"] = _nonzero_blocks(layers, d, theta)
    return out


def _nonzero_blocks(layers: int, d: int, theta: Any) -> list[str]:
    """The d×d sub-blocks of θ with an entry above 1e-6 of θ's largest (``L2.W_KQ_31`` …)."""
    import numpy as np

    from mesadyn.models import DeepLinearAttention

    model = DeepLinearAttention(layers)
    labels = model.block_labels(d)
    th = np.asarray(theta)
    big = np.abs(th) > 1e-6 * np.abs(th).max()
    return sorted({str(lab) for lab in labels[big]})


def _gaussian_init(x1: str, d: int, T: int) -> dict[str, Any]:
    import torch

    from mesadyn.analysis.model_mesa import model_incontext
    from mesadyn.models import DeepLinearAttention
    from mesadyn.train import test_seed
    from mesadyn.workflows import integrate

    cfg = integrate.Config(model="deep", layers=2, x1=x1, d=d, T=T, init="gaussian",
                           sigma_w=0.1, seed=3, steady_tol=1e-10, t_end=GAUSSIAN_INIT_T_END)
    t0 = time.perf_counter()
    res = integrate.run(cfg)
    assert res.path is not None
    final = torch.from_numpy(res.path.final)
    ic = model_incontext(DeepLinearAttention(2), final, cfg.family(), T, 1000,
                         test_seed(cfg.seed))
    return {"x1": x1, "d": d, "T": T, "status": res.status.value, "message": res.message,
            "loss": res.loss, "grad_norm": res.grad_norm, "ab": res.ab,
            "incontext": ic.to_dict(), "wall_s": time.perf_counter() - t0}


def _finite_gd(layers: int, x1: str, d: int, T: int, m: int, lr: float,
               steps: int) -> dict[str, Any]:
    """Full-batch GD on the finite-sample loss (``mesadyn train --model deep``) from the
    layered diagonal init, with the in-context analyses at ``T_te = T``."""
    from mesadyn.workflows import train

    t0 = time.perf_counter()
    res = train.run(train.Config(model="deep", layers=layers, x1=x1, d=d, T=T, m=m, lr=lr,
                                 steps=steps, eval_every=max(1, steps // 10), incontext=(T,)))
    out = res.to_dict()
    out["wall_s"] = time.perf_counter() - t0
    return out


def _softmax(d: int, T: int, m: int) -> dict[str, Any]:
    from mesadyn.workflows import stability

    t0 = time.perf_counter()
    res = stability.run(stability.Config(model="softmax", x1="gaussian", d=d, T=T,
                                         field="finite", m=m, t_end=T_END))
    out = res.to_dict()
    out["wall_s"] = time.perf_counter() - t0
    return out


def _row(case: dict[str, Any], ref: dict[str, Any] | None) -> str:
    ic = case.get("incontext") or {}
    fit, fit1 = ic.get("gd_fit") or {}, ic.get("gd_fit_1") or {}
    spec = case.get("spectrum") or {}
    ratio = ic.get("ratio") or {}
    ref_ic = (ref or {}).get("incontext") or {}
    ref_ratio = (ref_ic.get("ratio") or {}).get("value", math.nan)
    etas = ", ".join(f"{v:.4g}" for v in fit.get("etas", []))
    return (f"| {case['layers']} | {case['family']} | {case['d']} | {case['T']} "
            f"| {case['status']} | {case['loss']:.6g} | {(ref or {}).get('loss', math.nan):.6g} "
            f"| {case['grad_norm']:.1e} | {spec.get('n_unstable', '—')} "
            f"| {spec.get('n_zero', '—')}/{spec.get('unexplained', '—')} "
            f"| {etas} | {fit.get('rel_residual', math.nan):.2e} "
            f"| {fit1.get('rel_residual', math.nan):.2e} "
            f"| {ratio.get('value', math.nan):.4f} ± {ratio.get('se', math.nan):.4f} "
            f"| {ref_ratio:.4f} |")


def _figure(summary: dict[str, Any], path: Path) -> None:
    """Three panels over the exact cases that end at a critical point with L > 0 (the sparse
    ones end at L = 0, an exact learner at any depth; the table has them): the loss there
    against the one-layer model's, the residual of the one- and k-step GD fits, and Prop.
    4.1's ratio (± its standard error)."""
    import numpy as np

    from mesadyn.plots import OKABE_ITO
    from mesadyn.plots._style import new_figure, save

    pairs = [(c, r) for c, r in zip(summary["exact"], summary["one_layer"], strict=True)
             if c.get("incontext") and r.get("incontext") and c["loss"] > 1e-12]
    names = [f"{c['layers']} layers\n{c['family']}\n$d={c['d']},T={c['T']}$" for c, _ in pairs]
    x = np.arange(len(pairs))
    one_c, deep_c = OKABE_ITO["blue"], OKABE_ITO["vermillion"]
    fig = new_figure("two", aspect=0.4)
    ax0, ax1, ax2 = fig.subplots(1, 3)
    w = 0.38
    ax0.bar(x - w / 2, [r["loss"] for _, r in pairs], w, color=one_c, label="one layer")
    ax0.bar(x + w / 2, [c["loss"] for c, _ in pairs], w, color=deep_c, label="k layers")
    ax0.set_ylabel(r"$L(\theta^\ast)$")
    ax0.set_title("loss where the flow ends", fontsize=7)
    ax1.bar(x - w / 2, [c["incontext"]["gd_fit_1"]["rel_residual"] for c, _ in pairs], w,
            color=one_c, label="one GD step")
    ax1.bar(x + w / 2, [c["incontext"]["gd_fit"]["rel_residual"] for c, _ in pairs], w,
            color=deep_c, label="k GD steps")
    ax1.set_ylabel(r"relative residual of $\hat y_t$")
    ax1.set_title("the k-layer model as GD steps", fontsize=7)
    for col, key, dx, fmt in ((one_c, 1, -0.1, "o"), (deep_c, 0, 0.1, "s")):
        vals = [(p[key]["incontext"]["ratio"]["value"], p[key]["incontext"]["ratio"]["se"])
                for p in pairs]
        ax2.errorbar(x + dx, [v for v, _ in vals], yerr=[e for _, e in vals], fmt=fmt,
                     color=col, ms=3, lw=0.8, label="one layer" if key else "k layers")
    ax2.axhline(1.0, color="0.5", lw=0.6, ls=":")
    ax2.set_ylim(0, 1.3)
    ax2.set_ylabel(r"$E[(\hat y_T)_j\,/\,(Wx_T)_j]$")
    ax2.set_title("Prop. 4.1's ratio", fontsize=7)
    for ax in (ax0, ax1):
        ax.set_ylim(0, 1.35 * ax.get_ylim()[1])
    for ax in (ax0, ax1, ax2):
        ax.set_xticks(x, names, fontsize=5)
        ax.legend(frameon=False, loc="upper right", ncol=2, fontsize=5.5, handlelength=1.2,
                  columnspacing=0.8)
    save(fig, path, provenance={"kind": "study deep_models", "config": summary["config"]})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/deep_models")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--softmax-m", type=int, default=2000)
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    import mesadyn
    from mesadyn.io import atomic_write_bytes

    summary: dict[str, Any] = {"config": {"quick": a.quick, "softmax_m": a.softmax_m},
                               "mesadyn_version": mesadyn.__version__,
                               "exact": [], "one_layer": [], "gaussian_init": [],
                               "finite_gd": []}
    for layers, x1, d, T, cheap in EXACT_CASES:
        if a.quick and not cheap:
            continue
        print(f"exact: {layers} layers, {x1}, d={d}, T={T}", flush=True)
        summary["exact"].append(_stability(layers, x1, d, T))
        summary["one_layer"].append(_stability(1, x1, d, T))
    for x1, d, T in GAUSSIAN_INIT_CASES:
        print(f"gaussian init: 2 layers, {x1}, d={d}, T={T}", flush=True)
        summary["gaussian_init"].append(_gaussian_init(x1, d, T))
    if not a.quick:
        x1, d, T, m, lr, steps = FINITE_GD_CASE
        for layers in (1, 2):
            print(f"finite-sample GD: {layers} layer(s), {x1}, d={d}, T={T}, m={m}", flush=True)
            summary["finite_gd"].append(_finite_gd(layers, x1, d, T, m, lr, steps))
    print("softmax: gaussian, d=2, T=6 (finite field)", flush=True)
    summary["softmax"] = _softmax(2, 6, a.softmax_m)
    atomic_write_bytes(out / "deep_models.json",
                       json.dumps(summary, indent=1, default=str).encode())
    lines = ["| layers | x1 | d | T | outcome | loss | one-layer loss | max abs grad "
             "| unstable | zero/unexplained | fitted η | k-step residual | 1-step residual "
             "| ratio | one-layer ratio |", "|" + "---|" * 15]
    lines += [_row(c, r) for c, r in zip(summary["exact"], summary["one_layer"], strict=True)]
    lines += ["", "Nonzero blocks at the fixed point:"]
    lines += [f"- {c['layers']} layers, {c['family']}, d={c['d']}: "
              f"{', '.join(c['nonzero_blocks'])}" for c in summary["exact"]]
    lines += ["", "From a Gaussian init (σ_w = 0.1, seed 3), two layers:"]
    for g in summary["gaussian_init"]:
        fit = g["incontext"]["gd_fit"]
        lines.append(f"- {g['x1']}, d={g['d']}, T={g['T']}: {g['status']}, loss {g['loss']:.3g}, "
                     f"max|∇L| {g['grad_norm']:.1e}, "
                     f"2-step fit η = {[round(v, 4) for v in fit['etas']]}, residual "
                     f"{fit['rel_residual']:.2e}")
    if summary["finite_gd"]:
        x1, d, T, m, lr, steps = FINITE_GD_CASE
        lines += ["", f"Finite-sample GD ({x1}, d={d}, T={T}, m={m}, lr={lr}, {steps} steps, "
                  "from the layered diagonal init):"]
    for r in summary["finite_gd"]:
        ic = (r.get("incontext") or [{}])[0]
        fit, fit1 = ic.get("gd_fit") or {}, ic.get("gd_fit_1") or {}
        ratio, mse = ic.get("ratio") or {}, ic.get("mse") or {}
        lines.append(
            f"- {r['layers']} layer(s): {r['status']}, train loss {r['train_loss']:.6g}, test "
            f"loss {r['test_loss']:.6g}, max|∇L| {r['grad_norm']:.1e}; test MSE at T_te={T} "
            f"{mse.get('value', math.nan):.4g} ± {mse.get('se', math.nan):.2g}; ratio "
            f"{ratio.get('value', math.nan):.4f} ± {ratio.get('se', math.nan):.4f}; "
            f"{fit.get('k')}-step fit η = {[round(v, 4) for v in fit.get('etas', [])]}, "
            f"residual {fit.get('rel_residual', math.nan):.3g}"
            + (f" (1 step: {fit1['rel_residual']:.3g})" if fit1 else ""))
    sm = summary["softmax"]
    smic = sm.get("incontext") or {}
    smfit, smratio, smmse = (smic.get(k) or {} for k in ("gd_fit", "ratio", "mse"))
    lines += ["", f"Softmax (finite field, m={a.softmax_m}, gaussian d=2, T=6): {sm['status']}, "
              f"loss {sm['loss']:.6g}, max|∇L| {sm['grad_norm']:.1e} at τ={sm['t_final']:.4g}; "
              f"test MSE {smmse.get('value', math.nan):.4g} ± {smmse.get('se', math.nan):.2g} "
              f"(ŷ = 0: {smmse.get('baseline', math.nan):.4g}); one-GD-step fit "
              f"η = {smfit.get('etas')}, residual {smfit.get('rel_residual', math.nan):.3g}; "
              f"ratio {smratio.get('value', math.nan):.4f} ± {smratio.get('se', math.nan):.4f}"]
    atomic_write_bytes(out / "deep_models.md", ("\n".join(lines) + "\n").encode())
    _figure(summary, out / "deep_models.svg")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
