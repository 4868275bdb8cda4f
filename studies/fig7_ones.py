"""Fig. 7 (Appendix B.5): x_1 = 1_d, heatmaps of the trained W^KQ and W^PV.

Configuration (runs, m, inits, step sizes):
`mesadyn.reproduce.studies.all_studies()["fig7"]`.

Run: `python studies/fig7_ones.py --out DIR [--quick] [--seed N]`
(= `mesadyn reproduce --only fig7 --out DIR`).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main("fig7", sys.argv[1:]))
