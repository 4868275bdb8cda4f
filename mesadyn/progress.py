"""Progress reporting below the CLI: a rich progress bar on stderr and the callback type.

Workflows take an optional :data:`ProgressCallback`; the CLI (or a notebook) decides whether a
bar is drawn.  Everything is written to stderr so that ``--json`` output on stdout stays clean.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported only when a bar is made
    from rich.progress import Progress

#: Called with the current position of a run (flow time τ, or a step count) as it advances.
ProgressCallback = Callable[[float], None]

__all__ = ["ProgressCallback", "progress"]


@contextmanager
def progress(enabled: bool = True) -> Iterator[Progress]:
    """A rich progress bar on stderr; nothing is drawn when ``enabled`` is False.

    ## Arguments
    - `enabled`: draw the bar (False gives a disabled ``Progress`` with the same methods).

    ## Returns
    A context manager yielding the ``rich.progress.Progress`` (add tasks with ``add_task``).
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not enabled,
        transient=False,
    )
    with bar:
        try:
            yield bar
        except BaseException:
            # the run failed: its one-line message must stand alone, so the bar leaves no frame
            bar.live.transient = True
            raise
