"""Static checks of the built site, without a browser (used by docs/check_site.py).

:func:`static_check` finds the internal links, anchors and images of every page that do not
resolve to a file.  The content checks each read the HTML files of a built site and return
their problems as ``"page: what"`` strings (empty when the site is sound):

- :func:`example_blockquotes`: a block quote inside an "Examples" section of the API
  reference (a Material "example" admonition, or what follows mkdocstrings' ``Examples:``
  section title), or block quotes nested in one another anywhere in the reference.  Either is
  a doctest rendered as Markdown: every ``>>>`` line becomes three nested block quotes and the
  code runs together as prose.
- :func:`tracker_references`: the word "issue" followed by a number (with or without ``#``,
  one or several numbers, in parentheses or not) in the
  visible text of any page, the rendered docstrings included: a page describes the package,
  never the tracker.
- :func:`missing_modules`: a public module of the package (every ``.py`` file and package
  under ``mesadyn/`` whose dotted name has no ``_`` component, ``mesadyn.cli`` aside: it has
  the CLI reference) without its page ``api/<module>/`` in the reference.  The module list is
  read from the source tree, independently of the hook that generates the reference.
- :func:`development_narrative`: the package's making told as a story (an ordinal, "this",
  "last" or "previous" before the name of a working period; who measured what; the jobs,
  agents or machines that helped) in any page but the changelog (history belongs there).
  The patterns below spell those words in pieces, so that a grep of the sources for them
  finds the pages, not this checker.
"""

from __future__ import annotations

import html.parser
import re
import urllib.parse
from pathlib import Path

#: Tags that never have an end tag (the parser's depth must not count them).
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                   "source", "track", "wbr"})
#: Subtrees whose text a reader does not see as prose.
_INVISIBLE = frozenset({"script", "style", "svg", "head"})

TRACKER = re.compile(r"\bissues?\s*(?:#\s*)?\d+(?:\s*(?:,|and|&)\s*#?\d+)*", re.IGNORECASE)
_ORDINALS = ("first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|this|last|"
             "previous|earlier|next|same|that")
NARRATIVE = re.compile(
    rf"\b(?:{_ORDINALS})\s+ses" r"sions?\b"
    r"|\bthe\s+lead(?:'s)?\s+(?:measured|ran|timed|found|wrote|asked)\b"
    r"|\bhelp" r"ers?(?:'s)?\s+(?:jobs?|agents?|machines?|runs?)\b",
    re.IGNORECASE)
#: Pages exempt from the narrative check (their subject is the history).
HISTORY_PAGES = frozenset({"changelog/index.html"})
#: Subpackages the API reference leaves to another page.
EXCLUDED_MODULES = frozenset({"mesadyn.cli"})


