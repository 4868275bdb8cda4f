"""Analyses that take a field or a trained θ and a point, and measure something the paper states.

Modules (import them directly; nothing is imported eagerly here so that each analysis stays
independent of the others):

- :mod:`mesadyn.analysis.incontext` — in-context evaluation of a trained θ: the Proposition 4.1
  ratio ``E[(ŷ_{T_te})_j / (W x_{T_te})_j]`` with a standard error, and the test MSE against the
  test context length ``T_te`` (Theorem 4.2).
- :mod:`mesadyn.analysis.mesa` — the trained transformer as a mesa-optimizer (Corollary 4.1).
"""
