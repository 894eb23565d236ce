"""ONNX Runtime's quantize_static as a peer of trtpipe: run by scripts/bench_quality.py in the peers'
environment (build/peers-venv), never imported by trtpipe.

Settings: QDQ format, per-channel symmetric weights, symmetric activations, MinMax calibration (its
default), only Conv/MatMul/Gemm quantized and biases left float: left at its defaults it quantizes
biases to INT32 and ops TensorRT does not fuse, and TensorRT rejects the graph (docs/design.md).

The extra options are those of ONNX Runtime's own example of a Q/DQ model for TensorRT
(onnxruntime-inference-examples, quantization/nlp/bert/trt/e2e_tensorrt_bert_example.py); Model
Optimizer 0.47 drives the same quantizer with the same exclusion (its "TensorRT friendly" options in
modelopt/onnx/quantization/ort_utils.py). The one that matters is OpTypesToExcludeOutputQuantization:
without it quantize_static also quantizes every Conv/MatMul/Gemm *output*. ONNX Runtime narrows a
Conv output feeding a Clip/Relu to the Clip's range only when the Clip itself is quantized
(BaseQuantizer.adjust_tensor_ranges), which restricting the op types turns off: EfficientNet-lite0's
pre-ReLU6 outputs then got a Q/DQ over their whole range (15 to 165), a step of up to 1.3 before
ReLU6's 0..6, and top-1 agreement fell to 53.75% (89.38% without those Q/DQ).
"""

from __future__ import annotations

import argparse

import numpy as np

OP_TYPES = ["Conv", "MatMul", "Gemm"]


def extra_options(op_types: list[str]) -> dict:
    """Return quantize_static's extra_options for a Q/DQ graph TensorRT builds: Q/DQ on the inputs of
    `op_types` only (TensorRT fuses the activation and the next layer's quantization itself)."""
    return {"ActivationSymmetric": True, "WeightSymmetric": True, "QuantizeBias": False,
            "OpTypesToExcludeOutputQuantization": list(op_types),
            # Also in ONNX Runtime's TensorRT example; they change the graph's form, not its numbers.
            "AddQDQPairToWeight": True, "DedicatedQDQPair": True, "QDQOpTypePerChannelSupportToAxis": {"MatMul": 1}}


def step_rows(model: str, arrays: dict[str, np.ndarray], batch_size: int) -> tuple[dict[str, int], int]:
    """Return how many rows of each stacked array one calibration step reads, and the number of steps.

    An input whose first axis the model fixes (gtcrn's caches: [2, 1, 16, 16, 33], the batch on axis 1)
    reads that many rows a step, as Model Optimizer splits the same file by its --calibration_shapes;
    the others `batch_size` rows (the last step what is left). Slicing every input by `batch_size` fed
    gtcrn's caches one row of their two, which ONNX Runtime refused ("Got: 1 Expected: 2")."""
    import onnx

    first = {i.name: i.type.tensor_type.shape.dim[0].dim_value if i.type.tensor_type.shape.dim else 0
             for i in onnx.load(model, load_external_data=False).graph.input}
    rows = {name: first.get(name) or batch_size for name in arrays}
    steps = min(-(-len(a) // rows[k]) if not first.get(k) else len(a) // rows[k] for k, a in arrays.items())
    return rows, steps


def sample_feeds(arrays: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Return the runs of an archive keyed SAMPLE/INPUT (bench_quality.sample_calibration), one a sample, in
    the samples' order."""
    runs: dict[str, dict[str, np.ndarray]] = {}
    for key, value in arrays.items():
        sample, name = key.split("/", 1)
        runs.setdefault(sample, {})[name] = value
    return [runs[sample] for sample in sorted(runs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--onnx", required=True)
    parser.add_argument("--calibration", required=True,
                        help=".npz of stacked inputs keyed by input name, or of samples keyed SAMPLE/INPUT (one run each)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()

    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    with np.load(args.calibration) as archive:
        arrays = {name: archive[name] for name in archive.files}
    if any("/" in name for name in arrays):  # samples of their own shapes, or a scalar input: one run each
        feeds = sample_feeds(arrays)
    else:
        rows, steps = step_rows(args.onnx, arrays, args.batch_size)
        feeds = [{k: v[step * rows[k]:(step + 1) * rows[k]] for k, v in arrays.items()} for step in range(steps)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter(feeds)

        def get_next(self):
            return next(self.feeds, None)

    quantize_static(args.onnx, args.output, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    op_types_to_quantize=OP_TYPES,
                    extra_options=extra_options(OP_TYPES))


if __name__ == "__main__":
    main()
