"""Benchmark: trtpipe's entropy calibration against ONNX Runtime's, same model, same data, same run.

Both calibrate the digits CNN (build/digits/digits.onnx) on the same batches of real digits: the
calibration images, cycled until the sample count is reached. ONNX Runtime runs as
`quantize_static` drives it: one EntropyCalibrater over a data reader, 2048 histogram bins,
symmetric. Each run is its own process, so peak RSS (ru_maxrss) is that calibrator's alone.
Wall time covers loading the data, running the model and computing the amax of every tensor.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODEL = ROOT / "build" / "digits" / "digits.onnx"
SPEC = ROOT / "models" / "digits" / "model.toml"
BATCH = 32


def batches(samples: int):
    """Yield input dicts of real digits, cycling the calibration set until `samples` are given."""
    from trtpipe import data
    from trtpipe.config import load_spec

    spec = load_spec(SPEC)
    given = 0
    while given < samples:
        for batch in data.iter_batches(spec, spec.calibration, BATCH, samples - given):
            given += len(batch)
            yield batch.arrays


def run_trtpipe(samples: int) -> int:
    from calibrators.amax import compute_amax
    from calibrators.collect import collect_histograms
    from calibrators.graph import quantized_activations
    from trtpipe import onnxio

    model = onnxio.load(MODEL)
    tensors = quantized_activations(model)
    histograms = collect_histograms(model, tensors, batches(samples))
    amax = {name: compute_amax(h, "entropy") for name, h in histograms.items()}
    return len(amax)


def run_onnxruntime(samples: int) -> int:
    from onnxruntime.quantization.calibrate import CalibrationDataReader, CalibrationMethod, create_calibrator

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.source = batches(samples)

        def get_next(self):
            return next(self.source, None)

    with tempfile.TemporaryDirectory() as tmp:
        calibrator = create_calibrator(
            MODEL, ["Conv", "Gemm", "MatMul"], augmented_model_path=Path(tmp) / "augmented.onnx",
            calibrate_method=CalibrationMethod.Entropy,
            extra_options={"num_bins": 2048, "num_quantized_bins": 128, "symmetric": True},
        )
        calibrator.collect_data(Reader())
        return len(calibrator.compute_data().data)


def child(which: str, samples: int) -> None:
    start = time.perf_counter()
    tensors = (run_trtpipe if which == "trtpipe" else run_onnxruntime)(samples)
    seconds = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
    print(json.dumps({"seconds": seconds, "peak_mib": peak_mib, "tensors": tensors}))


def measure(which: str, samples: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", which, "--samples", str(samples)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--child", choices=["trtpipe", "onnxruntime"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.samples[0])
        return
    if not MODEL.is_file():
        sys.exit(f"{MODEL}: missing; run 'make engines MODEL=digits' first")
    import os

    print(f"entropy calibration of {MODEL.name}, {os.cpu_count()} CPUs, batch {BATCH}")
    print(f"{'samples':>8} {'calibrator':>12} {'tensors':>8} {'wall s':>8} {'peak MiB':>9}")
    results = {}
    for samples in args.samples:
        for which in ("trtpipe", "onnxruntime"):
            r = results[samples, which] = measure(which, samples)
            print(f"{samples:>8} {which:>12} {r['tensors']:>8} {r['seconds']:>8.2f} {r['peak_mib']:>9.0f}", flush=True)
    for samples in args.samples:
        ours, theirs = results[samples, "trtpipe"], results[samples, "onnxruntime"]
        print(f"{samples} samples: trtpipe {theirs['seconds'] / ours['seconds']:.2f}x faster than ONNX Runtime "
              f"(target >= 3x); peak RSS {ours['peak_mib']:.0f} vs {theirs['peak_mib']:.0f} MiB")
    lo, hi = min(args.samples), max(args.samples)
    for which in ("trtpipe", "onnxruntime"):
        growth = results[hi, which]["peak_mib"] / results[lo, which]["peak_mib"]
        print(f"{which}: peak RSS at {hi} samples is {growth:.2f}x that at {lo} (target for trtpipe <= 1.2x)")


if __name__ == "__main__":
    main()
