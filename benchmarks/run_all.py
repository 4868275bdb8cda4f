"""Run the benchmarks and write ``benchmarks/README.md``: one table per benchmark.

    python benchmarks/run_all.py                     # every benchmark, full settings
    python benchmarks/run_all.py --only gd_step flow # these, full settings (the rest kept)
    python benchmarks/run_all.py --quick             # small sizes, a few minutes: checks the
                                                     # scripts, prints the page, writes nothing
    python benchmarks/run_all.py --render            # rewrite README.md from results.json
    python benchmarks/run_all.py --list              # the benchmarks and their commands

Each benchmark (:data:`BENCHMARKS`) is one or more runs of a ``benchmarks/bench_*.py`` script
(or of ``mesadyn``) in a fresh process, with its ``--json`` output read back; this script adds
the machine (CPU model, cores, Python, torch, numpy, scipy and numba versions, the package
version and commit), the load average before and after, and the run's own wall time.  A full
run stores each benchmark's record in ``benchmarks/results.json`` and renders the page from
that file, so ``--only`` refreshes some tables and keeps the others; both files are written
atomically (a temporary file renamed into place).  A benchmark that fails keeps its previous
record, and the script exits 1 naming it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results.json"
README = HERE / "README.md"
TMP = "{tmp}"  # replaced by a temporary folder in a run's arguments
Rows = Callable[[Any], list[dict[str, Any]]]


def rows_of(key: str = "rows") -> Rows:
    """Read the rows from ``obj[key]`` (or ``obj`` itself when it is a list)."""
    return lambda obj: obj if isinstance(obj, list) else list(obj.get(key, []))


@dataclass(frozen=True)
class Bench:
    """One benchmark: what it measures, the runs of its full and quick modes, its table."""

    name: str
    title: str
    what: str
    script: str  # a file of benchmarks/, or "mesadyn" (the command line)
    full: tuple[tuple[str, ...], ...]  # the arguments of each run
    quick: tuple[tuple[str, ...], ...]
    columns: tuple[tuple[str, str], ...]  # (header, "key" or "key|format")
    output: str = "file"  # file: --json PATH; stdout: --json prints it; text: parse stdout
    rows: Rows = field(default=rows_of())
    env: tuple[tuple[str, str], ...] = ()
    cost: str = ""  # what the full mode takes on 2 cores
    summary: tuple[tuple[str, str], ...] = ()  # (label, "key|format") of a run's scalars


def _ensemble_text(text: str) -> list[dict[str, Any]]:
    """The rows of ``bench_ensemble.py``'s printed report (it has no ``--json``)."""
    rows = []
    num = r"([0-9.e+-]+)"
    for m in re.finditer(rf"^batched (\S+): {num} s wall, {num} s CPU; statuses (.*?); "
                         rf"max\|∇L\| at the end {num}; steps per row median (\d+)", text, re.M):
        rows.append({"run": f"batched {m[1]}", "wall_s": float(m[2]), "cpu_s": float(m[3]),
                     "outcomes": m[4], "grad_max": float(m[5]), "steps": int(m[6])})
    for m in re.finditer(rf"^one-by-one (.+?) \(.*?\): (\d+) rows {num} s wall, {num} s CPU → "
                         rf"{num} s CPU for N=(\d+) \(extrapolated\); speed-up of the batch "
                         rf"{num}× wall, {num}× CPU; max end-point gap to the batch {num}",
                         text, re.M):
        rows.append({"run": f"one by one, {m[1]} ({m[2]} rows, extrapolated to N = {m[6]})",
                     "cpu_s": float(m[5]), "speedup_cpu": float(m[8]), "gap": float(m[9])})
    return rows


def _reproduce_rows(obj: Any) -> list[dict[str, Any]]:
    claims = obj.get("claims", [])
    return [{"claims": f"{sum(c.get('status') == 'PASS' for c in claims)}/{len(claims)} PASS",
             **obj.get("_process", {})}]


