"""ONNX Runtime's quantize_static as a peer of trtpipe: run by scripts/bench_quality.py in the peers'
environment (build/peers-venv), never imported by trtpipe.

Settings: QDQ format, per-channel symmetric weights, symmetric activations, MinMax calibration (its
default), only Conv/MatMul/Gemm quantized and biases left float: left at its defaults it quantizes
biases to INT32 and ops TensorRT does not fuse, and TensorRT rejects the graph (DESIGN.md).
"""

from __future__ import annotations

import argparse

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--onnx", required=True)
    parser.add_argument("--calibration", required=True, help=".npz of stacked inputs keyed by input name")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()

    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    with np.load(args.calibration) as archive:
        arrays = {name: archive[name] for name in archive.files}
    count = len(next(iter(arrays.values())))

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.start = 0

        def get_next(self):
            if self.start >= count:
                return None
            batch = {k: v[self.start:self.start + args.batch_size] for k, v in arrays.items()}
            self.start += args.batch_size
            return batch

    quantize_static(args.onnx, args.output, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    op_types_to_quantize=["Conv", "MatMul", "Gemm"],
                    extra_options={"ActivationSymmetric": True, "WeightSymmetric": True, "QuantizeBias": False})


if __name__ == "__main__":
    main()
