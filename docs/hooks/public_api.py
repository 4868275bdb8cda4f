"""mesadyn's public API, read from the ``__all__`` lists (shared by the docs build and the tests).

The public API is ``mesadyn.__all__`` plus the ``__all__`` of every public subpackage
(``mesadyn.field``, ``mesadyn.flow``, ``mesadyn.workflows``, ...; ``mesadyn.cli`` is documented
by the CLI reference instead).  Each exported name is resolved to the place where it is
*defined*, so that mkdocstrings can render it whatever re-export style ``__init__`` uses (an
explicit import or a lazy ``__getattr__``), and so that a new export appears in the API reference
without anyone editing the docs.
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
    """One exported name: where it is exported, what it is and where it is defined."""

    package: str  # the package whose __all__ lists it, e.g. "mesadyn.field"
    name: str  # the exported name
    kind: str  # "module", "class", "function" or "data"
    identifier: str  # dotted path of the definition, for mkdocstrings ("::: identifier")
    docstring: str  # its docstring ("" when it has none)

    @property
    def public_path(self) -> str:
        """How a user spells it: ``package.name``."""
        return f"{self.package}.{self.name}"


def public_packages() -> list[str]:
    """``mesadyn`` and each public subpackage that declares ``__all__``, in a stable order."""
    root = importlib.import_module(ROOT)
    names = [ROOT]
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda m: m.name):
        full = f"{ROOT}.{info.name}"
        if not info.ispkg or info.name.startswith("_") or full in EXCLUDED:
            continue
        if "__all__" in vars(importlib.import_module(full)):
            names.append(full)
    return names


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
    """Resolve ``package.name`` (a name in ``package.__all__``) to an :class:`Entry`.

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
        return Entry(package, name, "data", f"{package}.{name}", "")
    return Entry(package, name, "data", f"{home}.{name}", _assigned_docstrings(home)[name])


def entries(package: str) -> list[Entry]:
    """Every name of ``package.__all__``, resolved, in the order of ``__all__``."""
    pkg = importlib.import_module(package)
    return [resolve(package, name) for name in pkg.__all__]


def all_entries() -> dict[str, list[Entry]]:
    """``{package: entries}`` for :func:`public_packages`."""
    return {package: entries(package) for package in public_packages()}
