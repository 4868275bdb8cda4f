"""A griffe extension: a ``#:`` comment block right above an assignment is its docstring.

mesadyn documents module- and class-level data the Sphinx way::

    #: Table 1 (Appendix B.2): GD step sizes of the paper's simulations.
    TABLE1: dict[tuple[str, float | None], float] = {...}

griffe (and so mkdocstrings) reads only a string literal *after* an assignment; this extension
also reads the ``#:`` block before it, so both conventions show in the API reference.  It is
loaded by mkdocs.yml (``extensions: [docs/hooks/griffe_comments.py:CommentDocstrings]``);
``public_api.comment_docstring`` applies the same rule for the tests.
"""

from __future__ import annotations

import ast
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
