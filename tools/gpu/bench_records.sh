#!/usr/bin/env bash
# The records BENCHMARKS.md renders, from the repository root on one CUDA GPU: each benchmark with
# --record docs/results/NAME.json; then `python -m specsim.figures.numbers --write` renders them.
#   bash tools/gpu/bench_records.sh [anchor] [v32000] [v151936] [bfloat16] [goals] [trees]   (H100 records)
#   bash tools/gpu/bench_records.sh h200-tune h200-latency h200-goals h200-breakdown h200-loaded h200-bfloat16   (on an H200)
# vLLM's rows (V1 sampler and Model Runner V2) need its pinned modules: `python -m devices.field.vllm_loader fetch
# --cache DIR`, then SPECSIM_VLLM_CACHE=DIR here; FlashInfer's rows need flashinfer-python==0.7.2.post1 installed
# (without them those rows are left out and each table's note says why). `goals` times every goal in one run (specsim bench --goals): the whole goals table.
# The breakdown records get the values BENCHMARKS.md derives from them (tools/breakdown_values.py).
# With $OUT set, the records written are also copied to $OUT/results.
set -o pipefail
export PYTHONUNBUFFERED=1
bench="python3 -m specsim.cli bench"
written=()
for part in ${@:-anchor v32000 v151936 bfloat16 goals trees}; do
  case "$part" in
    anchor) timeout 270 $bench --breakdown --record docs/results/bench-h100.json
            written+=(docs/results/bench-h100.json) ;;
    v32000) timeout 200 $bench --batch 512 --k 8 --vocab 32000 --record docs/results/bench-h100-v32000.json
            written+=(docs/results/bench-h100-v32000.json) ;;
    v151936) timeout 300 $bench --batch 64 256 --k 8 --vocab 151936 --record docs/results/bench-h100-v151936.json
             written+=(docs/results/bench-h100-v151936.json) ;;
    bfloat16) timeout 200 $bench --dtype bfloat16 --devices triton vllm --breakdown --record docs/results/bench-h100-bfloat16.json
              written+=(docs/results/bench-h100-bfloat16.json) ;;
    goals) timeout 540 $bench --goals --devices triton vllm vllm-v2 flashinfer --reps 100 --breakdown \
               --record docs/results/bench-h100-goals.json
           written+=(docs/results/bench-h100-goals.json) ;;
    trees) timeout 300 python3 -m specsim.bench.trees --device triton --kernel --batch 64 --vocab 128256 --depth 6 \
             --branch 4 --width 3 --record docs/results/tree-bench-h100.json
           written+=(docs/results/tree-bench-h100.json) ;;
    h200-tune) timeout 480 $bench --tune --reps 30 --tune-out devices/triton_tuning.json --record docs/results/tune-h200.json
               written+=(docs/results/tune-h200.json devices/triton_tuning.json) ;;
    h200-latency) timeout 260 $bench --latency --devices triton vllm vllm-v2 --record docs/results/bench-h200-latency.json
                  written+=(docs/results/bench-h200-latency.json) ;;
    h200-goals) timeout 420 $bench --goals --breakdown --devices triton vllm vllm-v2 --record docs/results/bench-h200-goals.json
                written+=(docs/results/bench-h200-goals.json) ;;
    h200-breakdown) timeout 200 $bench --devices triton --breakdown --sampler all --no-launches \
                      --record docs/results/bench-h200-breakdown.json \
                      && python3 tools/breakdown_values.py docs/results/bench-h200-breakdown.json
                    written+=(docs/results/bench-h200-breakdown.json) ;;
    h200-loaded) timeout 200 $bench --devices triton --sampler all --host-load "$(nproc)" --breakdown \
                   --record docs/results/bench-h200-loaded.json
                 written+=(docs/results/bench-h200-loaded.json) ;;
    h200-bfloat16) timeout 90 $bench --devices triton --dtype bfloat16 --breakdown --no-launches \
                     --record docs/results/bench-h200-bfloat16.json \
                     && python3 tools/breakdown_values.py docs/results/bench-h200-bfloat16.json
                   written+=(docs/results/bench-h200-bfloat16.json) ;;
    *) echo "unknown part: $part" >&2; exit 2 ;;
  esac
done
if [ -n "$OUT" ]; then
  mkdir -p "$OUT/results"
  for f in "${written[@]}"; do [ -f "$f" ] && cp "$f" "$OUT/results/"; done
fi
