"""``mesadyn theory``: the paper's predictions for one process (Lemmas 5.2–5.3, Thms 4.1/4.3)."""

from __future__ import annotations

import typer

from ._common import Json, ProcessArgs, console, emit_json, process_options, table


@process_options()
def theory(
    process: ProcessArgs,
    json: Json = False,
) -> None:
    """The closed-form constants of the reduced dynamics (Lemma 5.2, Theorems 4.1, 4.3).

    κ1, κ2, κ3, c1, c2, Theorem 4.1's ab* at this T (4.3's for ones), and its T→∞ limit.
    """
    from ..workflows import theory as wf

    res = wf.run(wf.Config(**process))
    if json:
        emit_json(res.to_dict())
        return
    title = f"mesadyn theory — {res.family}, d={res.d}, T={res.T} ({res.theorem})"
    console.print(table(title, list(res.to_dict().items())))
    console.print(
        f"The paper's figures draw the T→∞ value κ1/κ2 = {res.ab_limit:.6g}; "
        f"at T={res.T} the prediction is ab* = {res.ab_star:.6g}."
    )


def register(app: typer.Typer) -> None:
    app.command("theory")(theory)
