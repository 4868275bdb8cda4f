"""Fig. 3 (Appendix B.4): sparse (Example 4.1) c = 1, 2.

Configuration (runs, m, inits, step sizes):
`mesadyn.reproduce.studies.all_studies()["fig3"]`.

Run: `python studies/fig3_sparse.py --out DIR [--quick] [--seed N]`
(= `mesadyn reproduce --only fig3 --out DIR`).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main("fig3", sys.argv[1:]))
