#!/usr/bin/env bash
# On a CUDA machine, from the repository root: `specsim conform --device ${DEVICE:-triton}` in parts of at most
# ${PART_S:-540} s, ${JOBS:-1} group(s) side by side. A part stopped by its limit (SIGTERM) leaves an INCOMPLETE run; the next part continues it
# with --resume, which refuses if any code, option or package release changed in between. The run directory
# travels between machines as one archive: $OUT/run.tgz out, .gpu-run/run.tgz in (an ignored folder).
#   OUT=DIR bash tools/gpu/conform_parts.sh
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp}
RUN=/tmp/conform-run
resume=""
if [ -f .gpu-run/run.tgz ]; then
  rm -rf "$RUN" && tar -xzf .gpu-run/run.tgz -C /tmp && resume=--resume
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
start=$(date +%s)
timeout -s TERM "${PART_S:-540}" python3 -m specsim.cli conform --device "${DEVICE:-triton}" --out "$RUN" $resume \
  --jobs "${JOBS:-1}" \
  > "$OUT/conform.log" 2>&1
rc=$?
echo "part: exit $rc after $(( $(date +%s) - start )) s" | tee -a "$OUT/gpu.txt"
tar -czf "$OUT/run.tgz" -C /tmp conform-run
tail -n 60 "$OUT/conform.log"
