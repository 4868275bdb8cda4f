"""Options and output functions shared by every ``mesadyn`` command (the CLI contract).

Every command takes ``--x1 --sigma --scale --d --T --seed --json`` and the data models of
docs/design.md §6: ``--mu --moments --mixture --radius --rotation --noise``, and the attention
model ``--model --layers`` (defaults: the paper).
``--json`` prints exactly one JSON object on stdout in place of the table a command prints
there otherwise; progress bars and messages go to stderr, so scripts can parse stdout.  The
work itself is done by :mod:`mesadyn.workflows`; a command module only maps options onto a
workflow's ``Config`` and renders its ``Result``.

The process options are declared once, here: a command takes one parameter annotated
:class:`ProcessArgs` and is decorated with :func:`process_options`, which puts the fourteen
options in that parameter's place in the signature typer reads, and hands the command their
values as one dict, ready for ``wf.Config(**process, ...)``::

    @process_options()                       # or process_options(d=3, T=20): other defaults
    def theory(process: ProcessArgs, json: Json = False) -> None:
        res = wf.run(wf.Config(**process))

Commands that evaluate a field take ``device: Device = "cpu"`` (``--device``: the CPU is the
default of every command, :mod:`mesadyn.device`) and pass it on as the workflow ``Config``'s
``device``.  A command ends with :func:`finish`: its result on stdout (a table, or ``--json``),
and exit 1 after it when the result's outcome is not ok.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypedDict, cast

import typer
from rich.console import Console
from rich.table import Table

from ..errors import RunFailed
from ._progress import progress_bar

if TYPE_CHECKING:
    from ..workflows import RunResult

X1 = Annotated[
    str,
    typer.Option("--x1", help="Initial-token family: gaussian, sparse, ones, rademacher, uniform, "
                 "shifted (--mu, --sigma), moments (--moments), mixture (--mixture)."),
]
Sigma = Annotated[float, typer.Option("--sigma", help="σ of the gaussian family.")]
Scale = Annotated[float, typer.Option("--scale", help="c of the sparse family (Example 4.1).")]
Dim = Annotated[int, typer.Option("--d", help="Dimension d of the tokens.")]
Length = Annotated[int, typer.Option("--T", help="Training sequence length T (>= 3).")]
Seed = Annotated[int, typer.Option("--seed", help="Random seed.")]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
A0 = Annotated[float, typer.Option("--a0", help="Diagonal init: W^KQ_32 = a0 I (Assumption 3.1).")]
B0 = Annotated[float, typer.Option("--b0", help="Diagonal init: W^PV_12 = b0 I (Assumption 3.1).")]
Init = Annotated[str, typer.Option("--init", help="Initialisation: diagonal or gaussian.")]
Mu = Annotated[float, typer.Option("--mu", help="Token mean μ of the shifted family: "
                                  "x_1 = μ·1_d + σ·g.")]
Moments = Annotated[str | None, typer.Option(
    "--moments", help="The moments E x^k, k = 1..6, of the moments family: 'm1,...,m6', ';' "
    "between per-coordinate sequences.")]
Mixture = Annotated[str | None, typer.Option(
    "--mixture", help="Components of the mixture family, e.g. '0.3:ones,0.7:gaussian' or "
    "'0.5:gaussian(sigma=0.5),0.5:gaussian(sigma=2)'.")]
Radius = Annotated[float, typer.Option(
    "--radius", help="r of W = r·diag(λ): r < 1 contracting, r = 1 the paper.")]
Rotation = Annotated[str, typer.Option(
    "--rotation", help="W: diagonal (the paper), real (2x2 blocks, d even) or haar; every field "
    "kind (exact for haar up to d = 5); the 2-D reduced system exists for haar, not for real "
    "(its flow leaves the diagonal manifold).")]
Noise = Annotated[float, typer.Option(
    "--noise", help="Scale s of AR noise x_{t+1} = W x_t + ε_t (E|ε_k|² = s²): every field kind "
    "(exact for diagonal and real W) and the reduced system of diagonal W.")]
Model = Annotated[str, typer.Option(
    "--model", help="Attention model: linear (the paper's one layer), deep (k-layer linear "
    "attention, --layers k) or softmax (one layer); integrate, stability and train take all "
    "three (docs/models.md).")]
Layers = Annotated[int, typer.Option("--layers", help="Layers k of --model deep (>= 1).")]
SigmaW = Annotated[float, typer.Option("--sigma-w", help="σ_w of the gaussian initialisation.")]
Device = Annotated[str, typer.Option(
    "--device", help="Where the field is evaluated: cpu, cuda, or auto (CUDA if available).")]
Rtol = Annotated[float, typer.Option("--rtol", help="Relative tolerance.")]
Out = Annotated[str | None, typer.Option(
    "--out", help="Write the run file (.nc): the result with its full configuration, the seed "
    "and the package version (mesadyn rerun FILE reruns it).")]
Atol = Annotated[float, typer.Option("--atol", help="Absolute tolerance.")]


class ProcessArgs(TypedDict):
    """The values of the process options, named as :class:`mesadyn.workflows.ProcessOptions`'s
    fields (so ``wf.Config(**process)`` takes them)."""

    x1: str
    sigma: float
    scale: float
    d: int
    T: int
    seed: int
    mu: float
    moments: str | None
    mixture: str | None
    radius: float
    rotation: str
    noise: float
    model: str
    layers: int


#: ``(name, option, default)`` of every process option, in the order ``--help`` lists them.
PROCESS_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("x1", X1, "gaussian"), ("sigma", Sigma, 1.0), ("scale", Scale, 1.0), ("d", Dim, 5),
    ("T", Length, 100), ("seed", Seed, 1), ("mu", Mu, 0.0), ("moments", Moments, None),
    ("mixture", Mixture, None), ("radius", Radius, 1.0), ("rotation", Rotation, "diagonal"),
    ("noise", Noise, 0.0), ("model", Model, "linear"), ("layers", Layers, 1),
)

Command = Callable[..., None]


def process_options(**defaults: Any) -> Callable[[Command], Command]:
    """Give a command the process options ``--x1 ... --layers`` in place of its one parameter
    annotated :class:`ProcessArgs`, which then receives their values as a dict.

    ``defaults`` replaces the paper's default of any of them (e.g. ``d=3, T=20``).  The command's
    other parameters, its docstring and the order of its options in ``--help`` are kept.

    Raises:
        TypeError: (a programming error, at import) an unknown name in ``defaults``, no or
            several :class:`ProcessArgs` parameters, or a parameter named like a process option.
    """
    names = [name for name, _, _ in PROCESS_OPTIONS]
    unknown = sorted(set(defaults) - set(names))
    if unknown:
        raise TypeError(f"process_options: unknown process options {unknown}")

    def decorate(command: Command) -> Command:
        sig = inspect.signature(command, eval_str=True)
        slots = [p.name for p in sig.parameters.values() if p.annotation is ProcessArgs]
        clash = sorted(set(names) & set(sig.parameters))
        if len(slots) != 1 or clash:
            raise TypeError(f"{command.__qualname__}: needs exactly one ProcessArgs parameter "
                            f"and none named like a process option (found {slots}, {clash})")
        slot = slots[0]
        injected = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=option,
                                      default=defaults.get(name, default))
                    for name, option, default in PROCESS_OPTIONS]
        params: list[inspect.Parameter] = []
        for p in sig.parameters.values():
            params += injected if p.name == slot else [p.replace(kind=p.KEYWORD_ONLY)]

        @functools.wraps(command)
        def run(**kwargs: Any) -> None:
            process = {name: kwargs.pop(name) for name in names}
            command(**kwargs, **{slot: cast(ProcessArgs, process)})

        run.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
        return run

    return decorate

#: Tables (a command's human-readable result) go to stdout, in place of the ``--json`` object
#: they stand for; progress bars and messages go to stderr (:data:`messages`).
console = Console()
#: Progress, notes and the one-line failure messages: stderr, so stdout holds only the result.
messages = Console(stderr=True)


def show(result: RunResult, *, json: bool, render: Callable[[dict[str, Any]], None]) -> None:
    """A workflow's ``result`` on stdout: its ``--json`` object, or ``render`` of it."""
    obj = result.to_dict()
    if json:
        emit_json(obj)
    else:
        output_written()
        render(obj)


