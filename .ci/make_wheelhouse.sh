#!/usr/bin/env bash
# Download, on a machine with network, the wheels .ci/device_suite.sh installs
# on a device machine, which has none: the packages that fastkern's build
# requirements, runtime dependencies and `test` and `plot` extras
# (pyproject.toml) need, with all their dependencies, for CPython on
# manylinux x86_64, LESS every package the device image already holds
# (.ci/device_image_packages.txt).  The device tool carries at most 64 MiB a
# call, working tree included: the whole closure (124 MB with numpy, scipy,
# scikit-learn, pandas, matplotlib) does not fit, what the image lacks does.
#
#   .ci/make_wheelhouse.sh [IMAGE_PIN ...]
#
# IMAGE_PIN: requirements stating versions the image has, so that the
# dependency resolution agrees with it (default "numpy==2.5.2", the image's
# numpy); they are resolved, never downloaded, when the image holds them.
# Environment: PYTHON_VERSION (default 3.12, the image's), WHEELHOUSE (default
# .ci/wheelhouse, git-ignored), IMAGE_PACKAGES (default
# .ci/device_image_packages.txt), HEADERS_PYTHON (default python3.12: a
# Python of that minor version whose C headers are packed along, for an
# image whose Python has none; here ~/.pyenv/versions/3.12.1/bin/python).
# Needs a recent pip (26.3 was used: `pip install --dry-run --report`
# resolving for another Python version; here, `. /root/venv/bin/activate`
# first).
#
# Run it in the checkout the device tool sends (the session's own, not a
# helper's worktree): the tool carries an ignored path only when the call's
# `carry` names it.  The call is in .ci/device_suite.sh's header.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then
    set -- "numpy==2.5.2"
fi
python_version="${PYTHON_VERSION:-3.12}"
abi="cp${python_version/./}"
wheelhouse="${WHEELHOUSE:-.ci/wheelhouse}"
image_packages="${IMAGE_PACKAGES:-.ci/device_image_packages.txt}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The requirement strings of pyproject.toml, one per line.  tomllib needs
# Python 3.11; the regular expressions are the fallback.
mapfile -t requirements < <(python3 - <<'EOF'
import re
try:
    import tomllib
    with open("pyproject.toml", "rb") as f:
        meta = tomllib.load(f)
    reqs = (meta["build-system"]["requires"] + meta["project"]["dependencies"]
            + [r for extra in ("test", "plot")
               for r in meta["project"].get("optional-dependencies", {}).get(extra, [])])
except ImportError:
    text = open("pyproject.toml").read()
    reqs = re.findall(r'^\s*"([A-Za-z][^"]*)",', text, flags=re.M)
    reqs += re.findall(r'"([A-Za-z][^"]*)"', text.split("requires =", 1)[1].split("]", 1)[0])
for r in reqs:
    print(r)
EOF
)

# pip matches --platform literally (manylinux_2_28 does not admit a wheel
# tagged only manylinux2014), so every manylinux tag up to glibc 2.28 is
# listed; the wheels of pure-Python packages (py3-none-any) match any platform.
target=(--only-binary=:all: --python-version "$python_version" --implementation cp --abi "$abi"
        --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)
for glibc in 5 12 $(seq 17 28); do
    target+=(--platform "manylinux_2_${glibc}_x86_64")
done

# The closure, resolved from the index's metadata alone (no wheel is fetched
# for this); --target only lets pip resolve for another interpreter.
python3 -m pip install --quiet --dry-run --ignore-installed --target "$work/unused" \
    --report "$work/report.json" "${target[@]}" "$@" "${requirements[@]}"

# name==version of each resolved project the image lacks (names compared in
# their normalized form, PEP 503).
mapfile -t missing < <(python3 - "$work/report.json" "$image_packages" <<'EOF'
import json
import re
import sys

def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()

with open(sys.argv[2]) as f:
    image = {normalize(line.split("#", 1)[0].strip()) for line in f} - {""}
with open(sys.argv[1]) as f:
    report = json.load(f)
for item in report["install"]:
    meta = item["metadata"]
    if normalize(meta["name"]) not in image:
        print(f"{meta['name']}=={meta['version']}")
EOF
)

# Emptied first: two versions of one project stop `pip install --no-deps`.
mkdir -p "$wheelhouse"
rm -f "$wheelhouse"/*.whl "$wheelhouse"/python*-include.tar.gz
if [ "${#missing[@]}" -gt 0 ]; then
    python3 -m pip download --quiet --no-deps --dest "$wheelhouse" "${target[@]}" "${missing[@]}"
fi

# Headers of one patch release build extensions for any other of the same
# minor version.
headers_python="${HEADERS_PYTHON:-python$python_version}"
if include="$("$headers_python" -c 'import sys, sysconfig
assert "%d.%d" % sys.version_info[:2] == sys.argv[1]
print(sysconfig.get_paths()["include"])' "$python_version" 2> /dev/null)" && [ -f "$include/Python.h" ]; then
    tar -czf "$wheelhouse/python$python_version-include.tar.gz" -C "$(dirname "$include")" "$(basename "$include")"
else
    echo "make_wheelhouse: no Python $python_version with C headers here (HEADERS_PYTHON): none packed"
fi

limit=$((64 * 1024 * 1024))
wheels=$(du -cb "$wheelhouse" | tail -1 | cut -f1)
tree=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
echo "wheelhouse: $wheelhouse, ${#missing[@]} wheels the image lacks, for Python $python_version:"
ls "$wheelhouse"
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "carried: wheelhouse $(mib "$wheels") + tracked tree $(mib "$tree") = $(mib $((wheels + tree))) of the device tool's 64 MiB"
if [ $((wheels + tree)) -gt "$limit" ]; then
    echo "make_wheelhouse: over the device tool's 64 MiB" >&2
    exit 1
fi
