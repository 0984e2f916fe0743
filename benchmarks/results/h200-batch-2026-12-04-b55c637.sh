#!/usr/bin/env bash
# One device call (2026-12-04, session 2): the matmul starter's unaligned-B tiles at odd shapes
# (issue 13), host time per call (13), the warm harness (14), profile attribution (13), the CUDA
# backend (17), GPU tests. Usage: bash .devrun/batch1.sh COMMIT
set -u
export PYTHONUNBUFFERED=1
C=${1:-unknown}
R=/tmp/r; mkdir -p "$R"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
step() {
  cp benchmarks/results/h200.jsonl "$R/" 2>/dev/null
  tar czf "$OUT/results.tgz" -C "$R" . 2>/dev/null; tar czf "$OUT/benchres.tgz" benchmarks/results 2>/dev/null; echo "== $1 ($(date -u +%T))"
}
{
  date -u; nvidia-smi -L
  python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0])"
  step "gpu tests"
  timeout 100 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_harness.py \
    -k "starter_passes and (matmul or softmax or rmsnorm)" 2>&1 | tail -8
  step "matmul vs cuBLAS"
  timeout 90 python3 -m benchmarks.kernels_vs_baselines --out "$R/matmul.md" --types matmul \
    --no-compile --budget-s 75 --commit "$C" --results benchmarks/results 2>&1 | tail -25
  step "host overhead"
  timeout 150 python3 -m benchmarks.host_overhead --json "$R/host.json" --out "$R/host.md" \
    --commit "$C" --results benchmarks/results 2>&1 | tail -16
  step "harness warm"
  timeout 75 python3 -m benchmarks.harness_report --out "$R/harness.md" --types softmax \
    --warm-runs 3 --commit "$C" --results benchmarks/results 2>&1 | tail -8
  step "profile check"
  timeout 60 python3 -m benchmarks.profile_check --json "$R/profile_check.json" --commit "$C" \
    --results benchmarks/results 2>&1 | tail -14
  step "cuda backend"
  timeout 120 python3 -m benchmarks.cuda_backend "$R/cuda" --commit "$C" --budget-s 110 \
    --results benchmarks/results 2>&1 | tail -14
  step "done"
  ls -la "$R" "$R/cuda" 2>&1
} 2>&1 | tee "$OUT/batch.log"
tar czf "$OUT/results.tgz" -C "$R" .
