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
   (:func:`mesadyn.analysis.model_mesa.fit_gd_steps`); and k *preconditioned* steps
   ``W_{j+1} = W_j − Λ_j ∇L Γ_j/(t−1)`` with full ``Γ_j`` (right), ``Λ_j`` (left) or both, on
   :data:`FIT_SEQUENCES` test sequences from each of the seeds :data:`FIT_SEEDS`
   (:mod:`mesadyn.analysis.gd_fit`), with the form ``c I + c'(J − I)`` of each fitted Γ_j;
4. **Proposition 4.1's ratio** ``E[(ŷ_T)_j/(W x_T)_j]`` (standard error over 1000 test
   sequences) against the one-layer model's;
5. **from a Gaussian init** (σ_w = 0.1, the cheap cases): where the full flow ends;
6. **d = 5 by the finite-sample loss**: full-batch GD (m = 2000, T = 20) for one and two
   layers, and the same in-context analyses (left out by ``--quick``);
7. **softmax attention** on the finite-sample loss (m sequences, its loss is not a polynomial):
   where the flow goes and the same in-context analyses.

Writes ``OUT/deep_models.json``, ``OUT/deep_models.md`` and ``OUT/deep_models.svg``.  Every
number is computed by the run; ``--quick`` keeps the cases that take seconds.  Each flow's or
GD run's result, with its end point θ, is written to ``OUT/cases/<case>.json`` when it ends and
reused by a later run into the same ``OUT``: a rerun recomputes only the GD fits (from the
kept θ), the tables and the figure (delete ``OUT/cases`` to run the flows again).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from functools import partial
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
#: The test seeds (through :func:`mesadyn.train.test_seed`) of the GD fits; 1 is the one
#: ``mesadyn stability`` reports.  The spread over them is the test set's share of a residual.
FIT_SEEDS = (1, 2, 3)
#: Test sequences per seed of the GD fits (every fit on the same prompts; the preconditioned
#: fits of :func:`mesadyn.analysis.model_mesa.model_incontext` use at most this many).
FIT_SEQUENCES = 250


def _stability(layers: int, x1: str, d: int, T: int, **kw: Any) -> dict[str, Any]:
    from mesadyn.workflows import stability

    t0 = time.perf_counter()
    res = stability.run(stability.Config(model="deep", layers=layers, x1=x1, d=d, T=T,
                                         t_end=T_END, **kw))
    out = res.to_dict()
    out["wall_s"] = time.perf_counter() - t0
    theta = res.theta
    out["nonzero_blocks"] = _nonzero_blocks(layers, d, theta)
    out["theta"] = _flat(theta)
    return out


def _flat(theta: Any) -> list[float]:
    import numpy as np

    return [float(v) for v in np.asarray(theta, dtype=np.float64).ravel()]