def finish(result: RunResult, *, json: bool, render: Callable[[dict[str, Any]], None],
           saved: str | None = None) -> None:
    """Show a workflow's ``result`` (``--json`` or ``render`` of its dict, on stdout) and end
    the command by its outcome: a failing one raises :class:`~mesadyn.errors.RunFailed`
    (exit 1) with the result's message, after the output (``saved`` names the partial run
    file, when one was written)."""
    show(result, json=json, render=render)
    if not result.ok:
        where = f"; partial result saved to {saved}" if saved else ""
        raise RunFailed(f"{result.status}: {result.message}{where}")


def emit_json(obj: dict[str, Any]) -> None:
    """Print exactly one JSON object on stdout (the command's output: :func:`output_written`)."""
    from ..io import to_json

    text = to_json(obj) + "\n"
    output_written()
    sys.stdout.write(text)
    sys.stdout.flush()


#: SIGINT's handler before :func:`output_written` ignored it (``None``: not ignored).
_SIGINT_BEFORE: Any = None


def output_written() -> None:
    """The command's output is being written: from here on Ctrl-C (SIGINT) is ignored, so a
    command whose result is on stdout ends by that result's exit code (0, or 1 with its
    one-line message), never 130 after a complete output (``docs/reliability.md``).  The CLI
    restores the handler when it returns to an in-process caller
    (:func:`restore_interrupt`); a ``mesadyn`` process keeps it until it exits."""
    import signal
    import threading

    global _SIGINT_BEFORE
    if _SIGINT_BEFORE is None and threading.current_thread() is threading.main_thread():
        _SIGINT_BEFORE = signal.signal(signal.SIGINT, signal.SIG_IGN)


