#!/usr/bin/env bash
# Wheels of the Python packages the GPU recipes need that the device image lacks (datasets, bm25s and what
# they need) or holds at another version (sentence-transformers), at the versions spanqa is tested with here
# (read from .venv). Fetched here, where pip reaches PyPI, into gpu/wheels/; the device gets them as part of
# gpu/ (carry: gpu), and the recipes install them there (scripts/gpu/env.sh).
#   bash scripts/gpu/wheels.sh                 # for the device's Python 3.12, into gpu/wheels
#   PYVER=3.11 bash scripts/gpu/wheels.sh      # for another Python, into /tmp/wheels-3.11 (to try a recipe
#                                              # here with WHEELS=/tmp/wheels-3.11), never into gpu/
set -euo pipefail
cd "$(dirname "$0")/../.."
PYVER=${PYVER:-3.12}
DEST=gpu/wheels
[ "$PYVER" = 3.12 ] || DEST=/tmp/wheels-$PYVER
NAMES="sentence-transformers datasets dill multiprocess bm25s"
pins=$(.venv/bin/python -m pip freeze --disable-pip-version-check 2>/dev/null | grep -i -E "^($(echo $NAMES | tr ' ' '|'))==")
[ "$(echo "$pins" | wc -l)" -eq "$(echo $NAMES | wc -w)" ] || { echo "wheels.sh: .venv lacks one of: $NAMES" >&2; exit 1; }
rm -rf "$DEST" && mkdir -p "$DEST"
# shellcheck disable=SC2086
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version "$PYVER" --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$DEST" $pins 2>&1 | grep -v "is ignored" || true
[ "$(ls "$DEST"/*.whl | wc -l)" -eq "$(echo $NAMES | wc -w)" ] || { echo "wheels.sh: a wheel is missing" >&2; exit 1; }
ls "$DEST"
