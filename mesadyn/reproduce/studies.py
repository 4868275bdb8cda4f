"""The studies of Section 6 and Appendix B: which runs each result needs (small configs).

A study is a set of *runs* — the paper's finite-sample gradient descent (the ``train``
workflow, :mod:`mesadyn.workflows.train`) and the exact gradient flow (the ``integrate``
workflow, :mod:`mesadyn.workflows.integrate`) — plus the figure drawn from them.  Each run is
a workflow ``Config`` (:meth:`GDRun.workflow_config`, :meth:`FlowRun.workflow_config`); runs
are shared between studies and claims: a run is identified by its configuration, computed
once, and stored under ``OUT/runs``.

``quick=True`` keeps the paper's d, T, step sizes, 200 steps and seed, but trains on ``m = 500``
sequences (test sets of 2 000) and only the Fig. 1 configurations with the middle init (0.5, 1.5).
The full run's training-set sizes are explained in :func:`all_studies`.
The exact flows, which do not depend on m, are the same in quick and full runs except that
quick integrates only the families of Fig. 1 (plus the ones/rademacher/uniform checks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..workflows import ProcessOptions, integrate, train

#: Assumption 3.1 inits of the paper (Section 6).
DIAG_INITS: tuple[tuple[float, float], ...] = ((0.1, 0.1), (0.5, 1.5), (2.0, 2.0))
#: Gaussian-init scales of Figs. 5–6.
SIGMA_WS: tuple[float, ...] = (0.001, 0.01, 0.1)
#: The paper's protocol (Section 6, Appendix B).
D, T_TRAIN, T_SMALL, STEPS, M_FULL = 5, 100, 5, 200, 10_000
#: Test context lengths of the in-context panels (Proposition 4.1, Theorem 4.2).
T_TE = (3, 5, 10, 20, 50, 100, 200)
#: Tolerances of the exact flows (the flow tolerances of the claims refer to these).
FLOW_RTOL, FLOW_ATOL = 1e-10, 1e-12
#: Saved points of an exact flow (the trajectories of Lemmas 5.3 and 5.4, the dashed lines).
FLOW_N_SAVE = 400
#: The exact flows run to the integrate workflow's horizon without the steady-state test
#: (``steady_tol = 0``), so each ends at the fixed point to the solver's tolerance.
FLOW_STEADY_TOL = 0.0


def process_options(family: str, param: float | None) -> dict[str, Any]:
    """The process options of a study's ``(family, param)``: ``param`` is σ of gaussian and
    c (``scale``) of sparse; the other families take none."""
    if param is not None and family in ("gaussian", "sparse"):
        return {"x1": family, "sigma" if family == "gaussian" else "scale": float(param)}
    return {"x1": family}


def process(family: str, param: float | None, T: int = T_TRAIN, d: int = D) -> ProcessOptions:
    """The :class:`~mesadyn.workflows.ProcessOptions` of ``(family, param)`` at ``(d, T)``:
    ``.family()``, ``.constants()`` and ``.field_spec(...)`` of the studies' processes."""
    from ..workflows import ProcessOptions

    return ProcessOptions(**process_options(family, param), d=d, T=T)


def m_test(m: int) -> int:
    """The held-out test set of a GD run of ``m`` training sequences: ``m``, at least 2 000
    and at most 10 000."""
    return max(2000, min(m, 10_000))


def _start(init: tuple[Any, ...]) -> dict[str, Any]:
    """The init options of ``("diagonal", a0, b0)`` or ``("gaussian", σ_w)``."""
    if init[0] == "gaussian":
        return {"init": "gaussian", "sigma_w": float(init[1])}
    return {"init": init[0], "a0": float(init[1]), "b0": float(init[2])}


