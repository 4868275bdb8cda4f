"""Check the built documentation site in headless Chromium (see docs/check_site.sh).

Usage::

    python docs/check_site.py --site SITE_DIR --base http://127.0.0.1:PORT/ --out SHOTS \\
        [--page PATH ...] [--self-test]

For every page given (default: the home page, the API reference's root and a workflow's page
with its examples, a tutorial and the gallery)
Chromium, driven through its DevTools protocol, loads the page from the local server and the
check fails when

- the page logs a console error or throws an uncaught exception (``Runtime.consoleAPICalled``
  with level error, ``Runtime.exceptionThrown``, ``Log.entryAdded`` with level error — which
  includes a resource the server answered with 404);
- an image is broken (``img.complete && img.naturalWidth > 0`` is false after load);
- a formula was not rendered (an ``.arithmatex`` element without KaTeX output in it);
- an internal link is broken: the target page does not exist on the server, or its
  ``#fragment`` is not an id in the target page.

A screenshot of each page's first screen goes to ``SHOTS/<name>.png``.  Independently of the
browser, every HTML file of the site is also checked statically for internal links and images
that do not resolve to a file (``static_check``), and for its content
(``docs/check_content.py``): a block quote in an Examples section of the API reference, a
tracker reference, a public module of the package without its reference page, and the
package's making told as a story (history belongs in the changelog).  ``--no-browser`` runs
only these static checks (a machine without Chromium).

``--self-test`` copies the site, breaks it on purpose (a missing image, a dead link, a dead
anchor and a console error on the gallery page; an example rendered as block quotes and a
tracker reference in an API page, a module's reference page removed, a line of narrative on
the home page) and exits 0 only if the check reports every one of them: the check cannot
pass vacuously.

Why the DevTools protocol rather than ``chromium --dump-dom``: only a live page can tell a
broken image (``naturalWidth``) and collect console errors; ``--dump-dom`` gives the DOM and
nothing else.  The protocol needs a websocket client: tornado's (a dependency of ipykernel,
which the docs extra installs).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_content  # noqa: E402  (next to this file)
from check_content import _Refs, static_check  # noqa: E402

DEFAULT_PAGES = {
    "home": "",
    "api-reference": "api/mesadyn/",
    "api-examples": "api/mesadyn.workflows.integrate/",
    "tutorial": "tutorials/1-theorem-to-portrait/",
    "gallery": "gallery/",
}
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
SETTLE_S = 1.5  # after the load event: KaTeX and material's scripts run
PACKAGE = Path(__file__).resolve().parents[1] / "mesadyn"


@dataclass
class PageReport:
    """What the browser found on one page."""

    name: str
    url: str
    console_errors: list[str] = field(default_factory=list)
    broken_images: list[str] = field(default_factory=list)
    broken_links: list[str] = field(default_factory=list)
    unrendered_math: int = 0
    n_math: int = 0
    n_images: int = 0
    n_links: int = 0
    screenshot: str = ""

    @property
    def ok(self) -> bool:
        return not (self.console_errors or self.broken_images or self.broken_links
                    or self.unrendered_math)

    def lines(self) -> list[str]:
        head = (f"{'PASS' if self.ok else 'FAIL'} {self.name} ({self.url}): {self.n_images} "
                f"images, {self.n_links} internal links, {self.n_math} formulas; screenshot "
                f"{self.screenshot}")
        out = [head]
        out += [f"    console error: {e}" for e in self.console_errors]
        out += [f"    broken image: {e}" for e in self.broken_images]
        out += [f"    broken link: {e}" for e in self.broken_links]
        if self.unrendered_math:
            out.append(f"    unrendered formulas: {self.unrendered_math}")
        return out


# ---- the browser --------------------------------------------------------------------------
def find_chromium() -> str:
    """The Chromium executable (``$CHROMIUM`` or Debian's ``chromium`` on the PATH)."""
    candidates = [os.environ.get("CHROMIUM", "")] + [shutil.which(n) or "" for n in CHROMIUM_NAMES]
    for c in candidates:
        if c and Path(c).exists():
            return c
    raise SystemExit("check_site: no Chromium found (apt-get install -y chromium, or set CHROMIUM)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Browser:
    """Headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self, executable: str, width: int = 1280, height: int = 900) -> None:
        self.port = _free_port()
        self.profile = tempfile.mkdtemp(prefix="check-site-chromium-")
        self.proc = subprocess.Popen(
            [executable, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking", "--hide-scrollbars",
             "--force-device-scale-factor=1", f"--window-size={width},{height}",
             f"--remote-debugging-port={self.port}", "--remote-debugging-address=127.0.0.1",
             f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.width, self.height = width, height
        self.ws: Any = None
        self._id = 0
        self.events: list[dict] = []

    def _page_ws_url(self, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list",
                                            timeout=2) as r:
                    for target in json.load(r):
                        if target.get("type") == "page":
                            return str(target["webSocketDebuggerUrl"])
            except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
                pass
            time.sleep(0.2)
        raise SystemExit("check_site: Chromium did not open its DevTools port")

    async def connect(self) -> None:
        from tornado.websocket import websocket_connect

        self.ws = await websocket_connect(self._page_ws_url(), max_message_size=1 << 28)
        for domain in ("Page", "Runtime", "Log", "Network"):
            await self.send(f"{domain}.enable")
        await self.send("Emulation.setDeviceMetricsOverride", width=self.width,
                        height=self.height, deviceScaleFactor=1, mobile=False)

    async def send(self, method: str, timeout: float = 60.0, **params: object) -> dict:
        """Send a command; return its result (events seen meanwhile are kept)."""
        assert self.ws is not None
        self._id += 1
        my_id = self._id
        await self.ws.write_message(json.dumps({"id": my_id, "method": method,
                                                "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"DevTools: no answer to {method}")
            raw = await asyncio.wait_for(self.ws.read_message(), left)
            if raw is None:
                raise ConnectionError("DevTools connection closed")
            msg = json.loads(raw)
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"DevTools {method}: {msg['error']}")
                return dict(msg.get("result", {}))
            if "method" in msg:
                self.events.append(msg)

    async def drain(self, seconds: float) -> None:
        """Collect events for ``seconds``."""
        assert self.ws is not None
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                raw = await asyncio.wait_for(self.ws.read_message(), left)
            except TimeoutError:
                return
            if raw is None:
                return
            msg = json.loads(raw)
            if "method" in msg:
                self.events.append(msg)

    async def load(self, url: str, timeout: float = 60.0) -> None:
        """Navigate and wait for the load event, then let scripts settle."""
        self.events.clear()
        await self.send("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while not any(e["method"] == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not finish loading")
            await self.drain(0.2)
        await self.drain(SETTLE_S)

    async def evaluate(self, expression: str) -> object:
        res = await self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                              awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    async def screenshot(self, path: Path) -> None:
        res = await self.send("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(res["data"]))

    def console_errors(self) -> list[str]:
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error",
                                                                              "assert"):
                args = p.get("args", [])
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in args))
            elif e["method"] == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append(str(d.get("exception", {}).get("description") or d.get("text")))
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                entry = p["entry"]
                out.append(f"{entry.get('text', '')} {entry.get('url', '')}".strip())
        return out

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


_PAGE_FACTS = """(() => {
  const imgs = [...document.images];
  const math = [...document.querySelectorAll('.arithmatex')];
  return {
    images: imgs.length,
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.currentSrc || i.src),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href)
             .filter(h => h.startsWith(location.origin)),
    math: math.length,
    unrendered: math.filter(m => !m.querySelector('.katex')).length,
  };
})()"""


def _fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            body = r.read().decode("utf-8", "replace") if "html" in r.headers.get(
                "Content-Type", "") else ""
            return r.status, body
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def check_links(links: list[str], cache: dict[str, tuple[int, set[str]]]) -> list[str]:
    """The links (absolute, same origin) whose page is missing or lacks the fragment's id."""
    broken = []
    for link in sorted(set(links)):
        url, _, fragment = link.partition("#")
        if url not in cache:
            status, body = _fetch(url)
            refs = _Refs()
            refs.feed(body)
            cache[url] = (status, refs.ids)
        status, ids = cache[url]
        if status != 200:
            broken.append(f"{link} (HTTP {status})")
        elif fragment and urllib.parse.unquote(fragment) not in ids:
            broken.append(f"{link} (no id {fragment!r} in the page)")
    return broken


