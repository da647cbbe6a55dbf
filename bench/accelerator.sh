#!/usr/bin/env bash
# The accelerator check in one call: install gojax from this working tree without fetching
# anything (or fall back to PYTHONPATH), then run bench/accelerator.py with the given flags.
set -uo pipefail
cd "$(dirname "$0")/.."
# Accelerator images often have only python3 (the one that holds JAX).
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"
if ! "$PYTHON" -c "import gojax" 2>/dev/null; then
  "$PYTHON" -m pip install -q --no-deps --no-build-isolation --no-index -e . 2>/dev/null \
    || export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
# train/ and eval/ are importable from the root either way.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" bench/accelerator.py "$@"
