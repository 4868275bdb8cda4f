"""`mesadyn.cli._common.process_options`: the process options declared once (issue 11).

The decorator must give a command exactly the options it had when each command listed them:
the names, help, defaults and order of ``--help``, and the values ``ProcessOptions`` takes.
Checked against an independent source: the fields and defaults of the ``ProcessOptions``
dataclass, and typer's own parsing of a hand-written signature.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from mesadyn.cli._common import (
    PROCESS_OPTIONS,
    Dim,
    Json,
    ProcessArgs,
    Seed,
    process_options,
)
from mesadyn.workflows._common import ProcessOptions

Count = Annotated[int, typer.Option("--count", help="A command's own option.")]


def _app(command: Any) -> typer.Typer:
    app = typer.Typer(add_completion=False)
    app.command("cmd")(command)
    app.command("other", hidden=True)(lambda: None)  # a group, so `cmd` is a sub-command
    return app


def _invoke(command: Any, *args: str) -> Any:
    result = CliRunner().invoke(_app(command), ["cmd", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result


def test_the_options_are_process_options_fields_with_their_defaults() -> None:
    """Names, order and defaults are ProcessOptions' (the workflows' Config base)."""
    fields = [(f.name, f.default) for f in dataclasses.fields(ProcessOptions)]
    assert [(name, default) for name, _, default in PROCESS_OPTIONS] == fields
    assert list(ProcessArgs.__annotations__) == [name for name, _ in fields]


def test_values_reach_the_command_as_a_config_ready_dict() -> None:
    seen: list[dict[str, Any]] = []

    @process_options()
    def cmd(process: ProcessArgs, count: Count = 0, json: Json = False) -> None:
        seen.append({"process": process, "count": count, "json": json})

    _invoke(cmd, "--x1", "sparse", "--scale", "0.5", "--d", "3", "--T", "7", "--seed", "4",
            "--radius", "0.9", "--count", "2", "--json")
    got = seen[0]
    assert got["count"] == 2 and got["json"] is True
    assert got["process"] == {f.name: f.default for f in dataclasses.fields(ProcessOptions)} | {
        "x1": "sparse", "scale": 0.5, "d": 3, "T": 7, "seed": 4, "radius": 0.9}
    cfg = ProcessOptions(**got["process"])  # what a workflow's Config does with it
    assert (cfg.x1, cfg.d, cfg.T, cfg.radius) == ("sparse", 3, 7, 0.9)


def test_help_and_order_match_a_hand_written_signature() -> None:
    """The decorated command's --help is the one of the same options written out by hand, in
    the place of the ProcessArgs parameter; the own parameters keep their order."""

    @process_options(d=3, T=20)
    def decorated(count: Count = 0, *, process: ProcessArgs, json: Json = False) -> None:
        """One-line summary."""

    def by_hand(count: Count = 0, x1: Any = "gaussian", sigma: Any = 1.0,
                scale: Any = 1.0, d: Dim = 3, T: Any = 20, seed: Seed = 1, mu: Any = 0.0,
                moments: Any = None, mixture: Any = None, radius: Any = 1.0,
                rotation: Any = "diagonal", noise: Any = 0.0, model: Any = "linear",
                layers: Any = 1, json: Json = False) -> None:
        """One-line summary."""

    annotations = {name: option for name, option, _ in PROCESS_OPTIONS}
    sig = inspect.signature(by_hand, eval_str=True)
    by_hand.__signature__ = sig.replace(parameters=[  # type: ignore[attr-defined]
        p.replace(annotation=annotations.get(p.name, p.annotation))
        for p in sig.parameters.values()])
    want = _invoke(by_hand, "--help").output
    assert _invoke(decorated, "--help").output == want
    assert want.index("--count") < want.index("--x1") < want.index("--noise") < want.index(
        "--json") and "One-line summary." in want and "[default: 3]" in want


@pytest.mark.parametrize(("defaults", "command", "match"), [
    ({"dim": 3}, lambda process: None, "unknown process options"),
    ({}, lambda count=0: None, "exactly one ProcessArgs"),
])
def test_programming_errors_are_caught_at_import(defaults: dict[str, Any], command: Any,
                                                 match: str) -> None:
    with pytest.raises(TypeError, match=match):
        process_options(**defaults)(command)


def test_a_parameter_named_like_a_process_option_is_refused() -> None:
    def cmd(process: ProcessArgs, d: int = 1) -> None:
        """Two --d options."""

    with pytest.raises(TypeError, match=r"\['d'\]"):
        process_options()(cmd)


def test_every_command_that_takes_the_process_options_gets_them_once() -> None:
    """Each command's click parameters hold the twelve process options exactly once, in
    PROCESS_OPTIONS' order (so their --help rows are contiguous, as before)."""
    from mesadyn.cli import load_command

    names = [name for name, _, _ in PROCESS_OPTIONS]
    for command in ("theory", "train", "integrate", "stability", "portrait", "continue",
                    "ensemble", "gdflow"):
        params = [p.name for p in load_command(command).params]
        start = params.index("x1")
        assert params[start:start + len(names)] == names, command
        assert sorted(params) == sorted(set(params)), command