@dataclass(frozen=True)
class GDRun:
    """One run of the paper's full-batch GD (Section 6)."""

    family: str
    param: float | None  # σ (gaussian) or c (sparse); None for ones
    T: int
    init: tuple[Any, ...]  # ("diagonal", a0, b0) or ("gaussian", σ_w)
    m: int
    steps: int = STEPS
    eval_every: int = 10
    mask: str = "none"
    d: int = D

    @property
    def name(self) -> str:
        p = "" if self.param is None else f"{self.param:g}"
        i = "-".join(f"{v:g}" if isinstance(v, float) else str(v) for v in self.init)
        return f"gd-{self.family}{p}-T{self.T}-{i}-m{self.m}-{self.mask}"

    def workflow_config(self, seed: int, device: str = "cpu",
                        out: str | None = None) -> train.Config:
        """The ``train`` workflow's configuration of this run: Table 1's step size, a test
        set of :func:`m_test` sequences and the end point's in-context curve at :data:`T_TE`."""
        from ..workflows import train

        return train.Config(**process_options(self.family, self.param), d=self.d, T=self.T,
                            seed=seed, m=self.m, m_test=m_test(self.m), steps=self.steps,
                            **_start(self.init), mask=self.mask, eval_every=self.eval_every,
                            incontext=T_TE, device=device, out=out)


@dataclass(frozen=True)
class FlowRun:
    """One exact gradient flow (population loss, Eq. 2) from an init, to convergence."""

    family: str
    param: float | None
    T: int
    init: tuple[Any, ...]
    mask: str = "none"  # "diagonal" = Theorem 4.3's clipping
    d: int = D

    @property
    def name(self) -> str:
        p = "" if self.param is None else f"{self.param:g}"
        i = "-".join(f"{v:g}" if isinstance(v, float) else str(v) for v in self.init)
        return f"flow-{self.family}{p}-T{self.T}-{i}-{self.mask}"

    def workflow_config(self, seed: int, out: str | None = None) -> integrate.Config:
        """The ``integrate`` workflow's configuration of this run: the full flow of the exact
        field (LSODA at :data:`FLOW_RTOL`, :data:`FLOW_ATOL`) to the workflow's horizon
        (:func:`mesadyn.analysis.horizon.full_flow_horizon`), :data:`FLOW_N_SAVE` points."""
        from ..workflows import integrate

        return integrate.Config(**process_options(self.family, self.param), d=self.d,
                                T=self.T, seed=seed, reduced=False, field="exact",
                                **_start(self.init), mask=self.mask, rtol=FLOW_RTOL,
                                atol=FLOW_ATOL, n_save=FLOW_N_SAVE,
                                steady_tol=FLOW_STEADY_TOL, out=out)


@dataclass(frozen=True)
class Study:
    """One result of the paper: its runs and its figure."""

    name: str
    title: str
    paper: str  # where in the paper
    figure: str  # figure kind drawn by mesadyn.reproduce.figures
    panels: tuple[tuple[str, float | None], ...]  # (family, param) per panel row
    T: int
    gd: tuple[GDRun, ...] = field(default_factory=tuple)
    flow: tuple[FlowRun, ...] = field(default_factory=tuple)
    notes: str = ""

    def runs(self) -> list[GDRun | FlowRun]:
        return [*self.gd, *self.flow]


def _diag(fam: str, p: float | None, T: int, m: int, inits: tuple[tuple[float, float], ...],
          eval_every: int,
          mask: str = "none") -> tuple[tuple[GDRun, ...], tuple[FlowRun, ...]]:
    gd = tuple(GDRun(fam, p, T, ("diagonal", a, b), m, eval_every=eval_every, mask=mask)
               for a, b in inits)
    fl = tuple(FlowRun(fam, p, T, ("diagonal", a, b), mask=mask) for a, b in inits)
    return gd, fl


#: Training-set sizes of the full run (see :func:`all_studies`).
M_FIG1, M_OTHER, M_QUICK = 2_000, 1_000, 500


