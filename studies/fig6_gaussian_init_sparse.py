"""Fig. 6 (Appendix B.4): sparse c = 1, 2 from Gaussian inits σ_w ∈ {0.001, 0.01, 0.1}.

Configuration (runs, m, inits, step sizes):
`mesadyn.reproduce.studies.all_studies()["fig6"]`.

Run: `python studies/fig6_gaussian_init_sparse.py --out DIR [--quick] [--seed N]`
(= `mesadyn reproduce --only fig6 --out DIR`).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main("fig6", sys.argv[1:]))
