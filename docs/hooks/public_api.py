"""mesadyn's public API, read from the package itself (shared by the docs build and the tests).

The public modules are ``mesadyn`` and every module and package below it whose dotted name has
no component starting with ``_``, found by walking the package with :mod:`pkgutil`
(:func:`public_modules`; ``mesadyn.cli`` is documented by the CLI reference instead).  A module's
public names are its ``__all__`` when it declares one, else the classes and functions it
defines, the data it assigns at its top level and, for a package, its public submodules
(:func:`public_names`).  Each name is resolved to the place where it is *defined*, so that
mkdocstrings can render it whatever re-export style ``__init__`` uses (an explicit import or a
lazy ``__getattr__``).  Nothing here is a hand-kept list: a new module, or a new export, appears
in the API reference without anyone editing the docs.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import sys
import types
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from griffe_comments import comment_docstring

ROOT = "mesadyn"
#: Subpackages whose API is documented elsewhere (the CLI has its own generated reference).
EXCLUDED = frozenset({"mesadyn.cli"})


@dataclass(frozen=True)
class Entry:
    """One public name: the module that lists it, what it is and where it is defined."""

    module: str  # the public module whose names list it, e.g. "mesadyn.field"
    name: str  # the exported name
    kind: str  # "module", "class", "function" or "data"
    identifier: str  # dotted path of the definition, for mkdocstrings ("::: identifier")
    docstring: str  # its docstring ("" when it has none)
    #: False for data that no single assignment in the source defines (``A, B = ...``, a name
    #: set in a loop): griffe cannot collect it, so the page shows its value instead.
    static: bool = True

    @property
    def public_path(self) -> str:
        """How a user spells it: ``module.name``."""
        return f"{self.module}.{self.name}"


def is_public(module: str) -> bool:
    """Whether ``module`` (a dotted name under ``mesadyn``) is public: no ``_`` component, and
    not in an :data:`EXCLUDED` subtree."""
    if any(part.startswith("_") for part in module.split(".")):
        return False
    return not any(module == e or module.startswith(e + ".") for e in EXCLUDED)


def _walk(package: str) -> list[str]:
    """The public modules below ``package``, depth first (its subpackages import here)."""
    pkg = importlib.import_module(package)
    found: list[str] = []
    for info in pkgutil.iter_modules(pkg.__path__):
        full = f"{package}.{info.name}"
        if not is_public(full):
            continue
        found.append(full)
        if info.ispkg:
            found += _walk(full)
    return found


def public_modules() -> list[str]:
    """``mesadyn`` and every public module and package below it, packages before their
    modules, in name order."""
    return sorted([ROOT, *_walk(ROOT)], key=lambda m: m.split("."))


def public_packages() -> list[str]:
    """The public modules that are packages (kept for callers that want only those)."""
    return [m for m in public_modules() if hasattr(importlib.import_module(m), "__path__")]


@cache
def _assigned_docstrings(module_name: str) -> dict[str, str]:
    """Top-level names assigned in a module's source, with the docstring that follows each.

    The docstring of a data attribute is a string literal right after its assignment, or the
    ``#:`` comment block right above it (both shown in the API reference: mkdocstrings reads
    the first, ``griffe_comments.CommentDocstrings`` the second).
    """
    module = sys.modules[module_name]
    path = getattr(module, "__file__", None)
    if path is None:
        return {}
    text = Path(path).read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    found: dict[str, str] = {}
    body = tree.body
    for k, node in enumerate(body):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        doc = ""
        if k + 1 < len(body):
            nxt = body[k + 1]
            if (isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                    and isinstance(nxt.value.value, str)):
                doc = inspect.cleandoc(nxt.value.value)
        if not doc and targets:
            doc = comment_docstring(lines, node.lineno)
        for target in targets:
            if isinstance(target, ast.Name):
                found[target.id] = doc
    return found


def _defining_module(name: str, obj: object, package: str) -> str | None:
    """The ``mesadyn`` module whose source assigns ``name`` to ``obj`` (data attributes)."""
    candidates = [
        mod_name for mod_name, mod in list(sys.modules.items())
        if (mod_name == ROOT or mod_name.startswith(ROOT + ".")) and mod is not None
        and vars(mod).get(name) is obj
    ]
    # prefer the package itself, then its submodules, then anything else
    candidates.sort(key=lambda m: (m != package, not m.startswith(package + "."), m))
    for mod_name in candidates:
        if name in _assigned_docstrings(mod_name):
            return mod_name
    return None


def resolve(package: str, name: str) -> Entry:
    """Resolve ``package.name`` (a public name of the module ``package``) to an :class:`Entry`.

    Raises:
        AttributeError: the name is listed in ``__all__`` but does not resolve.
    """
    pkg = importlib.import_module(package)
    obj = getattr(pkg, name)
    if isinstance(obj, types.ModuleType):
        return Entry(package, name, "module", obj.__name__, inspect.getdoc(obj) or "")
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if (inspect.isclass(obj) or inspect.isroutine(obj)) and module and qualname \
            and "<locals>" not in qualname:
        kind = "class" if inspect.isclass(obj) else "function"
        # a class's own docstring only: inspect.getdoc would inherit one from a base class
        doc = obj.__doc__ if kind == "class" else inspect.getdoc(obj)
        return Entry(package, name, kind, f"{module}.{qualname}", inspect.cleandoc(doc or ""))
    home = _defining_module(name, obj, package)
    if home is None:
        return Entry(package, name, "data", f"{package}.{name}", "", static=False)
    return Entry(package, name, "data", f"{home}.{name}", _assigned_docstrings(home)[name])


def public_names(module: str) -> list[str]:
    """The public names of ``module``: its ``__all__`` when it declares one; otherwise the
    classes and functions it defines, the data assigned at its top level (in source order) and,
    for a package, its public submodules."""
    mod = importlib.import_module(module)
    if "__all__" in vars(mod):
        return list(mod.__all__)
    assigned = _assigned_docstrings(module)
    names: list[str] = []
    for name, obj in vars(mod).items():
        if name.startswith("_") or isinstance(obj, types.ModuleType):
            continue
        if inspect.isclass(obj) or inspect.isroutine(obj):
            if getattr(obj, "__module__", None) == module:
                names.append(name)
        elif name in assigned:
            names.append(name)
    if hasattr(mod, "__path__"):
        for info in pkgutil.iter_modules(mod.__path__):
            if is_public(f"{module}.{info.name}"):
                importlib.import_module(f"{module}.{info.name}")
                names.append(info.name)
    return names


def entries(module: str) -> list[Entry]:
    """Every public name of ``module`` (:func:`public_names`), resolved, in that order."""
    return [resolve(module, name) for name in public_names(module)]


def all_entries() -> dict[str, list[Entry]]:
    """``{module: entries}`` for every module of :func:`public_modules`."""
    return {module: entries(module) for module in public_modules()}
