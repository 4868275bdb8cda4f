"""mkdocs hook: the API reference, one page per public module, generated from the package.

The modules are found by walking ``mesadyn`` with :mod:`pkgutil` (``public_api.public_modules``:
every module and package whose dotted name has no ``_`` component); each page shows the
module's docstring, a table of its public names (its ``__all__``, or what it defines) and, for
each object whose home it is, the object rendered by mkdocstrings from its docstring
(``::: <where it is defined>``).  The pages are generated in memory at each build (nothing is
written to ``docs/``), so a new module or export appears in the reference, and in the
navigation, without anyone editing the docs.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

import public_api
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

NAV_TITLE = "API reference"
INDEX = "api/index.md"
ROOT_MODULE = public_api.ROOT

_pages: dict[str, str] = {}
#: Sphinx roles left in docstrings (``:class:`X` ``) render as ``:class:<code>X</code>``.
_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):(?=<code>)")
#: ``~a.b.C`` means "show C" in Sphinx.
_TILDE = re.compile(r"<code>~(?:\w+\.)*(\w+)</code>")
#: ``:meth:`title <target>` `` means "show title" in Sphinx.
_TITLED = re.compile(r"<code>([^<>]+?) &lt;[\w.]+&gt;</code>")


def page_path(module: str) -> str:
    """Where the page of ``module`` lives in the site (``api/mesadyn.field.md``)."""
    return f"api/{module}.md"


def _summary(doc: str) -> str:
    """The first sentence-line of a docstring, made safe for a table cell."""
    first = doc.strip().split("\n\n")[0].replace("\n", " ").strip()
    return first.replace("|", "\\|") or "—"


def home_package(identifier: str, modules: list[str]) -> str:
    """The page that documents ``identifier`` in full: the most specific public module that
    contains its definition (``mesadyn.field._base.Field`` -> ``mesadyn.field``), else
    ``mesadyn``.  Other pages that list the same object link there, so every object has one
    anchor in the site."""
    best = "mesadyn"
    for module in modules:
        if identifier.startswith(module + ".") and len(module) > len(best):
            best = module
    return best


def homes(entries: dict[str, list[public_api.Entry]]) -> dict[str, str]:
    """``{identifier: module whose page documents it}``: a module's own page for a module;
    else its home module when that module lists it, else the first module (in page order) that
    does."""
    modules = list(entries)
    listed: dict[str, list[str]] = {}
    for module, es in entries.items():
        for e in es:
            listed.setdefault(e.identifier, []).append(module)
    out = {}
    for identifier, where in listed.items():
        if identifier in entries:  # a public module: its own page
            out[identifier] = identifier
            continue
        home = home_package(identifier, modules)
        out[identifier] = home if home in where else where[0]
    return out


def _link(e: public_api.Entry, module: str, home: dict[str, str]) -> str:
    where = home[e.identifier]
    if e.kind == "module" and where == e.identifier:
        return f"{where}.md"
    return f"#{e.identifier}" if where == module else f"{where}.md#{e.identifier}"


def render_package(module: str, entries: list[public_api.Entry], home: dict[str, str]) -> str:
    """The Markdown of one module's page: the module's docstring, a summary table of its
    public names, then one mkdocstrings block for each object this page documents (objects
    documented on another page are linked)."""
    mod = importlib.import_module(module)
    listed = ("Every name in `__all__`, in that order" if "__all__" in vars(mod)
              else "Every public name it defines, in source order")
    lines = [
        f"# `{module}`",
        "",
        f"::: {module}",
        "    options:",
        "      members: false",
        "      show_root_heading: false",
        "",
    ]
    if not (mod.__doc__ or "").strip():
        lines += [f"*`{module}` has no docstring.*", ""]
    if entries:
        lines += [f"{listed}:", "", "| name | kind | summary |", "|---|---|---|"]
        for e in entries:
            lines.append(f"| [`{e.name}`]({_link(e, module, home)}) | {e.kind} | "
                         f"{_summary(e.docstring)} |")
        lines.append("")
    for e in entries:
        if home[e.identifier] != module or e.kind == "module":
            continue
        if not e.static:  # griffe cannot collect it: its name and value
            value = repr(getattr(mod, e.name)).replace("`", "'")
            lines += [f"## `{e.name}` {{#{e.identifier}}}", "", f"`{e.name} = {value}`", ""]
            continue
        lines += [
            f"::: {e.identifier}",
            "    options:",
            "      show_root_heading: true",
            "      show_root_full_path: false",
            f'      heading: "{e.name}"',
            "",
        ]
        if not e.docstring:
            lines += [f"*`{e.public_path}` has no docstring.*", ""]
    return "\n".join(lines) + "\n"


def render_index(modules: list[str], entries: dict[str, list[public_api.Entry]]) -> str:
    """The Markdown of the API reference's landing page."""
    lines = [
        "# API reference",
        "",
        "Generated at each build from the package itself: one page per public module (every",
        "module of `mesadyn` whose name has no `_` component), with its docstring and its",
        "public names (its `__all__`, or the classes, functions and data it defines).  A test,",
        "`tests/test_public_api.py`, fails when an exported name has no docstring; another,",
        "`tests/docs/test_docs_build.py`, when a module of the package has no page here.  The",
        "command line has its own [CLI reference](../cli-reference.md).",
        "",
        "| module | names | summary |",
        "|---|---|---|",
    ]
    for module in modules:
        doc = importlib.import_module(module).__doc__ or ""
        lines.append(f"| [`{module}`]({module}.md) | {len(entries[module])} | "
                     f"{_summary(doc)} |")
    lines += [
        "",
        "## Docstring convention",
        "",
        "One convention throughout, Google-style sections written in Markdown (mkdocstrings",
        "renders them as tables, and an `Examples:` section as Python console blocks):",
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
        "",
        "    Examples:",
        "        >>> system.settle_time(0.5, 1.5, 1e-6)  # doctest: +SKIP",
        '    """',
        "```",
        "",
        "The first line says what the object is; the next paragraph names the equation, lemma",
        "or theorem of the paper it implements.  A public data attribute is documented by a",
        "string literal right after its assignment.  `Example:` is read as `Examples:`.",
    ]
    return "\n".join(lines) + "\n"