# ---- links, anchors and images of every page ----------------------------------------------
class _Refs(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.images: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "a" and a.get("href"):
            self.links.append(str(a["href"]))
        if tag == "img" and a.get("src"):
            self.images.append(str(a["src"]))


def _parse(path: Path) -> _Refs:
    refs = _Refs()
    refs.feed(path.read_text(encoding="utf-8", errors="replace"))
    return refs


def _resolve(site: Path, page: Path, ref: str) -> tuple[Path | None, str]:
    """The file a relative reference of ``page`` points to (None: external), and its fragment."""
    parts = urllib.parse.urlsplit(ref)
    if parts.scheme or parts.netloc or ref.startswith(("mailto:", "javascript:", "data:")):
        return None, ""
    if not parts.path:
        return page, parts.fragment
    path = urllib.parse.unquote(parts.path)
    base = site if path.startswith("/") else page.parent
    target = (base / path.lstrip("/")).resolve()
    if parts.path.endswith("/") or target.is_dir():
        target = target / "index.html"
    return target, parts.fragment


def static_check(site: Path) -> list[str]:
    """Every internal link, anchor and image of every HTML file of ``site`` that does not
    resolve (``"page: reference"`` strings; empty when all resolve)."""
    site = site.resolve()
    problems: list[str] = []
    parsed: dict[Path, _Refs] = {}

    def refs_of(p: Path) -> _Refs:
        if p not in parsed:
            parsed[p] = _parse(p)
        return parsed[p]

    for page in sorted(site.rglob("*.html")):
        refs = refs_of(page)
        rel = page.relative_to(site)
        for kind, items in (("link", refs.links), ("image", refs.images)):
            for ref in items:
                target, fragment = _resolve(site, page, ref)
                if target is None:
                    continue
                if not target.is_relative_to(site) or not target.exists():
                    problems.append(f"{rel}: broken {kind} {ref}")
                elif fragment and target.suffix == ".html" \
                        and fragment not in refs_of(target).ids:
                    problems.append(f"{rel}: broken anchor {ref}")
    return problems


# ---- content ---------------------------------------------------------------------------
class _Page(html.parser.HTMLParser):
    """One pass over a page: its visible text, and the block quotes in Examples sections."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, str]] = []  # (tag, class attribute) of the open elements
        self.text: list[str] = []
        self.quotes_in_examples: list[str] = []
        self.nested_quotes = 0
        self._invisible = 0
        self._example_depth: int | None = None  # depth of the element an admonition opens
        self._section_depth: int | None = None  # depth of the parent of an Examples title
        self._in_title = False
        self._heading = ""  # the id of the last heading: where a problem is

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        cls = a.get("class", "")
        if tag in _INVISIBLE:
            self._invisible += 1
        if re.fullmatch(r"h[1-6]", tag) and a.get("id"):
            self._heading = a["id"]
        if tag == "span" and "doc-section-title" in cls.split():
            self._in_title = True
            self._section_depth = None  # a new section ends the previous one
        if tag == "blockquote":
            if self._example_depth is not None or self._section_depth is not None:
                self.quotes_in_examples.append(self._heading or "(top of page)")
            if any(t == "blockquote" for t, _ in self.stack):
                self.nested_quotes += 1
        if tag in _VOID:
            return
        self.stack.append((tag, cls))
        if self._example_depth is None and tag in ("details", "div") \
                and "example" in cls.split():
            self._example_depth = len(self.stack)

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        if tag in _INVISIBLE:
            self._invisible = max(0, self._invisible - 1)
        while self.stack:
            open_tag, _ = self.stack.pop()
            depth = len(self.stack)
            if self._example_depth is not None and depth < self._example_depth:
                self._example_depth = None
            if self._section_depth is not None and depth < self._section_depth:
                self._section_depth = None
            if open_tag == tag:
                break
        if tag == "span" and self._in_title:
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._invisible:
            return
        self.text.append(data)
        if self._in_title and data.strip().lower().startswith("example"):
            # the section runs on through the siblings that follow the title's <p>
            self._section_depth = max(0, len(self.stack) - 2)


def _pages(site: Path) -> list[tuple[str, _Page]]:
    out = []
    for path in sorted(site.rglob("*.html")):
        page = _Page()
        page.feed(path.read_text(encoding="utf-8", errors="replace"))
        page.close()
        out.append((path.relative_to(site).as_posix(), page))
    return out


def example_blockquotes(site: Path) -> list[str]:
    """Block quotes in the API reference's Examples sections, and nested block quotes."""
    problems = []
    for rel, page in _pages(site / "api"):
        for where in page.quotes_in_examples:
            problems.append(f"api/{rel}: block quote in an Examples section (at #{where}): "
                            "a doctest rendered as Markdown")
        if page.nested_quotes:
            problems.append(f"api/{rel}: {page.nested_quotes} nested block quotes "
                            "(a `>>>` line rendered as Markdown)")
    return problems


def _visible(page: _Page) -> str:
    return re.sub(r"\s+", " ", " ".join(page.text))


def _matches(pattern: re.Pattern[str], site: Path, skip: frozenset[str]) -> list[str]:
    problems = []
    for rel, page in _pages(site):
        if rel in skip:
            continue
        text = _visible(page)
        for m in pattern.finditer(text):
            context = text[max(0, m.start() - 40): m.end() + 40].strip()
            problems.append(f"{rel}: {m.group(0)!r} in “…{context}…”")
    return problems


def tracker_references(site: Path) -> list[str]:
    """Every "issue N" in the visible text of every page."""
    return _matches(TRACKER, site, frozenset())


def development_narrative(site: Path) -> list[str]:
    """Every phrase that narrates the package's making, in every page but the changelog."""
    return _matches(NARRATIVE, site, HISTORY_PAGES)


def package_modules(package_dir: Path) -> list[str]:
    """The public modules of the package at ``package_dir`` (read from its files)."""
    root = package_dir.name
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join([root, *parts])
        if any(p.startswith("_") for p in parts):
            continue
        if any(name == e or name.startswith(e + ".") for e in EXCLUDED_MODULES):
            continue
        found.append(name)
    return found


def missing_modules(site: Path, package_dir: Path) -> list[str]:
    """The public modules of the package without a page in the site's API reference."""
    return [f"api/{m}/index.html: no page for the public module {m}"
            for m in package_modules(package_dir)
            if not (site / "api" / m / "index.html").is_file()]


def check(site: Path, package_dir: Path) -> dict[str, list[str]]:
    """Every content check: ``{check name: problems}``."""
    return {
        "examples rendered as block quotes": example_blockquotes(site),
        "tracker references": tracker_references(site),
        "public modules missing from the reference": missing_modules(site, package_dir),
        "development narrative": development_narrative(site),
    }


# ---- defects planted by the self-test -------------------------------------------------------
PLANTED_QUOTE = ('<p><span class="doc-section-title">Examples:</span></p>'
                 '<blockquote><blockquote><blockquote><p>from mesadyn import planted</p>'
                 '</blockquote></blockquote></blockquote>')
PLANTED_ADMONITION = ('<details class="example" open><summary>Example</summary><blockquote>'
                      '<p>res = planted.run()</p></blockquote></details>')
PLANTED_TRACKER = "<p>Planted: the flow of issue&#32;9731 item 5.</p>"  # &#32;: a space
PLANTED_NARRATIVE = "<p>Planted: measured in the ninth ses" "sion while help" "er jobs ran.</p>"


def plant(site: Path) -> dict[str, tuple[str, str]]:
    """Plant one defect of each kind in ``site`` (a copy of a built site).

    Returns ``{check name: (page, text)}``: the check must report a problem on that page
    (the start of the problem's line) that contains that text; the planted phrases occur
    nowhere else, so a defect already in the site cannot stand in for them.
    """
    api_pages = sorted((site / "api").glob("mesadyn*/index.html"))
    first, last = api_pages[0], api_pages[-1]
    text = first.read_text(encoding="utf-8")
    first.write_text(text.replace("</article>", PLANTED_QUOTE + PLANTED_ADMONITION
                                  + PLANTED_TRACKER + "</article>", 1), encoding="utf-8")
    home = site / "index.html"
    text = home.read_text(encoding="utf-8")
    home.write_text(text.replace("</article>", PLANTED_NARRATIVE + "</article>", 1),
                    encoding="utf-8")
    module = last.parent.name
    for f in last.parent.iterdir():
        f.unlink()
    last.parent.rmdir()
    api = first.relative_to(site).as_posix()
    return {
        "examples rendered as block quotes": (api, "block quote in an Examples section"),
        "tracker references": (api, "9731"),
        "public modules missing from the reference": (f"api/{module}/", module),
        "development narrative": ("index.html", "ninth"),
    }


def planted_found(planted: dict[str, tuple[str, str]],
                  found: dict[str, list[str]]) -> dict[str, bool]:
    """``{check name: whether it reported its planted defect}``."""
    return {what: any(p.startswith(page) and text in p for p in found[what])
            for what, (page, text) in planted.items()}
