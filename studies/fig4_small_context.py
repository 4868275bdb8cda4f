"""Fig. 4 (Appendix B.3): small context d = T = 5, gaussian σ = 1.

Configuration (runs, m, inits, step sizes):
`mesadyn.reproduce.studies.all_studies()["fig4"]`.

Run: `python studies/fig4_small_context.py --out DIR [--quick] [--seed N]`
(= `mesadyn reproduce --only fig4 --out DIR`).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main("fig4", sys.argv[1:]))
