"""Progress bars: the one place mesadyn draws them (rich, on stderr; rich renders live in a
Jupyter notebook too).

The library never draws: its long calls take a :data:`mesadyn.progress.ProgressCallback`
(called with the position reached: a flow time, a step, a count of rows or tasks).
:func:`progress_bar` turns a bar into such a callback, for the commands and for notebooks::

    from mesadyn.cli import progress_bar
    from mesadyn.workflows import train

    with progress_bar("GD", total=200) as bar:
        train.run(train.Config(x1="gaussian", d=3, T=10, m=500), progress=bar)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from ..progress import ProgressCallback

if TYPE_CHECKING:
    from rich.progress import Progress

__all__ = ["DELAY_S", "bar", "progress_bar"]

#: A bar is drawn only for work that is still going this many seconds after it started.
DELAY_S = 0.3


@contextmanager
def bar(enabled: bool = True) -> Iterator[Progress]:
    """A rich ``Progress`` on stderr (disabled: the same methods, nothing drawn); a bar whose
    run fails leaves no frame, so the one-line message stands alone."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    drawn = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                     TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True),
                     disable=not enabled, transient=False)
    with drawn:
        try:
            yield drawn
        except BaseException:
            drawn.live.transient = True
            raise


@contextmanager
def progress_bar(description: str | Callable[[float], str] = "", total: float | None = None,
                 enabled: bool = True) -> Iterator[ProgressCallback]:
    """A :data:`~mesadyn.progress.ProgressCallback` that draws a bar from its first call on.

    The bar appears only once the work has run for :data:`DELAY_S` (so an error raised while a
    workflow checks its input prints that error alone, and an instant closed form draws
    nothing).  ``description`` labels the bar (a string, or a function
    of the position); with a ``total`` the bar also shows the position of ``total``.
    """
    import time

    describe = description if callable(description) else (lambda _x: str(description))
    start = time.perf_counter()
    with ExitStack() as stack:
        state: dict[str, Any] = {}

        def update(x: float) -> None:
            if not enabled:
                return
            if "bar" not in state:
                if time.perf_counter() - start < DELAY_S:
                    return  # work that ends this soon needs no bar

                state["bar"] = stack.enter_context(bar(True))
                state["task"] = state["bar"].add_task(describe(x), total=total)
            state["bar"].update(state["task"], description=describe(x),
                                completed=x if total is not None else None)

        yield update
