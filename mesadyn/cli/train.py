"""``mesadyn train``: the paper's simulation protocol (Section 6, Appendix B) — full-batch GD."""

from __future__ import annotations

import math
from typing import Annotated, Any

import typer

from ..errors import MesadynError
from ..outcome import Outcome
from ._common import (
    A0,
    B0,
    Device,
    Init,
    Json,
    Out,
    ProcessArgs,
    SigmaW,
    console,
    finish,
    model_render,
    process_options,
    progress_callback,
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
Incontext = Annotated[str, typer.Option(
    "--incontext", help="Test context lengths of the end point's in-context curve, e.g. "
    "3,5,10,20 (Proposition 4.1, Theorem 4.2; empty: none).")]

#: Rows of the human-readable summary, in order.
_ROWS = ("family", "d", "T", "m", "lr", "steps", "ab", "ab_theory", "ab_limit", "ab_rel_err",
         "train_loss", "test_loss", "ratio", "ratio_se", "ratio_theory", "ratio_used",
         "ratio_excluded", "wall_s", "out")


@process_options()
def train_cmd(
    process: ProcessArgs,
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
    incontext: Incontext = "",
    out: Out = None,
    device: Device = "cpu",
    json: Json = False,
) -> None:
    """Train the linear transformer by full-batch gradient descent (the paper's Section 6 protocol).

    Full-batch GD on m sequences with a held-out test set (Table 1 step sizes).  Records per
    step ab, train and test loss and Proposition 4.1's ratio; prints the final values against
    Theorem 4.1's ab* at this T (Theorem 4.3's for ones).
    """
    from ..workflows import train as wf

    config = wf.Config(**process, m=m,
                       m_test=m_test, steps=steps, lr=lr, init=init, a0=a0, b0=b0,
                       sigma_w=sigma_w, mask=mask, eval_every=eval_every,
                       incontext=incontext,  # type: ignore[arg-type]  # Config parses the text
                       out=out, device=device)
    with progress_callback(not json, lambda k: "GD", total=config.steps) as on_step:
        res = wf.run(config, progress=on_step)

    if not isinstance(res, wf.Result):  # a model other than the paper's
        if res.status is Outcome.DIVERGED:
            raise MesadynError(res.message)
        finish(res, json=json, render=model_render("train"), saved=res.out)
        return

    def render(obj: dict[str, Any]) -> None:
        rows = [(k, obj[k]) for k in _ROWS if obj.get(k) is not None]
        console.print(table(f"mesadyn train — {res.family}, d={res.d}, T={res.T}", rows))
        if math.isfinite(res.ab):
            console.print(
                f"ab = {res.ab:.6g} vs Theorem 4.1's ab* = {res.ab_theory:.6g} at T={res.T} "
                f"({100 * res.ab_rel_err:+.2f}%); the paper's figures draw the T→∞ value "
                f"{res.ab_limit:.6g}."
            )

    if res.status is Outcome.DIVERGED:  # a step size GD diverges at is bad input (exit 2):
        # one line and nothing on stdout, the partial run kept in the run file
        where = f"; partial run saved to {res.out}" if res.out is not None else ""
        raise MesadynError(f"{res.message}{where}")
    finish(res, json=json, render=render, saved=res.out)

def register(app: typer.Typer) -> None:
    app.command("train")(train_cmd)
