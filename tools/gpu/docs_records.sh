#!/usr/bin/env bash
# Every record the docs render (docs/results/*.json), on one host with a CUDA GPU and 16 CPU cores: the GPU
# benchmarks run on cores 0-3 while the CPU campaigns (one torch thread a worker) run on cores 4-15, so that
# the campaigns do not take the benchmarks' cores. From the repository root:
#
#   OUT=DIR bash tools/gpu/docs_records.sh gpu1|gpu2 [cpu1|cpu2]
#
# gpu1: bench (anchor, V=32000, bfloat16, every goal in one run), the filter profile; gpu2: bench at V=151936,
# the tree benchmark, then the whole conformance suite on the compiled Triton device. cpu1: the seed tables of
# the sampler and tree mutants and the group calibration; cpu2: the zoo's seed table, the L3 calibration, the
# sampler precision table and the sizes calibration. Each record is copied to $OUT/results when written;
# copy them into docs/results/ and run `python -m specsim.figures.numbers --write`.
set -o pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/records}; R=docs/results; mkdir -p "$OUT/results" "$R"
keep() { [ -f "$1" ] && cp "$1" "$OUT/results/"; }
S="taskset -c 4-15 python3 -m specsim.cli"
W="--executor processes --workers 12"
cpu1() {
  $S mutants --seeds 0-19 --kinds sampler --black-box $W --out /tmp/r/sampler --record $R/seeds-sampler.json; keep $R/seeds-sampler.json
  $S mutants --seeds 0-19 --kinds tree --black-box $W --out /tmp/r/tree --record $R/seeds-tree.json; keep $R/seeds-tree.json
  $S calibrate --groups L1-trees,L2-trees,L3-trees,L1-sampler,L1-edges --seeds 100 $W --out /tmp/r/cg \
    --record $R/calibrate-groups.json; keep $R/calibrate-groups.json
}
cpu2() {
  $S mutants --seeds 0-4 --kinds inside,wrapper --families device,proposer --black-box $W --out /tmp/r/zoo \
    --record $R/seeds-zoo.json; keep $R/seeds-zoo.json
  $S calibrate --seeds 100 $W --out /tmp/r/l3 --record $R/calibrate-l3.json; keep $R/calibrate-l3.json
  taskset -c 4-15 python3 tools/sampler_seed_table.py --seeds 0-19 --record $R/sampler-precision.json; keep $R/sampler-precision.json
  taskset -c 4-15 python3 tools/sizes_calibration.py torch,hpu,npu 30 --record $R/sizes-calibration.json; keep $R/sizes-calibration.json
}
gpu1() {
  taskset -c 0-3 bash tools/gpu/bench_records.sh anchor v32000 bfloat16 goals
  taskset -c 0-3 python3 tools/gpu/filter_profile.py --record $R/triton-filters.json
  for f in bench-h100 bench-h100-v32000 bench-h100-bfloat16 bench-h100-goals triton-filters; do keep $R/$f.json; done
}
gpu2() {
  taskset -c 0-3 bash tools/gpu/bench_records.sh v151936 trees
  for f in bench-h100-v151936 tree-bench-h100; do keep $R/$f.json; done
  taskset -c 0-3 python3 -m specsim.cli conform --device triton --out "$OUT/conform-triton" > "$OUT/conform-triton.log" 2>&1
  tail -n 5 "$OUT/conform-triton.log"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
for part in "$@"; do
  case "$part" in
    cpu1|cpu2) $part > "$OUT/$part.log" 2>&1 & ;;
    gpu1|gpu2) $part 2>&1 | tee "$OUT/$part.log" ;;
    *) echo "unknown part: $part" >&2; exit 2 ;;
  esac
done
wait
ls "$OUT/results"