BENCHMARKS: tuple[Bench, ...] = (
    Bench("exact_models", "The exact fields beyond the paper",
          "The exact fields of the processes beyond the paper's diagonal W (docs/data-models.md): "
          "real block rotations, AR noise, both together, and Haar W, gaussian tokens: the "
          "build of the moment tensors (and a load from the disk cache), their size, one loss "
          "and gradient, against the Monte-Carlo path at equal accuracy (the draws for a "
          "gradient with 1% relative standard error, timed up to a cap, extrapolated beyond).",
          "bench_exact_models.py", full=((),), quick=(("--quick", "--no-mc"),),
          columns=(("process", "process"), ("d", "d"), ("T", "T"), ("build s", "build_s|.2f"),
                   ("cache load s", "load_s|.3f"), ("nnz(G)", "nnz"),
                   ("loss+grad ms", "loss_grad_ms|.3f"), ("MC to 1% s", "mc_seconds|.1f"),
                   ("MC samples", "mc_samples")), cost="≈ 10 min"),
    Bench("models", "The models beyond one layer",
          "The fields of the models of docs/models.md on the CPU: one full-batch GD step "
          "(loss and gradient of the finite-sample loss, direct form) of the two-layer linear "
          "model, of softmax attention and, for scale, of the paper's model through the same "
          "direct form, at d = 5, T = 100, m = 10⁴; the two-layer model's exact field by "
          "quadrature at d = 2, T = 6 and d = 3, T = 4: its points, the build, one loss and "
          "gradient, the Hessian (d = 2).  Target: the two-layer GD step under 1 s.",
          "bench_models.py", full=((),),
          quick=(("--d", "2", "--T", "6", "--m", "200", "--repeats", "1", "--quadrature",
                  "1:4", "--no-hessian"),),
          columns=(("row", "row"), ("d", "d"), ("T", "T"), ("points", "points"),
                   ("build s", "build_s|.2f"), ("loss+grad wall s", "wall_s|.3f"),
                   ("CPU s", "cpu_s|.3f"), ("Hessian s", "hessian_s|.1f")), cost="≈ 5 min"),
    Bench("models_cost", "The cost rule of a model's fields",
          "CPU seconds of one loss and gradient (the fused kernel for k-layer linear attention, "
          "autograd for softmax) and of one Hessian-vector product of a finite-sample field, "
          "one thread, per unit rows · (T − 1) · layers · max(1, d²/4): the constants of "
          "mesadyn/field/_direct_cost.py, which prices every model's run before it starts.",
          "bench_models.py", full=(("--calibrate",),),
          quick=(("--calibrate",),),
          columns=(("model", "row"), ("d", "d"), ("T", "T"), ("m", "m"),
                   ("gradient s", "gradient_s|.4f"), ("per unit", "gradient_unit|.3g"),
                   ("HVP s", "hvp_s|.4f"), ("HVP per unit", "hvp_unit|.3g")), cost="≈ 2 min"),
    Bench("models_steady", "A model's Monte-Carlo flow to its fixed point",
          "`mesadyn integrate --model deep --layers 2 --d 3 --T 20 --field mc --samples 2000 "
          "--steady-tol 1e-8 --t-end 1e5`: the flow with difference Jacobians of the fused "
          "gradient, handed to Newton across the symmetry orbits below max|∇L̂| = 1e-4; wall "
          "and CPU seconds, every gradient, the exact Hessians, the flow's Jacobians, Newton's "
          "steps, the flow time where Newton took over and the final max|∇L̂|.",
          "bench_models.py", full=(("--steady",),),
          quick=(("--steady", "--steady-d", "1", "--steady-T", "4", "--samples", "200",
                  "--no-units"),),
          columns=(("status", "status"), ("wall s", "wall_s|.0f"), ("CPU s", "cpu_s|.0f"),
                   ("gradients", "gradients"), ("flow Jacobians", "jacobians"),
                   ("exact Hessians", "hessians"), ("Newton steps", "newton_steps"),
                   ("τ at handoff", "flow_tau|.3g"), ("max|∇L̂|", "grad_max|.2g")),
          cost="≈ 15 min"),
    Bench("gd_map", "GD as a map, batched",
          "Gradient descent at a finite step size as a map (mesadyn.analysis.gd_batch): 1000 GD "
          "runs of 200 steps at d = 3, T = 20 on the exact field in one batched call, each "
          "classified (monotone, catapult, edge of stability, periodic, chaotic, divergent), "
          "and the reduced map's phase diagram of 100³ = 10⁶ (η, a0, b0) points of 200 steps.  "
          "Targets: 60 s each on 2 cores.",
          "bench_gd_map.py", full=((),), quick=(("--runs", "100", "--grid", "30"),),
          columns=(("benchmark", "benchmark"), ("wall s", "wall_s|.2f"), ("CPU s", "cpu_s|.2f"),
                   ("target s", "target_s|.0f")), cost="≈ 15 s"),
    Bench("gd_step", "One GD step at the paper's setting",
          "One full-batch gradient-descent step (forward and backward of the finite-sample "
          "loss, Eq. 2) at d = 5, T = 100, m = 10 000 (float64 / complex128), as `mesadyn "
          "train` runs it: `FiniteField.loss_and_grad` with the fused CPU kernel.  Dense draws "
          "(gaussian, ones) take the closed form of the prefix Gram matrices, O(T d²) per "
          "sequence; sparse draws (Example 4.1) a closed sum over t, O(d) per sequence.  "
          "Median and minimum of 5 steps after a warm-up; target at most 0.2 s per step.",
          "bench_gd_step.py",
          full=(("--family", "gaussian", "--batched"), ("--family", "gaussian", "--threads", "1"),
                ("--family", "ones"), ("--family", "sparse")),
          quick=(("--family", "gaussian", "--m", "1000", "--repeats", "2"),
                 ("--family", "sparse", "--m", "1000", "--repeats", "2")),
          columns=(("draws", "family"), ("path", "path"), ("torch threads", "threads"),
                   ("median wall s", "median_s|.3f"), ("min wall s", "min_s|.3f"),
                   ("CPU s", "cpu_s|.3f")), cost="≈ 1 min"),
    Bench("flow", "The full exact flow, every solver",
          "The full exact gradient flow at d = 5, T = 100, gaussian σ = 1, from the diagonal "
          "init (0.5, 1.5) to max|∇L| < 1e-9, with every solver backend at the loosest "
          "tolerance that reaches it (explicit low-order methods stall on this stiff flow).  "
          "Target: under 30 s on 2 cores.",
          "bench_flow.py", full=((),),
          quick=(("--solvers", "scipy:LSODA,scipy:DOP853", "--d", "3", "--T", "20"),),
          columns=(("solver", "solver"), ("backend", "backend"), ("rtol", "rtol|.0e"),
                   ("status", "status"), ("τ end", "t_end|.4g"), ("max|∇L|", "grad_max|.2e"),
                   ("nfev", "nfev"), ("njev", "njev"), ("accepted", "accepted"),
                   ("rejected", "rejected"), ("wall s", "wall_s|.2f"),
                   ("stiffness ratio", "stiffness|.3g")), cost="≈ 1 min"),
    Bench("portrait", "Phase portraits",
          "A phase portrait at the default resolution (build with every layer drawn, then "
          "PNG, PDF and SVG), median of 3.  Target: under 10 s.",
          "bench_portrait.py", full=(("--repeat", "3"),), quick=(("--repeat", "1"),),
          columns=(("case", "case"), ("build s", "build_s|.2f"), ("PNG s", "render_png_s|.2f"),
                   ("PDF s", "render_pdf_s|.2f"), ("SVG s", "render_svg_s|.2f"),
                   ("build + PNG wall s", "total_png_s|.2f"),
                   ("build + PNG CPU s", "total_png_cpu_s|.2f")), cost="≈ 1 min"),
    Bench("exact", "The exact population field",
          "For each family of the paper and d ∈ {2, 3, 5, 8, 12}, T ∈ {10, 100, 1000}: the "
          "build of the moment tensors (no cache), the load from the disk cache, the build's "
          "peak memory, the stored entries, one `loss_and_grad`; at d = 5 the Monte-Carlo "
          "estimate of ∇L to 1% relative standard error for comparison.",
          "bench_exact.py", full=((),), quick=(("--quick", "--no-mc"),),
          columns=(("family", "family"), ("d", "d"), ("T", "T"), ("build s", "build_s|.2f"),
                   ("cache load s", "load_s|.3f"), ("peak MiB", "peak_MiB|.1f"),
                   ("nnz(G)", "nnz"), ("stored MiB", "stored_MiB|.1f"),
                   ("loss+grad ms", "loss_grad_ms|.3f"), ("MC to 1% s", "mc_seconds|.2f"),
                   ("MC samples", "mc_samples"), ("exact speed-up", "speedup|.0f")),
          cost="≈ 15 min"),
    Bench("exact_device", "The exact field's contractions by thread count",
          "The exact field's sparse contraction `K = G·a`, `loss_and_grad` and `hessian` "
          "with scipy (the CPU default) and torch (`contractions=\"torch\"`) on 1 and 2 "
          "threads, gaussian, T = 100, d = 5 and 12: median wall and CPU milliseconds per call.",
          "bench_exact_device.py", full=((),),
          quick=(("--d", "3", "--threads", "1", "--budget", "0.1"),),
          columns=(("d", "d"), ("threads", "threads"), ("call", "what"), ("path", "path"),
                   ("wall ms", "wall_ms|.3f"), ("CPU ms", "cpu_ms|.3f")), cost="≈ 2 min"),
    Bench("sampled", "Sampled fields: polynomial against direct form",
          "A Gaussian Monte-Carlo field at a dense θ: the direct path's loss+gradient and "
          "Hessian (measured, or extrapolated from one Hessian-vector product past 120 s), the "
          "polynomial form's build and its loss+gradient and Hessian, and the cost model's "
          "choice of form.",
          "bench_sampled.py", full=((),), quick=(("--sizes", "2,6,2000", "--repeats", "1"),),
          columns=(("d", "d"), ("T", "T"), ("N", "N"), ("direct L+∇L s", "direct_lg_s|.3g"),
                   ("direct Hessian s", "direct_hessian_s|.3g"), ("build s", "build_s|.3g"),
                   ("polynomial L+∇L s", "poly_lg_s|.3g"),
                   ("polynomial Hessian s", "poly_hessian_s|.3g"),
                   ("model's form", "model_form")), cost="≈ 15 min"),
    Bench("sampled_coverage", "Coverage of the sampled flow's interval",
          "How often the 95% interval of the Monte-Carlo flow's end point (K = 3 sample sets "
          "per repeat, R = 100 repeats, d = 1, T = 5) covers the exact ab* of Theorem 4.1, and "
          "the pooled O(1/N) bias that explains the shortfall.",
          "bench_sampled_coverage.py", full=(("--R", "100", "--K", "3", "--N", "400", "1600"),),
          quick=(("--R", "4", "--K", "2", "--N", "200"),),
          columns=(("N", "N"), ("covered / R", "covered"), ("coverage", "coverage|.2f"),
                   ("pooled bias", "pooled_bias|.2e"), ("bias se", "pooled_bias_se|.1e"),
                   ("converged flows", "n_converged"), ("wall s", "wall_s|.1f")),
          env=(("OMP_NUM_THREADS", "1"),), cost="≈ 10 min"),
    Bench("block_rows", "Block size of the batched kernel",
          "CPU seconds of one loss+gradient of the batched (torch) kernel for several block "
          "sizes (`BLOCK_ROWS` (sequence, t) rows per block), in alternating rounds in one "
          "process so that a drifting machine affects every size alike; one thread.",
          "bench_block_rows.py", full=((),),
          quick=(("--rounds", "2", "--m", "1000", "--rows", "4704", "1568"),),
          columns=(("BLOCK_ROWS", "block_rows"), ("sequences per block", "sequences"),
                   ("min CPU s", "min_cpu_s|.3f"), ("lower quartile", "q25_cpu_s|.3f"),
                   ("median", "median_cpu_s|.3f"), ("default", "default")), cost="≈ 1 min"),
    Bench("reproduce_profile", "Where `mesadyn reproduce --m 10000` spends its time",
          "Each component of the paper's protocol at m = 10 000, measured once in CPU seconds "
          "on one thread and multiplied by how often the protocol needs it.",
          "bench_reproduce.py", full=(("--m", "10000", "--flow"),), quick=(("--m", "500"),),
          columns=(("component", "component"), ("count", "count"),
                   ("CPU s each", "cpu_s_each|.4g"), ("CPU s total", "cpu_s_total|.4g"),
                   ("share", "share|.1%")), env=(("OMP_NUM_THREADS", "1"),), cost="≈ 2 min",
          summary=(("extrapolated total, CPU s on one thread", "total_cpu_s|.0f"),
                   ("estimated wall on 2 cores (s)", "estimated_wall_s.2|.0f"))),
    Bench("reproduce", "`mesadyn reproduce` end to end",
          "The whole paper, every study and claim, from an empty folder: the default run "
          "(reduced m, see docs/reproduce.md) and the paper's protocol (`--m 10000`).  Wall "
          "time, CPU seconds of every process and the peak memory of the largest.",
          "mesadyn",
          full=(("reproduce", "--out", f"{TMP}/default", "--json"),
                ("reproduce", "--m", "10000", "--out", f"{TMP}/m10000", "--json")),
          quick=(("reproduce", "--quick", "--out", f"{TMP}/quick", "--json"),),
          columns=(("command", "command"), ("claims", "claims"), ("wall", "wall|min"),
                   ("CPU s", "cpu_s|.0f"), ("CPU use", "cpu_use|.0%"),
                   ("peak RSS GB (largest process)", "peak_rss_gb|.2f")),
          output="stdout", rows=_reproduce_rows, cost="≈ 12 min"),
    Bench("startup", "Start-up of whole processes",
          "Whole `mesadyn` processes from spawn to exit (median of 7), next to `python -c "
          "pass`, with the heavy modules each imported.  Targets: `--help`, `theory` and "
          "`integrate --reduced` under 0.5 s, `portrait` under 2 s.",
          "bench_startup.py", full=(("--repeat", "7"),), quick=(("--repeat", "1"),),
          columns=(("case", "case"), ("median s", "median_s|.2f"), ("min s", "min_s|.2f"),
                   ("CPU s", "cpu_median_s|.2f"), ("target s", "target_s"),
                   ("heavy modules imported", "heavy_imports")),
          output="stdout", rows=rows_of("cases"), cost="≈ 3 min"),
    Bench("sweep", "Parameter sweeps on Dask",
          "8 points of `mesadyn stability` on 1 and 2 Dask workers (after a warm-up), and the "
          "machinery's cost per point over 200 `theory` points.",
          "bench_sweep.py", full=((),), quick=(("--points", "2", "--overhead-points", "10"),),
          columns=(("workers", "workers"), ("cluster start s", "cluster_start_s|.2f"),
                   ("sweep wall s", "wall_s|.2f"), ("Σ compute s", "compute_s|.2f"),
                   ("per point s", "per_point_s|.3f")),
          output="stdout", rows=lambda o: [{"workers": n, **o[f"workers_{n}"]} for n in (1, 2)
                                           if f"workers_{n}" in o],
          summary=(("speed-up of 2 workers over 1", "speedup_2_vs_1|.2f"),
                   ("overhead per point with Dask (s)", "overhead_per_point_s|.4f"),
                   ("inline, without Dask (s)", "inline_overhead_per_point_s|.4f")),
          cost="≈ 1 min"),
    Bench("continuation", "Continuation of the gaussian σ-branch",
          "200 points of the balanced point's branch in σ (d = 3, T = 20) with the full "
          "per-point analysis of `mesadyn continue`.  Target: under 60 s.",
          "bench_continuation.py", full=((),), quick=(("--points", "10"),),
          columns=(("points", "points"), ("σ reached", "sigma_last|.4g"),
                   ("wall s", "wall_s|.1f"), ("corrector s", "corrector_s|.1f"),
                   ("analysis s", "analysis_s|.1f"), ("max|∇L|", "max_residual|.1e"),
                   ("max rel. ab error", "max_ab_rel_error|.1e")),
          rows=lambda o: [o], env=(("OMP_NUM_THREADS", "1"),), cost="≈ 1 min"),
    Bench("ensemble", "Ensembles in one batched solve",
          "N = 1000 Gaussian inits (σ_w = 0.01) of the exact flow at d = 3, T = 20 to "
          "max|∇L| < 1e-8 in one batched solve (RODAS4 at rtol 1e-6), against one-by-one "
          "solves of 5 rows extrapolated.  Target: under 60 s.",
          "bench_ensemble.py",
          full=(("--n", "1000", "--method", "rodas4", "--rtol", "1e-6", "--atol", "1e-10",
                 "--baseline", "5"),),
          quick=(("--n", "20", "--baseline", "2", "--no-scipy"),),
          columns=(("run", "run"), ("wall s", "wall_s|.1f"), ("CPU s", "cpu_s|.1f"),
                   ("steps per row (median)", "steps"), ("outcomes", "outcomes"),
                   ("batch speed-up (CPU)", "speedup_cpu|.1f"),
                   ("end-point gap", "gap|.1e")),
          output="text", rows=_ensemble_text, cost="≈ 3 min"),
)


