#!/usr/bin/env bash
# L1-offsets on a CUDA GPU: calls whose rows cross 2^31 and 2^32 elements (docs/bugs.md #55), on the compiled Triton
# device, its 32-bit-offset mutant, and vLLM 0.33.0's V1 runner and Model Runner V2.
#
#   OUT=DIR bash tools/gpu/offsets.sh [triton] [mutant] [vllm] [vllm-v2]     (default: all four, one after another)
#
# Run from the repository root on a CUDA machine with specsim installed (pip install -e ".[triton]"); the vLLM devices
# read the pinned members of vLLM's wheel from SPECSIM_VLLM_CACHE (tools/gpu/field.sh says how to fetch them).
# The parts run one after another: each call of 2^32 elements holds up to 29 GiB of host arrays and more on the GPU.
# Budgets: the triton and vllm parts allow 40GiB per call (every boundary); the mutant part 6GiB (target rows past
# 2^31, where its named check lies: 20 seeds in minutes); vllm-v2 16GiB (its device widens draft rows to float64 on
# the host, so the 25 GiB call of draft rows past 2^32 is left out: the scope line names it).
# Writes $OUT/offsets-<part>.log (each run's table and scope) and $OUT/offsets-mutant.json (the seed table).
set -u -o pipefail
export PYTHONUNBUFFERED=1 SPECSIM_PROGRESS=lines
OUT=${OUT:-/tmp/offsets-gpu}
WORK=$(mktemp -d)
LIMIT=${GROUP_TIMEOUT:-900}
mkdir -p "$OUT"
python3 -c "import torch, triton; print(torch.cuda.get_device_name(0), 'torch', torch.__version__, 'triton', triton.__version__)" \
  | tee "$OUT/offsets-machine.txt"

conform() {  # conform PART DEVICE BUDGET: the group alone, its failing checks and scope in the part's log
  local started=$SECONDS
  timeout $((LIMIT + 60)) python3 -m specsim.cli conform --device "$2" --groups L1-offsets --call-bytes "$3" \
    --group-timeout "$LIMIT" --table --out "$WORK/$1" --no-report > "$OUT/offsets-$1.log" 2>&1
  echo "== $1: exit $? in $((SECONDS - started)) s" | tee -a "$OUT/offsets-$1.log"
}

field() {  # field PART DEVICE BUDGET: specsim field on the group (judged deviations, upstream report)
  local started=$SECONDS
  SPECSIM_CALL_BYTES=$3 timeout $((LIMIT + 60)) python3 -m specsim.cli field --group-timeout "$LIMIT" \
    --out "$WORK/$1" --devices "$2" --groups L1-offsets > "$OUT/offsets-$1.log" 2>&1
  echo "== $1: exit $? in $((SECONDS - started)) s" | tee -a "$OUT/offsets-$1.log"
  [ -f "$WORK/$1/field.md" ] && cp "$WORK/$1/field.md" "$OUT/offsets-$1-field.md"
}

for part in ${@:-triton mutant vllm vllm-v2}; do
  case "$part" in
    triton) conform triton triton 40GiB ;;
    mutant)  # the Triton kernels with int32 row offsets, compiled: killed at every seed, the correct device passing
      started=$SECONDS
      timeout 900 python3 -m specsim.cli mutants --base triton --only triton-offsets-int32 --seeds 0-19 \
        --call-bytes 6GiB --out "$WORK/mutant" > "$OUT/offsets-mutant.log" 2>&1
      echo "== mutant: exit $? in $((SECONDS - started)) s" | tee -a "$OUT/offsets-mutant.log"
      [ -f "$WORK/mutant/seedtable.json" ] && cp "$WORK/mutant/seedtable.json" "$OUT/offsets-mutant.json" ;;
    vllm) field vllm vllm 40GiB ;;
    vllm-v2) field vllm-v2 vllm-v2 16GiB ;;
    *) echo "tools/gpu/offsets.sh: unknown part '$part' (triton, mutant, vllm, vllm-v2)" >&2; exit 2 ;;
  esac
done
grep -h "^== " "$OUT"/offsets-*.log
