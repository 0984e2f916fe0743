#!/usr/bin/env bash
# One device call (2026-12-04): the harness after the cache split, the red-team fixes and the
# fresh-values timing (issue 14); parallel workers on one GPU (issue 18); the CUDA backend's
# first run (issue 17). Usage: bash .devrun/batch.sh COMMIT
set -u
export PYTHONUNBUFFERED=1
C=${1:-unknown}
R=/tmp/r; mkdir -p "$R"  # bundled into $OUT/results.tgz: at most 8 files come back
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
step() {
  cp benchmarks/results/h200.jsonl "$R/" 2>/dev/null
  tar czf "$OUT/results.tgz" -C "$R" . 2>/dev/null; echo "== $1 ($(date -u +%T))"
}
{
  date -u; nvidia-smi -L
  python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0])"
  step "gpu tests"
  timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_cache_tiers.py \
    tests/test_gpu_harness.py -k "starter_passes or side_stream or launcher" 2>&1 | tail -25
  step "redteam gpu"
  timeout 75 python3 -m benchmarks.redteam_gpu > "$R/redteam_gpu.jsonl"
  tail -c 1500 "$R/redteam_gpu.jsonl"
  step "sandbox overhead"
  timeout 55 python3 -m benchmarks.sandbox_overhead --n 3 --evals 2 --commit "$C" \
    --results benchmarks/results > "$R/sandbox.json"
  step "harness warm"
  timeout 70 python3 -m benchmarks.harness_report --out "$R/harness.md" --types softmax,rmsnorm \
    --warm-runs 3 --commit "$C" --results benchmarks/results 2>&1 | tail -12
  step "workers"
  timeout 110 python3 -m benchmarks.workers --out-dir "$R" --commit "$C" --workers 1,2 \
    --seconds 25 -- --no-compile 2>&1 | tail -20
  step "cuda backend"
  timeout 95 python3 -m benchmarks.cuda_backend "$R/cuda" --commit "$C" --budget-s 85 \
    --results benchmarks/results 2>&1 | tail -12
  step "done"
  ls -la "$R" "$R/cuda" 2>&1
} 2>&1 | tee "$OUT/batch.log"
tar czf "$OUT/results.tgz" -C "$R" .
