#!/usr/bin/env bash
# On the device machine, from the repo root: conformance, launch-shape sweep, benchmark table.
# Logs go to $OUT (the device tool brings them back).
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
case "${1:-all}" in
  sweep) python3 tools/gpu/triton_sweep.py 2>&1 | tee "$OUT/sweep.log" ;;
  conform) python3 tools/gpu/triton_conformance.py --out "$OUT" 2>&1 | tee "$OUT/conformance.log" ;;
  bench) shift; python3 -m specsim.cli bench --device triton --breakdown "$@" 2>&1 | tee "$OUT/bench.log" ;;
  all)  # each part bounded so that one stuck part leaves time for the others
    timeout 300 python3 tools/gpu/triton_conformance.py --out "$OUT" 2>&1 | tee "$OUT/conformance.log"
    timeout 150 python3 tools/gpu/triton_sweep.py 2>&1 | tee "$OUT/sweep.log"
    timeout 120 python3 -m specsim.cli bench --device triton --breakdown 2>&1 | tee "$OUT/bench.log" ;;
esac