# ---- the machine --------------------------------------------------------------------------
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(module: str) -> str:
    try:
        return str(__import__(module).__version__)
    except ImportError:
        return "not installed"


def machine() -> dict[str, Any]:
    """The machine and software a measurement ran on."""
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                            capture_output=True, text=True, check=False).stdout.strip()
    out = {"cpu": _cpu_model(), "cores": os.cpu_count(), "os": platform.platform(),
           "python": platform.python_version()}
    out |= {m: _version(m) for m in ("torch", "numpy", "scipy", "numba", "mesadyn")}
    return out | {"commit": commit or "unknown"}


# ---- running ------------------------------------------------------------------------------
def _children() -> tuple[float, float]:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 2**20  # CPU s, peak RSS GB (KiB on Linux)


def shown(bench: Bench, args: tuple[str, ...]) -> str:
    """The command line a reader types to reproduce one run."""
    env = " ".join(f"{k}={v}" for k, v in bench.env)
    prog = "mesadyn" if bench.script == "mesadyn" else f"python benchmarks/{bench.script}"
    json_arg = " --json" if bench.output == "stdout" and bench.script != "mesadyn" else ""
    words = [a.replace(TMP, "DIR") for a in args]
    return " ".join(x for x in (env, prog, *words) if x) + json_arg


