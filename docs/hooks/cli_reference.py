"""mkdocs hook: ``cli-reference.md``, generated from the CLI itself at each build.

For every command registered on ``mesadyn.cli.app`` (in registration order, nested groups
included) the page shows the command's help, a table of its options (names, help, default)
read from the command object, and the verbatim output of ``mesadyn <command> --help``.  The
page therefore cannot drift from ``--help``: it is ``--help``.
"""

from __future__ import annotations

from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

SRC_URI = "cli-reference.md"
#: Terminal width used for the verbatim ``--help`` blocks.
COLUMNS = 96


def _help_text(args: list[str]) -> str:
    """The output of ``mesadyn *args --help``, plain text, trailing blanks stripped."""
    from typer.testing import CliRunner

    from mesadyn.cli import app

    env = {"COLUMNS": str(COLUMNS), "NO_COLOR": "1", "TERM": "dumb"}
    result = CliRunner().invoke(app, [*args, "--help"], env=env, prog_name="mesadyn")
    if result.exit_code != 0:
        raise RuntimeError(f"mesadyn {' '.join(args)} --help exited {result.exit_code}: "
                           f"{result.output}")
    lines = [line.rstrip() for line in result.output.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines).rstrip() + "\n"


def commands() -> list[tuple[list[str], Any]]:
    """``(path, command)`` for every command of the CLI, depth first, in registration order."""
    import typer.main

    from mesadyn.cli import app

    root = typer.main.get_command(app)
    found: list[tuple[list[str], Any]] = []

    def walk(group: Any, path: list[str]) -> None:
        # the click protocol (list_commands/get_command), so lazily loaded commands count
        lister = getattr(group, "list_commands", None)
        if lister is None:
            return
        ctx = group.make_context(" ".join(["mesadyn", *path]), [], resilient_parsing=True)
        for name in lister(ctx):
            cmd = group.get_command(ctx, name)
            if cmd is None or getattr(cmd, "hidden", False):
                continue
            found.append(([*path, name], cmd))
            walk(cmd, [*path, name])

    walk(root, [])
    return found


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(param: Any) -> str:
    default = getattr(param, "default", None)
    if default is None or getattr(param, "is_flag", False) and default is False:
        return ""
    if callable(default):
        return "(computed)"
    return f"`{_cell(default)}`"


def render() -> str:
    """The Markdown of the CLI reference."""
    from mesadyn import __version__

    lines = [
        "# CLI reference (generated)",
        "",
        f"Generated from `mesadyn --help` and `mesadyn COMMAND --help` (mesadyn {__version__})",
        "at each build of this site, so it always matches the installed command.  The",
        "[hand-written guide](cli.md) explains each command's `--json` keys with examples.",
        "",
        "```text",
        _help_text([]).rstrip(),
        "```",
        "",
    ]
    for path, cmd in commands():
        name = " ".join(path)
        lines += [f"## `mesadyn {name}`", ""]
        summary = (getattr(cmd, "help", None) or "").strip()
        if summary:
            lines += [summary, ""]
        params = [p for p in getattr(cmd, "params", []) if not getattr(p, "hidden", False)]
        if params:
            lines += ["| option | help | default |", "|---|---|---|"]
            for p in params:
                opts = ", ".join(f"`{o}`" for o in [*p.opts, *getattr(p, "secondary_opts", [])])
                lines.append(f"| {opts} | {_cell(getattr(p, 'help', '') or '')} | "
                             f"{_default(p)} |")
            lines.append("")
        lines += [
            f'??? example "`mesadyn {name} --help`"',
            "",
            "    ```text",
            *(("    " + line) if line else "" for line in _help_text(path).splitlines()),
            "    ```",
            "",
        ]
    return "\n".join(lines) + "\n"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated page to the site."""
    existing = files.get_file_from_path(SRC_URI)
    if existing is not None:
        files.remove(existing)
    files.append(File.generated(config, SRC_URI, content=render()))
    return files
