"""``mesadyn theory``: the paper's predictions for one process (Lemmas 5.2–5.3, Thms 4.1/4.3)."""

from __future__ import annotations

import typer

from ._common import (
    X1,
    Dim,
    Json,
    Length,
    Mixture,
    Moments,
    Mu,
    Noise,
    Radius,
    Rotation,
    Scale,
    Seed,
    Sigma,
    console,
    emit_json,
    table,
)


def theory(
    x1: X1 = "gaussian",
    sigma: Sigma = 1.0,
    scale: Scale = 1.0,
    d: Dim = 5,
    T: Length = 100,
    seed: Seed = 1,
    mu: Mu = 0.0,
    moments: Moments = None,
    mixture: Mixture = None,
    radius: Radius = 1.0,
    rotation: Rotation = "diagonal",
    noise: Noise = 0.0,
    json: Json = False,
) -> None:
    """The closed-form constants of the reduced dynamics (Lemma 5.2, Theorems 4.1, 4.3).

    κ1, κ2, κ3, c1, c2, Theorem 4.1's ab* at this T (4.3's for ones), and its T→∞ limit.
    """
    from ..workflows import theory as wf

    res = wf.run(wf.Config(x1=x1, sigma=sigma, scale=scale, d=d, T=T, seed=seed,
                       mu=mu, moments=moments, mixture=mixture, radius=radius,
                       rotation=rotation, noise=noise))
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
