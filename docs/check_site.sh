#!/usr/bin/env bash
# Build the documentation site, serve it on 127.0.0.1 and check it in headless Chromium:
# the home page, the API reference (its root and a workflow's page), a tutorial and the
# gallery must load with no console error, no broken image, no broken internal link and every
# formula rendered; screenshots of those pages go to SCREENSHOT_DIR.  Every page of the site
# is also checked without the browser (docs/check_content.py): links and images resolve, no
# example of the API reference renders as block quotes, no page cites the tracker (an issue
# number) or narrates how the package was made (that history belongs in the changelog), and
# every public module of the package has its reference page.  With --self-test it then breaks
# a copy of the site on purpose (one defect of each kind) and passes only if the check catches
# every one.  See docs/check_site.py.
#
#   docs/check_site.sh SCREENSHOT_DIR [--self-test]
#
# Needs Debian's Chromium (apt-get update && apt-get install -y chromium) and the docs extra
# (pip install -e ".[docs]").  MESADYN_DOCS_EXECUTE=cache (default) reuses executed tutorials.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: docs/check_site.sh SCREENSHOT_DIR [--self-test]}
self_test=${2:-}
if ! command -v chromium >/dev/null 2>&1 && [ -z "${CHROMIUM:-}" ]; then
    echo "check_site: no chromium; install it with: apt-get update && apt-get install -y chromium" >&2
    exit 2
fi
mkdir -p "$out"
work=$(mktemp -d)
server=""
cleanup() {
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

echo "== build (mkdocs build --strict) =="
NO_MKDOCS_2_WARNING=1 mkdocs build --strict --site-dir "$work/site"

port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python -m http.server "$port" --bind 127.0.0.1 --directory "$work/site" >/dev/null 2>&1 &
server=$!
base="http://127.0.0.1:$port/"
for _ in $(seq 100); do
    if python -c "import urllib.request; urllib.request.urlopen('$base', timeout=1)" 2>/dev/null; then
        break
    fi
    sleep 0.1
done

echo "== browser check ($base) =="
python docs/check_site.py --site "$work/site" --base "$base" --out "$out"
if [ "$self_test" = "--self-test" ]; then
    echo "== self-test: a deliberately broken copy must fail =="
    python docs/check_site.py --site "$work/site" --out "$out" --self-test
fi
