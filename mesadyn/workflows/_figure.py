"""Workflows whose output is a figure: the figure is the run file.

A workflow whose ``out`` ends in one of :data:`~mesadyn.workflows._run.FIGURE_SUFFIXES`
returns a :class:`FigureResult` (the drawn ``figure`` and its ``dpi``, hidden from the
``--json`` object); :func:`~mesadyn.workflows._run.write_run` then writes the figure with its
provenance embedded in the file's own metadata (:func:`mesadyn.plots.save`), in place of a
netCDF run file: the workflow's ``kind``, its ``config`` (:meth:`RunOptions.run_config`), its
``result`` (the ``--json`` object without :data:`UNEMBEDDED`), the package version and the
seed.  :func:`mesadyn.plots.read_provenance` reads them back, so ``Config.from_run(figure)``
and ``mesadyn rerun figure.pdf`` work as for a run file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..record import hidden
from ._run import RunOptions, RunResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["UNEMBEDDED", "FigureResult", "provenance", "write_figure"]

#: Keys of the ``--json`` object left out of the embedded result: where the figure was written
#: and in which format (the file itself says both; a rerun that only draws has neither) and
#: the wall time (so that the same figure gives the same bytes).
UNEMBEDDED = frozenset({"out", "format", "wall_s"})


@dataclass(frozen=True, kw_only=True)
class FigureResult(RunResult):
    """A :class:`RunResult` whose run file is the figure it drew: ``figure`` (None when
    nothing was drawn) and the ``dpi`` of raster output (None: :func:`mesadyn.plots.save`'s
    default), both hidden from ``to_dict()``."""

    figure: Figure | None = hidden()
    dpi: int | None = hidden()


F = TypeVar("F", bound=RunResult)


def provenance(config: RunOptions, result: RunResult) -> dict[str, Any]:
    """The provenance a figure embeds: ``kind``, ``config``, ``result`` (its ``--json`` object
    as plain JSON values, without :data:`UNEMBEDDED`), ``mesadyn_version`` and ``seed``."""
    from ..io import jsonable, version

    shown = {k: v for k, v in result.to_dict().items() if k not in UNEMBEDDED}
    return {"kind": config.COMMAND, "config": config.run_config(), "result": jsonable(shown),
            "mesadyn_version": version(), "seed": config.seed}


def write_figure(config: RunOptions, result: F) -> F:
    """Write ``result``'s figure to ``config.out`` with its :func:`provenance` embedded
    (:func:`mesadyn.plots.save`) and return ``result``.

    ## Raises
    `TypeError`: (a programming error) a result that is no :class:`FigureResult` or drew no
    figure.
    """
    if not isinstance(result, FigureResult) or result.figure is None:
        raise TypeError(f"{config.COMMAND}: out={config.out!r} is a figure, but the result "
                        f"{type(result).__qualname__} holds none")
    from ..plots import save

    assert config.out is not None
    options: dict[str, Any] = {} if result.dpi is None else {"dpi": result.dpi}
    save(result.figure, config.out, provenance=provenance(config, result), **options)
    return result
