"""The documentation machinery: generated pages, tutorial rendering and the site checker.

The full site build (``mkdocs build --strict``, which executes the tutorials) runs in
``.ci/docs.sh``; these tests check the parts quickly and show that each check can fail.
"""

from __future__ import annotations

import base64
import importlib
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))
sys.path.insert(0, str(ROOT / "docs"))

api_reference = importlib.import_module("api_reference")
cli_reference = importlib.import_module("cli_reference")
external_pages = importlib.import_module("external_pages")
public_api = importlib.import_module("public_api")
tutorials = importlib.import_module("tutorials")
check_site = importlib.import_module("check_site")


# ---- API reference ------------------------------------------------------------------------
def test_every_export_is_documented_once_and_listed_everywhere() -> None:
    entries = public_api.all_entries()
    home = api_reference.homes(entries)
    documented: dict[str, int] = {}
    for module, es in entries.items():
        page = api_reference.render_package(module, es, home)
        for e in es:
            assert f"[`{e.name}`](" in page, f"{e.public_path} missing from its table"
        assert f"::: {module}\n" in page  # the module's own docstring heads its page
        for line in page.splitlines():
            plain = re.match(r"^## `\w+` \{#([\w.]+)\}$", line)  # data griffe cannot see
            if (line.startswith("::: ") and line[4:] != module) or plain:
                ident = plain.group(1) if plain else line[4:]
                documented[ident] = documented.get(ident, 0) + 1
    every = {e.identifier for es in entries.values() for e in es if e.kind != "module"}
    assert set(documented) == every
    assert all(n == 1 for n in documented.values())
    modules = {e.identifier for es in entries.values() for e in es if e.kind == "module"}
    assert modules <= set(entries)  # a listed module links to its own page


def test_home_page_of_an_object_is_its_most_specific_package() -> None:
    packages = ["mesadyn", "mesadyn.field", "mesadyn.flow"]
    assert api_reference.home_package("mesadyn.field._base.Field", packages) == "mesadyn.field"
    assert api_reference.home_package("mesadyn.theory.constants", packages) == "mesadyn"


def test_markdown_heading_sections_become_google_sections() -> None:
    griffe_comments = importlib.import_module("griffe_comments")
    text = ("What it is.\n\n# Arguments\n- `theta`: a flat θ,\n  or a batch.\n- `a`, `b`: two.\n\n"
            "## Returns\nTwo arrays.\n\n**Raises:**\n`MesadynError`: bad input.\n\nMore text.")
    out = griffe_comments.google_sections(text)
    assert "Arguments:\n    theta: a flat θ,\n        or a batch.\n    a, b: two.\n" in out
    assert "Returns:\n    Two arrays.\n" in out
    assert "Raises:\n    MesadynError: bad input.\n" in out
    assert out.startswith("What it is.") and out.rstrip().endswith("More text.")
    assert "#" not in out and "**" not in out


def test_sphinx_roles_are_cleaned_from_the_html() -> None:
    html = ":class:<code>~mesadyn.field.ExactField</code>, :func:<code>make_field</code>"
    assert api_reference.clean_roles(html) == "<code>ExactField</code>, <code>make_field</code>"
    titled = (":meth:<code>ReducedSystem.horizon "
              "&lt;mesadyn.reduced.ReducedSystem.horizon&gt;</code>")
    assert api_reference.clean_roles(titled) == "<code>ReducedSystem.horizon</code>"


# ---- CLI reference ------------------------------------------------------------------------
def test_cli_reference_has_every_command_and_its_help() -> None:
    text = cli_reference.render()
    commands = cli_reference.commands()
    assert len(commands) >= 5
    for path, cmd in commands:
        name = " ".join(path)
        assert f"## `mesadyn {name}`" in text
        assert f"Usage: mesadyn {name}" in text
        for param in cmd.params:
            if not getattr(param, "hidden", False):
                assert all(f"`{opt}`" in text for opt in param.opts)


