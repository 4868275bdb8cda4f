"""``mesadyn reproduce``: every result of the paper, re-derived, with a claim-by-claim report.

Every run is a workflow run (:mod:`mesadyn.workflows.integrate` for the exact flows,
:mod:`mesadyn.workflows.train` for GD); the modules depend on each other one way only (no
cycles)::

    studies -> context -> rows -> claims -> outcome -> figures -> report -> runner

- :mod:`.studies` — the runs behind each figure of Section 6 / Appendix B, each a workflow
  ``Config``;
- :mod:`.context` — finding a run's file on disk or computing it through its workflow;
- :mod:`.rows` — a claim's rows, their verdict (:class:`~mesadyn.reproduce.rows.ClaimStatus`)
  and record; :mod:`.claims` — the claim registry (predicted, measured, error, tolerance);
- :mod:`.figures`, :mod:`.report` — the figures (through :mod:`mesadyn.plots`) and the
  Markdown/HTML report;
- :mod:`.runner` — :func:`plan` and :func:`run`: studies and claims into a folder, resumably
  and atomically; :mod:`.outcome` — its result, :class:`ReproduceResult` (a
  :class:`~mesadyn.workflows.RunResult`: ``status``, ``all_pass``, ``to_dict()``).
"""

from .outcome import ReproduceResult
from .runner import Plan, plan, run

__all__ = ["Plan", "ReproduceResult", "plan", "run"]