def nav_section(modules: list[str]) -> list[Any]:
    """The API reference's navigation: the index, then each top-level module; a package is a
    section holding its own page and its modules' pages (nested alike)."""
    def children(parent: str) -> list[Any]:
        items: list[Any] = []
        for m in modules:
            if m.rpartition(".")[0] != parent:
                continue
            below = children(m)
            items.append({m: [page_path(m), *below]} if below else {m: page_path(m)})
        return items

    return [INDEX, {ROOT_MODULE: page_path(ROOT_MODULE)}, *children(ROOT_MODULE)]


def generate() -> tuple[dict[str, str], list[Any]]:
    """``({page path: Markdown}, navigation section)`` of the whole reference."""
    entries = public_api.all_entries()
    modules = list(entries)
    pages = {INDEX: render_index(modules, entries)}
    home = homes(entries)
    for module in modules:
        pages[page_path(module)] = render_package(module, entries[module], home)
    return pages, nav_section(modules)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Generate the pages and put the module tree under the API reference in the nav."""
    _pages.clear()
    pages, section = generate()
    _pages.update(pages)
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
    return _TITLED.sub(r"<code>\1</code>", _TILDE.sub(r"<code>\1</code>", _ROLE.sub("", html)))


def on_page_content(html: str, page: Any, config: MkDocsConfig, files: Files) -> str:
    """Clean the API pages' HTML of Sphinx roles."""
    if page.file.src_uri.startswith("api/"):
        return clean_roles(html)
    return html
