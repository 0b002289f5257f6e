#!/usr/bin/env bash
# The whole suite in parallel on a device machine (16 cores, Python 3.12,
# numpy 2.5, no network), in one call: the image's Python and packages
# (numpy, scipy, scikit-learn, Cython, pytest-xdist, ...; see
# .ci/device_image_packages.txt), the few packages it lacks installed from the
# wheels .ci/make_wheelhouse.sh downloaded (carried along in .ci/wheelhouse)
# into a folder put on PYTHONPATH, fastkern compiled in place, then
# `pytest -n JOBS` within a time budget, the counts, the time and the versions.
#
# How a session runs it, with the device tool, from the checkout that tool
# sends (the session's own; a helper's worktree does not travel):
#   1. here, with network (prints the size carried; for numpy 2.5.2 on
#      Python 3.12: 25 wheels and the headers, 18.4 MiB, beside a 2.6 MiB
#      tracked tree):
#        . /root/venv/bin/activate
#        HEADERS_PYTHON=~/.pyenv/versions/3.12.1/bin/python .ci/make_wheelhouse.sh
#   2. run(command="bash .ci/device_suite.sh", carry=[".ci/wheelhouse"],
#          timeout_s=420)
# .ci/wheelhouse is git-ignored, and the tool takes an ignored path along
# only when `carry` names it.  timeout_s: the 300 s budget, the install and
# the build (63 s on the 2 shared cores here), and 30 s for a stopped pytest
# to report.  With OUT set (the device tool sets it) the output is also
# written to $OUT/device_suite.log, next to pytest.log, build.log, junit.xml.
# To try it here: a wheelhouse for this Python (PYTHON_VERSION=3.11
# WHEELHOUSE=/tmp/wh311 .ci/make_wheelhouse.sh numpy==2.4.6), then
# PYTHON=/root/venv/bin/python WHEELHOUSE=/tmp/wh311 JOBS=2
# PYTEST_ARGS=tests/test_packaging.py .ci/device_suite.sh, under `unshare -n`
# (with `ip link set lo up`) to prove nothing is fetched.
#
# Environment: PYTHON (default /opt/torch/.venv/bin/python3, the image's,
# else python3), WHEELHOUSE (default .ci/wheelhouse), JOBS (default 16),
# BUDGET_S (default 300: the suite's budget in seconds; over it, the run is
# stopped and the script fails), PYTEST_ARGS (default none: the whole suite;
# e.g. a test file, to try the script on a small machine), BENCH_THREADS
# (unset: no benchmark; set, even empty: benchmarks/bench_threads.py with
# these arguments after the suite, e.g. "--large-n", its JSON to
# $OUT/threads.json), BENCH_BUDGET_S (default 300).
#
# Measured on the 16-core device: the checks and build 29-36 s, the whole
# suite with the slow tier 150-168 s on 16 workers, bench_threads.py 39 s of
# measuring and --large-n 168 s more; the machine's start about 40 s.  So
# one call of about 7 minutes does all three:
#   run(command="BUDGET_S=200 BENCH_THREADS=--large-n bash .ci/device_suite.sh",
#       carry=[".ci/wheelhouse"], timeout_s=540)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${OUT:-}" ] && [ -z "${DEVICE_SUITE_LOGGED:-}" ]; then
    mkdir -p "$OUT"
    DEVICE_SUITE_LOGGED=1 bash "$0" "$@" 2>&1 | tee "$OUT/device_suite.log"
    exit "${PIPESTATUS[0]}"
fi
root="$PWD"
if [ -z "${PYTHON:-}" ] && [ -x /opt/torch/.venv/bin/python3 ]; then
    PYTHON=/opt/torch/.venv/bin/python3
fi
python="${PYTHON:-python3}"
wheelhouse="$(realpath -m "${WHEELHOUSE:-.ci/wheelhouse}")"
if [ ! -d "$wheelhouse" ]; then
    echo "device suite: no $wheelhouse (did the call carry .ci/wheelhouse?): the image's packages alone"
