"""Time the fields of the models beyond the paper's (``mesadyn.models``) on the CPU.

Rows: one full-batch GD step (loss and gradient of the finite-sample loss, direct form) of the
two-layer linear model (the fused kernel, ``mesadyn/field/_deep_fused.py``, and for comparison
autograd through its forward pass) and of softmax attention at the paper's size (d = 5,
T = 100, m = 10 000 by default), the paper's model through the same direct form for scale; and
the exact
field by quadrature of the two-layer model at small d and T: its points, the build of the
weighted sequences, one loss and gradient, and the Hessian (d = 2 only).  Each time is the
median of ``--repeats`` after one warm-up call.

    python benchmarks/bench_models.py [--d 5 --T 100 --m 10000 --repeats 3 --threads N]
                                      [--quadrature 2:6,3:4] [--no-hessian] [--json out.json]

The target for the two-layer GD step is under 1 s on 2 cores.

``--calibrate`` measures the constants of the one cost rule of a model's fields
(``mesadyn/field/_direct_cost.py``): CPU seconds of a gradient and of a Hessian-vector product
per unit ``rows · (T − 1) · layers · max(1, d²/4)``, one thread, for one to three layers at
d = 1, 2, 3, 5 and softmax attention.

    python benchmarks/bench_models.py --calibrate [--json out.json]

``--steady`` runs one row alone: the two-layer Monte-Carlo flow to ``max|∇L̂| < 1e-8``
(``mesadyn integrate --model deep --layers 2 --d 3 --T 20 --field mc --samples 2000
--steady-tol 1e-8 --t-end 1e5``, the integrate defaults ``--rtol 1e-10 --atol 1e-12`` unless
``--rtol/--atol`` are given): wall and CPU seconds, gradients (the flow's, its difference
Jacobians', Newton's), exact Hessians, the flow's Jacobians, Newton's steps, the final
``max|∇L̂|``, the flow time τ where the flow handed over to Newton, the load average; and
the unit costs at that size (one gradient, one Hessian-vector product, one exact Hessian,
one difference Hessian; ``--no-units`` skips them).

    python benchmarks/bench_models.py --steady [--steady-d 3 --steady-T 20 --samples 2000]
                                      [--rtol 1e-10 --atol 1e-12] [--no-units]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds (all threads) per call, after a warm-up."""
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--m", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    ap.add_argument("--quadrature", default="2:6,3:4",
                    help="d:T pairs of the two-layer quadrature rows ('' for none)")
    ap.add_argument("--no-hessian", action="store_true", help="skip the quadrature Hessian")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    ap.add_argument("--steady", action="store_true",
                    help="run the Monte-Carlo flow-to-steady-state row alone")
    ap.add_argument("--steady-d", type=int, default=3)
    ap.add_argument("--steady-T", type=int, default=20)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--rtol", type=float, default=1e-10)
    ap.add_argument("--atol", type=float, default=1e-12)
    ap.add_argument("--no-units", action="store_true", help="skip the unit costs (--steady)")
    ap.add_argument("--calibrate", action="store_true",
                    help="measure the per-unit costs of mesadyn/field/_direct_cost.py")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.steady:
        steady(args)
        return
    if args.calibrate:
        calibrate(args)
        return

    from mesadyn.field._model_fields import FiniteModelField
    from mesadyn.field._quadrature_field import QuadratureField
    from mesadyn.models import PAPER, DeepLinearAttention, SoftmaxAttention
    from mesadyn.process import gaussian

    fam = gaussian(args.d)
    rows: list[dict[str, object]] = []
    for model in (DeepLinearAttention(2), SoftmaxAttention(), PAPER):
        fld = FiniteModelField(model, fam, args.T, args.m, 1)
        theta = model.diagonal_init(args.d, 0.1, 0.1) + model.gaussian_init(args.d, 1e-3, 2)
        wall, cpu = timed(lambda fld=fld, theta=theta: fld.loss_and_grad(theta), args.repeats)
        rows.append({"row": f"GD step, {model}", "d": args.d, "T": args.T, "m": args.m,
                     "points": args.m, "wall_s": wall, "cpu_s": cpu})
        if isinstance(model, DeepLinearAttention):  # the same step by autograd, for scale
            wall, cpu = timed(lambda fld=fld, theta=theta: _autograd_step(fld, theta),
                              args.repeats)
            rows.append({"row": f"GD step, {model}, autograd", "d": args.d, "T": args.T,
                         "m": args.m, "points": args.m, "wall_s": wall, "cpu_s": cpu})
    deep = DeepLinearAttention(2)
    for pair in filter(None, args.quadrature.split(",")):
        d, T = (int(v) for v in pair.split(":"))
        t0 = time.perf_counter()
        quad = QuadratureField(deep, gaussian(d), T)
        quad.prepare()
        build = time.perf_counter() - t0
        theta = deep.gaussian_init(d, 0.2, 3)
        wall, cpu = timed(lambda quad=quad, theta=theta: quad.loss_and_grad(theta), args.repeats)
        row: dict[str, object] = {"row": f"quadrature, {deep}", "d": d, "T": T, "m": None,
                                  "points": quad.plan.points, "build_s": build, "wall_s": wall,
                                  "cpu_s": cpu}
        if d <= 2 and not args.no_hessian:
            t0 = time.perf_counter()
            quad.hessian(theta)
            row["hessian_s"] = time.perf_counter() - t0
        rows.append(row)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| row | d | T | m | points | build s | loss+grad s | CPU s | Hessian s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cells = [r["row"], r["d"], r["T"], r.get("m") or "—", r["points"],
                 f"{r['build_s']:.3g}" if "build_s" in r else "—", f"{r['wall_s']:.3g}",
                 f"{r['cpu_s']:.3g}", f"{r['hessian_s']:.3g}" if "hessian_s" in r else "—"]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"threads": torch.get_num_threads(), "rows": rows}, fh, indent=1)


