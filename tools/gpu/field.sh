#!/usr/bin/env bash
# The field table's CUDA rows (docs/field.md): vLLM's V1 runner, vLLM's Model Runner V2 and FlashInfer, every
# conformance group on the compiled kernels, then their tables merged into $OUT/field.json and $OUT/field.md.
#
#   OUT=DIR bash tools/gpu/field.sh [vllm] [vllm-v2] [flashinfer] [pytest] [repro]     (default: all five)
#
# Run from the repository root on a CUDA machine with specsim installed (pip install -e ".[triton]").
# vLLM's devices read the pinned members of vLLM's wheel from SPECSIM_VLLM_CACHE: on a machine without network,
# fetch them where there is network (python -m devices.field.vllm_loader fetch --cache DIR), copy DIR over and
# set SPECSIM_VLLM_CACHE=DIR. The flashinfer device needs flashinfer-python==0.7.2.post1 importable.
#
# Each group set is one `specsim field` process, all side by side, so that Triton's and nvcc's compiles overlap
# (16 cores: every group finishes within the per-group limit). `pytest` runs the shipped property suites on the
# vllm device with its waivers (the vendor workflow); `repro` runs the masked-token reproduction on the compiled
# kernels. Fold the merged table into docs/field-results/field.json with specsim field --merge (docs/field.md).
set -u -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/field-gpu}
WORK=$(mktemp -d)
LIMIT=${GROUP_TIMEOUT:-280}
mkdir -p "$OUT"
F="python3 -m specsim.cli field --group-timeout $LIMIT"
python3 -c "import torch, triton; print(torch.cuda.get_device_name(0), 'torch', torch.__version__, 'triton', triton.__version__)" \
  | tee "$OUT/machine.txt"

run_groups() {  # run_groups DEVICE NAME GROUPS: one specsim field process, in the background
  timeout $((LIMIT + 60)) $F --out "$WORK/$2" --devices "$1" ${3:+--groups "$3"} > "$WORK/$2.log" 2>&1 &
}

for part in ${@:-vllm vllm-v2 flashinfer pytest repro}; do
  case "$part" in
    vllm)  # the V1 runner (devices/field/vllm_device.py)
      run_groups vllm vllm-injected L1-injected
      run_groups vllm vllm-rest L1-edges,L1-keyed,L1-sampler,L1-trees,L2-trees,L1-volume,L2-rng,input-rules,L3-trees,capabilities
      run_groups vllm vllm-l1-sizes L1-sizes
      run_groups vllm vllm-l2-sizes L2-sizes
      run_groups vllm vllm-l3 L3-statistical ;;
    vllm-v2)  # Model Runner V2's verifier (devices/field/vllm_v2_device.py)
      run_groups vllm-v2 v2-rest L1-edges,L1-sampler,L2-rng,capabilities,input-rules,L1-injected,L1-keyed,L1-trees,L2-trees,L3-trees,L1-volume
      run_groups vllm-v2 v2-l3 L3-statistical
      run_groups vllm-v2 v2-sizes L1-sizes,L2-sizes ;;
    flashinfer)  # FlashInfer's chain_speculative_sampling (devices/field/flashinfer_device.py), every group
      run_groups flashinfer flashinfer "" ;;
    pytest)  # the vendor workflow: the shipped property suites on the vllm device with its waivers
      timeout $((LIMIT + 60)) python3 -m pytest -q -p no:cacheprovider --pyargs property_tests --specsim-device=vllm \
        --specsim-waivers devices/field/vllm_waivers.toml > "$OUT/pytest-vllm.log" 2>&1 & ;;
    repro)  # vLLM's inclusive coin accepting a masked token, on the compiled kernels
      python3 devices/field/repro/vllm_zero_coin_accepts_masked_token.py --specsim-loader > "$OUT/repro.log" 2>&1 ;;
    *) echo "tools/gpu/field.sh: unknown part '$part' (vllm, vllm-v2, flashinfer, pytest, repro)" >&2; exit 2 ;;
  esac
done
wait
for log in "$WORK"/*.log; do echo "== $(basename "$log")"; grep -v -i warning "$log" | tail -n 4; done | tee "$OUT/groups.log"
runs=$(ls "$WORK"/*/field.json 2>/dev/null)
if [ -n "$runs" ]; then
  python3 -m specsim.cli field --out "$WORK/merged" --merge $runs --render-only --no-repro-run
  cp "$WORK/merged/field.json" "$WORK/merged/field.md" "$OUT/"
fi
