#!/usr/bin/env bash
# On the device machine, from the repo root: conformance, launch-shape sweep, benchmark tables.
# Logs go to $OUT (the device tool brings them back). Each part is bounded by `timeout`
# so that one stuck part leaves time for the others.
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
bench="python3 -m specsim.cli bench --device triton --breakdown"
for part in ${@:-conform sweep bench shapes}; do
  case "$part" in
    conform) timeout 300 python3 tools/gpu/triton_conformance.py --out "$OUT" 2>&1 | tee "$OUT/conformance.log" ;;
    sweep) timeout 200 python3 tools/gpu/triton_sweep.py 2>&1 | tee "$OUT/sweep.log" ;;
    bench) timeout 120 $bench 2>&1 | tee "$OUT/bench.log" ;;   # the anchor: batch 256, K 4, V 128256, float32
    shapes)
      { timeout 100 $bench --batch 512 --k 8 --vocab 32000
        timeout 100 $bench --batch 64 256 --k 8 --vocab 151936
        timeout 60 $bench --batch 256 --k 4 --vocab 128256 --dtype float64 --modes draft; } 2>&1 | tee "$OUT/shapes.log" ;;
  esac
done