# ---- pages copied from outside docs/ -------------------------------------------------------
def test_external_links_are_rewritten_for_the_site() -> None:
    md = "[a](bench_flow.py), [b](../docs/cli.md#x), [c](https://x.org), ![i](p.png)"
    out = external_pages.rewrite_links(md, "benchmarks/README.md")
    assert "a (`benchmarks/bench_flow.py`)" in out
    assert "[b](cli.md#x)" in out and "[c](https://x.org)" in out and "![i](p.png)" in out


def test_missing_optional_pages_leave_the_nav(tmp_path: Path) -> None:
    (tmp_path / "ensembles.md").write_text("# E\n")
    nav = [{"Home": "index.md"},
           {"Capabilities": [{"E": "ensembles.md"}, {"C": "continuation.md"}]},
           {"Reliability": "reliability.md"}]
    assert external_pages._prune(nav, tmp_path) == [
        {"Home": "index.md"}, {"Capabilities": [{"E": "ensembles.md"}]}]


def test_an_unlisted_page_joins_the_nav(tmp_path: Path) -> None:
    (tmp_path / "index.md").write_text("# Home\n")
    (tmp_path / "new-thing.md").write_text("Intro\n# A new capability\n")
    nav = [{"Home": "index.md"}, {"Capabilities": [{"X": "x.md"}]}]
    assert external_pages.add_unlisted(nav, tmp_path) == [
        {"Home": "index.md"},
        {"Capabilities": [{"X": "x.md"}, {"A new capability": "new-thing.md"}]}]


# ---- tutorials ------------------------------------------------------------------------------
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==")


def _notebook(outputs: list[dict]) -> object:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title\n\nSome $x^2$."),
                nbformat.v4.new_code_cell("print(1)\nfig")]
    nb.cells[1].outputs = [nbformat.from_dict(o) for o in outputs]
    return nb


def test_an_executed_notebook_renders_with_its_outputs() -> None:
    nb = _notebook([
        {"output_type": "stream", "name": "stdout", "text": "1\n"},
        {"output_type": "display_data", "metadata": {},
         "data": {"image/png": base64.b64encode(PNG).decode(), "text/plain": "<Figure>"}},
        {"output_type": "execute_result", "execution_count": 1, "metadata": {},
         "data": {"text/plain": "42"}},
    ])
    text, images = tutorials.render(nb, "demo")
    assert text.startswith("# Title")
    assert "```python\nprint(1)\nfig\n```" in text
    assert "```text\n1\n```" in text and "```text\n42\n```" in text
    (name, raw), = images.items()
    assert raw == PNG and f"(demo_files/{name})" in text


def test_a_notebook_with_an_error_fails_the_build() -> None:
    from mkdocs.exceptions import PluginError

    nb = _notebook([{"output_type": "error", "ename": "ValueError", "evalue": "boom",
                     "traceback": []}])
    with pytest.raises(PluginError, match="ValueError: boom"):
        tutorials.render(nb, "demo")


def test_the_tutorials_are_jupytext_percent_scripts() -> None:
    import jupytext

    sources = tutorials.sources(ROOT / "docs")
    assert [p.stem for p in sources] == [
        "1-theorem-to-portrait", "2-proposition-4-2", "3-finite-samples-gd"]
    for path in sources:
        nb = jupytext.read(path)
        assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
        assert sum(c.cell_type == "code" for c in nb.cells) >= 4


@pytest.mark.slow
@pytest.mark.parametrize("stem", ["1-theorem-to-portrait", "2-proposition-4-2",
                                  "3-finite-samples-gd"])
