#!/usr/bin/env bash
# CI: build the documentation as a reader gets it, with every warning an error.
# Installs docs/requirements.txt into the active environment (which must have
# fastkern installed, or built in place and on PYTHONPATH), then runs Sphinx
# with -W --keep-going into a temporary directory: the gallery examples are
# executed and the benchmark plots drawn from docs/benchmarks/data.
# Usage: .ci/docs.sh [OUTDIR]   (OUTDIR: where the HTML goes; default a temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
out="${1:-$(mktemp -d)/html}"

python -m pip install --quiet -r docs/requirements.txt

# From outside the checkout: `python -m` puts the working directory first on
# sys.path, and a source tree without compiled extensions would shadow the
# installed package (docs/conf.py falls back to it too).
cd "$(mktemp -d)"
start=$SECONDS
MPLBACKEND=Agg python -m sphinx -W --keep-going -b html -j 1 "$root/docs" "$out"
echo "docs: built in $((SECONDS - start)) s into $out"
