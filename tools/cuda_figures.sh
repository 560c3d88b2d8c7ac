#!/usr/bin/env bash
# The CUDA figures of the README (Performance): `attnsvm bench --device cuda` and the quick catalogue on
# CUDA compared verdict by verdict with reports/baseline.json (the CPU quick profile, seed 0), in one script.
# Run from the repository root on a machine with a GPU; OUT is where the figures go (default reports/cuda).
# Needs the project's dependencies importable (cvxpy and its solvers, latex2mathml besides torch).
set -u
OUT=${OUT:-reports/cuda}
mkdir -p "$OUT"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MPLBACKEND=Agg PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c 'import torch, numpy, cvxpy; print("torch", torch.__version__, "cuda", torch.version.cuda, "numpy", numpy.__version__, "cvxpy", cvxpy.__version__)'
  nproc; uptime
} 2>&1 | tee "$OUT/machine.txt"
# Optional, on a many-core device machine: the whole power matrix (every catalogue id, controls included) on
# its CPUs, in the background while the GPU runs the bench and the catalogue (POWER_WORKERS processes).
if [ -n "${POWER_WORKERS:-}" ]; then
  ( tp=$(date +%s)
    timeout "${POWER_TIMEOUT:-500}" $PY -m checks power $($PY -m checks list --json | $PY -c \
      'import json, sys; print(" ".join(r["id"] for r in json.load(sys.stdin)))') --workers "$POWER_WORKERS" \
      --no-progress --out "$OUT/power" > "$OUT/power.log" 2>&1
    echo "power rc=$? wall=$(( $(date +%s) - tp )) s" >> "$OUT/power.log" ) &
  POWER_PID=$!
fi
t0=$(date +%s)
timeout "${BENCH_TIMEOUT:-260}" $PY -m checks bench --device cuda --out /tmp/cuda-bench 2>&1 | tail -60
echo "bench rc=${PIPESTATUS[0]} wall=$(( $(date +%s) - t0 )) s"
cp /tmp/cuda-bench/bench.md /tmp/cuda-bench/bench.json /tmp/cuda-bench/bench.png "$OUT"/ 2>/dev/null
t0=$(date +%s)
timeout "${CHECK_TIMEOUT:-200}" $PY -m checks check --profile quick --device cuda --out /tmp/cuda-quick \
  --baseline reports/baseline.json --no-progress 2>&1 | tail -90
echo "check rc=${PIPESTATUS[0]} wall=$(( $(date +%s) - t0 )) s"
tar czf "$OUT/cuda-quick.tgz" -C /tmp cuda-quick/report.md cuda-quick/report.json cuda-quick/results.jsonl \
  cuda-quick/run.json 2>/dev/null
if [ -n "${POWER_PID:-}" ]; then
  wait "$POWER_PID"
  tail -25 "$OUT/power.log"
fi
