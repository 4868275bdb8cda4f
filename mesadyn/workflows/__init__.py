"""The analyses of mesadyn as a Python API: one module per use case, one run contract.

Each workflow module has a frozen ``Config`` (a :class:`RunOptions`; validated on
construction: a bad value raises :class:`~mesadyn.errors.MesadynError` naming it),
``run(config, progress=None) -> Result`` and a ``Result`` (a :class:`RunResult`: an
:class:`~mesadyn.outcome.Outcome` ``status``, a ``message``, and ``to_dict()`` — exactly the
``--json`` object of the matching ``mesadyn`` command — derived from its fields).  The command
line is a thin skin over these functions:

```python
from mesadyn.workflows import integrate

res = integrate.run(integrate.Config(x1="ones", d=3, T=20, a0=0.5, b0=1.5))
res.status, res.ab_mean, res.flow.t[-1]
```

The contract (what a workflow provides, what it may rely on) is written in
:mod:`mesadyn.workflows._run`; :data:`REGISTRY` lists the workflows, and the CLI's commands and
the sweep's targets are derived from it.  A run file rebuilds its configuration alone:
``integrate.Config.from_run("run.nc")`` (``mesadyn rerun run.nc``).  Importing this package
imports no torch, scipy or matplotlib: each workflow imports them when it runs.
"""

from __future__ import annotations

from ..registry import REGISTRY as REGISTRY
from ..registry import Workflow as Workflow
from . import continuation as continuation
from . import ensemble as ensemble
from . import gd as gd
from . import gdflow as gdflow
from . import integrate as integrate
from . import portrait as portrait
from . import stability as stability
from . import theory as theory
from . import train as train
from ._common import ProcessOptions as ProcessOptions
from ._common import check_seed as check_seed
from ._cost import FLOW_COST as FLOW_COST
from ._cost import check_cost as check_cost
from ._cost import gd_cost as gd_cost
from ._cost import sampled_flow_seconds as sampled_flow_seconds
from ._rerun import RerunResult as RerunResult
from ._rerun import rerun as rerun
from ._run import NOT_RECORDED as NOT_RECORDED
from ._run import DeviceOptions as DeviceOptions
from ._run import RunOptions as RunOptions
from ._run import RunRecord as RunRecord
from ._run import RunResult as RunResult
from ._run import config_mismatch as config_mismatch
from ._run import load_point as load_point
from ._run import read_record as read_record
from ._run import stored_run as stored_run
from ._run import write_run as write_run

__all__ = ["FLOW_COST", "NOT_RECORDED", "REGISTRY", "DeviceOptions", "ProcessOptions",
           "RerunResult", "RunOptions", "RunRecord", "RunResult", "Workflow", "check_cost",
           "check_seed", "config_mismatch", "continuation", "ensemble", "gd", "gd_cost",
           "gdflow", "integrate", "load_point", "portrait", "read_record", "rerun",
           "sampled_flow_seconds", "stability", "stored_run", "theory", "train", "write_run"]
