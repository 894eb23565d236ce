"""The FP32 baseline on onnxruntime-gpu's CUDA provider, judged against the CPU provider's.

Run where onnxruntime-gpu and a GPU are (the H200: scripts/h200_ort_gpu.sh). For each model given as
MODEL.onnx=model.toml it runs the FP32 ONNX on both providers over the spec's validation set, judges
the CUDA outputs against the CPU ones with the spec's own task metrics (the validation report's
machinery, CPU as the reference), and times each provider per batch after a warm-up batch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def _timed(runner, batches) -> list[float]:
    """Seconds per batch, the first (warm-up: CUDA kernels load, cuDNN picks algorithms) left out."""
    seconds = []
    for batch in batches:
        start = time.perf_counter()
        runner(batch.arrays)
        seconds.append(time.perf_counter() - start)
    return seconds[1:] or seconds


KEY_METRICS = ("top1_agreement", "neighbour_agreement", "cosine_min", "max_abs_error")


def _key(outputs: dict) -> str:
    return "; ".join(f"{name}: " + ", ".join(f"{k} {m[k]:.6g}" for k in KEY_METRICS if k in m) for name, m in outputs.items())


def compare_providers(model: Path, spec_path: Path, batch_size: int) -> dict:
    from trtpipe import data
    from trtpipe.graph import onnxio
    from trtpipe.quality.validate import compare
    from trtpipe.runtime.onnxrt import OnnxRunner
    from trtpipe.spec import load_spec, resolve_inputs

    class DefaultCuda(OnnxRunner):
        """The CUDA provider as it comes, TF32 allowed (trtpipe's runner turns TF32 off)."""

        tf32 = True

    proto = onnxio.load(model)
    spec = resolve_inputs(load_spec(spec_path), proto, model)
    directory = spec.validation
    batches = list(data.iter_batches(spec, directory, batch_size))
    with OnnxRunner(model, ["CUDAExecutionProvider", "CPUExecutionProvider"], model=proto) as gpu, \
            DefaultCuda(model, ["CUDAExecutionProvider", "CPUExecutionProvider"], model=proto) as tf32, \
            OnnxRunner(model, ["CPUExecutionProvider"], model=proto) as cpu:
        if gpu.provider != "CUDAExecutionProvider":
            raise SystemExit(f"{model}: the CUDA provider did not load (got {gpu.provider}); is onnxruntime-gpu installed?")
        fp32 = compare(gpu, cpu, spec, directory, "fp32", thresholds={}, batch_size=batch_size, show_progress=False)
        tf32_report = compare(tf32, cpu, spec, directory, "fp32", thresholds={}, batch_size=batch_size, show_progress=False)
        gpu_s, tf32_s, cpu_s = _timed(gpu, batches), _timed(tf32, batches), _timed(cpu, batches)
    samples = sum(len(b) for b in batches)
    return {"model": model.stem, "samples": samples, "batch": batch_size,
            "cuda_fp32_vs_cpu": fp32.outputs, "cuda_tf32_vs_cpu": tf32_report.outputs,
            "cuda_ms_per_batch": 1e3 * statistics.median(gpu_s), "cuda_tf32_ms_per_batch": 1e3 * statistics.median(tf32_s),
            "cpu_ms_per_batch": 1e3 * statistics.median(cpu_s)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="MODEL.onnx=model.toml")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    import onnxruntime

    print(f"onnxruntime {onnxruntime.__version__}, providers {onnxruntime.get_available_providers()}")
    rows = []
    for item in args.models:
        model, _, spec = item.partition("=")
        row = compare_providers(Path(model), Path(spec), args.batch_size)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("| model | samples | CUDA (TF32 off, trtpipe's) against CPU | CUDA as it comes (TF32) against CPU "
          f"| ms per batch of {args.batch_size}: CUDA / CUDA TF32 / CPU | CPU / CUDA |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['samples']} | {_key(r['cuda_fp32_vs_cpu'])} | {_key(r['cuda_tf32_vs_cpu'])} | "
              f"{r['cuda_ms_per_batch']:.2f} / {r['cuda_tf32_ms_per_batch']:.2f} / {r['cpu_ms_per_batch']:.2f} | "
              f"{r['cpu_ms_per_batch'] / r['cuda_ms_per_batch']:.1f}x |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    sys.exit(0)


if __name__ == "__main__":
    main()
