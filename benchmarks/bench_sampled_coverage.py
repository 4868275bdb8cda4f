"""How often the 95% interval of the sampled flow's end point covers the exact
``ab*`` (Theorem 4.1).

R repeats, each :func:`mesadyn.workflows.integrate.run` with ``repeats=K`` on its own K sample
sets (seeds ``base + r·K .. base + r·K + K − 1``, disjoint across repeats): the Student-t 95%
interval of the mean end-point ``ab`` over the K sets is checked against the exact ``ab*``.
Unbiased normal end points would give coverage 95% (binomial SD ≈ 2.2 points at R = 100).  The
sampled end point is the fixed point of ``L̂``, a smooth function of the empirical moments, so
it carries an O(1/N) bias; coverage drops once that bias is comparable with ``SE ≈ SD/√K``.
The script also reports the pooled bias over all R·K flows with its standard error.

    OMP_NUM_THREADS=1 python benchmarks/bench_sampled_coverage.py [--R 100] [--K 3]
        [--N 400] [--d 1] [--T 5] [--field mc] [--base 1000] [--verbose] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time


def coverage(R: int, K: int, N: int, d: int, T: int, field: str = "mc",
             base: int = 1000, verbose: bool = False) -> dict[str, object]:
    """Coverage of ``ab*`` by R intervals of K sample sets each, and the pooled bias."""
    from mesadyn.theory import constants
    from mesadyn.workflows import integrate

    opts = {"samples": N} if field == "mc" else {"m": N}
    start = time.perf_counter()
    covered = 0
    values: list[float] = []
    statuses: list[str] = []
    ab_star = math.nan
    for r in range(R):
        cfg = integrate.Config(x1="gaussian", d=d, T=T, field=field, repeats=K,
                               seed=base + r * K, force=True, **opts)
        res = integrate.run(cfg)
        assert isinstance(res, integrate.RepeatedResult)
        q = res.quantities["ab"]
        ab_star = constants(cfg.family(), T).ab_star
        covered += int(q.lo <= ab_star <= q.hi)
        values.extend(q.values)
        statuses.extend(res.statuses)
        if verbose:
            print(f"repeat {r}: mean {q.mean:.6g} ± {q.se:.2g}, covers {q.lo <= ab_star <= q.hi}"
                  f", {time.perf_counter() - start:.0f} s", flush=True)
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return {"R": R, "K": K, "N": N, "d": d, "T": T, "field": field, "ab_star": ab_star,
            "covered": covered, "coverage": covered / R,
            "pooled_mean": mean, "pooled_bias": mean - ab_star, "pooled_bias_se": sd / math.sqrt(n),
            "sd_one_set": sd, "se_of_K_mean": sd / math.sqrt(K),
            "bias_over_se_K": (mean - ab_star) / (sd / math.sqrt(K)),
            "n_converged": statuses.count("converged"), "n_flows": len(statuses),
            "wall_s": time.perf_counter() - start}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--R", type=int, default=100)
    ap.add_argument("--K", type=int, default=3)
    ap.add_argument("--N", type=int, nargs="+", default=[400])
    ap.add_argument("--d", type=int, default=1)
    ap.add_argument("--T", type=int, default=5)
    ap.add_argument("--field", default="mc")
    ap.add_argument("--base", type=int, default=1000, help="first seed (repeat r uses "
                    "base + r·K .. base + r·K + K − 1)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    for N in args.N:
        rows.append(coverage(args.R, args.K, N, args.d, args.T, args.field, base=args.base,
                             verbose=args.verbose))
        print(json.dumps(rows[-1]), flush=True)
    print(f"load average: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
