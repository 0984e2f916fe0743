#!/usr/bin/env bash
# Last device call (2026-12-04, session 2), on the restructured tree: GPU tests, the matmul,
# host-time and warm-harness figures again (issue 16: figures unchanged; 13; 14), two workers
# on a compile-heavy target (18), the ops whose compile baselines moved (15).
# Usage: bash .devrun/batch4.sh COMMIT
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
  timeout 130 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_generic_gpu.py \
    tests/test_gpu_harness.py -k "outer_sum or (starter_passes and (matmul or softmax or rmsnorm))" 2>&1 | tail -15
  step "matmul vs cuBLAS"
  timeout 60 python3 -m benchmarks.kernels_vs_baselines --out "$R/matmul.md" --types matmul \
    --no-compile --budget-s 45 --commit "$C" --results benchmarks/results 2>&1 | grep -E "met|wrote"
  step "host overhead"
  timeout 90 python3 -m benchmarks.host_overhead --json "$R/host.json" --out "$R/host.md" \
    --commit "$C" --results benchmarks/results 2>&1 | tail -13
  step "harness warm"
  timeout 75 python3 -m benchmarks.harness_report --out "$R/harness.md" --types softmax \
    --warm-runs 3 --commit "$C" --results benchmarks/results 2>&1 | tail -6
  step "workers matmul"
  timeout 190 python3 -m benchmarks.workers --out-dir "$R" --commit "$C" --workers 1,2 \
    --kernel matmul --seconds 60 2>&1 | tail -16
  step "ops subset"
  timeout 100 python3 -m benchmarks.ops --commit "$C" --budget-s 85 --tune-s 2 --out-dir "$R" \
    --cases l2_normalize,softmax_dim1,scaled_masked_softmax,amax_last,mean_last,var_last,layernorm_noaffine,hf_rotary 2>&1 | grep -E "^\| .* (torch.compile|tuned) "
  step "done"
  ls -la "$R" 2>&1
} 2>&1 | tee "$OUT/batch.log"
tar czf "$OUT/results.tgz" -C "$R" .