def _cached(out: Path, key: str, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``OUT/cases/<key>.json`` if an earlier run wrote it, else ``run()``, written there."""
    from mesadyn.io import atomic_write_bytes

    path = out / "cases" / f"{key}.json"
    if path.exists():
        print(f"  (kept: {path})", flush=True)
        loaded: dict[str, Any] = json.loads(path.read_text())
        return loaded
    result = run()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, json.dumps(result, indent=1, default=str).encode())
    return result


def _fits(model: str, layers: int, theta: list[float], family: Any, T: int) -> dict[str, Any]:
    """The GD fits of θ's ŷ_t at ``T_te = T``: scalar, one-step and full preconditioned on each
    side, on :data:`FIT_SEQUENCES` test sequences of each of :data:`FIT_SEEDS`."""
    import numpy as np

    from mesadyn.analysis.model_mesa import model_incontext
    from mesadyn.models import model_of
    from mesadyn.train import test_seed

    t0 = time.process_time()
    per = []
    for seed in FIT_SEEDS:
        ic = model_incontext(model_of(model, layers), np.asarray(theta), family, T,
                             FIT_SEQUENCES, test_seed(seed)).to_dict()
        per.append({"seed": seed, "gd_fit": ic["gd_fit"], "gd_fit_1": ic["gd_fit_1"],
                    "preconditioned": ic["gd_fit_preconditioned"]})
    return {"model": model, "layers": layers, "sequences": FIT_SEQUENCES,
            "per_seed": per, "cpu_s": time.process_time() - t0}


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
            "incontext": ic.to_dict(), "wall_s": time.perf_counter() - t0,
            "theta": _flat(res.path.final)}


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
    assert res.trace is not None
    out["theta"] = _flat(res.trace["final_theta"])
    return out


def _softmax(d: int, T: int, m: int) -> dict[str, Any]:
    from mesadyn.workflows import stability

    t0 = time.perf_counter()
    res = stability.run(stability.Config(model="softmax", x1="gaussian", d=d, T=T,
                                         field="finite", m=m, t_end=T_END))
    out = res.to_dict()
    out["wall_s"] = time.perf_counter() - t0
    out["theta"] = _flat(res.theta)
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
    against the one-layer model's; the residual of one scalar GD step, k scalar steps and k
    steps with full preconditioners on the right, the left and both sides (at the first test
    seed, the bars' whiskers the range over :data:`FIT_SEEDS`); and Prop. 4.1's ratio (± its
    standard error)."""
    import numpy as np

    from mesadyn.plots import CYCLE, OKABE_ITO
    from mesadyn.plots._style import new_figure, save, style

    pairs = [(c, r, f) for c, r, f in zip(summary["exact"], summary["one_layer"],
                                          summary["fits"]["exact"], strict=True)
             if c.get("incontext") and r.get("incontext") and c["loss"] > 1e-12]
    names = [f"{c['layers']} layers\n{c['family']}\nd={c['d']}, T={c['T']}"
             for c, _, _ in pairs]
    x = np.arange(len(pairs))
    one_c, deep_c = OKABE_ITO["blue"], OKABE_ITO["vermillion"]
    bars: list[tuple[str, Callable[[dict[str, Any]], float]]] = [
        ("one step", lambda p: p["gd_fit_1"]["rel_residual"]),
        ("k steps", lambda p: p["preconditioned"]["right"]["scalar_residual"]),
        (r"$\Gamma_j$ right", lambda p: p["preconditioned"]["right"]["rel_residual"]),
        (r"$\Lambda_j$ left", lambda p: p["preconditioned"]["left"]["rel_residual"]),
        ("both", lambda p: p["preconditioned"]["both"]["rel_residual"])]
    with style():
        fig = new_figure("two", aspect=0.42)
        ax0, ax1, ax2 = fig.subplots(1, 3, width_ratios=[1.15, 1.5, 1.15])
        w = 0.38
        ax0.bar(x - w / 2, [r["loss"] for _, r, _ in pairs], w, color=one_c, label="one layer")
        ax0.bar(x + w / 2, [c["loss"] for c, _, _ in pairs], w, color=deep_c, label="k layers")
        ax0.set_ylabel(r"$L(\theta^\ast)$")
        ax0.set_title("loss where the flow ends", fontsize=7)
        wb = 0.8 / len(bars)
        for i, (label, get) in enumerate(bars):
            vals = np.array([[get(p) for p in f["per_seed"]] for _, _, f in pairs])
            first = vals[:, 0]
            err = np.stack([first - vals.min(axis=1), vals.max(axis=1) - first])
            ax1.bar(x + (i - (len(bars) - 1) / 2) * wb, first, wb, yerr=err, color=CYCLE[i],
                    label=label, error_kw={"lw": 0.6, "capsize": 1.2})
        ax1.set_ylabel("relative residual of $\\hat y_t$\n(whiskers: test seeds 1–3)")
        ax1.set_title(r"the k-layer model as GD steps $W_{j+1}=W_j-\Lambda_j\nabla L\,"
                      r"\Gamma_j/(t-1)$", fontsize=7)
        for col, key, dx, fmt in ((one_c, 1, -0.1, "o"), (deep_c, 0, 0.1, "s")):
            vals2 = [(p[key]["incontext"]["ratio"]["value"], p[key]["incontext"]["ratio"]["se"])
                     for p in pairs]
            ax2.errorbar(x + dx, [v for v, _ in vals2], yerr=[e for _, e in vals2], fmt=fmt,
                         color=col, ms=3, lw=0.8, label="one layer" if key else "k layers")
        ax2.axhline(1.0, color="0.5", lw=0.6, ls=":")
        ax2.set_ylim(0, 1.3)
        ax2.set_ylabel(r"$E[(\hat y_T)_j\,/\,(Wx_T)_j]$")
        ax2.set_title("Prop. 4.1's ratio", fontsize=7)
        ax0.set_ylim(0, 1.35 * ax0.get_ylim()[1])
        ax1.set_ylim(0, max(1.3, 1.35 * max(p["gd_fit_1"]["rel_residual"] for _, _, f in pairs
                                             for p in f["per_seed"])))
        for ax, ncol in ((ax0, 2), (ax1, 3), (ax2, 2)):
            ax.set_xlim(-0.6, len(pairs) - 0.4)  # room for the outer tick labels
            ax.set_xticks(x, names, fontsize=5)
            ax.legend(frameon=False, loc="upper right", ncol=ncol, fontsize=5.5,
                      handlelength=1.2, columnspacing=0.8)
        save(fig, path, provenance={"kind": "study deep_models", "config": summary["config"]})


def _family(x1: str, d: int) -> Any:
    """The family ``--x1 x1 --d d`` names (the commands' defaults otherwise)."""
    from mesadyn.workflows import stability

    return stability.Config(x1=x1, d=d, T=4).family()


def _seed_range(fits: dict[str, Any], get: Callable[[dict[str, Any]], float]) -> str:
    vals = [get(p) for p in fits["per_seed"]]
    return f"{vals[0]:.3g} ({min(vals):.3g}–{max(vals):.3g})"


def _precond_row(name: str, loss: float, fits: dict[str, Any]) -> str:
    """A row of the preconditioned table: the residuals at seed 1 (range over the seeds) and
    the fitted right Γ_j's forms at seed 1."""
    first = fits["per_seed"][0]
    pre = first["preconditioned"]
    forms = "; ".join(f"{f['c']:.3g}, {f['c_off']:.3g} ({f['rel_distance']:.2g})"
                      for f in pre["right"]["gamma_forms"])
    cols = [_seed_range(fits, lambda p: p["preconditioned"]["right"]["scalar_residual"])]
    cols += [_seed_range(fits, lambda p, s=side: p["preconditioned"][s]["rel_residual"])
             + ("" if pre[side]["converged"] else "*") for side in ("right", "left", "both")]
    gain = pre["both"]["improvement"]
    return (f"| {name} | {loss:.4g} | {pre['right']['sequences']} | " + " | ".join(cols)
            + f" | {100 * gain:.0f}% | {forms} |")


def _fit_all(summary: dict[str, Any]) -> None:
    """``summary["fits"]``: :func:`_fits` of every kept θ (recomputed on every run)."""
    fits: dict[str, Any] = {"exact": [], "one_layer": [], "gaussian_init": [], "finite_gd": []}
    for key in ("exact", "one_layer"):
        for c in summary[key]:
            print(f"fits: {c['layers']} layer(s), {c['family']}, d={c['d']}, T={c['T']}",
                  flush=True)
            fits[key].append(_fits("deep", c["layers"], c["theta"], _family(c["family"], c["d"]),
                                   c["T"]))
    for g in summary["gaussian_init"]:
        print(f"fits: gaussian init, {g['x1']}, d={g['d']}", flush=True)
        fits["gaussian_init"].append(_fits("deep", 2, g["theta"], _family(g["x1"], g["d"]),
                                           g["T"]))
    for r in summary["finite_gd"]:
        print(f"fits: finite-sample GD, {r['layers']} layer(s), d={r['d']}", flush=True)
        fits["finite_gd"].append(_fits("deep", r["layers"], r["theta"],
                                       _family(r["family"], r["d"]), r["T"]))
    sm = summary["softmax"]
    print("fits: softmax", flush=True)
    fits["softmax"] = _fits("softmax", 1, sm["theta"], _family("gaussian", sm["d"]), sm["T"])
    summary["fits"] = fits


def _precond_lines(summary: dict[str, Any]) -> list[str]:
    fits = summary["fits"]
    lines = ["", f"k preconditioned GD steps, full Γ_j (right), Λ_j (left) or both, against k "
             f"scalar steps on the same prompts: relative residual at test seed {FIT_SEEDS[0]} "
             f"(range over seeds {', '.join(map(str, FIT_SEEDS))}), on the first of "
             f"{FIT_SEQUENCES} test sequences each that model_incontext fits them on, T_te = T; "
             "'gain' is both's 1 − residual/scalar residual; * where the kept end point "
             "stopped at the iteration cap; the right Γ_j at seed "
             f"{FIT_SEEDS[0]} as c, c' (relative distance from c I + c'(J − I)):", "",
             "| model | L | sequences | k scalar steps | right Γ_j | left Λ_j | both | gain "
             "| right Γ_j: c, c' (distance) |", "|" + "---|" * 9]
    for c, r, f, g in zip(summary["exact"], summary["one_layer"], fits["exact"],
                          fits["one_layer"], strict=True):
        where = f"{c['family']}, d={c['d']}, T={c['T']}"
        lines.append(_precond_row(f"{c['layers']} layers, {where}", c["loss"], f))
        lines.append(_precond_row(f"1 layer, {where}", r["loss"], g))
    for gi, f in zip(summary["gaussian_init"], fits["gaussian_init"], strict=True):
        lines.append(_precond_row(f"2 layers from a Gaussian init, {gi['x1']}, d={gi['d']}, "
                                  f"T={gi['T']}", gi["loss"], f))
    for r, f in zip(summary["finite_gd"], fits["finite_gd"], strict=True):
        lines.append(_precond_row(f"{r['layers']} layer(s), finite-sample GD, {r['family']}, "
                                  f"d={r['d']}, T={r['T']}", r["train_loss"], f))
    sm = summary["softmax"]
    lines.append(_precond_row(f"softmax, gaussian, d={sm['d']}, T={sm['T']}", sm["loss"],
                              fits["softmax"]))
    return lines


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

    summary: dict[str, Any] = {"config": {"quick": a.quick, "softmax_m": a.softmax_m,
                                          "fit_seeds": list(FIT_SEEDS),
                                          "fit_sequences": FIT_SEQUENCES},
                               "mesadyn_version": mesadyn.__version__,
                               "exact": [], "one_layer": [], "gaussian_init": [],
                               "finite_gd": []}
    for layers, x1, d, T, cheap in EXACT_CASES:
        if a.quick and not cheap:
            continue
        print(f"exact: {layers} layers, {x1}, d={d}, T={T}", flush=True)
        summary["exact"].append(_cached(out, f"exact-{layers}-{x1}-{d}-{T}",
                                        partial(_stability, layers, x1, d, T)))
        summary["one_layer"].append(_cached(out, f"exact-1-{x1}-{d}-{T}",
                                            partial(_stability, 1, x1, d, T)))
    for x1, d, T in GAUSSIAN_INIT_CASES:
        print(f"gaussian init: 2 layers, {x1}, d={d}, T={T}", flush=True)
        summary["gaussian_init"].append(_cached(out, f"gaussian-init-{x1}-{d}-{T}",
                                                partial(_gaussian_init, x1, d, T)))
    if not a.quick:
        x1, d, T, m, lr, steps = FINITE_GD_CASE
        for layers in (1, 2):
            print(f"finite-sample GD: {layers} layer(s), {x1}, d={d}, T={T}, m={m}", flush=True)
            summary["finite_gd"].append(_cached(
                out, f"finite-gd-{layers}-{x1}-{d}-{T}-{m}-{lr}-{steps}",
                partial(_finite_gd, layers, x1, d, T, m, lr, steps)))
    print("softmax: gaussian, d=2, T=6 (finite field)", flush=True)
    summary["softmax"] = _cached(out, f"softmax-gaussian-2-6-{a.softmax_m}",
                                 partial(_softmax, 2, 6, a.softmax_m))
    _fit_all(summary)
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
    lines += _precond_lines(summary)
    atomic_write_bytes(out / "deep_models.md", ("\n".join(lines) + "\n").encode())
    _figure(summary, out / "deep_models.svg")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
