"""The one registry of workflows: the CLI's commands, the sweep's targets and the docs' CLI
reference are all derived from :data:`REGISTRY` (``tests/workflows/test_registry.py`` and
``tests/sweep/test_targets.py`` check that they agree).

It is plain data, so reading it imports no workflow (``mesadyn --help`` stays fast).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["REGISTRY", "Workflow"]


@dataclass(frozen=True)
class Workflow:
    """One workflow: ``name`` (its module ``mesadyn.workflows.<name>``, its sweep target and its
    run files' ``kind``), ``command`` (the ``mesadyn`` sub-command, with ``cli/<cli_module>.py``
    its skin) and ``summary`` (the one line of ``mesadyn --help``)."""

    name: str
    command: str
    summary: str
    cli_module: str

    @property
    def module(self) -> str:
        """The workflow's module path."""
        return f"mesadyn.workflows.{self.name}"


#: Every workflow, in the order ``mesadyn --help`` lists them.
REGISTRY: dict[str, Workflow] = {w.name: w for w in (
    Workflow("theory", "theory", "Closed-form constants (Lemma 5.2, Theorems 4.1, 4.3).",
             "theory"),
    Workflow("train", "train", "Train by full-batch gradient descent (Section 6).", "train"),
    Workflow("integrate", "integrate", "Integrate the gradient flow dθ/dτ = −∇L(θ).",
             "integrate"),
    Workflow("stability", "stability",
             "Stability of the diagonal fixed point (Proposition 4.2).", "stability"),
    Workflow("portrait", "portrait", "Phase portrait of the reduced flow (Lemmas 5.2, 5.3).",
             "portrait"),
    Workflow("continuation", "continue", "Follow a fixed point through a data parameter.",
             "continue_"),
    Workflow("ensemble", "ensemble", "Many full-flow trajectories in one batched solve.",
             "ensemble"),
    Workflow("gdflow", "gdflow",
             "Gradient descent against the gradient flow and its modified flow.", "gdflow"),
    Workflow("gd", "gd", "Gradient descent at a finite step size as a map (stability, regimes).",
             "gd"),
)}