async def check_pages(base: str, pages: dict[str, str], out: Path) -> list[PageReport]:
    """Load each page in Chromium and report what is wrong with it."""
    out.mkdir(parents=True, exist_ok=True)
    browser = Browser(find_chromium())
    reports = []
    cache: dict[str, tuple[int, set[str]]] = {}
    try:
        await browser.connect()
        for name, path in pages.items():
            url = urllib.parse.urljoin(base, path)
            await browser.load(url)
            facts = await browser.evaluate(_PAGE_FACTS)
            assert isinstance(facts, dict)
            shot = out / f"{name}.png"
            await browser.screenshot(shot)
            reports.append(PageReport(
                name=name, url=url, console_errors=browser.console_errors(),
                broken_images=list(facts["broken"]),
                broken_links=check_links(list(facts["links"]), cache),
                unrendered_math=int(facts["unrendered"]), n_math=int(facts["math"]),
                n_images=int(facts["images"]), n_links=len(set(facts["links"])),
                screenshot=str(shot)))
    finally:
        browser.close()
    return reports


def content_check(site: Path) -> dict[str, list[str]]:
    """The content checks of ``docs/check_content.py``, printed one line per check."""
    found = check_content.check(site, PACKAGE)
    for what, problems in found.items():
        print(f"{'FAIL' if problems else 'PASS'} content: {what}: {len(problems)}")
        for p in problems[:20]:
            print(f"    {p}")
    return found


