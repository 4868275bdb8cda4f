"""mkdocs hook: execute the tutorials (jupytext percent-format ``.py``); render their outputs.

For each ``docs/tutorials/*.py`` the build

1. reads it with jupytext and executes it top to bottom with nbclient (a fresh ``python3``
   kernel, working directory a temporary folder, so a tutorial can write files freely);
2. renders the executed notebook as a Markdown page: prose cells as they are, code cells as
   Python blocks, text outputs as text blocks, figures as PNG files next to the page;
3. publishes the executed notebook (``.ipynb``) and the source (``.py``) for download.

A cell that raises fails the build (``mkdocs build`` exits non-zero naming the tutorial and
the cell), so CI catches a tutorial broken by a change to the package.

``MESADYN_DOCS_EXECUTE`` chooses: ``always`` executes every build (CI); ``cache`` (default)
reuses an executed notebook from ``~/.cache/mesadyn-docs`` when the tutorial, this hook and
every file of ``mesadyn/`` are byte-identical to when it was executed; ``never`` renders the
code without outputs (quick previews of prose).
"""

from __future__ import annotations

import base64
import hashlib
import html
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.tutorials")

FOLDER = "tutorials"
#: Seconds one cell may run before the build fails.
CELL_TIMEOUT = 300
_generated: dict[str, str | bytes] = {}
_timings: dict[str, float] = {}


def mode() -> str:
    """``always``, ``cache`` or ``never`` (``MESADYN_DOCS_EXECUTE``)."""
    value = os.environ.get("MESADYN_DOCS_EXECUTE", "cache")
    if value not in ("always", "cache", "never"):
        raise PluginError(f"MESADYN_DOCS_EXECUTE must be always, cache or never, not {value!r}")
    return value


def sources(docs_dir: Path) -> list[Path]:
    """The tutorial sources, in name order (their names start with a number)."""
    return sorted((docs_dir / FOLDER).glob("[0-9]*.py"))


def _cache_key(path: Path) -> str:
    """Hash of the tutorial, this hook and the package's files (any change re-executes)."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[2] / "mesadyn"
    for p in [path, Path(__file__), *sorted(package.rglob("*.py"))]:
        h.update(str(p.name).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:20]


def execute(path: Path) -> Any:
    """The executed notebook of the tutorial at ``path``.

    Raises:
        PluginError: a cell raised (the message names the tutorial and the error).
    """
    import jupytext
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    how = mode()
    nb = jupytext.read(path)
    if how == "never":
        return nb
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mesadyn-docs"
    cached = cache / f"{path.stem}-{_cache_key(path)}.ipynb"
    if how == "cache" and cached.exists():
        log.info("tutorial %s: executed notebook reused from %s", path.name, cached)
        return nbformat.read(cached, as_version=4)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mesadyn-tutorial-") as work:
        client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                                resources={"metadata": {"path": work}})
        try:
            client.execute()
        except CellExecutionError as exc:
            raise PluginError(f"tutorial {path.name} failed:\n{exc}") from None
    _timings[path.name] = time.perf_counter() - start
    log.info("tutorial %s executed in %.1f s", path.name, _timings[path.name])
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp")
    nbformat.write(nb, tmp)
    tmp.replace(cached)
    return nb


def _fence(text: str, lang: str) -> list[str]:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return [f"{ticks}{lang}", text.rstrip("\n"), ticks, ""]


def render(nb: Any, stem: str) -> tuple[str, dict[str, bytes]]:
    """Markdown of an executed notebook and its image files (``{name: bytes}``).

    Images are named by a hash of their content, so a rebuild with the same figures writes
    the same files.

    Raises:
        PluginError: the notebook holds an error output (the cell raised).
    """
    lines: list[str] = []
    images: dict[str, bytes] = {}
    for k, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            lines += [cell.source, ""]
            continue
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        lines += _fence(cell.source, "python")
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "error":
                raise PluginError(f"tutorial {stem}: cell {k} raised {out.get('ename')}: "
                                  f"{out.get('evalue')}")
            if kind == "stream":
                lines += ['<div class="nb-output" markdown>', ""]
                lines += _fence(out.get("text", ""), "text")
                lines += ["</div>", ""]
                continue
            data = out.get("data", {})
            if "image/png" in data:
                raw = base64.b64decode(data["image/png"])
                name = f"{stem}-{hashlib.sha256(raw).hexdigest()[:12]}.png"
                images[name] = raw
                lines += [f'![figure of cell {k}]({stem}_files/{name}){{ .nb-figure }}', ""]
            elif "text/html" in data:
                lines += ['<div class="nb-output nb-html">', data["text/html"], "</div>", ""]
            elif "text/markdown" in data:
                lines += [data["text/markdown"], ""]
            elif "text/plain" in data:
                lines += ['<div class="nb-output" markdown>', ""]
                lines += _fence(data["text/plain"], "text")
                lines += ["</div>", ""]
    return "\n".join(lines) + "\n", images


def _banner(stem: str, executed: bool) -> str:
    note = ("This page is the notebook as executed when the site was built."
            if executed else "Outputs are not shown: this build did not execute the notebook.")
    return (f'!!! info "Run it yourself"\n    {html.escape(note)}  Download '
            f"[the notebook]({stem}.ipynb) or [its source]({stem}.py) (a jupytext "
            "percent-format script: `jupytext --to notebook` converts it, or run it with "
            "`python`).\n\n")


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Execute and render every tutorial (before the files are collected)."""
    import nbformat

    _generated.clear()
    docs = Path(config.docs_dir)
    for path in sources(docs):
        nb = execute(path)
        stem = path.stem
        text, images = render(nb, stem)
        executed = mode() != "never"
        body = text
        if body.startswith("# "):  # keep the title first, then the banner
            title, _, rest = body.partition("\n")
            body = f"{title}\n\n{_banner(stem, executed)}{rest}"
        else:
            body = _banner(stem, executed) + body
        _generated[f"{FOLDER}/{stem}.md"] = body
        _generated[f"{FOLDER}/{stem}.ipynb"] = nbformat.writes(nb)
        for name, raw in images.items():
            _generated[f"{FOLDER}/{stem}_files/{name}"] = raw
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the rendered pages, notebooks and figures to the site."""
    for src_uri, content in _generated.items():
        existing = files.get_file_from_path(src_uri)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, src_uri, content=content))
    return files


def on_post_build(config: MkDocsConfig) -> None:
    """Log how long each executed tutorial took."""
    for name, seconds in _timings.items():
        log.info("tutorial %s: %.1f s", name, seconds)
