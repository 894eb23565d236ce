"""NVIDIA Model Optimizer's ONNX PTQ as a peer of trtpipe, on calibration samples no stacked array holds:
run by scripts/bench_methods.py in the peers' environment (build/peers-venv), never imported by trtpipe.

Model Optimizer's command line reads one stacked array per input (--calibration_data_path), which samples
of their own lengths (khmersm's phrases) or with a scalar input (swift-f0's fmin) cannot be. Its Python
API also takes an ONNX Runtime CalibrationDataReader: this one feeds it the samples one run each, every
other option at the value the command line's own parser gives it, so the graph is the one the command
line would write from the same samples, were they stackable. `--calibration-shapes` is the command line's
batch (bench_methods: up to 16): without it Model Optimizer sizes its MatMuls by a run of one sample and
leaves out every Gemm whose rows are the batch as a GEMV (romanizer-enc's one Gemm).
"""

from __future__ import annotations

import argparse
import inspect

import numpy as np
from peer_ort_quantize import sample_feeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--onnx", required=True)
    parser.add_argument("--calibration", required=True, help=".npz of samples keyed SAMPLE/INPUT (one run each)")
    parser.add_argument("--calibration-shapes", default=None,
                        help="its --calibration_shapes (NAME:DxD,...): only its rule on small MatMuls reads them here")
    parser.add_argument("--quantize-mode", required=True, choices=["int8", "fp8"])
    parser.add_argument("--output", required=True)
    args = parser.parse_args()

    from modelopt.onnx.quantization import quantize
    from modelopt.onnx.quantization.__main__ import get_parser
    from onnxruntime.quantization import CalibrationDataReader

    with np.load(args.calibration) as archive:
        feeds = sample_feeds({name: archive[name] for name in archive.files})

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter(feeds)

        def get_next(self):
            return next(self.feeds, None)

        def get_first(self):  # Model Optimizer's own readers have it: a trial run for the MatMuls' shapes, if none given
            return feeds[0]

    shapes = ["--calibration_shapes", args.calibration_shapes] if args.calibration_shapes else []
    cli = vars(get_parser().parse_args(["--onnx_path", args.onnx, "--quantize_mode", args.quantize_mode, *shapes,
                                        "--calibration_eps", "cpu", "--output_path", args.output]))
    options = {name: value for name, value in cli.items() if name in inspect.signature(quantize).parameters}
    options["autotune"] = cli["autotune"] is not None  # as the command line turns its flag into a bool
    quantize(**options, calibration_data_reader=Reader())


if __name__ == "__main__":
    main()
