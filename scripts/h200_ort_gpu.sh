#!/usr/bin/env bash
# validate's FP32 baseline on onnxruntime-gpu's CUDA provider, on the H200 (see docs/runtime.md).
# Expects onnxruntime-gpu unpacked in $ORT (default /tmp/ort) and the shipped models' FP32 ONNX, INT8
# typed ONNX and data under build/ and models/ of this tree. Logs go to $OUT (or ./h200-out).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$here/h200-out}
mkdir -p "$out"
cd "$here"
export PYTHONPATH=${ORT:-/tmp/ort}:$here PYTHONUNBUFFERED=1
# The probe below shows whether onnxruntime-gpu needs PyTorch or preload_dlls() first to find CUDA 13 (on the
# H200 it needed neither); the runs after it import torch first, as they were measured.
trtpipe() { python3 -c 'import sys, torch; from trtpipe.cli import main; sys.argv[0] = "trtpipe"; main()' "$@"; }
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader | tee "$out/ort-gpu.log"
for how in "" "onnxruntime.preload_dlls()" "import torch"; do
    python3 - "$how" <<'EOF' 2>&1 | tail -1 | tee -a "$out/ort-gpu.log"
import sys
how = sys.argv[1]
if how == "import torch":
    import torch  # noqa: F401
import onnxruntime
if how.startswith("onnxruntime."):
    onnxruntime.preload_dlls()
from trtpipe.runtime.onnxrt import OnnxRunner
runner = OnnxRunner("build/digits/digits.onnx")
print(f"onnxruntime {onnxruntime.__version__} with {how or 'nothing'} first: {runner.provider}")
EOF
done
models=(digits efficientnet-lite0 minilm)
reports=$(mktemp -d)
for m in "${models[@]}"; do
    trtpipe quantize "build/$m/$m.onnx" --precision fp16 -o "build/$m/$m.fp16.onnx" 2>&1 | tail -1
done
python3 -c 'import torch, runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name="__main__")' \
    scripts/baseline_providers.py --json "$out/baseline-providers.json" \
    $(for m in "${models[@]}"; do echo "build/$m/$m.onnx=models/$m/model.toml"; done) 2>&1 | tee "$out/baseline-providers.log"
# validate as users run it: baseline (and candidate) on the GPU, then with the GPU hidden (the CPU provider).
for m in "${models[@]}"; do
    for p in fp16 int8; do
        [ -f "build/$m/$m.$p.onnx" ] || continue
        for where in gpu cpu; do
            start=$(date +%s.%N)
            if [ $where = cpu ]; then
                CUDA_VISIBLE_DEVICES= trtpipe validate "build/$m/$m.$p.onnx" --baseline "build/$m/$m.onnx" \
                    --spec "models/$m/model.toml" --json > "$reports/$m-$p-$where.json" 2>/dev/null
            else
                trtpipe validate "build/$m/$m.$p.onnx" --baseline "build/$m/$m.onnx" \
                    --spec "models/$m/model.toml" --json > "$reports/$m-$p-$where.json" 2>/dev/null
            fi
            rc=$?
            python3 - "$reports/$m-$p-$where.json" "$rc" "$start" <<'EOF' | tee -a "$out/ort-gpu.log"
import json, sys, time
r = json.load(open(sys.argv[1]))
d = r["decided_by"] or {}
print(f"{r['candidate']}: rc {sys.argv[2]}, {time.time() - float(sys.argv[3]):.1f} s, candidate {r['candidate_runner']}, "
      f"baseline {r['baseline_runner']}, {d.get('output')} {d.get('metric')} {d.get('value')}")
EOF
        done
    done
done
tar -C "$reports" -czf "$out/validate-reports.tar.gz" .
