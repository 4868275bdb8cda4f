"""What the sampled fields over general sequences cost (docs/data-models.md, "Sampled only").

For each size ``(d, T, m)`` and process it times, in CPU seconds (``time.process_time``, one
torch thread): drawing the sequences, building the polynomial form (Ĝ, Ĉ, ĉ), one loss+gradient
in the polynomial form, and one loss+gradient by the direct path; and, for comparison, the same
for the paper's diagonal process with the existing :class:`~mesadyn.field.FiniteField` on
``(x_1, λ)`` draws.  The polynomial and direct numbers are checked to agree.

    python studies/data_models_sequence_cost.py                      # d=3,T=20 and d=5,T=100
    python studies/data_models_sequence_cost.py --sizes 3,20,2000 --json
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from mesadyn.field import FiniteField, FiniteSequenceField
from mesadyn.model import gaussian_init
from mesadyn.process import gaussian


def _cpu(fn):  # type: ignore[no-untyped-def]
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0


def measure(d: int, T: int, m: int, rotation: str, noise: float) -> dict[str, object]:
    """One row: the cost of the sequence field (or FiniteField for ``rotation='paper'``)."""
    fam = gaussian(d)
    th = gaussian_init(d, 0.1, 3)
    if rotation == "paper":
        f, draw_s = _cpu(lambda: FiniteField(fam, T, m, seed=1, device="cpu", form="polynomial"))
        g, _ = _cpu(lambda: FiniteField(fam, T, m, seed=1, device="cpu", form="direct"))
    else:
        kw = {"rotation": rotation, "noise": noise, "device": "cpu"}
        f, draw_s = _cpu(lambda: FiniteSequenceField(fam, T, m, 1, form="polynomial", **kw))
        g, _ = _cpu(lambda: FiniteSequenceField(fam, T, m, 1, form="direct", **kw))
        _, more = _cpu(lambda: list(f.sequences()))  # the draws themselves (kept)
        draw_s += more
    _, build_s = _cpu(f.build)
    f.loss_and_grad(th)  # warm
    (Lp, gp), poly_s = _cpu(lambda: f.loss_and_grad(th))
    g.loss_and_grad(th)  # warm (draws, cached batches)
    (Ld, gd), direct_s = _cpu(lambda: g.loss_and_grad(th))
    return {"d": d, "T": T, "m": m, "process": rotation if rotation == "paper" else
            f"{rotation}, noise={noise:g}", "draw_s": round(draw_s, 3),
            "build_s": round(build_s, 3), "poly_loss_grad_ms": round(1e3 * poly_s, 3),
            "direct_loss_grad_ms": round(1e3 * direct_s, 3),
            "agree": float((gp - gd).abs().max() / gd.abs().max())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="3,20,2000;5,100,500",
                    help="d,T,m triples separated by ';'")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for triple in args.sizes.split(";"):
        d, T, m = (int(v) for v in triple.split(","))
        for rotation, noise in (("paper", 0.0), ("haar", 0.0), ("haar", 0.3), ("real", 0.0)):
            if rotation == "real" and d % 2:
                continue
            rows.append(measure(d, T, m, rotation, noise))
            if not args.json:
                print(rows[-1], flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
