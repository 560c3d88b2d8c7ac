#!/usr/bin/env bash
# CUDA smoke of the pieces a GPU changes: the quick catalogue on CUDA through the supervised pool (spawned
# workers) against reports/baseline.json, one worker killed mid-run, and `attnsvm gd` on CUDA against CPU.
set -u
OUT=${OUT:-reports/cuda}; mkdir -p "$OUT"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MPLBACKEND=Agg PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s)
$PY -m checks check --profile quick --device cuda --workers 8 --out /tmp/cq --baseline reports/baseline.json \
  --no-progress > "$OUT/check.txt" 2>&1 &
P=$!
sleep 25; K=$(pgrep -P $P -f spawn_main | head -1); [ -n "$K" ] || K=$(pgrep -P $P | head -1)  # a worker, not the resource tracker
echo "killing worker $K of $P: $(tr "\0" " " < /proc/$K/cmdline | cut -c1-80)"; kill -9 "$K"
wait $P; echo "check rc=$? wall=$(( $(date +%s) - t0 )) s"; tail -14 "$OUT/check.txt"
cp /tmp/cq/results.jsonl "$OUT/cuda-results.jsonl"
$PY -c "import numpy as np; from numerics.data import random_unit_sphere; \
random_unit_sphere(4, 5, 6, rng=np.random.default_rng(0)).save('/tmp/demo.npz')"
for dev in cpu cuda; do for p in W KQ; do
  $PY -m checks gd /tmp/demo.npz --param $p --steps 2000 --device $dev --backend torch --json > /tmp/gd-$dev-$p.json
  echo "gd $dev $p rc=$?"; done; done
$PY - <<'PY'
import json, numpy as np
for p in ("W", "KQ"):
    a, b = (json.load(open(f"/tmp/gd-{d}-{p}.json")) for d in ("cpu", "cuda"))
    Wa, Wb = np.asarray(a["final"]["W"]), np.asarray(b["final"]["W"])
    print(p, "corr cpu", a["corr"], "cuda", b["corr"], "max|W_cpu - W_cuda|/max|W|",
          float(np.abs(Wa - Wb).max() / np.abs(Wa).max()), "selected equal", a["selected"] == b["selected"])
PY
