#!/usr/bin/env bash
# L1-offsets on a CUDA GPU: calls whose rows cross 2^31 and 2^32 elements (docs/bugs.md #55), on the compiled Triton
# device, its 32-bit-offset mutant, and vLLM 0.33.0's V1 runner and Model Runner V2.
#
#   OUT=DIR bash tools/gpu/offsets.sh [triton] [correct] [mutant] [vllm] [vllm-v2]   (default: all, one after another)
#
#   triton   the group on the compiled Triton device, every boundary (40GiB per call)
#   correct  the Triton device at seeds 0-19, with injected noise and as a black box (6GiB: target rows past 2^31)
#   mutant   triton-offsets-int32 at seeds 0-19, with injected noise and as a black box (6GiB), the seed table
#   vllm     vLLM 0.33.0's V1 runner (40GiB), vllm-v2 its Model Runner V2 (16GiB), through specsim field
#
# Run from the repository root on a CUDA machine with specsim installed (pip install -e ".[triton]"); the vLLM devices
# read the pinned members of vLLM's wheel from SPECSIM_VLLM_CACHE (tools/gpu/field.sh says how to fetch them).
# The parts run one after another: each call of 2^32 elements holds up to 29 GiB of host arrays and more on the GPU.
# Budgets: 6GiB for the seed sweeps holds the call of target rows past 2^31, where the mutant's named check lies;
# vllm-v2 16GiB (its device widens draft rows to float64 on the host, so the 25 GiB call of draft rows past 2^32 is
# left out: the scope line names it). The mutant and the correct device run in separate processes: a kernel reading
# far outside its tensors may leave the process's CUDA context unusable.
# Writes $OUT/offsets-<part>.log (each run's checks, scope and time) and $OUT/offsets-mutant.json (the seed table).
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

for part in ${@:-triton correct mutant vllm vllm-v2}; do
  case "$part" in
    triton) conform triton triton 40GiB ;;
    correct)  # the unmutated kernels at the mutant's 20 seeds and budget: every check passes
      started=$SECONDS
      for box in "" --black-box; do
        timeout 900 python3 -m specsim.conformance.checks.chain.offsets --device triton --seeds 0-19 \
          --call-bytes 6GiB $box 2>&1 | grep -v "^seed .* pass " >> "$OUT/offsets-correct.log"
      done
      echo "== correct: exit $? in $((SECONDS - started)) s" | tee -a "$OUT/offsets-correct.log" ;;
    mutant)  # the Triton kernels with int32 row offsets, compiled: killed at every seed (the correct device: part correct)
      started=$SECONDS
      timeout 900 python3 -m specsim.cli mutants --base triton --only triton-offsets-int32 --seeds 0-19 --black-box \
        --skip-correct --call-bytes 6GiB --out "$WORK/mutant" > "$OUT/offsets-mutant.log" 2>&1
      echo "== mutant: exit $? in $((SECONDS - started)) s" | tee -a "$OUT/offsets-mutant.log"
      [ -f "$WORK/mutant/seedtable.json" ] && cp "$WORK/mutant/seedtable.json" "$OUT/offsets-mutant.json" ;;
    vllm) field vllm vllm 40GiB ;;
    vllm-v2) field vllm-v2 vllm-v2 16GiB ;;
    *) echo "tools/gpu/offsets.sh: unknown part '$part' (triton, correct, mutant, vllm, vllm-v2)" >&2; exit 2 ;;
  esac
done
grep -h "^== " "$OUT"/offsets-*.log
