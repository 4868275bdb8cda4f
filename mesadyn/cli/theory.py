"""``mesadyn theory``: the paper's predictions for one process (Lemmas 5.2–5.3, Thms 4.1/4.3)."""

from __future__ import annotations

import typer

from ._common import X1, Dim, Json, Length, Scale, Seed, Sigma, console, emit_json, table


def compute(x1: str = "gaussian", sigma: float = 1.0, scale: float = 1.0, d: int = 5,
            T: int = 100, seed: int = 1) -> dict[str, object]:
    """The JSON result of ``mesadyn theory`` (also used by ``mesadyn sweep``)."""
    from ..theory import constants, predicted_ratio
    from ._common import make_family

    fam = make_family(x1, d, sigma, scale)
    c = constants(fam, T)
    return {
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
    out = compute(x1, sigma, scale, d, T, seed)
    if json:
        emit_json(out)
        return
    note = "Theorem 4.1" if out["assumption_4_1"] else "Theorem 4.3 (masked)"
    rows = [(k, v) for k, v in out.items()]
    title = f"mesadyn theory — {out['family']}, d={out['d']}, T={out['T']} ({note})"
    console.print(table(title, rows))
    console.print(
        f"The paper's figures draw the T→∞ value κ1/κ2 = {out['ab_limit']:.6g}; "
        f"at T={out['T']} the prediction is ab* = {out['ab_star']:.6g}."
    )


def register(app: typer.Typer) -> None:
    app.command("theory")(theory)