fi
jobs="${JOBS:-16}"
budget="${BUDGET_S:-300}"
work="$(mktemp -d)"
site="$work/site"
save_logs() {
    if [ -n "${OUT:-}" ]; then
        cp -f "$work"/*.log "$work"/junit.xml "$OUT"/ 2> /dev/null || true
    fi
}
trap save_logs EXIT

# Nothing may be fetched: the index is never asked.
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1

start=$SECONDS
shopt -s nullglob
wheels=("$wheelhouse"/*.whl)
# --no-deps: each dependency is either in the image or a wheel of its own
# here; pip would otherwise try to reinstall the image's packages.
if [ "${#wheels[@]}" -gt 0 ]; then
    "$python" -m pip install --quiet --no-deps --target "$site" "${wheels[@]}"
fi
export PYTHONPATH="$root:$site${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$site/bin:$PATH"

# The closure of pyproject.toml's requirements (build, runtime, `test` and
# `plot`) as this Python now sees it.  One of those requirements missing
# stops the run here, before the build; a missing dependency of theirs, or a
# version outside a specifier, is reported (the image's own metadata may be
# stricter than what its packages need).
"$python" - <<'EOF'
import re
import sys
import tomllib
from importlib import metadata

from packaging.requirements import Requirement

with open("pyproject.toml", "rb") as f:
    meta = tomllib.load(f)
top = (meta["build-system"]["requires"] + meta["project"]["dependencies"]
       + [r for extra in ("test", "plot") for r in meta["project"]["optional-dependencies"][extra]])
missing, conflicts, seen = [], [], set()
todo = [(Requirement(r), "pyproject.toml") for r in top]
while todo:
    req, wanted_by = todo.pop()
    name = re.sub(r"[-_.]+", "-", req.name).lower()
    try:
        dist = metadata.distribution(req.name)
    except metadata.PackageNotFoundError:
        missing.append(f"{req} (for {wanted_by})")
        continue
    if not req.specifier.contains(dist.version, prereleases=True):
        conflicts.append(f"{name} {dist.version} does not satisfy {req} (for {wanted_by})")
    for extra in [""] + sorted(req.extras):
        if (name, extra) in seen:
            continue
        seen.add((name, extra))
        for spec in dist.requires or []:
            sub = Requirement(spec)
            if sub.marker is None or sub.marker.evaluate({"extra": extra}):
                todo.append((sub, f"{name}[{extra}]" if extra else name))
for line in conflicts:
    print("device suite: warning:", line)
for line in missing:
    print("device suite: missing:", line)
if any(line.endswith("(for pyproject.toml)") for line in missing):
    sys.exit("device suite: requirements missing; were the wheels of .ci/make_wheelhouse.sh carried?")
EOF

# A C compiler and Python.h.  An image whose Python lacks its headers gets
# those .ci/make_wheelhouse.sh packed from a Python of the same minor version.
cc="$("$python" -c "import sysconfig; print(sysconfig.get_config_var('CC') or 'cc')" | cut -d' ' -f1)"
if ! command -v "$cc" > /dev/null; then
    # setuptools takes CC from the environment, and the linker command with it.
    for other in gcc cc clang; do
        if command -v "$other" > /dev/null; then
            export CC="$other"
            echo "device suite: $cc, the compiler Python was built with, is not here: $other instead"
            break
        fi
    done
    if [ -z "${CC:-}" ]; then
        echo "device suite: no C compiler on this machine" >&2
        exit 2
    fi
fi
include="$("$python" -c "import sysconfig; print(sysconfig.get_paths()['include'])")"
py_minor="$("$python" -c "import sys; print('%d.%d' % sys.version_info[:2])")"
if [ ! -f "$include/Python.h" ]; then
    headers="$wheelhouse/python$py_minor-include.tar.gz"
    if [ ! -f "$headers" ]; then
        echo "device suite: $include/Python.h is missing, and no $headers was carried" >&2
        exit 2
    fi
    mkdir -p "$work/include"
    tar -xzf "$headers" -C "$work/include"
    export CPATH="$work/include/python$py_minor${CPATH:+:$CPATH}"
    echo "device suite: Python.h from the carried $(basename "$headers")"
fi

if ! "$python" setup.py build_ext --inplace -j "$jobs" > "$work/build.log" 2>&1; then
    tail -40 "$work/build.log"
    echo "device suite: the build failed (build.log)" >&2
    exit 2
fi
install_s=$((SECONDS - start))
(cd "$work" && "$python" - "$site" <<'EOF'
import sys
from importlib import metadata, util

import Cython, numpy, scipy, sklearn, fastkern
site = sys.argv[1]
print("device suite: Python", sys.version.split()[0], "| numpy", numpy.__version__,
      "| scipy", scipy.__version__, "| scikit-learn", sklearn.__version__,
      "| Cython", Cython.__version__)
print("device suite: fastkern from", fastkern.__file__)
for name in ("dask", "distributed", "numpydoc"):
    where = "carried" if util.find_spec(name).origin.startswith(site) else "the image's"
    print(f"device suite: {name} {metadata.version(name)}, {where}")
fastkern.show_config()
EOF
)

start=$SECONDS
status=0
# SIGINT first, so pytest prints what it has; SIGKILL 30 s later if it hangs.
# shellcheck disable=SC2086
timeout --signal=INT --kill-after=30 "$budget" \
    "$python" -m pytest -n "$jobs" -p no:cacheprovider -q --run-slow --junitxml="$work/junit.xml" ${PYTEST_ARGS:-} \
    > "$work/pytest.log" 2>&1 || status=$?
suite_s=$((SECONDS - start))
tail -40 "$work/pytest.log"

"$python" - "$work/junit.xml" <<'EOF' || true
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError) as exc:
    print("device suite: no JUnit report:", exc)
    raise SystemExit
suites = [root] if root.tag == "testsuite" else list(root)
total = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
total["passed"] = total["tests"] - total["failures"] - total["errors"] - total["skipped"]
print("device suite counts:", ", ".join(f"{k} {v}" for k, v in total.items()))
EOF
echo "device suite: carried wheels, checks and build ${install_s} s, pytest -n ${jobs} ${suite_s} s (budget ${budget} s), exit status ${status}"
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    echo "device suite: over the ${budget} s budget"
fi

# The thread-scaling benchmark on the same build, after the suite (so that
# the tests do not load the cores it measures), within its own budget.
if [ -n "${BENCH_THREADS+set}" ]; then
    bench_json="${OUT:-$work}/threads.json"
    bench_status=0
    # shellcheck disable=SC2086
    timeout --signal=INT --kill-after=30 "${BENCH_BUDGET_S:-300}" \
        "$python" benchmarks/bench_threads.py ${BENCH_THREADS} --json "$bench_json" \
        > "$work/threads.log" 2>&1 || bench_status=$?
    tail -25 "$work/threads.log"
    echo "device suite: bench_threads.py ${BENCH_THREADS} exit status ${bench_status}, saved ${bench_json}"
    if [ "$status" -eq 0 ]; then
        status=$bench_status
    fi
fi
exit "$status"
