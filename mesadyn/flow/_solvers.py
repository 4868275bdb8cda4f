"""Solver ids: canonical ``backend:method`` names, today's bare names as aliases, the closed form
of the reduced system (:data:`CLOSED_FORM`), and the one policy for the automatic choice
(:func:`default_solver`)."""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from ..errors import MesadynError
from ..reduced import ReducedSystem


class Backend(StrEnum):
    """The library that does the stepping."""

    scipy = "scipy"
    torchdiffeq = "torchdiffeq"
    diffrax = "diffrax"
    closed_form = "closed_form"
    """Lemma 5.2's exact solution evaluated at the saved times (the reduced system only)."""


class Solver(NamedTuple):
    """A resolved solver: its backend and its name inside that backend.

    A 2-tuple, so ``resolve_solver("LSODA") == ("scipy", "LSODA")`` as before.
    """

    backend: Backend
    method: str

    @property
    def id(self) -> str:
        """The canonical id, e.g. ``"scipy:LSODA"`` (``"closed_form"`` for the closed form)."""
        if self.backend is Backend.closed_form:
            return self.method
        return f"{self.backend.value}:{self.method}"

    @property
    def implicit(self) -> bool:
        """Implicit methods get the exact Jacobian ``−∇²L`` from the field."""
        return self.method in IMPLICIT


#: Canonical ids of the ODE solvers, in the order of ``--solver``'s help.  The bare method names
#: are aliases.
SOLVERS: dict[str, Solver] = {
    s.id: s for s in (
        Solver(Backend.torchdiffeq, "dopri5"), Solver(Backend.torchdiffeq, "dopri8"),
        Solver(Backend.torchdiffeq, "bosh3"), Solver(Backend.torchdiffeq, "adaptive_heun"),
        Solver(Backend.diffrax, "Tsit5"), Solver(Backend.diffrax, "Dopri5"),
        Solver(Backend.diffrax, "Dopri8"), Solver(Backend.diffrax, "Kvaerno5"),
        Solver(Backend.scipy, "RK45"), Solver(Backend.scipy, "DOP853"),
        Solver(Backend.scipy, "Radau"), Solver(Backend.scipy, "LSODA"),
    )
}
#: Today's bare names (``dopri5``, ``LSODA``, …) → canonical id.
ALIASES: dict[str, str] = {s.method: k for k, s in SOLVERS.items()}
#: The implicit methods (they get the exact Jacobian −∇²L).
IMPLICIT = frozenset({"Kvaerno5", "Radau", "LSODA"})
#: The word that asks for :func:`default_solver`'s choice.
AUTO = "auto"
#: The id of the reduced system's closed form (Lemma 5.2 evaluated exactly, no ODE solve): the
#: automatic choice for the reduced system; the ODE solvers remain selectable and are its test.
CLOSED_FORM = "closed_form"
_CLOSED_FORM_SOLVER = Solver(Backend.closed_form, CLOSED_FORM)

#: The automatic solver for the full flow: stiff near its fixed points (stiffness ratio ≈ 7.7e3
#: at d = 5, T = 100), where explicit dopri5 stalls above the steady-state test; LSODA gets the
#: exact Jacobian −∇²L and switches between Adams and BDF itself.
FULL_FLOW_SOLVER = "scipy:LSODA"
#: The ODE solver for the reduced system when it is not stiff on the horizon (with
#: ``default_solver(True, ode=True)``).
REDUCED_SOLVER = "torchdiffeq:dopri5"
#: Past this many predicted explicit steps the reduced system counts as stiff (LSODA instead).
EXPLICIT_STEP_LIMIT = 10_000
#: dopri5's stability interval on the negative real axis (|h λ| <= 3.3).
_DOPRI5_STABILITY = 3.3


def solver_names(aliases: bool = False) -> list[str]:
    """The canonical ODE solver ids (``backend:method``), plus the bare aliases if asked
    (:data:`CLOSED_FORM` is the reduced system's own, besides these)."""
    return list(SOLVERS) + (list(ALIASES) if aliases else [])


def resolve_solver(name: str) -> Solver:
    """The :class:`Solver` for a canonical id, a bare alias, ``backend:name`` in any case, or
    :data:`CLOSED_FORM`.

    # Raises
    `MesadynError` naming the bad value and the valid ids.
    """
    if isinstance(name, str):
        if name.lower() == CLOSED_FORM:
            return _CLOSED_FORM_SOLVER
        if name in SOLVERS:
            return SOLVERS[name]
        if name in ALIASES:
            return SOLVERS[ALIASES[name]]
        backend, sep, method = name.partition(":")
        for s in SOLVERS.values():
            if sep and s.backend == backend.lower() and s.method.lower() == method.lower():
                return s
    raise MesadynError(f"unknown solver {name!r}; valid: {', '.join(SOLVERS)} (or the bare "
                       f"names {', '.join(ALIASES)}; {CLOSED_FORM} for the reduced system)")


def default_solver(reduced: bool, *, system: ReducedSystem | None = None, a0: float = 0.0,
                   b0: float = 0.0, t_end: float | None = None, ode: bool = False) -> str:
    """The one policy for the automatic (``"auto"``) solver.

    Full flow: ``scipy:LSODA`` (see :data:`FULL_FLOW_SOLVER`).  Reduced system:
    :data:`CLOSED_FORM` (Lemma 5.2's exact solution at the saved times: no ODE solve).  With
    ``ode=True`` (an ODE solver for the reduced system, e.g. to test the closed form):
    ``torchdiffeq:dopri5``, unless the closed form says it is stiff on the horizon: given the
    ``system``, the start and ``t_end``, an explicit method needs about
    ``t_end · ρ_max / 3.3`` steps, where ``ρ_max`` (:meth:`ReducedSystem.max_rate`) is the
    Jacobian's largest spectral radius along the orbit; above :data:`EXPLICIT_STEP_LIMIT`
    steps (e.g. ``--sigma 100``, where ``c1 ≈ 1.5e15`` but the horizon is ``50/c2 ≈ 1.7e-9``),
    ``scipy:LSODA`` with the exact Jacobian.

    # Returns
    A canonical solver id.
    """
    if not reduced:
        return FULL_FLOW_SOLVER
    if not ode:
        return CLOSED_FORM
    if system is None or t_end is None:
        return REDUCED_SOLVER
    steps = t_end * system.max_rate(a0, b0) / _DOPRI5_STABILITY
    return FULL_FLOW_SOLVER if steps > EXPLICIT_STEP_LIMIT else REDUCED_SOLVER
