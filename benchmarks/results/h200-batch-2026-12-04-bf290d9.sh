#!/usr/bin/env bash
# One device call (2026-12-04, session 2): the 30 generic ops with the at-shape code and
# Inductor's autotuned blocks (issue 15); whole HF models with the starters in every mode (13).
# Usage: bash .devrun/batch3.sh COMMIT
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
  step "ops"
  timeout 280 python3 -m benchmarks.ops --commit "$C" --budget-s 220 --tune-s 2 \
    --out-dir "$R" 2>&1 | tail -45
  step "models"
  timeout 250 python3 -m benchmarks.models --starters --models llama,qwen2,gpt2,bert \
    --mode eager --cuda-graphs --budget-s 230 --out-dir "$R" --commit "$C" \
    --results benchmarks/results 2>&1 | tail -40
  step "done"
  ls -la "$R" 2>&1
} 2>&1 | tee "$OUT/batch.log"
tar czf "$OUT/results.tgz" -C "$R" .
