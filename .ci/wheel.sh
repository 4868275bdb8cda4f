#!/usr/bin/env bash
# CI: build the wheel and the sdist, check them with twine, install the wheel into a fresh
# virtual environment and run `mesadyn --version` and a smoke test there, from outside the
# checkout, so that a module or data file missing from the wheel fails CI.  The venv sees the
# system's packages (--system-site-packages), so the pinned CPU torch is reused, never a CUDA
# build downloaded; pip still installs any declared dependency that is missing.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)

python -m pip install --quiet "build>=1.2" "twine>=5"   # the packaging tools, if missing
echo "== build (python -m build) =="
python -m build --outdir "$work/dist" "$repo" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
ls -l "$work/dist"
python -m twine check --strict "$work"/dist/*

echo "== wheel contents: every module of mesadyn/ is in it =="
python - "$repo" "$work"/dist/*.whl <<'PY'
import sys, zipfile
from pathlib import Path
repo, wheel = Path(sys.argv[1]), sys.argv[2]
names = set(zipfile.ZipFile(wheel).namelist())
want = {p.relative_to(repo).as_posix() for p in (repo / "mesadyn").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
missing = sorted(want - names)
assert not missing, f"files of mesadyn/ missing from the wheel: {missing}"
print(f"{len(want)} package files, all in {Path(wheel).name}")
PY

echo "== install into a fresh venv =="
python -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install --quiet "$work"/dist/*.whl
cd "$work"   # not the checkout: the installed wheel, not the source tree, must be imported

echo "== mesadyn --version and a smoke test =="
"$work/venv/bin/mesadyn" --version
"$work/venv/bin/python" - "$work/venv" <<'PY'
import json, subprocess, sys
from pathlib import Path
import numpy as np
import mesadyn as md
from mesadyn.field import FieldSpec, make_field
from mesadyn import flow
venv = Path(sys.argv[1]).resolve()
where = Path(md.__file__).resolve()
assert venv in where.parents, f"mesadyn imported from {where}, not from the wheel in {venv}"
out = subprocess.run([str(venv / "bin" / "mesadyn"), "--version"], capture_output=True,
                     text=True, check=True).stdout
assert md.__version__ in out, (out, md.__version__)
theory = json.loads(subprocess.run([str(venv / "bin" / "mesadyn"), "theory", "--json"],
                                   capture_output=True, text=True, check=True).stdout)
assert abs(theory["ab_star"] - 0.19190508852558866) < 1e-15, theory
# the full exact flow from the diagonal init follows the reduced closed form (Lemma 5.2)
fam = md.gaussian(2, sigma=1.0)
field = make_field(FieldSpec("exact", fam, 6))
system = md.ReducedSystem.from_family(fam, 6)
res = flow.integrate(field, md.diagonal_init(2, 0.5, 1.5), t_end=0.05, rtol=1e-10, atol=1e-12)
a, b = system.solution(0.5, 1.5, res.t)
ab = np.array([md.ab(__import__("torch").as_tensor(th)).numpy() for th in res.theta])
assert np.max(np.abs(ab - (a * b)[:, None])) < 1e-7
print(f"smoke test passed: mesadyn {md.__version__} from {where.parent}")
PY
echo "wheel: built, checked, installed and smoke-tested in $(( $(date +%s) - start )) s"