def run_one(bench: Bench, given: tuple[str, ...], tmp: Path, timeout: float | None) -> Any:
    """Run one invocation; return its parsed output (raises RuntimeError on failure)."""
    args = tuple(a.replace(TMP, str(tmp)) for a in given)
    out_file = tmp / f"{bench.name}.json"
    if bench.script == "mesadyn":
        cmd = [sys.executable, "-m", "mesadyn", *args]
    else:
        cmd = [sys.executable, str(HERE / bench.script), *args]
        if bench.output == "file":
            cmd += ["--json", str(out_file)]
        elif bench.output == "stdout":
            cmd += ["--json"]
    env = {**os.environ, **dict(bench.env)}
    cpu0, _ = _children()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=timeout, check=False)
    wall = time.perf_counter() - t0
    cpu1, peak = _children()
    if bench.output == "file" and out_file.is_file():
        parsed: Any = json.loads(out_file.read_text())
    elif bench.output == "stdout" and proc.stdout.strip():
        parsed = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{"):])[0]
    elif bench.output == "text" and proc.returncode == 0:
        parsed = proc.stdout
    else:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {' | '.join(tail)}")
    if isinstance(parsed, dict):
        parsed["_process"] = {"command": shown(bench, given), "wall_s": wall, "wall": wall,
                              "cpu_s": cpu1 - cpu0, "cpu_use": (cpu1 - cpu0) / wall,
                              "peak_rss_gb": peak, "rc": proc.returncode}
    return parsed


def measure(bench: Bench, quick: bool, timeout: float | None) -> dict[str, Any]:
    """Every run of ``bench`` in one mode: its record (machine, load, commands, rows)."""
    runs = bench.quick if quick else bench.full
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    scalars: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix=f"bench-{bench.name}-") as tmp:
        for args in runs:
            parsed = run_one(bench, args, Path(tmp), timeout)
            rows += bench.rows(parsed)
            if isinstance(parsed, dict):
                scalars.append({k: v for k, v in parsed.items()
                                if isinstance(v, (int, float, str)) or k == "estimated_wall_s"})
    return {"when": datetime.datetime.now().astimezone().isoformat(timespec="minutes"),
            "mode": "quick" if quick else "full", "machine": machine(),
            "load_before": [round(x, 2) for x in load0],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "wall_s": round(time.perf_counter() - t0, 1),
            "commands": [shown(bench, args) for args in runs], "rows": rows,
            "summary": scalars}


