"""Table 1 (Appendix B.2): the GD step sizes,
checked against the stability limit lr·λ_max < 2.

Configuration (runs, m, inits, step sizes):
`mesadyn.reproduce.studies.all_studies()["table1"]`.

Run: `python studies/table1_step_sizes.py --out DIR [--quick] [--seed N]`
(= `mesadyn reproduce --only table1 --out DIR`).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main("table1", sys.argv[1:]))
