"""griffe extensions for the API reference: ``#:`` comments, section spellings, examples.

**CommentDocstrings**: a ``#:`` comment block right above an assignment is its docstring.

mesadyn documents module- and class-level data the Sphinx way::

    #: Table 1 (Appendix B.2): GD step sizes of the paper's simulations.
    TABLE1: dict[tuple[str, float | None], float] = {...}

griffe (and so mkdocstrings) reads only a string literal *after* an assignment; this extension
also reads the ``#:`` block before it, so both conventions show in the API reference.  It is
loaded by mkdocs.yml (``extensions: [docs/hooks/griffe_comments.py:CommentDocstrings]``);
``public_api.comment_docstring`` applies the same rule for the tests.

**MarkdownSections**: the package's docstring convention is Google-style sections
(``Arguments:`` / ``Returns:`` / ``Raises:`` with indented ``name: text`` items), which
mkdocstrings renders as tables.  Some modules write the same sections as Markdown headings
(``# Arguments`` or ``## Arguments``, or ``**Arguments:**``) with ``- `name`: text`` items; this
extension rewrites those into the Google form before rendering, so every docstring renders
alike (and no docstring injects a heading into the page's table of contents).

**Examples**: the Google style guide spells the examples section ``Example:`` or
``Examples:``; griffe's Google parser knows only ``Examples:`` and reads ``Example:`` as a
Material *admonition* of type "example", whose body is Markdown, so every ``>>>`` line
becomes three nested block quotes and the code runs together as prose.  The same extension
renames an ``Example:`` section title to ``Examples:`` (:func:`examples_sections`), so that
griffe parses its ``>>>`` lines as doctest code and mkdocstrings renders them as Python
console blocks.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import griffe


def comment_docstring(lines: list[str], lineno: int) -> str:
    """The ``#:`` block ending right above line ``lineno`` (1-based) of ``lines``, or ""."""
    out: list[str] = []
    k = lineno - 2
    while k >= 0 and lines[k].lstrip().startswith("#:"):
        out.append(lines[k].lstrip()[2:].strip())
        k -= 1
    return "\n".join(reversed(out))


class CommentDocstrings(griffe.Extension):
    """Give attributes without a docstring the ``#:`` comment block above them."""

    def on_attribute_instance(self, *, node: ast.AST | Any, attr: griffe.Attribute,
                              **kwargs: Any) -> None:
        if attr.docstring is not None or not isinstance(node, ast.AST):
            return
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            return
        try:
            lines = attr.lines_collection[attr.filepath]  # type: ignore[index]
        except (KeyError, TypeError, AttributeError):
            return
        text = comment_docstring(list(lines), lineno)
        if text:
            attr.docstring = griffe.Docstring(text, lineno=lineno - 1, parent=attr)


_SECTION = re.compile(r"^(?:#{1,4} +|\*\*)(Arguments|Args|Parameters|Returns|Raises|Yields)"
                      r"(?::\*\*|\*\*|:)?\s*$")
_ITEM = re.compile(r"^(?:[-*] +)?`?([^`:]+?)`?(?:,\s*`([^`]+)`)*\s*:\s+(.*)$")
#: A Raises item without a colon: ```MesadynError` for bad input.``
_RAISED = re.compile(r"^(?:[-*] +)?`(\w[\w.]*)`(?!`):?\s+(.*)$")
_GOOGLE = {"Args": "Arguments", "Parameters": "Arguments"}


def google_sections(text: str) -> str:
    """``text`` with its Markdown-heading sections rewritten as Google-style sections."""
    lines = text.splitlines()
    out: list[str] = []
    k = 0
    while k < len(lines):
        m = _SECTION.match(lines[k].strip())
        if not m:
            out.append(lines[k])
            k += 1
            continue
        kind = _GOOGLE.get(m.group(1), m.group(1))
        out.append(f"{kind}:")
        k += 1
        while k < len(lines) and not lines[k].strip():
            k += 1
        while k < len(lines):
            line = lines[k]
            if _SECTION.match(line.strip()):
                break
            if not line.strip():
                nxt = lines[k + 1] if k + 1 < len(lines) else ""
                if not nxt.strip() or not (nxt.startswith((" ", "-", "*", "`"))):
                    break
                k += 1
                continue
            item = _ITEM.match(line) if kind in ("Arguments", "Raises") else None
            raised = _RAISED.match(line) if kind == "Raises" else None
            starts_item = line.startswith(("- ", "* ")) or (
                line.startswith("`") and not line.startswith("``"))
            if raised:  # `MesadynError` for bad input.  ->  MesadynError: for bad input.
                out.append(f"    {raised.group(1)}: {raised.group(2)}")
            elif item and not line.startswith(" ") and (kind != "Raises" or starts_item):
                names = re.findall(r"`([^`]+)`", line.split(":", 1)[0]) or [item.group(1)]
                out.append(f"    {', '.join(n.strip() for n in names)}: {item.group(3)}")
            elif out and out[-1].startswith("    ") and (
                    line.startswith(" ") or (kind == "Raises" and not starts_item)):
                out.append("        " + line.strip())
            else:
                out.append("    " + line.strip().removeprefix("- "))
            k += 1
        out.append("")
    return "\n".join(out).rstrip() + "\n" if text.endswith("\n") else "\n".join(out).rstrip()


#: A section title that Google style allows and griffe reads as an admonition.
_EXAMPLE = re.compile(r"^Example:[ \t]*$", re.MULTILINE)


def examples_sections(text: str) -> str:
    """``text`` with each ``Example:`` section title (at the docstring's own indentation)
    renamed ``Examples:``, the spelling griffe parses as an examples section."""
    return _EXAMPLE.sub("Examples:", text)


class MarkdownSections(griffe.Extension):
    """Rewrite Markdown-heading docstring sections into Google-style ones, and ``Example:``
    titles into ``Examples:`` (see above)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        doc = obj.docstring
        if doc is None:
            return
        if any(_SECTION.match(ln.strip()) for ln in doc.value.splitlines()):
            doc.value = google_sections(doc.value)
        if _EXAMPLE.search(doc.value):
            doc.value = examples_sections(doc.value)