def unit_costs(d: int, T: int, samples: int) -> dict[str, float]:
    """CPU seconds of one gradient, one Hessian-vector product, one exact Hessian and one
    central-difference Hessian (over the free entries) of the two-layer Monte-Carlo field at
    the layered diagonal init (0.5, 1.5), after a warm-up gradient."""
    from mesadyn.analysis.model_fixedpoint import difference_hessian
    from mesadyn.field import FieldSpec, make_field
    from mesadyn.models import DeepLinearAttention
    from mesadyn.process import gaussian

    model = DeepLinearAttention(2)
    fld = make_field(FieldSpec("mc", gaussian(d, 1.0), T, model=model, samples=samples))
    theta = model.diagonal_init(d, 0.5, 1.5)
    free = model.free_mask("none", d)
    v = torch.from_numpy(free.astype("float64"))

    def grad(x):  # type: ignore[no-untyped-def]
        return fld.loss_and_grad(torch.from_numpy(x))[1].numpy()

    out = {}
    for name, fn in (("gradient", lambda: fld.loss_and_grad(theta)),
                     ("hvp", lambda: fld.hvp(theta, v)),
                     ("hessian", lambda: fld.hessian(theta)),
                     ("difference_hessian",
                      lambda: difference_hessian(grad, theta.numpy(), free))):
        out[f"{name}_cpu_s"] = timed(fn, 1)[1] if name == "gradient" else _once(fn)
    return out


def _autograd_step(fld: object, theta: torch.Tensor) -> torch.Tensor:
    """A direct-form field's loss and gradient by autograd through the model's forward pass,
    chunk by chunk (the path the fused kernel replaces)."""
    th = theta.clone().requires_grad_(True)
    grad = torch.zeros_like(theta)
    for x, w in fld._weighted():  # type: ignore[attr-defined]
        (g,) = torch.autograd.grad(fld._chunk_loss(th, x, w), th)  # type: ignore[attr-defined]
        grad += g
    return grad


