"""mkdocs hook: pages of the site whose one source lives outside ``docs/``, copied at build time.

``benchmarks.md`` is ``benchmarks/README.md`` (it sits next to the scripts it describes) and
``changelog.md`` is ``CHANGELOG.md``.  Relative links are rewritten for the site: a link to
``../docs/X`` (or ``docs/X``) becomes ``X``; a link to another file of the repository (a script)
is shown as its path in code, since the site does not serve it.

It also keeps the navigation in step with ``docs/``: an optional page listed in
:data:`OPTIONAL` whose file does not exist leaves the nav (so it never points nowhere), and a
top-level page of ``docs/`` that the nav does not list is added to the :data:`SECTION`
section under its first heading (so every page is reachable; mkdocs.yml gives it its place
and a shorter title when someone gets to it).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

#: ``{page in the site: source file relative to the repository root}``.
PAGES = {"benchmarks.md": "benchmarks/README.md", "changelog.md": "CHANGELOG.md"}
#: Navigation entries kept only while their page exists in ``docs/``.
OPTIONAL = frozenset({
    "architecture.md", "reliability.md", "data-models.md", "continuation.md", "ensembles.md",
    "sampled-fields.md",
})
#: The nav section that collects pages mkdocs.yml does not list yet.
SECTION = "Capabilities"
_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")


def rewrite_links(markdown: str, source: str) -> str:
    """Rewrite the relative links of ``source`` (a repository path) for a page at the site root."""
    base = posixpath.dirname(source)

    def fix(match: re.Match[str]) -> str:
        text, target = match.group(1), match.group(2)
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            return match.group(0)
        path = posixpath.normpath(posixpath.join(base, target))
        if path.startswith("docs/"):
            return f"[{text}]({path[len('docs/'):]})"
        return f"{text} (`{path}`)"

    return _LINK.sub(fix, markdown)


def _prune(items: list[Any], docs: Path) -> list[Any]:
    kept: list[Any] = []
    for item in items:
        if isinstance(item, dict):
            (title, value), = item.items()
            if isinstance(value, list):
                value = _prune(value, docs)
                if value:
                    kept.append({title: value})
                continue
            if value in OPTIONAL and not (docs / value).exists():
                continue
        elif isinstance(item, str) and item in OPTIONAL and not (docs / item).exists():
            continue
        kept.append(item)
    return kept


def _listed(items: list[Any]) -> set[str]:
    out: set[str] = set()
    for item in items:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            out |= _listed(value)
        elif isinstance(value, str):
            out.add(value)
    return out


def _title(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip().strip("`")
    return path.stem.replace("-", " ").capitalize()


def add_unlisted(nav: list[Any], docs: Path) -> list[Any]:
    """``nav`` with every top-level page of ``docs`` it does not list added to SECTION."""
    listed = _listed(nav)
    extra = [{_title(p): p.name} for p in sorted(docs.glob("*.md")) if p.name not in listed]
    if not extra:
        return nav
    for item in nav:
        if isinstance(item, dict) and isinstance(item.get(SECTION), list):
            item[SECTION].extend(extra)
            return nav
    return [*nav, {SECTION: extra}]


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Keep the nav in step with docs/; rebuild on source changes under serve."""
    root = Path(config.docs_dir).parent
    for source in PAGES.values():
        config.watch.append(str(root / source))
    if config.nav:
        docs = Path(config.docs_dir)
        config.nav = add_unlisted(_prune(config.nav, docs), docs)
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the copied pages to the site."""
    root = Path(config.docs_dir).parent
    for page, source in PAGES.items():
        text = rewrite_links((root / source).read_text(encoding="utf-8"), source)
        existing = files.get_file_from_path(page)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, page, content=text))
    return files
