"""The one progress-callback type of mesadyn.

Every long call of the library (a flow, GD, an ensemble, a continuation, a sweep, reproduce)
takes ``progress: ProgressCallback | None`` and calls it with the position it has reached — a
flow time τ, a step count, a number of rows, points or tasks done.  The library never draws:
:func:`mesadyn.cli.progress_bar` turns a bar (on stderr, or live in a notebook) into such a
callback, for the commands and for interactive use.

Example:
    >>> from mesadyn.cli import progress_bar
    >>> from mesadyn.workflows import train
    >>> with progress_bar("GD", total=200) as bar:
    ...     result = train.run(train.Config(x1="gaussian", d=3, T=10, m=500), progress=bar)
"""

from __future__ import annotations

from collections.abc import Callable

#: Called with the current position of a run (flow time τ, or a step count) as it advances.
ProgressCallback = Callable[[float], None]

__all__ = ["ProgressCallback"]
