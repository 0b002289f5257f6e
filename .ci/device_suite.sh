#!/usr/bin/env bash
# The whole suite in parallel on a many-core machine that may have no
# network: a fresh Python 3.12 venv, fastkern and its test dependencies
# installed from the wheels .ci/make_wheelhouse.sh downloaded (carried along
# in .ci/wheelhouse), `pytest -n JOBS` within a time budget, then the counts
# and the time.
#
#   .ci/device_suite.sh
#
# Environment: PYTHON (default python3.12), WHEELHOUSE (default
# .ci/wheelhouse), JOBS (default 16), BUDGET_S (default 300: the suite's
# budget in seconds; over it, the run is stopped and the script fails),
# PYTEST_ARGS (default none: the whole suite; e.g. a test file to try the
# script on a small machine).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
python="${PYTHON:-python3.12}"
wheelhouse="$(cd "${WHEELHOUSE:-.ci/wheelhouse}" && pwd)"
jobs="${JOBS:-16}"
budget="${BUDGET_S:-300}"
work="$(mktemp -d)"

start=$SECONDS
"$python" -m venv "$work/venv"
# shellcheck disable=SC1091
. "$work/venv/bin/activate"
# --no-index: the index is never asked; pip's isolated build environment
# (setuptools, Cython, scipy) comes from the wheelhouse too.
export PIP_NO_INDEX=1 PIP_FIND_LINKS="$wheelhouse" PIP_DISABLE_PIP_VERSION_CHECK=1
pip install --quiet --upgrade pip
pip install --quiet ".[test]"
install_s=$((SECONDS - start))
(cd "$work" && python -c "import sys, numpy, scipy, sklearn, fastkern; print('device suite:', fastkern.__file__, '| Python', sys.version.split()[0], '| numpy', numpy.__version__, '| scipy', scipy.__version__, '| scikit-learn', sklearn.__version__); fastkern.show_config()")

start=$SECONDS
status=0
# SIGINT first, so pytest prints what it has; SIGKILL 30 s later if it hangs.
timeout --signal=INT --kill-after=30 "$budget" \
    pytest -n "$jobs" -p no:cacheprovider -q --junitxml="$work/junit.xml" ${PYTEST_ARGS:-} \
    > "$work/pytest.log" 2>&1 || status=$?
suite_s=$((SECONDS - start))
tail -40 "$work/pytest.log"

python - "$work/junit.xml" <<'EOF' || true
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
echo "device suite: install ${install_s} s, pytest -n ${jobs} ${suite_s} s (budget ${budget} s), exit status ${status}"
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    echo "device suite: over the ${budget} s budget"
fi
exit "$status"