def test_each_tutorial_executes_without_error(stem: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MESADYN_DOCS_EXECUTE", "always")
    nb = tutorials.execute(ROOT / "docs" / "tutorials" / f"{stem}.py")
    text, images = tutorials.render(nb, stem)
    assert images, f"{stem} draws no figure"


# ---- the site checker -----------------------------------------------------------------------
HEAD = '<head><link rel="icon" href="data:,"></head>'  # no favicon request, no 404


def _tiny_site(root: Path) -> Path:
    site = root / "site"
    (site / "gallery").mkdir(parents=True)
    (site / "index.html").write_text(
        f'<html>{HEAD}<body><article><h1 id="top">Home</h1><a href="gallery/">gallery</a>'
        '<a href="gallery/#fig">fig</a></article></body></html>')
    (site / "gallery" / "a.png").write_bytes(PNG)
    (site / "gallery" / "index.html").write_text(
        f'<html>{HEAD}<body><article><h2 id="fig">Fig</h2><img src="a.png" alt="a">'
        '<a href="../index.html#top">home</a></article></body></html>')
    for module in check_site.check_content.package_modules(ROOT / "mesadyn"):
        (site / "api" / module).mkdir(parents=True)
        (site / "api" / module / "index.html").write_text(
            f'<html>{HEAD}<body><article><h1 id="{module}">{module}</h1>'
            '<p><span class="doc-section-title">Examples:</span></p>'
            '<div class="highlight"><pre><code>&gt;&gt;&gt; 1 + 1\n2</code></pre></div>'
            '</article></body></html>')
    return site


def test_the_content_checks_pass_a_sound_site_and_fail_on_each_planted_defect(
        tmp_path: Path) -> None:
    content = check_site.check_content
    site = _tiny_site(tmp_path)
    assert content.check(site, ROOT / "mesadyn") == {
        "examples rendered as block quotes": [], "tracker references": [],
        "public modules missing from the reference": [], "development narrative": []}
    planted = content.plant(site)
    found = content.check(site, ROOT / "mesadyn")
    assert content.planted_found(planted, found) == dict.fromkeys(planted, True)
    assert len(found["public modules missing from the reference"]) == 1


@pytest.mark.parametrize(("text", "tracker", "narrative"), [
    ("the flow of issue 15 item 5", True, False),
    ("as in issue #3", True, False),
    ("Target (issue 2): 0.5 s", True, False),
    ("the tissue 5 sample", False, False),
    ("measured in the fifth session", False, True),
    ("the last session measured 0.39 s", False, True),
    ("Before this change the lead measured 0.5 s", False, True),
    ("while eight helper jobs shared the cores", False, True),
    ("a helper function of the kernel", False, False),
    ("the leading eigenvectors", False, False),
])
def test_the_tracker_and_narrative_patterns(text: str, tracker: bool, narrative: bool) -> None:
    content = check_site.check_content
    assert bool(content.TRACKER.search(text)) is tracker
    assert bool(content.NARRATIVE.search(text)) is narrative


def test_the_static_check_passes_a_sound_site_and_fails_a_broken_one(tmp_path: Path) -> None:
    site = _tiny_site(tmp_path)
    assert check_site.static_check(site) == []
    page = site / "gallery" / "index.html"
    page.write_text(page.read_text().replace("</article>", check_site.BREAKAGE + "</article>"))
    problems = check_site.static_check(site)
    assert len(problems) == 3
    assert any("does-not-exist.png" in p for p in problems)
    assert any("no-such-page" in p for p in problems)
    assert any("no-such-anchor" in p for p in problems)


@pytest.mark.skipif(not any(shutil.which(n) for n in check_site.CHROMIUM_NAMES),
                    reason="no Chromium (apt-get install -y chromium)")
def test_the_browser_check_catches_every_deliberate_breakage(tmp_path: Path) -> None:
    site = _tiny_site(tmp_path)
    with check_site._Server(site) as base:
        import asyncio

        good = asyncio.run(check_site.check_pages(base, {"home": "", "gallery": "gallery/"},
                                                  tmp_path / "shots"))
    assert all(r.ok for r in good), [r.lines() for r in good]
    assert (tmp_path / "shots" / "gallery.png").stat().st_size > 1000
    assert check_site.self_test(site, tmp_path / "work", tmp_path / "shots", check_site._Server)
