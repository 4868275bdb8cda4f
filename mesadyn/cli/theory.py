"""``mesadyn theory``: the paper's predictions for one process (Lemmas 5.2–5.3, Thms 4.1/4.3)."""

from __future__ import annotations

import typer

from ._common import Json, Out, ProcessArgs, console, finish, process_options, table


@process_options()
def theory(
    process: ProcessArgs,
    out: Out = None,
    json: Json = False,
) -> None:
    """The closed-form constants of the reduced dynamics (Lemma 5.2, Theorems 4.1, 4.3).

    κ1, κ2, κ3, c1, c2, Theorem 4.1's ab* at this T (4.3's for ones), and its T→∞ limit.
    """
    from ..workflows import theory as wf

    res = wf.run(wf.Config(**process, out=out))

    def render(obj: dict[str, object]) -> None:
        title = f"mesadyn theory — {res.family}, d={res.d}, T={res.T} ({res.theorem})"
        rows = [(k, v) for k, v in obj.items() if k not in ("status", "message")]
        console.print(table(title, rows))
        if res.rotation == "real":
            console.print(
                f"At every minimum of the 3-D rotation manifold ab = k*_1 = {res.ab_star:.6g} "
                f"and cb = k*_2 = {res.cb_star:.6g} (T={res.T}); the T→∞ limit of k*_1 is "
                f"2μ2/μ3 = {res.ab_limit:.6g} (NaN where no closed form is known)."
            )
        else:
            console.print(
                f"The paper's figures draw the T→∞ value κ1/κ2 = {res.ab_limit:.6g}; "
                f"at T={res.T} the prediction is ab* = {res.ab_star:.6g}."
            )

    finish(res, json=json, render=render)

def register(app: typer.Typer) -> None:
    app.command("theory")(theory)
