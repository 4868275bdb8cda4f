"""One prepared device check: parity of every field on CUDA against the CPU,
and timings, printed as one table.  At most ~8 minutes on one GPU.

    python benchmarks/device_check.py                 # on a machine with CUDA
    python benchmarks/device_check.py --cpu-dry-run   # the same table on the CPU, small sizes

Rows:
- **parity** of the exact field (loss and gradient, relative 1e-12; if the exact field cannot be
  built on CUDA the row says so instead of a number), of the finite-sample and Monte-Carlo
  fields' direct path on the same draws (1e-12), and whether a seed draws the same samples on
  CUDA and the CPU (torch's CUDA and CPU generators are different streams, so the sampled
  fields' parity is measured on draws made on the CPU and moved to the device; a field built
  with ``device="cuda"`` draws on the device and so has other samples than the CPU's);
- **timings**: the exact loss+gradient at d = 5 and 12 (T = 100), a Monte-Carlo gradient at
  d = 32 and 64 (T = 100, 10⁶ samples, chunked, with the chunk's memory stated), one GD step at
  the paper's setting (d = 5, T = 100, m = 10⁴) and ``mesadyn reproduce --m 10000`` under a
  time limit (the row says how many of its runs finished if it did not end).

Without CUDA (and without ``--cpu-dry-run``) it prints one line and exits 0.  Exit 1 if a
parity row fails.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

TOL = 1e-12


@dataclass(frozen=True)
class Sizes:
    """The problem sizes of one check (full on CUDA, reduced for the CPU dry run)."""

    exact: tuple[tuple[int, int], ...]  # (d, T) of the exact-field timings
    parity: tuple[int, int, int]  # (d, T, draws) of the parity rows
    mc: tuple[int, ...]  # d of the Monte-Carlo timings
    mc_T: int
    mc_samples: int
    gd: tuple[int, int, int]  # (d, T, m) of the GD step
    reproduce: tuple[str, ...]  # arguments of the reproduce row
    reproduce_limit_s: float


FULL = Sizes(exact=((5, 100), (12, 100)), parity=(5, 100, 20_000), mc=(32, 64), mc_T=100,
             mc_samples=1_000_000, gd=(5, 100, 10_000), reproduce=("--m", "10000"),
             reproduce_limit_s=240.0)
DRY = Sizes(exact=((2, 10), (3, 10)), parity=(2, 10, 300), mc=(3, 4), mc_T=10,
            mc_samples=2_000, gd=(2, 10, 200),
            reproduce=("--quick", "--only", "lem5.2"), reproduce_limit_s=120.0)


def _timed(fn: Callable[[], object], sync: Callable[[], None], repeats: int = 3) -> float:
    """Median seconds of ``fn`` after one warm-up call."""
    fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    return float((a - b).abs().max() / max(float(b.abs().max()), 1e-300))


def _theta(d: int) -> torch.Tensor:
    from mesadyn.model import diagonal_init, gaussian_init

    return diagonal_init(d, 0.5, 1.5) + gaussian_init(d, 0.05, seed=3)


def parity_rows(dev: torch.device, s: Sizes) -> list[tuple[str, str, str]]:
    """(what, value, verdict) rows comparing ``dev`` with the CPU."""
    from mesadyn.errors import MesadynError
    from mesadyn.field import FieldSpec, Form, make_field
    from mesadyn.field._sampled import SampledField
    from mesadyn.process import gaussian, make_generator, sample

    d, T, n = s.parity
    fam = gaussian(d, 1.0)
    th = _theta(d)
    rows: list[tuple[str, str, str]] = []
    cpu_exact = make_field(FieldSpec("exact", fam, T), reuse=False)
    L0, g0 = cpu_exact.loss_and_grad(th)
    try:
        f = make_field(FieldSpec("exact", fam, T, device=str(dev)), reuse=False)
        L1, g1 = f.loss_and_grad(th.to(dev))
        err = max(_rel(L1, L0), _rel(g1, g0))
        rows.append((f"exact field d={d} T={T}: loss+grad rel. diff", f"{err:.2e}",
                     "ok" if err <= TOL else "FAIL"))
    except MesadynError as exc:
        rows.append((f"exact field d={d} T={T} on {dev}", "CPU only",
                     f"not built on {dev}: {exc}"))
    from mesadyn.flow import integrate

    try:  # the full flow on the device: torchdiffeq keeps its state on dev
        fl = make_field(FieldSpec("exact", fam, T, device=str(dev)), reuse=False)
        ref, run = (integrate(f_, th, t_end=0.05, solver="torchdiffeq:dopri5", n_save=20,
                              steady_tol=None, compute_stiffness=False)
                    for f_ in (cpu_exact, fl))
        err = _rel(torch.from_numpy(run.theta), torch.from_numpy(ref.theta))
        st = run.solver_stats
        rows.append((f"full flow d={d} T={T} dopri5 on {dev} ({st.nfev} evals, "
                     f"{st.wall_s:.3g} s vs {ref.solver_stats.wall_s:.3g} s on cpu): "
                     "θ(τ) rel. diff", f"{err:.2e}", "ok" if err <= TOL else "FAIL"))
    except MesadynError as exc:
        rows.append((f"full flow d={d} T={T} on {dev}", "-", f"not on {dev}: {exc}"))

    same = torch.equal(sample(fam, 64, T, make_generator(7, "cpu"), "cpu")[0],
                       sample(fam, 64, T, make_generator(7, dev), dev)[0].cpu())
    rows.append((f"seed 7 draws the same samples on {dev} and cpu", "yes" if same else "no",
                 "parity below uses CPU draws moved to the device" if not same else "ok"))

    class _Draws(SampledField):
        """Given draws (the direct path MonteCarloField and FiniteField share)."""

        name = "draws"

        def options(self) -> dict[str, object]:
            return {}

    x1, lam = sample(fam, n, T, make_generator(1, "cpu"), "cpu")
    here = _Draws(fam, T, x1, lam, "cpu", form=Form.DIRECT)
    there = _Draws(fam, T, x1, lam, dev, form=Form.DIRECT)
    L0, g0 = here.loss_and_grad(th)
    L1, g1 = there.loss_and_grad(th.to(dev))
    err = max(_rel(L1, L0), _rel(g1, g0))
    rows.append((f"finite/MC direct path d={d} T={T} n={n}: loss+grad rel. diff",
                 f"{err:.2e}", "ok" if err <= TOL else "FAIL"))
    return rows


def timing_rows(dev: torch.device, s: Sizes) -> list[tuple[str, str, str]]:
    """(what, seconds, note) rows on ``dev``."""
    from mesadyn.errors import MesadynError
    from mesadyn.field import FieldSpec, FiniteField, Form, MonteCarloField, make_field
    from mesadyn.process import gaussian

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    rows: list[tuple[str, str, str]] = []
    for d, T in s.exact:
        fam = gaussian(d, 1.0)
        th = _theta(d).to(dev)
        try:
            t0 = time.perf_counter()
            f = make_field(FieldSpec("exact", fam, T, device=str(dev)), reuse=False)
            build = time.perf_counter() - t0
            sec = _timed(lambda f=f, th=th: f.loss_and_grad(th), sync)
            rows.append((f"exact loss+grad d={d} T={T}", f"{sec:.3g}", f"build {build:.3g} s"))
        except MesadynError as exc:
            rows.append((f"exact loss+grad d={d} T={T}", "-", f"not on {dev}: {exc}"))
    for d in s.mc:
        fam = gaussian(d, 1.0)
        T = s.mc_T
        per_seq = 16 * (T * d * d + 3 * T * d)  # bytes per sequence of the direct path
        chunk = max(1, min(s.mc_samples, (4 << 30) // per_seq))
        t0 = time.perf_counter()
        f = MonteCarloField(fam, T, samples=s.mc_samples, seed=1, device=dev, chunk=chunk,
                            form=Form.DIRECT)
        build = time.perf_counter() - t0
        th = _theta(d).to(dev)
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        sec = _timed(lambda f=f, th=th: f.loss_and_grad(th), sync, repeats=1)
        peak = (f"; peak {torch.cuda.max_memory_allocated(dev) / 2**30:.2f} GiB allocated"
                if dev.type == "cuda" else "")
        rows.append((f"MC gradient d={d} T={T} N={s.mc_samples:.0e}", f"{sec:.3g}",
                     f"chunks of {chunk} sequences ({chunk * per_seq / 2**30:.2f} GiB of "
                     f"prefix Grams){peak}; draws {build:.2g} s on {dev}"))
        del f
    d, T, m = s.gd
    f = FiniteField(gaussian(d, 1.0), T, m, seed=1, device=dev, form=Form.DIRECT)
    th = _theta(d).to(dev)
    sec = _timed(lambda: f.loss_and_grad(th), sync)
    rows.append((f"GD step d={d} T={T} m={m}", f"{sec:.3g}", "loss+grad, direct form"))
    rows.append(reproduce_row(dev, s))
    return rows


def reproduce_row(dev: torch.device, s: Sizes) -> tuple[str, str, str]:
    """``mesadyn reproduce`` with ``s.reproduce`` on ``dev``, stopped after the time limit."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "mesadyn", "reproduce", *s.reproduce, "--device",
               dev.type, "--out", tmp, "--json"]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True,
                                  timeout=s.reproduce_limit_s)
            note = f"exit {proc.returncode}"
        except subprocess.TimeoutExpired:
            note = f"stopped at the {s.reproduce_limit_s:g} s limit"
        wall = time.perf_counter() - t0
        done = len(list((Path(tmp) / "runs").glob("*.nc")))
    return (f"mesadyn reproduce {' '.join(s.reproduce)}", f"{wall:.3g}",
            f"{note}; {done} run files written")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu-dry-run", action="store_true",
                    help="run the same table on the CPU at reduced sizes (tests this script)")
    ap.add_argument("--reproduce-limit", type=float, default=None,
                    help="seconds the reproduce row may take")
    args = ap.parse_args(argv)
    if args.cpu_dry_run:
        dev, sizes = torch.device("cpu"), DRY
    elif torch.cuda.is_available():
        dev, sizes = torch.device("cuda"), FULL
    else:
        print("device_check: CUDA is not available here; nothing to check "
              "(use --cpu-dry-run to test the script on the CPU)")
        return 0
    if args.reproduce_limit is not None:
        from dataclasses import replace

        sizes = replace(sizes, reproduce_limit_s=args.reproduce_limit)
    torch.set_default_dtype(torch.float64)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu (dry run)"
    t0 = time.perf_counter()
    rows = [("parity", *r) for r in parity_rows(dev, sizes)]
    rows += [("seconds", *r) for r in timing_rows(dev, sizes)]
    print(f"# device check on {name}, torch {torch.__version__}, "
          f"{time.perf_counter() - t0:.0f} s")
    print("| kind | what | value | note |")
    print("|---|---|---|---|")
    for kind, what, value, note in rows:
        print(f"| {kind} | {what} | {value} | {note} |")
    return 1 if any(note == "FAIL" for _k, _w, _v, note in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
