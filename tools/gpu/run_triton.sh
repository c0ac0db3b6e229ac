#!/usr/bin/env bash
# On the device machine, from the repo root: conformance, launch-shape sweep, benchmark tables.
# Logs (and the tables as JSON) go to $OUT (the device tool brings them back). Each part is bounded
# by `timeout` so that one stuck part leaves time for the others.
#   bash tools/gpu/run_triton.sh [conform] [sweep] [bench] [shapes] [bf16]
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
bench="python3 -m specsim.cli bench"
for part in ${@:-conform sweep bench shapes bf16}; do
  case "$part" in
    conform) timeout 300 python3 tools/gpu/triton_conformance.py --out "$OUT" 2>&1 | tee "$OUT/conformance.log" ;;
    sweep) timeout 150 python3 tools/gpu/triton_sweep.py 2>&1 | tee "$OUT/sweep.log"
           timeout 100 python3 tools/gpu/triton_sweep.py --mode point 2>&1 | tee -a "$OUT/sweep.log" ;;
    bench) timeout 150 $bench --breakdown --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log" ;;  # the anchor
    shapes)
      { timeout 120 $bench --batch 512 --k 8 --vocab 32000 --json "$OUT/shapes1.json"
        timeout 150 $bench --batch 64 256 --k 8 --vocab 151936 --json "$OUT/shapes2.json"
        timeout 60 $bench --batch 256 --k 4 --vocab 128256 --dtype float64 --modes draft --devices triton; } 2>&1 \
        | tee "$OUT/shapes.log" ;;
    bf16) timeout 100 $bench --dtype bfloat16 --devices triton vllm --json "$OUT/bf16.json" 2>&1 | tee "$OUT/bf16.log" ;;
  esac
done
