"""Profile of ``mesadyn reproduce --m M``: CPU seconds per component, counted operations, and
the extrapolated total.

Each component is measured in CPU seconds (``time.process_time``, one torch thread: robust to
other processes on the machine) on one instance and multiplied by how many times the full
protocol needs it (counted from :func:`mesadyn.reproduce.select`).  The extrapolated total is
labelled as such; the end-to-end number is the wall time of

    OMP_NUM_THREADS=2 /usr/bin/time -v mesadyn reproduce --m 10000 --out /tmp/repro-m10k

on an idle machine (``benchmarks/run_all.py`` times it as the ``reproduce`` benchmark).  Run
this profile with

    OMP_NUM_THREADS=1 python benchmarks/bench_reproduce.py [--m 10000] [--flow] [--json out.json]

(``--flow`` also times one exact flow, the Fig. 1 gaussian σ = 0.5 run from (0.5, 1.5)).

The GD rows are split by draws: dense (gaussian and ones, measured on gaussian; the O(T d²)
closed form) and sparse (Example 4.1, the O(d) closed sum over t of ``ARBatch`` in
``mesadyn/field/_ar_kernels.py``).  The last lines estimate the wall time of the runner's
schedule: every run a task in worker processes, costliest first
(:meth:`mesadyn.reproduce.context.Context.compute_parallel`).  The measured table is in
``benchmarks/README.md``, written by ``benchmarks/run_all.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections import Counter
from collections.abc import Callable

import torch


def cpu(fn: Callable[[], object], repeats: int = 1) -> float:
    """Median CPU seconds of ``fn`` (no warm-up: callers warm up where it matters)."""
    times = []
    for _ in range(repeats):
        c0 = time.process_time()
        fn()
        times.append(time.process_time() - c0)
    return sorted(times)[len(times) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--flow", action="store_true", help="also time one exact flow")
    ap.add_argument("--cores", type=int, default=2,
                    help="also estimate the wall time on this many cores")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args()
    torch.set_num_threads(1)

    from mesadyn.analysis.incontext import ContextBatch, context_curve, draw_test_set
    from mesadyn.field import FiniteField, Form
    from mesadyn.model import diagonal_init
    from mesadyn.process import gaussian, sparse
    from mesadyn.reproduce.claims import CLAIMS
    from mesadyn.reproduce.runner import select
    from mesadyn.reproduce.studies import T_TE, FlowRun, GDRun
    from mesadyn.workflows import integrate

    studies, claim_ids = select(None, False, args.m)
    runs = {r.name: r for st in studies for r in st.runs()}
    for cid in claim_ids:
        runs.update({r.name: r for r in CLAIMS[cid].runs(False)})
    gd = [r for r in runs.values() if isinstance(r, GDRun)]
    flows = [r for r in runs.values() if isinstance(r, FlowRun)]
    groups = Counter(r.workflow_config(1).training_set() for r in gd)
    print(f"# reproduce --m {args.m}: {len(gd)} GD runs in {len(groups)} training sets, "
          f"{len(flows)} exact flows")
    print(f"# machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__} (1 thread), load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")

    rows: list[tuple[str, int, float]] = []  # (component, count, CPU s each)
    th = diagonal_init(5, 0.5, 1.5)
    step_cost: dict[tuple[int, bool], float] = {}  # (T, sparse) -> CPU s per step + test share
    for T in sorted({r.T for r in gd}):
        for is_sparse in (False, True):
            at = [r for r in gd if r.T == T and (r.family == "sparse") == is_sparse]
            if not at:
                continue
            # gaussian stands for the dense draws (gaussian, ones): the same O(T d²) path;
            # sparse draws take the closed sum over t (ARBatch)
            fam = sparse(5, 1.0) if is_sparse else gaussian(5, 1.0)
            label = f"T={T}, {'sparse' if is_sparse else 'dense (gaussian, ones)'}"
            steps, ev = at[0].steps, at[0].eval_every
            m = at[0].m
            m_test = max(2000, min(m, 10_000))
            build = cpu(lambda T=T, m=m, fam=fam: FiniteField(fam, T, m, seed=1,
                                                             form=Form.DIRECT)
                        .loss_and_grad(diagonal_init(5, 0.5, 1.5)))
            f = FiniteField(fam, T, m, seed=1, form=Form.DIRECT)
            f.loss_and_grad(th)  # builds the θ-independent data
            step = cpu(lambda f=f: f.loss_and_grad(th), args.repeats)
            ft = FiniteField(fam, T, m_test, seed=2, form=Form.DIRECT)
            ft.loss(th)
            test = cpu(lambda ft=ft: ft.batch_loss(th[None]), args.repeats)
            cb_build = cpu(lambda ft=ft, T=T: ContextBatch(ft.x1, ft.lam, T))
            cb = ContextBatch(ft.x1, ft.lam, T)
            ratio = cpu(lambda cb=cb: cb.ratio(th), args.repeats)
            evals = len({k for k in range(steps + 1) if k % ev == 0 or k == steps})
            step_cost[(T, is_sparse)] = ((steps + 1) * step + evals * (test + ratio)
                                         + build - step + cb_build)
            rows += [
                (f"{label}: GD step (loss+grad, m={m})", len(at) * (steps + 1), step),
                (f"{label}: test loss (m_test={m_test}, every {ev} steps)", len(at) * evals,
                 test),
                (f"{label}: test ratio at T_te=T", len(at) * evals, ratio),
                (f"{label}: training+test set (draws, θ-independent data, first step), per "
                 f"run", len(at), build - step + cb_build),
            ]
    x1, lam = draw_test_set(gaussian(5, 1.0), 2000, 8000)
    curve = cpu(lambda: context_curve(diagonal_init(5, 0.5, 1.5), x1, lam, T_TE))
    rows.append(("in-context curve of the end point (2000 draws, 7 T_te)", len(gd), curve))
    flow = 0.0
    if args.flow:
        fr = next(r for r in flows if r.family == "gaussian" and r.param == 0.5)
        flow = cpu(lambda: integrate.run(fr.workflow_config(1)))
        rows.append((f"exact flow ({fr.name}; others differ in length)", len(flows), flow))
    total = sum(n * s for _c, n, s in rows)
    print("| component | count | CPU s each | CPU s total | share |")
    print("|---|---:|---:|---:|---:|")
    for comp, n, s in rows:
        print(f"| {comp} | {n} | {s:.4g} | {n * s:.4g} | {100 * n * s / total:.1f}% |")
    print(f"| **extrapolated total (1 thread, this machine's load)** | | | {total:.4g} | |")
    # the runner computes every run in worker processes (one thread each, one run per task,
    # costliest first): the wall time on W cores is that schedule's makespan
    tasks = [step_cost[(r.T, r.family == "sparse")] + curve for r in gd] + [flow] * len(flows)
    schedule = {}
    for cores in sorted({1, 2, args.cores}):
        loads = [0.0] * cores
        for c in sorted(tasks, reverse=True):
            loads[loads.index(min(loads))] += c
        schedule[cores] = max(loads)
        print(f"estimated wall on {cores} core(s), one run per worker task: {max(loads):.4g} s "
              f"({max(loads) / 60:.1f} min; claims and figures afterwards not included)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"m": args.m, "gd_runs": len(gd), "training_sets": len(groups),
                       "flows": len(flows), "load": os.getloadavg(),
                       "rows": [{"component": c, "count": n, "cpu_s_each": s,
                                 "cpu_s_total": n * s, "share": n * s / total}
                                for c, n, s in rows],
                       "total_cpu_s": total,
                       "estimated_wall_s": {str(k): v for k, v in schedule.items()}},
                      fh, indent=1)


if __name__ == "__main__":
    main()
