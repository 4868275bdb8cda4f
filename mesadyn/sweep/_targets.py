"""What a sweep runs: a workflow of :data:`mesadyn.workflows.REGISTRY` (the one registry: the
sweep's targets are its workflows, ``ensemble`` among them), or — only when the caller opts in
with ``allow_code`` — any ``package.module:function``, checked as text and never imported here.

A target is a string: ``workflow:<name>`` for mesadyn's workflows, the function's
``package.module:function`` otherwise.  A workflow point's identity is its validated
``Config``'s :meth:`~mesadyn.workflows.RunOptions.config_hash` (every recorded option and the
package version: the one reuse rule of run files), with the spec's options the run file does
not record (its output paths) as extras; an opted-in function's is a hash of its options.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import tomllib
from types import ModuleType
from typing import Any

from ..errors import MesadynError
from ._coerce import Option, config_options

__all__ = ["WORKFLOW_PREFIX", "build_config", "options_hash", "point_hash", "resolve_command",
           "workflow_module", "workflow_names"]

#: Target prefix of mesadyn's own workflows (``workflow:integrate``).
WORKFLOW_PREFIX = "workflow:"


def workflow_names() -> tuple[str, ...]:
    """The workflows a spec may name: :data:`mesadyn.workflows.REGISTRY`, in its order."""
    from ..workflows import REGISTRY

    return tuple(REGISTRY)


def _workflow(head: str) -> str:
    """The registry name of ``head``: a workflow's name or its command (``continue``)."""
    from ..workflows import REGISTRY

    if head in REGISTRY:
        return head
    for w in REGISTRY.values():
        if w.command == head:
            return w.name
    raise MesadynError(
        f"spec: unknown workflow {head!r}; choose one of {', '.join(workflow_names())}")


def workflow_module(target: str) -> ModuleType:
    """The module of a ``workflow:<name>`` target (its ``Config`` and ``run``)."""
    from ..workflows import REGISTRY

    return importlib.import_module(REGISTRY[target[len(WORKFLOW_PREFIX):]].module)


def _check_code_target(head: str) -> str:
    """``package.module:function`` checked as text only (nothing is imported)."""
    module_name, _, func_name = head.partition(":")
    parts = module_name.split(".")
    if not all(part.isidentifier() for part in parts) or not func_name.isidentifier():
        raise MesadynError(f"spec: command {head!r} must look like package.module:function")
    return head


def resolve_command(command: str, *, allow_code: bool = False,
                    ) -> tuple[str, dict[str, Option] | None, dict[str, Any]]:
    """``(target, options, flags)`` for a spec's ``workflow``/``command`` string.

    ``"integrate --reduced"`` is the workflow ``mesadyn.workflows.integrate`` with
    ``reduced=True``; its options are the fields of its ``Config``.  ``"package.module:function"``
    is refused unless ``allow_code``; then its options are unknown (``None``) and nothing is
    imported here.
    """
    if not isinstance(command, str) or not command.strip():
        raise MesadynError(f"spec: workflow must be a non-empty string, got {command!r}")
    words = command.split()
    head, flags = words[0], words[1:]
    if ":" in head:
        if not allow_code:
            raise MesadynError(
                f"spec: {head!r} names a Python function; a sweep runs only mesadyn's workflows "
                f"({', '.join(workflow_names())}) unless --allow-code is given (it runs that "
                "code on every worker: only for specs you trust)"
            )
        return _check_code_target(head), None, _parse_flags(head, flags)
    target = f"{WORKFLOW_PREFIX}{_workflow(head)}"
    return target, config_options(workflow_module(target).Config), _parse_flags(head, flags)


def _parse_flags(head: str, words: list[str]) -> dict[str, Any]:
    """``--reduced`` -> {reduced: True}; ``--name=value`` / ``--name value`` -> TOML-typed value."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if not w.startswith("--"):
            raise MesadynError(f"spec: command {head!r}: expected an --option, got {w!r}")
        name, eq, value = w[2:].partition("=")
        if not eq and i + 1 < len(words) and not words[i + 1].startswith("--"):
            value, eq = words[i + 1], "="
            i += 1
        if not eq:
            out[name] = True
        elif name.startswith("no-") and not value:
            out[name[3:]] = False
        else:
            try:
                out[name] = tomllib.loads(f"v = {value}")["v"]
            except tomllib.TOMLDecodeError:
                out[name] = value
        i += 1
    return out


def build_config(target: str, options: dict[str, Any], label: str) -> Any:
    """The validated ``Config`` of a workflow point (``label`` names it in an error).

    ## Raises
    `MesadynError`: the ``Config`` refuses a value: ``spec: point <label>: <why>``.
    """
    try:
        return workflow_module(target).Config(**options)
    except (TypeError, ValueError) as exc:  # MesadynError, or a field the spec cannot set
        raise MesadynError(f"spec: point {label}: {' '.join(str(exc).split())}") from None


def options_hash(obj: Any) -> str:
    """16 hex digits of SHA-256 over ``obj`` as sorted JSON."""
    text = json.dumps(obj, sort_keys=True, allow_nan=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def point_hash(target: str, options: dict[str, Any], config: Any = None) -> str:
    """The identity of one point (16 hex digits).

    A workflow point with its validated ``config`` (a :class:`~mesadyn.workflows.RunOptions`):
    ``config.config_hash(target, unrecorded)``, where ``unrecorded`` are the point's options
    its run configuration leaves out (``out``, ``plot``: a point that writes elsewhere is
    another point).  Otherwise (an opted-in function): the hash of the target and every
    option.
    """
    from ..workflows import RunOptions

    if isinstance(config, RunOptions):
        recorded = set(config.recorded_fields())
        return config.config_hash(target, {k: v for k, v in options.items()
                                           if k not in recorded})
    return options_hash({"target": target, "options": options})
