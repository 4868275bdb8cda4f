"""``mesadyn reproduce``: every result of the paper, re-derived, with a claim-by-claim report.

- :mod:`.studies` — the runs behind each figure of Section 6 / Appendix B (small configs);
- :mod:`.claims` — the claim registry (predicted, measured, error, tolerance, PASS/FAIL);
- :mod:`.runner` — runs studies and claims into a folder, resumably and atomically;
- :mod:`.figures`, :mod:`.report` — the figures and the Markdown/HTML report.
"""

from .runner import Outcome, run

__all__ = ["Outcome", "run"]
