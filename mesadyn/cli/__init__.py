"""The ``mesadyn`` command.  Each sub-command lives in its own module of this package."""

from __future__ import annotations

import importlib
import sys

import typer

from ..errors import MesadynError

app = typer.Typer(
    name="mesadyn",
    help="Training dynamics of autoregressively trained linear transformers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)



@app.callback()
def _root() -> None:
    """Training dynamics of autoregressively trained linear transformers (the paper's model)."""


#: Sub-command modules; each defines ``register(app)``.  Missing ones are skipped.
COMMANDS = ("theory", "train", "integrate", "stability", "portrait", "reproduce", "sweep")

for _name in COMMANDS:
    try:
        _mod = importlib.import_module(f".{_name}", __name__)
    except ModuleNotFoundError as _exc:  # a command not written yet
        if _exc.name != f"{__name__}.{_name}":
            raise
        continue
    _mod.register(app)


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


def main(argv: list[str] | None = None) -> int:
    """Entry point: bad input prints one line ``mesadyn: error: …`` and exits 2."""
    try:
        app(args=argv, standalone_mode=False, prog_name="mesadyn")
    except MesadynError as exc:
        print(f"mesadyn: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("mesadyn: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:
        # typer vendors click; match its exceptions by shape rather than by import path.
        kind = type(exc).__name__
        if kind == "Exit":
            sys.exit(getattr(exc, "exit_code", 0))
        if kind == "Abort":
            print("mesadyn: interrupted", file=sys.stderr)
            sys.exit(130)
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            message = " ".join(exc.format_message().split())
            raw = _raw_value(getattr(exc, "param", None), sys.argv[1:] if argv is None else argv)
            if raw is not None:
                message += f" (got {raw!r})"
            print(f"mesadyn: error: {message}", file=sys.stderr)
            sys.exit(2)
        raise
    return 0


if __name__ == "__main__":  # pragma: no cover
    main()
