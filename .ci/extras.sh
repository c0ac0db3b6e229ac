#!/usr/bin/env bash
# What the default suite needs beyond the package's extras: triton (its kernels
# run on CPU under TRITON_INTERPRET=1) and Debian's chromium (the report's browser test).
set -euo pipefail
python -m pip install -q "triton==3.6.0"
bash "$(dirname "$0")/install-chromium.sh"
# HF transformers for its field adapter: the release its waivers were judged on (devices/field/hf_transformers.py,
# JUDGED_RELEASE; the [transformers] extra admits >=5.18). tests/field/test_transformers_releases.py installs the
# newest other release beside it.
python -m pip install -q "transformers==5.23.0"
# Ray for the campaign layer's executor (specsim/campaign/executors.py checks this release; tests/campaign/test_ray.py).
python -m pip install -q "ray==2.60.0"
# llguidance for the engine's structured output (specsim/engine/grammar.py checks this release; tests/engine/test_grammar.py).
python -m pip install -q "llguidance==1.9.1"