def run(site: Path, base: str | None, out: Path, pages: dict[str, str]) -> bool:
    """Browser check of ``pages`` (none without ``base``), static and content checks of the
    whole site; print a report."""
    reports = asyncio.run(check_pages(base, pages, out)) if base else []
    for r in reports:
        print("\n".join(r.lines()))
    problems = static_check(site)
    print(f"static check of {sum(1 for _ in site.rglob('*.html'))} pages: "
          f"{len(problems)} problems")
    for p in problems[:50]:
        print(f"    {p}")
    content = content_check(site)
    return all(r.ok for r in reports) and not problems and not any(content.values())


# ---- self-test: a deliberately broken site must fail ---------------------------------------
BREAKAGE = (
    '<p id="check-site-breakage">'
    '<img src="../gallery/does-not-exist.png" alt="deliberately missing image">'
    '<a href="../no-such-page/">deliberately dead link</a>'
    '<a href="../index.html#no-such-anchor">deliberately dead anchor</a>'
    '<script>console.error("deliberate console error")</script></p>'
)


def self_test(site: Path, base_dir: Path, out: Path, serve: Callable[[Path], Any] | None) -> bool:
    """Break a copy of the site; pass only if every breakage is reported (``serve`` None:
    the static and content checks only)."""
    broken_site = base_dir / "broken-site"
    if broken_site.exists():
        shutil.rmtree(broken_site)
    shutil.copytree(site, broken_site)
    page = broken_site / "gallery" / "index.html"
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace("</article>", BREAKAGE + "</article>", 1), encoding="utf-8")
    planted = check_content.plant(broken_site)
    found: dict[str, bool] = {}
    if serve is not None:
        with serve(broken_site) as base:
            r = asyncio.run(check_pages(base, {"gallery-broken": "gallery/"}, out))[0]
        print("\n".join(r.lines()))
        found |= {
            "missing image (browser)": any("does-not-exist.png" in b for b in r.broken_images),
            "dead link (browser)": any("no-such-page" in b for b in r.broken_links),
            "dead anchor (browser)": any("no-such-anchor" in b for b in r.broken_links),
            "console error (browser)": any("deliberate console error" in e
                                           for e in r.console_errors),
            "404 of the image logged (browser)": any("404" in e for e in r.console_errors),
            "the page fails (browser)": not r.ok,
        }
    static = static_check(broken_site)
    print("static check of the broken copy:", *static, sep="\n    ")
    found |= {
        "missing image (static)": any("does-not-exist.png" in s for s in static),
        "dead link (static)": any("no-such-page" in s for s in static),
        "dead anchor (static)": any("no-such-anchor" in s for s in static),
    }
    content = content_check(broken_site)
    for what, seen in check_content.planted_found(planted, content).items():
        found[f"{what} (content)"] = seen
    for what, seen in found.items():
        print(f"self-test: {what}: {'detected' if seen else 'MISSED'}")
    return all(found.values())


class _Server:
    """``python -m http.server`` on 127.0.0.1 serving a folder, as a context manager."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = _free_port()

    def __enter__(self) -> str:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(self.port), "--bind", "127.0.0.1",
             "--directory", str(self.folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{self.port}/"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(base, timeout=1).close()
                return base
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)
        raise SystemExit("check_site: the local server did not start")

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", type=Path, required=True, help="the built site folder")
    ap.add_argument("--base", help="URL serving the site (default: serve it here)")
    ap.add_argument("--out", type=Path, required=True, help="folder for the screenshots")
    ap.add_argument("--page", action="append", default=[],
                    help="NAME=PATH of a page to check (default: home, API, tutorial, gallery)")
    ap.add_argument("--self-test", action="store_true",
                    help="break a copy of the site on purpose; pass only if the check fails")
    ap.add_argument("--no-browser", action="store_true",
                    help="only the static and content checks (no Chromium needed)")
    args = ap.parse_args(argv)
    pages = dict(p.split("=", 1) for p in args.page) if args.page else DEFAULT_PAGES
    if args.self_test:
        with tempfile.TemporaryDirectory(prefix="check-site-") as tmp:
            ok = self_test(args.site, Path(tmp), args.out,
                           None if args.no_browser else _Server)
        print("self-test:", "PASS (the broken copy fails the check)" if ok else "FAIL")
        return 0 if ok else 1
    if args.no_browser:
        ok = run(args.site, None, args.out, pages)
    elif args.base:
        ok = run(args.site, args.base, args.out, pages)
    else:
        with _Server(args.site) as base:
            ok = run(args.site, base, args.out, pages)
    print("site check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
