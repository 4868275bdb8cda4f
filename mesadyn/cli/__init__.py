"""The ``mesadyn`` command.  Each sub-command lives in its own module of this package.

Sub-command modules are imported only when their command runs (or its help is shown), so
``mesadyn --help`` imports none of them.  Each module defines ``register(app)``, which adds
exactly one command named as in :data:`COMMANDS`.

Exit codes (``docs/reliability.md``; :class:`mesadyn.errors.ExitCode`): 0 success; 1 a run
that completed with failures (a command raises :class:`mesadyn.errors.RunFailed` after writing
its output) or an unexpected internal error; 2 bad input (:class:`mesadyn.errors.MesadynError`
or a usage error); 130 interrupted before the output was written (once a command's output is
on stdout, Ctrl-C is ignored and the command ends by its result).  No traceback is ever printed
unless ``--debug`` (or ``MESADYN_DEBUG=1``) asks for it, nor numpy's RuntimeWarnings.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from difflib import get_close_matches
from typing import Annotated, Any

import typer
from typer._click.exceptions import (  # typer vendors click
    ClickException,
    NoArgsIsHelpError,
    UsageError,
)
from typer.core import TyperCommand, TyperGroup

from ..errors import ExitCode, MesadynError, RunFailed
from ..registry import REGISTRY
from ._progress import progress_bar as progress_bar

#: The commands that are not workflows (they drive workflows): name -> (module of this
#: package, the one-line help ``mesadyn --help`` shows without importing the module).
DRIVERS: dict[str, tuple[str, str]] = {
    "reproduce": ("reproduce", "Re-derive the paper's claims; write a report."),
    "sweep": ("sweep", "Run a workflow over a TOML grid (docs/sweep.md)."),
    "rerun": ("rerun", "Rerun a run file from its own configuration and compare."),
}

#: The sub-commands, in the order ``--help`` lists them: the workflows of
#: :data:`mesadyn.workflows.REGISTRY` (each with its skin ``cli/<cli_module>.py``), then
#: :data:`DRIVERS`.  To add a workflow command: add it to the registry and write its skin with
#: ``register(app)`` adding one command of that name.
COMMANDS: dict[str, tuple[str, str]] = {
    **{w.command: (w.cli_module, w.summary) for w in REGISTRY.values()}, **DRIVERS}

#: Set by ``--debug`` or ``MESADYN_DEBUG``: print the traceback of an unexpected error.
_DEBUG = False


def _debug_env() -> bool:
    return os.environ.get("MESADYN_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


def load_command(name: str) -> Any:
    """The click command of sub-command ``name`` (its module imported now)."""
    module_name, _ = COMMANDS[name]
    module = importlib.import_module(f".{module_name}", __name__)
    sub = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    module.register(sub)
    group = typer.main.get_group(sub)
    command = group.commands.get(name)
    if command is None:  # a programming error: the module registered another name
        raise RuntimeError(f"mesadyn.cli.{module_name}.register() did not add {name!r}")
    return command


class _LazyGroup(TyperGroup):
    """The root group: commands are listed from :data:`COMMANDS` and imported on first use."""

    _listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMANDS:
            return None
        if self._listing:  # the root help lists names and one-line helps only
            line = COMMANDS[cmd_name][1]
            return TyperCommand(name=cmd_name, help=line, short_help=line, callback=None)
        command = self.commands.get(cmd_name)
        if command is None:
            command = load_command(cmd_name)
            self.commands[cmd_name] = command
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return self._click_resolve_command(ctx, args)
        except UsageError as e:
            if args:
                matches = get_close_matches(args[0], list(COMMANDS))
                if matches:
                    e.message = (f"{e.message.rstrip('.')}. Did you mean "
                                 f"{', '.join(repr(m) for m in matches)}?")
            raise


app = typer.Typer(
    name="mesadyn",
    help="Training dynamics of autoregressively trained linear transformers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_LazyGroup,
    rich_markup_mode=None,  # plain root help: rich's help renderer doubles the start-up time
)


def _print_version(value: bool) -> None:
    """``--version``: print ``mesadyn <version>`` (``mesadyn.__version__``) and exit 0."""
    if value:
        from .. import __version__

        print(f"mesadyn {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of an unexpected error.")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True,
                           help="Print the version and exit.")
    ] = False,
) -> None:
    """Training dynamics of autoregressively trained linear transformers (the paper's model)."""
    global _DEBUG
    _DEBUG = _DEBUG or debug


def _raw_value(param: object, argv: list[str]) -> str | None:
    """The text the user gave for ``param`` (so the error can echo it), if it can be found."""
    opts = getattr(param, "opts", None) or []
    for k, token in enumerate(argv):
        for opt in opts:
            if token == opt and k + 1 < len(argv):
                return argv[k + 1]
            if token.startswith(opt + "="):
                return token[len(opt) + 1 :]
    return None


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _status(argv: list[str]) -> int:
    """Run the command line ``argv``; return its exit code (messages printed on stderr).

    numpy's floating-point RuntimeWarnings (and ComplexWarning, one of them) are not printed
    unless ``--debug``: what they would say is in the result (a non-finite value is ``null``
    with its reason, a failed run or row says so) or in the one-line error."""
    import warnings

    with warnings.catch_warnings():
        if not ("--debug" in argv or _debug_env()):
            warnings.simplefilter("ignore", RuntimeWarning)
        return _run(argv)


def _run(argv: list[str]) -> int:
    try:
        rv = app(args=argv, standalone_mode=False, prog_name="mesadyn")
    except MesadynError as exc:
        print(f"mesadyn: error: {_one_line(exc)}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except RunFailed as exc:
        print(f"mesadyn: {_one_line(exc) or 'the run completed with failures'}", file=sys.stderr)
        return ExitCode.FAILED
    except (KeyboardInterrupt, typer.Abort):
        print("mesadyn: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except NoArgsIsHelpError as exc:  # `mesadyn` alone: the command list, then a usage error
        print(exc.ctx.get_help())
        print("mesadyn: error: missing command (choose one of the commands listed above)",
              file=sys.stderr)
        return ExitCode.BAD_INPUT
    except ClickException as exc:  # usage errors: bad option values
        message = _one_line(exc.format_message())
        raw = _raw_value(getattr(exc, "param", None), argv)
        if raw is not None:
            message += f" (got {raw!r})"
        print(f"mesadyn: error: {message}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except BrokenPipeError:  # stdout closed by the reader (e.g. `| head`)
        return ExitCode.FAILED
    except MemoryError:
        print("mesadyn: error: out of memory; try a smaller problem (d, T, m, samples)",
              file=sys.stderr)
        return ExitCode.FAILED
    except Exception as exc:  # noqa: BLE001 - the top-level guard: one line, never a traceback
        if _DEBUG or _debug_env():
            traceback.print_exc(file=sys.stderr)
        where = exc.__traceback__
        while where is not None and where.tb_next is not None:
            where = where.tb_next
        at = "" if where is None else (
            f" at {os.path.basename(where.tb_frame.f_code.co_filename)}:{where.tb_lineno}")
        print(f"mesadyn: internal error: {type(exc).__name__}: {_one_line(exc)}{at} "
              "(run with --debug or MESADYN_DEBUG=1 for the traceback)", file=sys.stderr)
        return ExitCode.FAILED
    if isinstance(rv, bool) or not isinstance(rv, int):
        return ExitCode.OK  # a command that returned nothing (or data) succeeded
    if rv == ExitCode.INTERRUPTED:  # typer turns KeyboardInterrupt into Exit(130)
        print("mesadyn: interrupted", file=sys.stderr)
    return int(rv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``mesadyn``: 0 is returned; any other exit code raises ``SystemExit``.

    Arguments:
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        0 on success (the console script passes it to ``sys.exit``).

    Raises:
        SystemExit: with code 1 (completed with failures, or an internal error), 2 (bad input)
            or 130 (interrupted); the one-line message is already on stderr.
    """
    from ._common import restore_interrupt

    global _DEBUG
    _DEBUG = False
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        code = _status(args)
        try:
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):  # pragma: no cover - reader gone
            pass
    finally:
        if argv is not None:  # an in-process caller gets its Ctrl-C back; a process exits
            restore_interrupt()
    if code != ExitCode.OK:
        sys.exit(int(code))
    return 0


if __name__ == "__main__":  # pragma: no cover
    main()
