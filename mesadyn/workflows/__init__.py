"""The analyses of mesadyn as a Python API: one module per use case.

Each module has a frozen ``Config`` (validated on construction: a bad value raises
:class:`~mesadyn.errors.MesadynError` naming it), ``run(config, progress=None) -> Result``, and
a frozen ``Result`` whose ``to_dict()`` is exactly the ``--json`` object of the matching
``mesadyn`` command.  The command line is a thin skin over these functions::

    from mesadyn.workflows import integrate
    res = integrate.run(integrate.Config(x1="ones", d=3, T=20, a0=0.5, b0=1.5))
    res.status, res.ab_mean, res.flow.t[-1]

Modules are imported on first use, so importing this package stays cheap.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import continuation as continuation
    from . import gdflow as gdflow
    from . import integrate as integrate
    from . import portrait as portrait
    from . import stability as stability
    from . import theory as theory
    from . import train as train
    # further workflows (stability, continuation, ensemble): add them here as well

#: The workflow modules, by command name.
WORKFLOWS: tuple[str, ...] = (
    "theory",
    "integrate",
    "train",
    "portrait",
    "stability",
    "continuation",
    "gdflow",
    # further workflows (stability, continuation, ensemble) are listed here
)

__all__ = ["WORKFLOWS", "continuation", "gdflow", "integrate", "portrait", "stability", "theory",
           "train"]


def __getattr__(name: str) -> ModuleType:
    if name in WORKFLOWS:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
