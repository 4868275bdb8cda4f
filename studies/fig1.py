"""Fig. 1 (Section 6): gaussian σ=0.5 and sparse c=0.5;
ab vs step (3 diagonal inits), ratio/MSE vs T_te.

Configuration (runs, m, inits, step sizes):
`mesadyn.reproduce.studies.all_studies()["fig1"]`.

Run: `python studies/fig1.py --out DIR [--quick] [--seed N]`
(= `mesadyn reproduce --only fig1 --out DIR`).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main("fig1", sys.argv[1:]))
