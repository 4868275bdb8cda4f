"""``mesadyn reproduce``: every result of the paper, re-derived, with a claim-by-claim report.

The modules depend on each other one way only (no cycles)::

    studies -> context -> claims -> figures -> report -> runner

- :mod:`.studies` — the runs behind each figure of Section 6 / Appendix B (small configs);
- :mod:`.context` — computing one run (exact flow or GD) and finding it on disk;
- :mod:`.claims` — the claim registry (predicted, measured, error, tolerance, PASS/FAIL);
- :mod:`.figures`, :mod:`.report` — the figures (through :mod:`mesadyn.plots`) and the
  Markdown/HTML report;
- :mod:`.runner` — runs studies and claims into a folder, resumably and atomically;
  :mod:`.outcome` — its result, :class:`Outcome` (``all_pass``, ``to_dict()``).
"""

from .outcome import Outcome
from .runner import run

__all__ = ["Outcome", "run"]
