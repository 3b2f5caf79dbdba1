#!/usr/bin/env bash
# Create ./.venv and install spanqa into it. torch goes first, pinned: an unpinned torch pulls a multi-GB
# CUDA build, while torch==2.13.0 resolves to the CPU wheel.
#   bash scripts/install.sh          # runtime dependencies
#   bash scripts/install.sh --dev    # plus the test and lint tools
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip 2>&1 | grep -v "is ignored" || true
.venv/bin/python -m pip install --quiet --disable-pip-version-check "torch==2.13.0" 2>&1 | grep -v "is ignored" || true
extra=""
[ "${1:-}" = "--dev" ] && extra="[dev]"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".${extra}" 2>&1 | grep -v "is ignored" || true
.venv/bin/python -c "import torch, spanqa; print('spanqa', spanqa.__version__, 'with torch', torch.__version__)"
