"""Where INT4 loses accuracy: each MatMul (and the embedding tables) quantized alone, the rest FP32.

The FP32 model with one weight replaced by its INT4 round-to-nearest values (dequantized, so ONNX
Runtime runs it in FP32 and only that weight's rounding shows), cosine against the FP32 model per
validation sample. Also: every MatMul at once, and the tables alone.

    python scripts/lowbit_layers.py build/minilm/minilm.onnx --spec models/minilm/model.toml --block-size 32
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trtpipe import data
from trtpipe.calibrators.lowbit import quantize_int4
from trtpipe.graph import onnxio
from trtpipe.quality.metrics import cosine_per_sample
from trtpipe.spec import load_spec


def run(model, batches):
    from trtpipe.graph.sessions import session

    runner = session(model)
    return np.concatenate([runner.run(None, b)[0] for b in batches])


def replaced(model, weights: dict[str, np.ndarray]):
    from onnx import numpy_helper

    from trtpipe.graph import toolkit

    copy = toolkit.copy(model)
    for init in copy.graph.initializer:
        if init.name in weights:
            init.CopyFrom(numpy_helper.from_array(weights[init.name], init.name))
    return copy


def main() -> None:
    from onnx import numpy_helper

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="FP32 ONNX")
    parser.add_argument("--spec", type=Path, required=True)
    parser.add_argument("--block-size", type=int, default=32)
    parser.add_argument("--limit", type=int, default=64, help="validation samples")
    args = parser.parse_args()
    spec = load_spec(args.spec)
    model = onnxio.load(args.model)
    batches = [b.arrays for b in data.iter_batches(spec, args.spec.parent / spec.validation, 16, args.limit)]
    reference = run(model, batches)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    bs = args.block_size
    layers, tables = {}, {}
    for node in model.graph.node:
        if node.op_type == "MatMul" and node.input[1] in inits and inits[node.input[1]].ndim == 2:
            layers[node.name] = node.input[1]
        if node.op_type == "Gather" and node.input[0] in inits and inits[node.input[0]].ndim == 2:
            tables[node.name] = node.input[0]

    def rtn(name, axis=0):
        """The weight on its INT4 round-to-nearest grid, blocks along `axis` (a table's: its width)."""
        w = inits[name]
        return quantize_int4(w, bs).dequantize() if axis == 0 else quantize_int4(w.T, bs).dequantize().T

    def score(label, weights):
        cos = cosine_per_sample(run(replaced(model, weights), batches), reference)
        print(f"{cos.mean():.5f}  {cos.min():.5f}  {label}", flush=True)

    print("mean     min      quantized alone (the rest FP32)")
    score("embedding tables", {t: rtn(t, 1) for t in tables.values()})
    for node, weight in layers.items():
        score(node, {weight: rtn(weight)})
    score("every MatMul", {w: rtn(w) for w in layers.values()})
    score("every MatMul and table", {**{w: rtn(w) for w in layers.values()}, **{t: rtn(t, 1) for t in tables.values()}})


if __name__ == "__main__":
    main()
