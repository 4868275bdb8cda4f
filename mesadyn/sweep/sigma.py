"""One ensemble per σ_w (``mesadyn ensemble --sigma-w 1e-2,1e-4``): the basin fractions against
the Gaussian init's scale.

:func:`sweep_sigma` runs (or reads, or continues) :func:`mesadyn.workflows.ensemble.run` once
per σ_w, in this process, with the same seeds at every σ_w (so the starts are the same
directions scaled: differences between σ_w are paired, not sampling noise), each into its own
run file (:func:`sigma_out`: ``ens.nc`` → ``ens-sigma_w0.01.nc``), each resumable on its own.
A grid over other options, or on a cluster, is :func:`mesadyn.sweep.run_sweep` with
``workflow = "ensemble"``.

Example:
    ```python
    from mesadyn.sweep import sweep_sigma
    from mesadyn.workflows import ensemble

    sw = sweep_sigma(ensemble.Config(d=2, T=6, n=4), "1e-2,1e-4")
    sw.status, sw.fractions()["branch_plus"]
    ```
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ..errors import MesadynError, check_positive
from ..outcome import Outcome
from ..progress import ProgressCallback
from ..workflows import RunResult, ensemble

__all__ = ["SigmaSweep", "sigma_out", "sigma_values", "sweep_sigma"]


def sigma_out(out: str | None, sigma_w: float) -> str | None:
    """The run file of one σ_w in a sweep: ``ens.nc`` → ``ens-sigma_w0.01.nc``."""
    if out is None:
        return None
    p = Path(out)
    return str(p.with_name(f"{p.stem}-sigma_w{sigma_w:g}{p.suffix}"))


@dataclass(frozen=True)
class SigmaSweep(RunResult):
    """One ensemble per σ_w (:func:`sweep_sigma`); ``to_dict()`` is the CLI's ``--json``
    (``sigma_w``, ``runs``: each ensemble's own, then ``status`` and ``message``).

    `status` combines the ensembles' (:meth:`~mesadyn.outcome.Outcome.combine`): a sweep in
    which an ensemble failed is a failure.
    """

    sigma_w: tuple[float, ...]
    runs: tuple[ensemble.Result, ...]

    def fractions(self) -> dict[str, list[dict[str, float | int]]]:
        """Each basin's fraction (with its Wilson interval) per σ_w, in σ_w order."""
        return {k: [r.fractions[k] for r in self.runs] for k in self.runs[0].fractions}


def sigma_values(sigma_ws: object) -> tuple[float, ...]:
    """σ_w values from a list or a comma-separated string: at least one, each > 0, distinct.

    ## Raises
    `MesadynError`: no value, an empty entry (``1e-2,,1e-4``), a value that is not a positive
    number, or a repeated value (each named).
    """
    if isinstance(sigma_ws, str):
        parts: list[object] = [p.strip() for p in sigma_ws.split(",")]
        if parts == [""]:
            parts = []
        if "" in parts:
            raise MesadynError(f"sigma_w: an empty entry in {sigma_ws!r}")
    elif isinstance(sigma_ws, (list, tuple)):
        parts = list(sigma_ws)
    else:
        raise MesadynError(f"sigma_w must be a list of numbers, got {sigma_ws!r}")
    if not parts:
        raise MesadynError(f"sigma_w: give at least one value, got {sigma_ws!r}")
    values = []
    for p in parts:
        try:
            values.append(check_positive("sigma_w", float(p)))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise MesadynError(f"sigma_w must be positive numbers, got {p!r}") from None
    if len(set(values)) != len(values):
        raise MesadynError(f"sigma_w values must differ, got {sigma_ws!r}")
    return tuple(values)


def sweep_sigma(config: ensemble.Config, sigma_ws: object,
                progress: ProgressCallback | None = None) -> SigmaSweep:
    """Run (or read, or continue) one Gaussian-init ensemble per σ_w in `sigma_ws` (a list or a
    comma-separated string): ``config`` with ``sigma_w`` replaced and the run file
    :func:`sigma_out`.  `progress` gets the number of rows done over all of them.

    ## Raises
    `MesadynError` for a bad list (:func:`sigma_values`) or an init other than ``gaussian``.
    """
    values = sigma_values(sigma_ws)
    if config.init is not ensemble.EnsembleInit.GAUSSIAN:
        raise MesadynError(f"a sweep over sigma_w needs init='gaussian', got {config.init!r}")
    configs = [dataclasses.replace(config, sigma_w=v, out=sigma_out(config.out, v))
               for v in values]
    runs = []
    for k, cfg in enumerate(configs):
        runs.append(ensemble.run(cfg, progress=None if progress is None
                                 else _offset(progress, k * cfg.n)))
    status = Outcome.combine(r.status for r in runs)
    bad = [f"σ_w={v:g}: {r.message}" for v, r in zip(values, runs, strict=True) if not r.ok]
    message = "; ".join(bad) if bad else f"{len(runs)} ensembles of {config.n} trajectories"
    return SigmaSweep(sigma_w=values, runs=tuple(runs), status=status, message=message)


def _offset(progress: ProgressCallback, base: float) -> ProgressCallback:
    """Rows done in one ensemble as rows done over the sweep."""
    def update(x: float) -> None:
        progress(base + x)
    return update