def calibrate(args: argparse.Namespace) -> None:
    """The ``--calibrate`` rows (module docstring): one thread, the smallest of three
    gradients and of two batched products of 8 directions (after one warm-up call)."""
    from mesadyn.field._model_fields import FiniteModelField
    from mesadyn.models import DeepLinearAttention, SoftmaxAttention
    from mesadyn.process import gaussian

    torch.set_num_threads(1)
    sizes = ((5, 100, 2000), (3, 20, 2000), (2, 6, 20000), (1, 4, 20000))
    cases = [(DeepLinearAttention(k), size) for k in (1, 2, 3) for size in sizes
             if not (k == 3 and size[0] == 5)]
    cases += [(SoftmaxAttention(), (5, 100, 1000)), (SoftmaxAttention(), (3, 20, 2000))]
    rows: list[dict[str, object]] = []
    for model, (d, T, m) in cases:
        fld = FiniteModelField(model, gaussian(d), T, m, 1)
        theta = model.gaussian_init(d, 0.1, 2)
        units = m * (T - 1) * model.layers * max(1.0, d * d / 4)
        grad = min(_once(lambda fld=fld, theta=theta: fld.loss_and_grad(theta))
                   for _ in range(3))
        row: dict[str, object] = {"row": f"{model}", "d": d, "T": T, "m": m, "units": units,
                                  "gradient_s": grad, "gradient_unit": grad / units}
        if d * T <= 60:
            V = torch.randn(8, theta.numel(), dtype=torch.float64)
            fld.batched_hvp(theta, V[:1])  # the first call sets up the vmapped transforms
            hvp = min(_once(lambda fld=fld, theta=theta, V=V: fld.batched_hvp(theta, V))
                      for _ in range(2)) / 8
            row.update(hvp_s=hvp, hvp_unit=hvp / units)
        rows.append(row)
        print(row, flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"threads": 1, "rows": rows}, fh, indent=1)


def _once(fn: Callable[[], object]) -> float:
    c0 = time.process_time()
    fn()
    return time.process_time() - c0


def steady(args: argparse.Namespace) -> None:
    """The ``--steady`` row (module docstring)."""
    from mesadyn.workflows import integrate

    cfg = integrate.Config(model="deep", layers=2, d=args.steady_d, T=args.steady_T,
                           field="mc", samples=args.samples, steady_tol=1e-8, t_end=1e5,
                           rtol=args.rtol, atol=args.atol, force=True)
    load0 = os.getloadavg()
    t0, c0 = time.perf_counter(), time.process_time()
    res = integrate.run(cfg)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    load1 = os.getloadavg()
    out = res.to_dict()
    newton = out.get("newton") or {}
    row: dict[str, object] = {
        "row": f"MC flow to max|∇L̂| < 1e-8, deep(layers=2), d = {args.steady_d}, "
               f"T = {args.steady_T}, samples {args.samples}",
        "rtol": args.rtol, "atol": args.atol, "status": out["status"], "wall_s": wall,
        "cpu_s": cpu, "gradients": out["gradients"], "flow_gradients": out["nfev"],
        "jacobians": out["njev"], "jacobian": out["jacobian"], "hessians": out["hessians"],
        "newton_steps": newton.get("iterations", 0),
        "newton_residuals": newton.get("residuals", []),
        "grad_max": out["grad_norm"], "flow_tau": out["t_final"],
        "flow_grad_max": out.get("flow_grad_norm"), "loss": out["loss"],
        "handoffs_declined": len(out.get("handoffs_declined", [])),
        "load_before": load0, "load_after": load1, "message": out["message"]}
    if not args.no_units:
        row.update(unit_costs(args.steady_d, args.steady_T, args.samples))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for key, value in row.items():
        print(f"{key}: {value}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"threads": torch.get_num_threads(), "rows": [row]}, fh, indent=1)


if __name__ == "__main__":
    main()
