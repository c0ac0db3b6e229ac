#!/usr/bin/env bash
# On a CUDA machine, from the repository root: the Triton device's benchmarks, conformance, the whole suite, a sweep.
# Logs go to $OUT. Each part is bounded by `timeout` so that one stuck part leaves time for the others.
#   OUT=DIR bash tools/gpu/run_triton.sh [bench] [shapes] [conform] [suite] [sweep] [sampler] [filters] [field-v2] [seeds] [calibrate]
# seeds and calibrate are CPU campaigns (one torch thread a process) for a machine with many cores:
#   WORKERS (default 12), SEEDS (seed table, default 0-19), CALIBRATE_SEEDS / CALIBRATE_FIRST (default 100 / 1000000).
# filters writes the record behind docs/triton-device.md's filter profile (RESULTS, default docs/results).
# field-v2 is tools/gpu/field.sh vllm-v2: it needs vLLM's pinned members in SPECSIM_VLLM_CACHE (see there).
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
bench="python3 -m specsim.cli bench"
for part in ${@:-bench shapes conform suite sweep}; do
  case "$part" in
    bench) timeout 150 $bench --breakdown 2>&1 | tee "$OUT/bench.log" ;;  # the anchor: 256 x 4 x 128256, float32
    shapes)
      { timeout 120 $bench --batch 512 --k 8 --vocab 32000
        timeout 150 $bench --batch 64 256 --k 8 --vocab 151936
        timeout 100 $bench --dtype bfloat16 --devices triton vllm
        timeout 60 $bench --dtype float64 --modes draft --devices triton; } 2>&1 | tee "$OUT/shapes.log" ;;
    conform) timeout 300 python3 tools/gpu/triton_conformance.py --out /tmp 2>&1 | tee "$OUT/conformance.log" ;;
    suite)  # the whole conformance suite on the compiled kernels, and the shipped L1 suites
      { timeout 300 python3 -m specsim.cli conform --device triton --out /tmp/conform-triton
        timeout 120 python3 -m pytest -q -p no:cacheprovider property_tests/test_device_exact.py \
          property_tests/test_bad_input.py --specsim-device=triton; } 2>&1 | tee "$OUT/suite.log" ;;
    sampler)  # SPEC §12: every parameter on, fused and unfused, then the compiled device vs torch-cuda
      { timeout 200 $bench --devices triton vllm --modes draft point --sampler all --reps 30 --breakdown
        timeout 200 python3 tools/gpu/sampler_check.py --seeds 1 --filters all; } 2>&1 | tee "$OUT/sampler.log" ;;
    field-v2) OUT="$OUT/field-v2" bash tools/gpu/field.sh vllm-v2 2>&1 | tee "$OUT/field-v2.log" ;;
    filters)  # where the top-k/top-p step's time goes, per variant (docs/triton-device.md)
      timeout 200 python3 tools/gpu/filter_profile.py --record "${RESULTS:-docs/results}/triton-filters.json" 2>&1 \
        | tee "$OUT/filters.log" ;;
    seeds)  # the seed x mutant table of the tree and sampler mutants, injected and black box (docs/statistics.md)
      timeout 560 python3 -m specsim.cli mutants --seeds "${SEEDS:-0-19}" --kinds tree,sampler --black-box \
        --executor processes --workers "${WORKERS:-12}" --out "$OUT/seedtable" 2>&1 | tail -n 60 > "$OUT/seeds.log" ;;
    calibrate)  # the tree and sampler groups of a correct device over many suite seeds, declared and black box
      timeout 560 python3 -m specsim.cli calibrate --groups L1-trees,L2-trees,L3-trees,L1-sampler \
        --seeds "${CALIBRATE_SEEDS:-100}" --first-seed "${CALIBRATE_FIRST:-1000000}" --executor processes \
        --workers "${WORKERS:-12}" --out "$OUT/calibrate" 2>&1 | tail -n 80 > "$OUT/calibrate.log" ;;
    sweep) { timeout 150 python3 tools/gpu/triton_sweep.py
             timeout 100 python3 tools/gpu/triton_sweep.py --mode point; } 2>&1 | tee "$OUT/sweep.log" ;;
  esac
done
