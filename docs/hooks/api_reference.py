"""mkdocs hook: the API reference, one page per public package, generated from ``__all__``.

Every name of ``mesadyn.__all__`` and of each public subpackage's ``__all__`` gets an entry
rendered by mkdocstrings from its docstring (``::: <where it is defined>``).  The pages are
generated in memory at each build (nothing is written to ``docs/``), so a new export appears in
the reference, and in the navigation, without anyone editing the docs.
"""

from __future__ import annotations

import re
from typing import Any

import public_api
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

NAV_TITLE = "API reference"
INDEX = "api/index.md"

_pages: dict[str, str] = {}
#: Sphinx roles left in docstrings (``:class:`X` ``) render as ``:class:<code>X</code>``.
_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):(?=<code>)")
#: ``~a.b.C`` means "show C" in Sphinx.
_TILDE = re.compile(r"<code>~(?:\w+\.)*(\w+)</code>")


def page_path(package: str) -> str:
    """Where the page of ``package`` lives in the site (``api/mesadyn.field.md``)."""
    return f"api/{package}.md"


def _summary(doc: str) -> str:
    """The first sentence-line of a docstring, made safe for a table cell."""
    first = doc.strip().split("\n\n")[0].replace("\n", " ").strip()
    return first.replace("|", "\\|") or "—"


def home_package(identifier: str, packages: list[str]) -> str:
    """The page that documents ``identifier`` in full: the most specific public package that
    contains its definition (``mesadyn.field._base.Field`` -> ``mesadyn.field``), else
    ``mesadyn``.  Other pages that export the same object link there, so every object has one
    anchor in the site."""
    best = "mesadyn"
    for package in packages:
        if identifier.startswith(package + ".") and len(package) > len(best):
            best = package
    return best


def homes(entries: dict[str, list[public_api.Entry]]) -> dict[str, str]:
    """``{identifier: package whose page documents it}``: its home package when that package
    exports it, else the first package (in page order) that does."""
    packages = list(entries)
    exported: dict[str, list[str]] = {}
    for package, es in entries.items():
        for e in es:
            exported.setdefault(e.identifier, []).append(package)
    out = {}
    for identifier, where in exported.items():
        home = home_package(identifier, packages)
        out[identifier] = home if home in where else where[0]
    return out


def render_package(package: str, entries: list[public_api.Entry], home: dict[str, str]) -> str:
    """The Markdown of one package's page: a summary table, then one mkdocstrings block for
    each object this page documents (objects documented on another page are linked)."""
    lines = [
        f"# `{package}`",
        "",
        f"Every name in `{package}.__all__`, in that order, rendered from its docstring.",
        "",
        "| name | kind | summary |",
        "|---|---|---|",
    ]
    for e in entries:
        where = home[e.identifier]
        target = f"#{e.identifier}" if where == package else f"{where}.md#{e.identifier}"
        lines.append(f"| [`{e.name}`]({target}) | {e.kind} | {_summary(e.docstring)} |")
    lines.append("")
    for e in entries:
        if home[e.identifier] != package:
            continue
        heading = e.public_path if e.kind == "module" else e.name
        lines += [
            f"::: {e.identifier}",
            "    options:",
            "      show_root_heading: true",
            "      show_root_full_path: false",
            f'      heading: "{heading}"',
            "",
        ]
        if not e.docstring:
            lines += [f"*`{e.public_path}` has no docstring.*", ""]
    return "\n".join(lines) + "\n"


def render_index(packages: list[str], entries: dict[str, list[public_api.Entry]]) -> str:
    """The Markdown of the API reference's landing page."""
    lines = [
        "# API reference",
        "",
        "Generated at each build from the `__all__` lists of the package and of its public",
        "subpackages: a name that is exported appears here with its docstring (a test,",
        "`tests/test_public_api.py`, fails when an exported name has none).  The command line",
        "has its own [CLI reference](../cli-reference.md).",
        "",
        "| package | names | summary |",
        "|---|---|---|",
    ]
    import importlib

    for package in packages:
        doc = importlib.import_module(package).__doc__ or ""
        lines.append(f"| [`{package}`]({package}.md) | {len(entries[package])} | "
                     f"{_summary(doc)} |")
    lines += [
        "",
        "## Docstring convention",
        "",
        "One convention throughout, Google-style sections written in Markdown (mkdocstrings",
        "renders them as tables):",
        "",
        "```python",
        "def settle_time(self, a0: float, b0: float, tol: float) -> float:",
        '    """Time for the reduced flow from (a0, b0) to come within ``tol`` of its limit.',
        "",
        "    Closed form of Lemma 5.2 (the flow of the surrogate of Lemma 5.3).",
        "",
        "    Arguments:",
        "        a0: initial diagonal of ``W^KQ_32``.",
        "        b0: initial diagonal of ``W^PV_12``.",
        "        tol: distance to the limit point.",
        "",
        "    Returns:",
        "        The time τ, in the units of the gradient flow.",
        "",
        "    Raises:",
        "        MesadynError: ``tol`` is not positive.",
        '    """',
        "```",
        "",
        "The first line says what the object is; the next paragraph names the equation, lemma",
        "or theorem of the paper it implements.  A public data attribute is documented by a",
        "string literal right after its assignment.",
    ]
    return "\n".join(lines) + "\n"


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Generate the pages and put one navigation entry per package under the API reference."""
    _pages.clear()
    entries = public_api.all_entries()
    packages = list(entries)
    _pages[INDEX] = render_index(packages, entries)
    home = homes(entries)
    for package in packages:
        _pages[page_path(package)] = render_package(package, entries[package], home)
    section: list[Any] = [INDEX] + [{package: page_path(package)} for package in packages]
    nav = config.nav or []
    for k, item in enumerate(nav):
        if isinstance(item, dict) and NAV_TITLE in item:
            nav[k] = {NAV_TITLE: section}
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated pages to the site."""
    for src_uri, content in _pages.items():
        existing = files.get_file_from_path(src_uri)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, src_uri, content=content))
    return files


def clean_roles(html: str) -> str:
    """Drop the Sphinx roles that docstrings written for Sphinx leave in the HTML."""
    return _TILDE.sub(r"<code>\1</code>", _ROLE.sub("", html))


def on_page_content(html: str, page: Any, config: MkDocsConfig, files: Files) -> str:
    """Clean the API pages' HTML of Sphinx roles."""
    if page.file.src_uri.startswith("api/"):
        return clean_roles(html)
    return html