# ---- the page -----------------------------------------------------------------------------
def _cell(row: dict[str, Any], spec: str) -> str:
    key, _, fmt = spec.partition("|")
    value: Any = row
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None or value == "":
        return "—"
    if fmt == "min" and isinstance(value, (int, float)):
        return f"{int(value // 60)} min {value % 60:.0f} s"
    if fmt and isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, fmt)
    return str(value).replace("|", "\\|")


def table(bench: Bench, rows: list[dict[str, Any]]) -> list[str]:
    """The Markdown table of one benchmark's rows."""
    out = ["| " + " | ".join(h.replace("|", "\\|") for h, _ in bench.columns) + " |",
           "|" + "---|" * len(bench.columns)]
    out += ["| " + " | ".join(_cell(r, s) for _, s in bench.columns) + " |" for r in rows]
    return out


def _machine_key(m: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in m.items() if k != "commit"}, sort_keys=True)


def render(results: dict[str, Any]) -> str:
    """The whole of ``benchmarks/README.md`` from the stored records."""
    records = {b.name: results[b.name] for b in BENCHMARKS if b.name in results}
    machines: dict[str, str] = {}
    for r in records.values():
        machines.setdefault(_machine_key(r["machine"]), chr(ord("A") + len(machines)))
    lines = [
        "# Benchmarks",
        "",
        "Every table on this page is written by `python benchmarks/run_all.py`: it runs each",
        "benchmark below with the settings shown, in a fresh process, records the machine and",
        "the load average during the run, and rewrites this page from `benchmarks/results.json`",
        "(where the records are kept).  `python benchmarks/run_all.py --only NAME ...` refreshes",
        "some tables and keeps the others; `--quick` runs every script at small sizes (a few",
        "minutes) and writes nothing; `--list` shows the commands.  Wall seconds mean something",
        "only while the load average stays below the number of cores; CPU seconds (processor",
        "time summed over threads) are much less sensitive to other processes.",
        "",
        "## Machines",
        "",
        "| machine | CPU | cores | OS | Python | torch | numpy | scipy | numba | mesadyn |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, label in machines.items():
        m = json.loads(key)
        lines.append(f"| {label} | {m['cpu']} | {m['cores']} | {m.get('os', '—')} "
                     f"| {m['python']} | {m['torch']} "
                     f"| {m['numpy']} | {m['scipy']} | {m['numba']} | {m['mesadyn']} |")
    for b in BENCHMARKS:
        r = records.get(b.name)
        lines += ["", f"## {b.title}", "", *textwrap.wrap(f"`{b.name}`: {b.what}", 92), ""]
        if r is None:
            lines += [f"*Not measured on this version yet*: `python benchmarks/run_all.py "
                      f"--only {b.name}` ({b.cost or 'minutes'} on 2 cores)."]
            continue
        notes = [f"{label}: {_cell(s, spec)}" for s in r.get("summary", [])
                 for label, spec in b.summary if _cell(s, spec) != "—"]
        lines += ["```bash", *r["commands"], "```", "", *table(b, r["rows"]), ""]
        lines += [*textwrap.wrap("; ".join(notes) + ".", 92), ""] if notes else []
        lines += textwrap.wrap(
            f"Machine {machines[_machine_key(r['machine'])]} (commit "
            f"`{r['machine']['commit']}`), {r['when']}; load average (1, 5, 15 min) "
            f"{', '.join(map(str, r['load_before']))} before, "
            f"{', '.join(map(str, r['load_after']))} after; {r['wall_s']:.0f} s in all.", 92)
    return "\n".join(lines).rstrip() + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file next to ``path`` and rename it into place."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_results(path: Path = RESULTS) -> dict[str, Any]:
    return dict(json.loads(path.read_text())) if path.is_file() else {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="+", metavar="NAME", choices=[b.name for b in BENCHMARKS])
    ap.add_argument("--quick", action="store_true",
                    help="small sizes; print the page, write nothing")
    ap.add_argument("--render", action="store_true", help="only rewrite README.md")
    ap.add_argument("--list", action="store_true", help="the benchmarks and their commands")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per run")
    args = ap.parse_args(argv)
    chosen = [b for b in BENCHMARKS if not args.only or b.name in args.only]
    if args.list:
        for b in chosen:
            runs = b.quick if args.quick else b.full
            print(f"{b.name} ({b.cost}):", *(shown(b, a) for a in runs), sep="\n    ")
        return 0
    results = {} if args.quick else load_results()
    failed = []
    if not args.render:
        for b in chosen:
            print(f"== {b.name}", flush=True)
            try:
                results[b.name] = measure(b, args.quick, args.timeout)
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
                print(f"   FAILED: {exc}", file=sys.stderr)
                failed.append(b.name)
                continue
            print(f"   {results[b.name]['wall_s']:.0f} s", flush=True)
            if not args.quick:
                write_atomic(RESULTS, json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    page = render(results)
    if args.quick:
        print(page)
    else:
        write_atomic(README, page)
        print(f"wrote {README}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
