"""The API reference: one page per public module, examples parsed as code, the griffe setup.

The module list the reference is generated from (``public_api.public_modules``, a
:mod:`pkgutil` walk of the imported package) is compared with one read from the source tree
(``check_content.package_modules``, a walk of the files), so a module that the walk misses,
or a page that the hook forgets, fails here before any site is built.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))
sys.path.insert(0, str(ROOT / "docs"))

api_reference = importlib.import_module("api_reference")
check_content = importlib.import_module("check_content")
griffe_comments = importlib.import_module("griffe_comments")
public_api = importlib.import_module("public_api")


def test_the_reference_has_a_page_for_every_public_module() -> None:
    from_files = check_content.package_modules(ROOT / "mesadyn")
    walked = public_api.public_modules()
    assert sorted(walked) == sorted(from_files)
    assert "mesadyn.workflows.ensemble" in walked and "mesadyn.analysis.pl" in walked
    assert not any(m.startswith("mesadyn.cli") or "._" in m for m in walked)
    pages, nav = api_reference.generate()
    assert set(pages) == {api_reference.INDEX} | {api_reference.page_path(m) for m in walked}

    def paths(items: list[object]) -> set[str]:
        out: set[str] = set()
        for item in items:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            out |= paths(value) if isinstance(value, list) else {str(value)}
        return out

    assert paths(nav) == set(pages)


def test_a_module_without_all_lists_what_it_defines() -> None:
    names = public_api.public_names("mesadyn.analysis.pl")
    mod = importlib.import_module("mesadyn.analysis.pl")
    assert names and all(not n.startswith("_") for n in names)
    for name in names:
        obj = getattr(mod, name)
        assert getattr(obj, "__module__", "mesadyn.analysis.pl") == "mesadyn.analysis.pl"
    # a package without __all__ lists its public submodules
    assert "spectrum" in public_api.public_names("mesadyn.analysis")


def test_a_name_is_documented_on_the_page_of_its_most_specific_module() -> None:
    entries = public_api.all_entries()
    home = api_reference.homes(entries)
    for es in entries.values():
        for e in es:
            if e.kind == "module":
                assert home[e.identifier] == e.identifier
            else:
                assert home[e.identifier] in entries
    modules = list(entries)
    assert api_reference.home_package("mesadyn.field._base.Field", modules) == "mesadyn.field"
    assert api_reference.home_package("mesadyn.theory.constants", modules) == "mesadyn.theory"


def test_example_sections_become_examples_sections() -> None:
    text = "What.\n\nExample:\n    >>> 1 + 1\n    2\n\nNot Example: here.\n"
    out = griffe_comments.examples_sections(text)
    assert "Examples:\n    >>> 1 + 1\n" in out and "Not Example: here." in out
    assert griffe_comments.examples_sections(out) == out


def test_the_griffe_extensions_are_mkdocstrings_options() -> None:
    """A handler-level ``extensions:`` key is ignored by mkdocstrings-python: the extensions
    must sit under ``options`` (where they were not, every ``Example:`` rendered as quotes)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    mkdocstrings = next(p["mkdocstrings"] for p in config["plugins"]
                        if isinstance(p, dict) and "mkdocstrings" in p)
    python = mkdocstrings["handlers"]["python"]
    assert "extensions" not in python
    options = python["options"]
    assert {"docs/hooks/griffe_comments.py:CommentDocstrings",
            "docs/hooks/griffe_comments.py:MarkdownSections"} <= set(options["extensions"])
    assert options["docstring_style"] == "google"
    assert options["separate_signature"] and options["show_signature_annotations"]
    assert 60 <= options["line_length"] <= 100


@pytest.fixture(scope="module")
def package() -> Any:
    import griffe

    extensions = griffe.load_extensions(*[str(ROOT / e) for e in (
        "docs/hooks/griffe_comments.py:CommentDocstrings",
        "docs/hooks/griffe_comments.py:MarkdownSections")])
    return griffe.load("mesadyn", search_paths=[str(ROOT)], extensions=extensions,
                       docstring_parser=griffe.Parser.google)


def _objects(obj: Any) -> list[Any]:
    out = [obj]
    for member in getattr(obj, "members", {}).values():
        if not member.is_alias:
            out += _objects(member)
    return out


def test_every_doctest_line_is_in_an_examples_section(package: Any) -> None:
    """As mkdocs renders them (google style, with the docs' griffe extensions): a ``>>>``
    line outside an examples section is Markdown, i.e. three nested block quotes."""
    import griffe

    for obj in _objects(package):
        doc = getattr(obj, "docstring", None)
        if doc is None or ">>>" not in doc.value:
            continue
        sections = doc.parse(griffe.Parser.google, warnings=False)
        for section in sections:
            if section.kind is griffe.DocstringSectionKind.examples:
                continue
            text = section.value if isinstance(section.value, str) else str(
                getattr(section.value, "contents", ""))
            text = re.sub(r"```.*?```", "", text, flags=re.S)  # fenced code renders as code
            stray = [ln for ln in text.splitlines() if ln.lstrip().startswith(">>>")]
            assert not stray, f"{obj.path}: {stray[0]!r} is not in an Examples section"


def test_an_example_section_with_doctests_parses_as_code() -> None:
    """The rule the test above relies on, on a docstring written for it: with the docs'
    griffe extensions, ``Example:`` and its ``>>>`` lines become one examples section."""
    import griffe

    extensions = griffe.load_extensions(
        str(ROOT / "docs/hooks/griffe_comments.py:MarkdownSections"))
    code = ('"""What it does.\n\nExample:\n    >>> from mesadyn import theory\n'
            '    >>> theory.constants  # doctest: +SKIP\n"""\n')
    module = griffe.visit("planted", Path("planted.py"), code, extensions=extensions)
    assert module.docstring is not None
    sections = module.docstring.parse(griffe.Parser.google, warnings=False)
    kinds = [s.kind for s in sections]
    assert kinds == [griffe.DocstringSectionKind.text, griffe.DocstringSectionKind.examples]
    (kind, block), = sections[1].value
    assert kind is griffe.DocstringSectionKind.examples
    assert block.splitlines() == [">>> from mesadyn import theory", ">>> theory.constants"]
