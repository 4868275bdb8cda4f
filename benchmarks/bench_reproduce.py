"""Profile of ``mesadyn reproduce --m M`` (issue 16 item 5): CPU seconds per component, counted
operations, and the extrapolated total.

The machine these helpers share is loaded, so wall time means little: each component is
measured in CPU seconds (``time.process_time``, one torch thread) on one instance and multiplied
by how many times the full protocol needs it (counted from :func:`mesadyn.reproduce.select`).
The extrapolated total is labelled as such; the honest end-to-end number is the wall time of

    OMP_NUM_THREADS=2 /usr/bin/time -v mesadyn reproduce --m 10000 --out /tmp/repro-m10k

on an idle machine.  Run this profile with

    OMP_NUM_THREADS=1 python benchmarks/bench_reproduce.py [--m 10000] [--flow]

(``--flow`` also times one exact flow, the Fig. 1 gaussian σ = 0.5 run from (0.5, 1.5)).

Measured on the loaded 2-core helper machine, 2026-11-30, ``--m 10000 --flow``, 1 thread:
33 GD runs in 8 training sets, 27 exact flows; GD steps at T = 100 (6030 × 1.07 CPU s) are 93%
of the extrapolated 6955 CPU s, test losses 4.8%, everything else under 1% each (the full
table is in ``docs/reproduce.md``, "Profile and speed").  After the closed form of the AR fast
path (``mesadyn.model``, issue 16), the same table gives GD steps at T = 100 0.58–0.70 CPU s
and test losses 0.22–0.24 CPU s (under load; see the helper's report for the table).  The
last lines estimate the wall time when the runner computes the training sets in worker
processes (:func:`mesadyn.reproduce.runner.default_jobs`).
"""

from __future__ import annotations

import argparse
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
    args = ap.parse_args()
    torch.set_num_threads(1)

    from mesadyn.analysis.incontext import ContextBatch, context_curve, draw_test_set
    from mesadyn.field import FiniteField, Form
    from mesadyn.model import diagonal_init
    from mesadyn.process import gaussian
    from mesadyn.reproduce import context
    from mesadyn.reproduce.claims import CLAIMS
    from mesadyn.reproduce.runner import select
    from mesadyn.reproduce.studies import FlowRun, GDRun

    studies, claim_ids = select(None, False, args.m)
    runs = {r.name: r for st in studies for r in st.runs()}
    for cid in claim_ids:
        runs.update({r.name: r for r in CLAIMS[cid].runs(False)})
    gd = [r for r in runs.values() if isinstance(r, GDRun)]
    flows = [r for r in runs.values() if isinstance(r, FlowRun)]
    groups = Counter(context.batch_key(r) for r in gd)
    print(f"# reproduce --m {args.m}: {len(gd)} GD runs in {len(groups)} training sets, "
          f"{len(flows)} exact flows")

    rows: list[tuple[str, int, float]] = []  # (component, count, CPU s each)
    fam = gaussian(5, 1.0)
    th = diagonal_init(5, 0.5, 1.5)
    for T in sorted({r.T for r in gd}):
        at_T = [r for r in gd if r.T == T]
        n_sets = sum(1 for k in groups if k[2] == T)
        steps, ev = at_T[0].steps, at_T[0].eval_every
        m = at_T[0].m
        m_test = max(2000, min(m, 10_000))
        build = cpu(lambda T=T, m=m: FiniteField(fam, T, m, seed=1, form=Form.DIRECT)
                    .loss_and_grad(diagonal_init(5, 0.5, 1.5)))
        f = FiniteField(fam, T, m, seed=1, form=Form.DIRECT)
        f.loss_and_grad(th)  # builds the prefix Grams
        step = cpu(lambda f=f: f.loss_and_grad(th), args.repeats)
        ft = FiniteField(fam, T, m_test, seed=2, form=Form.DIRECT)
        ft.loss(th)
        test = cpu(lambda ft=ft: ft.batch_loss(th[None]), args.repeats)
        cb_build = cpu(lambda ft=ft, T=T: ContextBatch(ft.x1, ft.lam, T))
        cb = ContextBatch(ft.x1, ft.lam, T)
        ratio = cpu(lambda cb=cb: cb.ratio(th), args.repeats)
        evals = len({k for k in range(steps + 1) if k % ev == 0 or k == steps})
        rows += [
            (f"T={T}: GD step (loss+grad, m={m})", len(at_T) * (steps + 1), step),
            (f"T={T}: test loss (m_test={m_test}, every {ev} steps)", len(at_T) * evals, test),
            (f"T={T}: test ratio at T_te=T", len(at_T) * evals, ratio),
            (f"T={T}: training+test set (draws, prefix Grams, first step), per set",
             n_sets, build - step + cb_build),
        ]
    x1, lam = draw_test_set(gaussian(5, 1.0), 2000, 8000)
    curve = cpu(lambda: context_curve(diagonal_init(5, 0.5, 1.5), x1, lam, context.T_TE))
    rows.append(("in-context curve of the end point (2000 draws, 7 T_te)", len(gd), curve))
    if args.flow:
        fr = next(r for r in flows if r.family == "gaussian" and r.param == 0.5)
        flow = cpu(lambda: context.compute_flow(fr, 1))
        rows.append((f"exact flow ({fr.name}; others differ in length)", len(flows), flow))
    total = sum(n * s for _c, n, s in rows)
    print("| component | count | CPU s each | CPU s total | share |")
    print("|---|---:|---:|---:|---:|")
    for comp, n, s in rows:
        print(f"| {comp} | {n} | {s:.4g} | {n * s:.4g} | {100 * n * s / total:.1f}% |")
    print(f"| **extrapolated total (1 thread, this machine's load)** | | | {total:.4g} | |")
    # the runner computes the training sets in worker processes (one thread each, one set per
    # worker at a time): GD time on W cores is the longest-first schedule's makespan
    per_T = {r[0].split(":")[0]: r[2] for r in rows if "GD step" in r[0]}
    per_T_test = {r[0].split(":")[0]: r[2] for r in rows if "test loss" in r[0]}
    costs = []
    for key, n_runs in groups.items():
        r0 = next(r for r in gd if context.batch_key(r) == key)
        evals = len({k for k in range(r0.steps + 1) if k % r0.eval_every == 0
                     or k == r0.steps})
        costs.append(n_runs * ((r0.steps + 1) * per_T[f"T={r0.T}"]
                               + evals * per_T_test[f"T={r0.T}"]))
    rest = total - sum(costs)
    for cores in (1, 2, args.cores) if args.cores not in (1, 2) else (1, 2):
        loads = [0.0] * cores
        for c in sorted(costs, reverse=True):
            loads[loads.index(min(loads))] += c
        print(f"estimated wall on {cores} core(s), training sets in {cores} process(es): "
              f"{max(loads) + rest:.4g} s ({(max(loads) + rest) / 60:.1f} min; GD sets "
              f"{max(loads):.4g} s, the rest {rest:.4g} s in one process)")


if __name__ == "__main__":
    main()
