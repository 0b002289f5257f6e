#!/usr/bin/env bash
# Download, on a machine with network, the wheels .ci/device_suite.sh installs
# on one without: every build requirement, runtime dependency and test
# dependency (the `test` and `plot` extras) of pyproject.toml, for CPython on
# manylinux x86_64, binaries only.
#
#   .ci/make_wheelhouse.sh [NUMPY_SPEC]
#
# NUMPY_SPEC pins numpy (e.g. "numpy==2.5.2"; default: the newest the index
# has).  PYTHON_VERSION (default 3.12) and WHEELHOUSE (default .ci/wheelhouse,
# git-ignored) can be set in the environment.  For Python 3.12 with numpy
# 2.5.5, scipy 1.18.1 and scikit-learn 1.9.1 it held 68 wheels, 124 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
numpy_spec="${1:-numpy}"
python_version="${PYTHON_VERSION:-3.12}"
abi="cp${python_version/./}"
wheelhouse="${WHEELHOUSE:-.ci/wheelhouse}"
mkdir -p "$wheelhouse"

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
platforms=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)
for glibc in 5 12 $(seq 17 28); do
    platforms+=(--platform "manylinux_2_${glibc}_x86_64")
done
pip download --only-binary=:all: --dest "$wheelhouse" \
    --python-version "$python_version" --implementation cp --abi "$abi" "${platforms[@]}" \
    "$numpy_spec" "${requirements[@]}" pip

echo "wheelhouse: $wheelhouse, $(ls "$wheelhouse" | wc -l) files, $(du -sh "$wheelhouse" | cut -f1)"
ls "$wheelhouse" | grep -E '^(numpy|scipy|Cython|cython|scikit_learn|setuptools)-' || true
