#!/usr/bin/env bash
# The runtime's proofs on the H200, from a carried copy of the tree (see docs/runtime.md):
# installs pycuda (a wheel built there earlier) and its pure-Python needs into /tmp/site, runs the
# GPU tests and the runtime's CI tests, then the same GPU tests against the code before the fixes
# (OLD, when given), then the bench proof. Logs go to $OUT (or ./h200-out).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$here/h200-out}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "${WHEELS:-$here/../whl}"/*.whl || exit 1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader | tee "$out/h200-tests.log"
cd "$here"
PYTHONPATH=/tmp/site:$here python3 -m pytest -v -p no:cacheprovider --timeout 300 \
    tests/gpu tests/runtime 2>&1 | tee -a "$out/h200-tests.log"
if [ -n "${OLD:-}" ]; then
    cd "$OLD" && PYTHONPATH=/tmp/site:$OLD python3 -m pytest -v -p no:cacheprovider --timeout 120 \
        tests/gpu/test_contract.py tests/gpu/test_stress.py 2>&1 | tee "$out/h200-tests-before.log"
fi
cd "$here" && PYTHONPATH=/tmp/site:$here python3 scripts/h200_bench_proof.py --json "$out/h200-bench-proof.json" \
    2>&1 | tee "$out/h200-bench-proof.log"
