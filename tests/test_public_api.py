"""The public API is complete and documented, and packages keep their private modules private.

- Every name in ``mesadyn.__all__`` and in the ``__all__`` of each public subpackage resolves,
  and has a non-empty docstring of its own (a data attribute: a string literal right after its
  assignment, or a ``#:`` comment block right above it), so a new export without a docstring
  fails CI: the API reference is generated from exactly these lists and docstrings
  (``docs/hooks/api_reference.py``).
- No module imports another package's private (``_x``) module or private name (a static
  ``ast`` check over ``mesadyn/**/*.py``); the checker itself is shown to catch a violation.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mesadyn"
sys.path.insert(0, str(ROOT / "docs" / "hooks"))
import public_api  # noqa: E402  (docs/hooks/public_api.py: shared with the docs build)

PACKAGES = public_api.public_packages()


def test_the_expected_packages_are_public() -> None:
    assert PACKAGES[0] == "mesadyn"
    assert {"mesadyn.field"} <= set(PACKAGES)
    assert "mesadyn.cli" not in PACKAGES


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_a_list_of_unique_strings(package: str) -> None:
    names = importlib.import_module(package).__all__
    assert all(isinstance(n, str) for n in names)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, f"{package}.__all__ lists {duplicates} twice"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_export_resolves_and_has_a_docstring(package: str) -> None:
    pkg = importlib.import_module(package)
    missing, undocumented = [], []
    for name in pkg.__all__:
        try:
            entry = public_api.resolve(package, name)
        except AttributeError:
            missing.append(name)
            continue
        if not entry.docstring.strip():
            undocumented.append(f"{name} ({entry.kind}, {entry.identifier})")
    assert not missing, f"{package}.__all__ names that do not resolve: {missing}"
    assert not undocumented, (
        f"{package}.__all__ names without a docstring: {undocumented}; a data attribute is "
        "documented by a string literal right after its assignment or a #: comment above it"
    )


def test_resolve_finds_the_definition_of_each_kind() -> None:
    entry = public_api.resolve("mesadyn", "MesadynError")
    assert entry.kind == "class" and entry.identifier == "mesadyn.errors.MesadynError"
    assert entry.docstring
    fn = public_api.resolve("mesadyn", "constants")
    assert fn.kind == "function" and fn.identifier == "mesadyn.theory.constants"


def test_a_data_docstring_is_the_string_after_the_assignment(tmp_path: Path) -> None:
    mod = tmp_path / "h5_probe_mod.py"
    mod.write_text('X = 1\n"""The X."""\nY = 2\nZ: int = 3\n"""The Z."""\n'
                   '#: The W,\n#: in two lines.\nW = 4\n# not this one\nV = 5\n')
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("h5_probe_mod")
        docs = public_api._assigned_docstrings("h5_probe_mod")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("h5_probe_mod", None)
    assert docs == {"X": "The X.", "Y": "", "Z": "The Z.", "W": "The W,\nin two lines.",
                    "V": ""}


# ---- private modules stay private ---------------------------------------------------------
def _module_name(path: Path, root: Path) -> tuple[str, bool]:
    """Dotted module name of ``path`` under ``root``'s parent, and whether it is a package."""
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts = parts[:-1]
    return ".".join(parts), is_pkg


def _absolute(module: str, is_pkg: bool, level: int, target: str | None) -> str:
    """The absolute module of ``from <level dots><target> import ...`` inside ``module``."""
    if level == 0:
        return target or ""
    base = module.split(".")
    if not is_pkg:
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _is_package(dotted: str) -> bool:
    return (ROOT.joinpath(*dotted.split("."))).is_dir()


def _private_owner(dotted: str) -> str | None:
    """The package that owns the first private component of ``dotted`` (None: all public):
    the package it sits in (a private name of a plain module belongs to that module's
    package)."""
    parts = dotted.split(".")
    for k, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            owner = ".".join(parts[:k])
            return owner if _is_package(owner) else owner.rpartition(".")[0]
    return None


def private_imports(source: str, module: str, is_pkg: bool) -> list[str]:
    """Imports in ``source`` (the code of ``module``) that reach into another package's
    private module or name: ``"module: line N imports X"`` strings.

    A private thing (a ``_x`` module, or a ``_x`` name imported from a module) belongs to the
    package that contains it; only that package and its subpackages may import it.
    """
    own_package = module if is_pkg else module.rpartition(".")[0]
    problems = []
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_pkg, node.level, node.module)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            if not target.startswith("mesadyn"):
                continue
            owner = _private_owner(target)
            if owner is None:
                continue
            if own_package == owner or own_package.startswith(owner + "."):
                continue
            problems.append(f"{module}: line {node.lineno} imports {target}")
    return sorted(set(problems))


def test_no_module_imports_another_packages_private_module() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module, is_pkg = _module_name(path, PACKAGE)
        problems += private_imports(path.read_text(encoding="utf-8"), module, is_pkg)
    assert not problems, "private modules imported across packages:\n" + "\n".join(problems)


@pytest.mark.parametrize(("source", "module", "is_pkg", "bad"), [
    ("from ..field._base import Field", "mesadyn.analysis.spectrum", False, True),
    ("from ..field import _cache", "mesadyn.analysis.spectrum", False, True),
    ("import mesadyn.cli._common", "mesadyn.sweep.runner", False, True),
    ("from mesadyn.plots._style import save", "mesadyn.reproduce.figures", False, True),
    ("from ._base import Field", "mesadyn.field.exact", False, False),
    ("from ._base import Field", "mesadyn.field", True, False),
    ("from .._style import save", "mesadyn.plots.sub.x", False, False),
    ("from ..field import Field, make_field", "mesadyn.flow.driver", False, False),
    ("from __future__ import annotations", "mesadyn.flow.driver", False, False),
    ("from .model import _HermitianMatvec", "mesadyn.train", False, False),
])
def test_the_private_import_check_catches_violations(source: str, module: str, is_pkg: bool,
                                                     bad: bool) -> None:
    assert bool(private_imports(source, module, is_pkg)) is bad


# ---- the root facade: one list, two spellings that agree ------------------------------------
def _type_checking_imports(path: Path) -> dict[str, str]:
    """``name -> module`` of the ``from .module import name as name`` lines under
    ``if TYPE_CHECKING:`` in ``path`` (``""`` for a subpackage imported whole)."""
    out: dict[str, str] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name)
                and node.test.id == "TYPE_CHECKING"):
            continue
        for stmt in node.body:
            assert isinstance(stmt, ast.ImportFrom) and stmt.level == 1, ast.dump(stmt)
            for alias in stmt.names:
                assert alias.asname == alias.name, f"{alias.name} is not re-exported as itself"
                out[alias.name] = stmt.module or ""
    return out


def test_the_root_facade_lists_each_name_once_in_both_places() -> None:
    """``mesadyn/__init__.py`` is lazy (``import mesadyn`` stays cheap): its TYPE_CHECKING
    imports (what type checkers and IDEs see) and its ``_EXPORTS`` table (what loads at run
    time) name the same names from the same modules."""
    import mesadyn

    seen = _type_checking_imports(PACKAGE / "__init__.py")
    assert seen == mesadyn._EXPORTS  # noqa: SLF001 - the facade's own table
    assert "default_device" not in mesadyn.__all__  # one device policy: resolve_device
    assert {"Outcome", "resolve_device", "make_generator"} <= set(mesadyn.__all__)
    assert mesadyn.make_generator is importlib.import_module("mesadyn.device").make_generator
