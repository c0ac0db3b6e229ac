#!/usr/bin/env bash
# The newest Triton release the [triton] extra admits, beside the pinned one the suite ran with
# (a new release can break the interpreter while the suite sees only the pin). It is laid over the
# venv's triton through PYTHONPATH in a temporary directory, and the Triton device's interpreter
# tests (kernels, every SPEC §4 edge, random batches vs the reference, PTD) run again with it.
set -euo pipefail
cd "$(dirname "$0")/.."
spec=$(python - <<'PY'
try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
with open("pyproject.toml", "rb") as f:
    extra = tomllib.load(f)["project"]["optional-dependencies"]["triton"]
print(next(r for r in extra if r.replace(" ", "").startswith("triton")))
PY
)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
PIP_CONSTRAINT= python -m pip install -q --no-deps --target "$dir" "$spec"   # the newest match, not the pin
PYTHONPATH="$dir" python -c "import triton; print('newest Triton admitted by \"$spec\":', triton.__version__)"
SPECSIM_REQUIRE_EXTRAS=1 PYTHONPATH="$dir" python -m pytest -q tests/devices/test_triton_device.py tests/platforms/test_ptd.py
