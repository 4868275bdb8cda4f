"""``mesadyn train``: the paper's simulation protocol (Section 6, Appendix B) — full-batch GD."""

from __future__ import annotations

import math
from typing import Annotated, Any

import typer

from ._common import (
    A0,
    B0,
    X1,
    Dim,
    Init,
    Json,
    Length,
    Scale,
    Seed,
    Sigma,
    SigmaW,
    console,
    emit_json,
    progress,
    table,
)

Steps = Annotated[int, typer.Option("--steps", help="Number of full-batch GD steps.")]
M = Annotated[int, typer.Option("--m", help="Training sequences (full batch).")]
MTest = Annotated[int | None, typer.Option("--m-test", help="Test sequences (default: --m).")]
Lr = Annotated[float | None, typer.Option("--lr", help="GD step size (default: Table 1).")]
Mask = Annotated[str, typer.Option(
    "--mask", help="none, or diagonal: train only diag(W^KQ_32), diag(W^PV_12) (Theorem 4.3).")]
EvalEvery = Annotated[int, typer.Option(
    "--eval-every", help="Evaluate test loss and ratio every this many steps (and at the end).")]
Out = Annotated[str | None, typer.Option("--out", help="Save the run to this .nc file.")]
Device = Annotated[str, typer.Option("--device", help="auto (CUDA if available), cpu or cuda.")]


def compute(x1: str = "gaussian", sigma: float = 1.0, scale: float = 1.0, d: int = 5,
            T: int = 100, seed: int = 1, m: int = 10_000, m_test: int | None = None,
            steps: int = 200, lr: float | None = None, init: str = "diagonal", a0: float = 0.1,
            b0: float = 0.1, sigma_w: float = 0.01, mask: str = "none", eval_every: int = 1,
            out: str | None = None, device: str = "auto",
            show_progress: bool = False) -> dict[str, Any]:
    """The JSON result of ``mesadyn train`` (also used by ``mesadyn sweep``).

    Raises :class:`~mesadyn.errors.MesadynError` on bad input and on divergence (after saving
    the partial run to ``out`` when given).
    """
    from ..errors import MesadynError
    from ..io import save_run
    from ..process import default_device
    from ..theory import check_T
    from ..train import TrainingDiverged, table1_lr, train
    from ._common import make_family, make_init

    fam = make_family(x1, d, sigma, scale)
    check_T(T)
    if out is not None and not str(out).endswith((".nc", ".nc4", ".netcdf")):
        raise MesadynError(f"run files are netCDF: give a path ending in .nc, got {out!r}")
    if device == "auto":
        dev = default_device()
    elif device in ("cpu", "cuda"):
        import torch

        if device == "cuda" and not torch.cuda.is_available():
            raise MesadynError("device 'cuda' requested but CUDA is not available here")
        dev = device
    else:
        raise MesadynError(f"unknown device {device!r}; choose auto, cpu or cuda")
    theta0 = make_init(init, fam.d, a0, b0, sigma_w, seed)
    lr = table1_lr(fam) if lr is None else lr

    def save(result) -> None:
        if out is not None:
            cfg = {**result.config, "init": init, "a0": a0, "b0": b0, "sigma_w": sigma_w}
            if init == "gaussian":
                cfg.update(a0=None, b0=None)
            else:
                cfg.update(sigma_w=None)
            save_run(result.to_dataset(), out, kind="train", config=cfg, seed=seed)

    with progress(show_progress) as bar:
        task = bar.add_task("GD", total=steps)

        def callback(k: int, rec: dict[str, float]) -> None:
            bar.update(task, completed=k,
                       description=f"GD  ab={rec['ab']:.4f}  loss={rec['train_loss']:.5g}")

        try:
            result = train(fam, T, m=m, m_test=m_test, steps=steps, lr=lr, theta0=theta0,
                           seed=seed, mask=mask, eval_every=eval_every, device=dev,
                           callback=callback)
        except TrainingDiverged as exc:
            save(exc.result)
            where = f"; partial run saved to {out}" if out is not None else ""
            raise MesadynError(f"{exc}{where}") from None
    save(result)
    summary = result.summary()
    summary.update(init=init, out=out)
    return summary


def train_cmd(
    x1: X1 = "gaussian",
    sigma: Sigma = 1.0,
    scale: Scale = 1.0,
    d: Dim = 5,
    T: Length = 100,
    seed: Seed = 1,
    m: M = 10_000,
    m_test: MTest = None,
    steps: Steps = 200,
    lr: Lr = None,
    init: Init = "diagonal",
    a0: A0 = 0.1,
    b0: B0 = 0.1,
    sigma_w: SigmaW = 0.01,
    mask: Mask = "none",
    eval_every: EvalEvery = 1,
    out: Out = None,
    device: Device = "auto",
    json: Json = False,
) -> None:
    """Full-batch GD on m sequences with a held-out test set (Section 6; Table 1 step sizes).

    Records per step ab, train and test loss and Proposition 4.1's ratio; prints the final
    values against Theorem 4.1's ab* at this T (Theorem 4.3's for ones).
    """
    res = compute(x1=x1, sigma=sigma, scale=scale, d=d, T=T, seed=seed, m=m, m_test=m_test,
                  steps=steps, lr=lr, init=init, a0=a0, b0=b0, sigma_w=sigma_w, mask=mask,
                  eval_every=eval_every, out=out, device=device, show_progress=True)
    if json:
        emit_json(res)
        return
    keys = ("family", "d", "T", "m", "lr", "steps", "ab", "ab_theory", "ab_limit", "ab_rel_err",
            "train_loss", "test_loss", "ratio", "ratio_se", "ratio_theory", "ratio_used",
            "ratio_excluded", "wall_s", "out")
    rows = [(k, res[k]) for k in keys if k in res and res[k] is not None]
    console.print(table(f"mesadyn train — {res['family']}, d={res['d']}, T={res['T']}", rows))
    if math.isfinite(res["ab"]):
        console.print(
            f"ab = {res['ab']:.6g} vs Theorem 4.1's ab* = {res['ab_theory']:.6g} at T={res['T']} "
            f"({100 * res['ab_rel_err']:+.2f}%); the paper's figures draw the T→∞ value "
            f"{res['ab_limit']:.6g}."
        )


def register(app: typer.Typer) -> None:
    app.command("train")(train_cmd)