def restore_interrupt() -> None:
    """Undo :func:`output_written` (the handler SIGINT had before it)."""
    import signal

    global _SIGINT_BEFORE
    if _SIGINT_BEFORE is not None:
        signal.signal(signal.SIGINT, _SIGINT_BEFORE)
        _SIGINT_BEFORE = None


def model_render(command: str) -> Callable[[dict[str, Any]], None]:
    """The table of a result of a model other than the paper's (``--model``): its scalar
    and short-list entries, then its spectrum's counts when it has one."""

    def render(obj: dict[str, Any]) -> None:
        title = (f"mesadyn {command} — {obj['model']}, {obj.get('layers', 1)} layer(s), "
                 f"{obj['family']}, d={obj['d']}, T={obj['T']}")
        rows = [(k, v if not isinstance(v, list) else ", ".join(_fmt(x) for x in v))
                for k, v in obj.items()
                if k not in ("model", "layers", "family", "d", "T", "spectrum", "field",
                             "incontext")
                and not isinstance(v, dict)]
        spec = obj.get("spectrum")
        if isinstance(spec, dict):
            rows += [(f"spectrum: {k}", v) for k, v in spec.items()
                     if not isinstance(v, list) or k in ("leading", "smallest_nonzero")]
        ic = obj.get("incontext")
        for rep in [ic] if isinstance(ic, dict) else ic or []:
            rows += _incontext_rows(rep)
        console.print(table(title, [(k, ", ".join(_fmt(x) for x in v) if isinstance(v, list)
                                     else v) for k, v in rows]))

    return render


def _incontext_rows(rep: dict[str, Any]) -> list[tuple[str, Any]]:
    """The rows of one ``model_incontext`` report: test MSE and ratio (± standard error), the
    fitted GD step sizes, the residuals of the k- and one-step fits and of the k-step fits with
    full preconditioners on each side."""
    at = f"T_te={rep['T_te']}"
    mse, ratio = rep["mse"], rep["ratio"]
    rows: list[tuple[str, Any]] = [
        (f"{at}: test MSE", f"{_fmt(mse['value'])} ± {_fmt(mse['se'])} "
                            f"(ŷ = 0: {_fmt(mse['baseline'])})"),
        (f"{at}: ratio (Prop. 4.1)", f"{_fmt(ratio['value'])} ± {_fmt(ratio['se'])}")]
    for fit in (rep.get("gd_fit"), rep.get("gd_fit_1")):
        if fit:
            rows += [(f"{at}: {fit['k']}-step GD fit η", ", ".join(_fmt(e) for e in fit["etas"])),
                     (f"{at}: {fit['k']}-step GD residual", fit["rel_residual"])]
    for side, fit in (rep.get("gd_fit_preconditioned") or {}).items():
        rows.append((f"{at}: {fit['k']}-step GD residual, full preconditioners ({side})",
                     fit["rel_residual"]))
    return rows


def table(title: str, rows: list[tuple[str, Any]]) -> Table:
    """A two-column rich table of (quantity, value)."""
    t = Table(title=title, show_header=True, header_style="bold")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    for k, v in rows:
        t.add_row(k, _fmt(v))
    return t


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.10g}"
    return str(v)


def progress_callback(enabled: bool, describe: Callable[[float], str],
                      total: float | None = None) -> Any:
    """The command's progress callback (:func:`mesadyn.cli._progress.progress_bar`): a bar on
    stderr from its first call on, none when ``enabled`` is False (``--json``)."""
    return progress_bar(describe, total=total, enabled=enabled)


__all__ = ["A0", "B0", "PROCESS_OPTIONS", "X1", "Atol", "Device", "Dim", "Init", "Json",
           "Length", "Mixture", "Moments", "Mu", "Noise", "Out", "ProcessArgs", "Radius",
           "Rotation", "Rtol", "Scale", "Seed", "Sigma", "SigmaW", "console", "emit_json",
           "finish", "messages", "output_written", "process_options", "progress_bar",
           "progress_callback", "restore_interrupt", "show", "table"]
