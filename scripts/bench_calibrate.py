"""Benchmark: trtpipe's entropy calibration against ONNX Runtime's, same model, same data, same run.

Both calibrate the digits CNN (build/digits/digits.onnx) on the same batches of real digits: the
calibration images, cycled until the sample count is reached, and the same four tensors. ONNX Runtime runs as
`quantize_static` drives it: one EntropyCalibrater over a data reader, 2048 histogram bins,
symmetric. Each run is its own process, so peak RSS (ru_maxrss) is that calibrator's alone.
Wall time covers running the model, collecting, and computing the amax of every tensor.
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
BATCH = 50  # divides 1,000 and 10,000


def batches(samples: int):
    """Yield input dicts of BATCH real digits, cycling the calibration set until `samples` are given.

    The set's 1,348 images are decoded once up front (5 MiB, the same for every sample count), so
    the timings are of the calibrators, not of PNG decoding. Every batch has the same size: ONNX
    Runtime's collector stacks batches and fails on a short one.
    """
    import numpy as np

    from trtpipe import data
    from trtpipe.spec import load_spec

    spec = load_spec(SPEC)
    images = np.concatenate([b.arrays["image"] for b in data.iter_batches(spec, spec.calibration, 256)])
    for start in range(0, samples, BATCH):
        index = np.arange(start, start + BATCH) % len(images)
        yield {"image": images[index]}


def run_trtpipe(samples: int) -> int:
    from trtpipe.calibrators.amax import compute_amax
    from trtpipe.calibrators.collect import collect_histograms
    from trtpipe.calibrators.graph import quantized_activations
    from trtpipe.graph import onnxio

    model = onnxio.load(MODEL)
    tensors = quantized_activations(model)
    histograms = collect_histograms(model, tensors, batches(samples))
    amax = {name: compute_amax(h, "entropy") for name, h in histograms.items()}
    return len(amax)


def run_onnxruntime(samples: int) -> int:
    from onnxruntime.quantization.calibrate import CalibrationDataReader, CalibrationMethod, create_calibrator

    from trtpipe.calibrators.graph import quantized_activations
    from trtpipe.graph import onnxio

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
        # The same tensors as trtpipe's (ONNX Runtime would also take the layers' outputs).
        calibrator.tensors_to_calibrate = set(quantized_activations(onnxio.load(MODEL)))
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
