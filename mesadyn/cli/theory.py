"""``mesadyn theory``: the paper's predictions for one process (Lemmas 5.2–5.3, Thms 4.1/4.3)."""

from __future__ import annotations

import typer

from ._common import X1, Dim, Json, Length, Scale, Seed, Sigma, console, emit_json, table


def theory(
    x1: X1 = "gaussian",
    sigma: Sigma = 1.0,
    scale: Scale = 1.0,
    d: Dim = 5,
    T: Length = 100,
    seed: Seed = 1,
    json: Json = False,
) -> None:
    """κ1, κ2, κ3, c1, c2, Theorem 4.1's ab* at this T (4.3's for ones), and its T→∞ limit."""
    from ..theory import constants, predicted_ratio
    from ._common import make_family

    fam = make_family(x1, d, sigma, scale)
    c = constants(fam, T)
    out = {
        "family": fam.name,
        "d": fam.d,
        "T": c.T,
        "kappa1": c.kappa1,
        "kappa2": c.kappa2,
        "kappa3": c.kappa3,
        "c1": c.c1,
        "c2": c.c2,
        "ab_star": c.ab_star,
        "ab_limit": c.ab_limit,
        "ratio": predicted_ratio(fam, T),
        "assumption_4_1": fam.assumption_41,
    }
    if json:
        emit_json(out)
        return
    note = "Theorem 4.3 (masked)" if fam.kind == "fixed" else "Theorem 4.1"
    rows = [(k, v) for k, v in out.items()]
    console.print(table(f"mesadyn theory — {fam.name}, d={fam.d}, T={c.T} ({note})", rows))
    console.print(
        f"The paper's figures draw the T→∞ value κ1/κ2 = {c.ab_limit:.6g}; "
        f"at T={c.T} the prediction is ab* = {c.ab_star:.6g}."
    )


def register(app: typer.Typer) -> None:
    app.command("theory")(theory)
