"""Analyses that take a field or a trained θ and a point, and measure something the paper states.

Modules (import them directly; nothing is imported eagerly here so that each analysis stays
independent of the others):

- :mod:`mesadyn.analysis.incontext` — in-context evaluation of a trained θ: the Proposition 4.1
  ratio ``E[(ŷ_{T_te})_j / (W x_{T_te})_j]`` with a standard error, and the test MSE against the
  test context length ``T_te`` (Theorem 4.2).
- :mod:`mesadyn.analysis.mesa` — the trained transformer as a mesa-optimizer (Corollary 4.1).
- :mod:`mesadyn.analysis.assumption42` — Assumption 4.2 for any family, exactly (rademacher
  satisfies it, uniform does not).
- :mod:`mesadyn.analysis.fixedpoint` — Newton refinement of fixed points, the scaling-symmetry
  direction ``(P, −A)``, the balanced point of Theorems 4.1/4.3, the flow to a fixed point.
- :mod:`mesadyn.analysis.spectrum` — spectra of the Jacobian ``−∇²L`` (reduced closed form and
  full θ) with zero/stable/unstable classification and the zero modes explained.
- :mod:`mesadyn.analysis.pl` — Lemma 5.4's PL ratio along a trajectory, measured vs linearised
  convergence rates.
"""
