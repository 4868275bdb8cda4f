"""Fig. 2 (Appendix B.3): gaussian σ = 1, 2.

Configuration (runs, m, inits, step sizes):
`mesadyn.reproduce.studies.all_studies()["fig2"]`.

Run: `python studies/fig2_gaussian.py --out DIR [--quick] [--seed N]`
(= `mesadyn reproduce --only fig2 --out DIR`).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main("fig2", sys.argv[1:]))