def all_studies(quick: bool = False, m: int | None = None) -> dict[str, Study]:
    """Every study, full or ``quick``; ``m`` overrides every GD run's training-set size.

    Full: one GD step costs ~1.2 CPU-s at the paper's m = 10 000 (T = 100), so the paper's 33
    runs × 200 steps would take ~2 CPU-hours.  To fit 15 minutes on 2 cores, Fig. 1 trains on
    m = 2 000, Figs. 2, 3, 5, 6, 7 on m = 1 000 and Fig. 4 (T = 5, cheap) on the paper's
    10 000.  ``m=10_000`` (``mesadyn reproduce --m 10000``) is the paper's protocol exactly.
    The report states the m of every run; GD's finite-sample error scales as 1/√m.
    """
    inits = DIAG_INITS[1:2] if quick else DIAG_INITS
    m1 = m if m is not None else (M_QUICK if quick else M_FIG1)
    m2 = m if m is not None else (M_QUICK if quick else M_OTHER)
    m4 = m if m is not None else M_FULL
    ev = 50 if quick else 10
    out: dict[str, Study] = {}

    def add(st: Study) -> None:
        out[st.name] = st

    g1, f1 = _diag("gaussian", 0.5, T_TRAIN, m1, inits, ev)
    g2, f2 = _diag("sparse", 0.5, T_TRAIN, m1, inits, ev)
    add(Study("fig1", "Fig. 1: ab and in-context ratio/MSE, gaussian σ=0.5 and sparse c=0.5",
              "Section 6, Fig. 1 (a–d)", "diag", (("gaussian", 0.5), ("sparse", 0.5)), T_TRAIN,
              g1 + g2, f1 + f2))
    if quick:
        return out
    gd: tuple[GDRun, ...] = ()
    fl: tuple[FlowRun, ...] = ()
    for s in (1.0, 2.0):
        g, f = _diag("gaussian", s, T_TRAIN, m2, inits, ev)
        gd, fl = gd + g, fl + f
    add(Study("fig2", "Fig. 2: gaussian σ = 1, 2", "Appendix B.3, Fig. 2", "diag",
              (("gaussian", 1.0), ("gaussian", 2.0)), T_TRAIN, gd, fl))
    gd, fl = (), ()
    for c in (1.0, 2.0):
        g, f = _diag("sparse", c, T_TRAIN, m2, inits, ev)
        gd, fl = gd + g, fl + f
    add(Study("fig3", "Fig. 3: sparse (Example 4.1) c = 1, 2", "Appendix B.4, Fig. 3", "diag",
              (("sparse", 1.0), ("sparse", 2.0)), T_TRAIN, gd, fl))
    g, f = _diag("gaussian", 1.0, T_SMALL, m4, inits, ev)
    add(Study("fig4", "Fig. 4: small context T = 5, gaussian σ = 1", "Appendix B.3, Fig. 4",
              "diag", (("gaussian", 1.0),), T_SMALL, g, f))
    gi = tuple(GDRun("gaussian", 1.0, T_TRAIN, ("gaussian", sw), m2, eval_every=ev)
               for sw in SIGMA_WS)
    add(Study("fig5", "Fig. 5: gaussian σ = 1 from Gaussian inits σ_w = 0.001, 0.01, 0.1",
              "Appendix B.3, Fig. 5", "ginit", (("gaussian", 1.0),), T_TRAIN, gi))
    gi = tuple(GDRun("sparse", c, T_TRAIN, ("gaussian", sw), m2, eval_every=ev)
               for c in (1.0, 2.0) for sw in SIGMA_WS)
    add(Study("fig6", "Fig. 6: sparse c = 1, 2 from Gaussian inits σ_w = 0.001, 0.01, 0.1",
              "Appendix B.4, Fig. 6", "ginit", (("sparse", 1.0), ("sparse", 2.0)), T_TRAIN, gi))
    g, _ = _diag("ones", None, T_TRAIN, m2, DIAG_INITS, ev)
    fl = tuple(FlowRun("ones", None, T_TRAIN, ("diagonal", a, b)) for a, b in DIAG_INITS)
    add(Study("fig7", "Fig. 7: x_1 = 1_d, heatmaps of the trained W^KQ and W^PV",
              "Appendix B.5, Fig. 7", "heatmap", (("ones", None),), T_TRAIN, g, fl))
    add(Study("table1", "Table 1: GD step sizes, checked against the stability limit",
              "Appendix B.2, Table 1", "table1", (), T_TRAIN))
    return out


def study_names(quick: bool = False) -> list[str]:
    return list(all_studies(quick))
