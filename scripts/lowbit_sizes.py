"""How many bytes the MatMul weights take in a real INT4 engine, against the FP16 engine: three engines
built in one run with TensorRT-RTX (FP16; INT4 MatMuls only; INT4 MatMuls and embedding tables).

The FP16 and INT4-MatMul engines differ only in how the MatMul weights are stored, so
    MatMul bytes in the INT4 engine = FP16 MatMul bytes - (FP16 engine - INT4-MatMul engine).

    python scripts/lowbit_sizes.py build/minilm/lowbit/awq/minilm.onnx --spec models/minilm/model.toml
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trtpipe import backend as backends
from trtpipe.build import BuildOptions, build_engine
from trtpipe.graph import onnxio
from trtpipe.graph.half import to_half
from trtpipe.graph.lowbit import int4_model
from trtpipe.spec import load_spec
from trtpipe.targets import Precision, Target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="FP32 ONNX (AWQ-scaled or not)")
    parser.add_argument("--spec", type=Path, required=True, help="model.toml (its shapes)")
    parser.add_argument("--target", default="sm_89")
    args = parser.parse_args()
    spec = load_spec(args.spec)
    options = BuildOptions(target=Target.parse(args.target), backend="tensorrt-rtx",
                           shapes=spec.shapes)
    rtx = backends.load(backends.TENSORRT_RTX)
    model = onnxio.load(args.model)
    matmuls, report = int4_model(model, embeddings=False)
    with_tables, full = int4_model(model, embeddings=True)
    sizes = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, typed, precision in (("fp16", to_half(model, Precision.FP16), Precision.FP16),
                                       ("int4 MatMuls", matmuls, Precision.INT4),
                                       ("int4 MatMuls + tables", with_tables, Precision.INT4)):
            path = onnxio.save(typed, Path(tmp) / f"{name.replace(' ', '_')}.onnx")
            engine = path.with_suffix(".engine")
            build_engine(path, engine, precision, options, rtx, args.model)
            sizes[name] = engine.stat().st_size
    for name, size in sizes.items():
        print(f"{name:24} engine {size / 1e6:7.2f} MB  ({size / sizes['fp16']:.3f}x FP16)")
    in_engine = report.fp16_bytes - (sizes["fp16"] - sizes["int4 MatMuls"])
    print(f"MatMul weights: FP16 {report.fp16_bytes / 1e6:.2f} MB; INT4 as written {report.quantized_bytes / 1e6:.2f} MB "
          f"({report.quantized_bytes / report.fp16_bytes:.3f}x); in the INT4 engine {in_engine / 1e6:.2f} MB "
          f"({in_engine / report.fp16_bytes:.3f}x)")
    print(f"embedding tables ({', '.join(full.embeddings)}): FP16 {full.embedding_fp16_bytes / 1e6:.2f} MB, "
          f"INT4 {full.embedding_bytes / 1e6:.2f} MB; engine {(sizes['int4 MatMuls'] - sizes['int4 MatMuls + tables']) / 1e6:.2f} MB smaller")


if __name__ == "__main__":
    main()
