"""AWQ for INT4 weight-only: search scales and clips on calibration data, fold them into the FP32 model.

The result is an FP32 ONNX whose round-to-nearest INT4 *is* the AWQ quantization: each weight's rows
are multiplied by the searched scales and clipped to the searched block ranges, and a Mul divides
the activation by the scales before the layers that read it (TensorRT builds it in the INT4
pattern). The block size it was searched for is recorded in the model, so `--precision int4`
quantizes with the same blocks. In FP32 the model differs from the original only by the clipping.

With `gptq`, the scaled weights are rounded by GPTQ's error compensation (trtpipe.calibrators.gptq) with
AWQ's block scales and folded as INT4 values times scales: `--precision int4` rounds them back to
the same values, so its round-to-nearest is then the AWQ+GPTQ quantization. Embedding tables are
clipped to their least INT4 rounding error (clip_tables).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from trtpipe.calibrators.awq import ALPHA_GRID, AwqLayerResult, clipped, output_error, search_clip_mse, search_layer
from trtpipe.calibrators.collect import exposed_activations
from trtpipe.calibrators.gptq import gptq_int4, gram
from trtpipe.calibrators.lowbit import DEFAULT_INT4_BLOCK, INT4_BLOCK_SIZES
from trtpipe.errors import TrtpipeError
from trtpipe.graph import toolkit
from trtpipe.graph.lowbit import BLOCK_SIZE_KEY, MIN_TABLE_ROWS
from trtpipe.graph.smooth import ChannelScales, smoothable_layers

DEFAULT_TOKENS = 1024  # sample rows per activation the search runs on


@dataclass
class ActivationSample:
    """Mean |x| per channel over every row seen, a random sample of rows for the search, and (for
    GPTQ) X^T X over every row seen."""

    total: np.ndarray | None = None
    count: int = 0
    rows: list[np.ndarray] = field(default_factory=list)
    gram: np.ndarray | None = None  # float64 [K, K]; None unless asked for

    def update(self, value: np.ndarray, keep: int, rng: np.random.Generator, mask: np.ndarray | None = None,
               with_gram: bool = False) -> None:
        flat = value.reshape(-1, value.shape[-1]).astype(np.float32)
        if mask is not None and mask.size == flat.shape[0]:
            flat = flat[mask.reshape(-1) != 0]  # padding tokens: computed, but no output reads them
        total = np.abs(flat).sum(axis=0, dtype=np.float64)
        self.total = total if self.total is None else self.total + total
        if with_gram:
            rows = gram(flat)
            self.gram = rows if self.gram is None else self.gram + rows
        self.count += flat.shape[0]
        self.rows.append(flat[rng.choice(flat.shape[0], min(keep, flat.shape[0]), replace=False)])

    def mean(self) -> np.ndarray:
        assert self.total is not None, "mean of no rows"  # awq() refuses data without samples first
        return np.asarray(self.total / max(self.count, 1), np.float32)

    def sample(self, tokens: int, rng: np.random.Generator) -> np.ndarray:
        rows = np.concatenate(self.rows)
        return rows[rng.choice(rows.shape[0], min(tokens, rows.shape[0]), replace=False)]


@dataclass
class AwqSummary:
    """Per activation: the layers that read it, alpha, and output error of RTN and AWQ on the samples
    (and of AWQ with GPTQ's rounding, where it ran)."""

    block: int
    layers: dict[str, AwqLayerResult] = field(default_factory=dict)
    gptq_errors: dict[str, float] = field(default_factory=dict)
    tables: list[str] = field(default_factory=list)  # embedding tables clipped for INT4

    def error_ratio(self, gptq: bool = True) -> float:
        """Return the summed output error over round-to-nearest's (below 1 is better): AWQ+GPTQ's where
        GPTQ ran and `gptq`, else AWQ's."""
        rtn = sum(r.rtn_error for r in self.layers.values())
        final = sum(self.gptq_errors[a] if gptq and a in self.gptq_errors else r.awq_error for a, r in self.layers.items())
        return final / rtn if rtn > 0 else 1.0


def awq_layers(model, block: int) -> dict[str, list]:
    """Return {activation: [MatMul nodes reading it]} whose weights split into INT4 blocks."""
    from onnx import numpy_helper

    weights = {init.name: init for init in model.graph.initializer}
    layers = {}
    for activation, nodes in smoothable_layers(model).items():
        nodes = [n for n in nodes if numpy_helper.to_array(weights[n.input[1]]).shape[0] % block == 0]
        if nodes:
            layers[activation] = nodes
    return layers


def with_block_size(model, block: int):
    """Return a copy of `model` that int4 quantizes in blocks of `block`, by plain round-to-nearest."""
    import onnx

    if block not in INT4_BLOCK_SIZES:
        raise TrtpipeError(f"--block-size {block}: TensorRT takes INT4 blocks of {', '.join(map(str, INT4_BLOCK_SIZES))}")
    model = toolkit.copy(model)
    onnx.helper.set_model_props(model, {**{p.key: p.value for p in model.metadata_props}, BLOCK_SIZE_KEY: str(block)})
    return model


def awq(model, batches: Iterable[Mapping[str, np.ndarray]], block: int = DEFAULT_INT4_BLOCK,
        tokens: int = DEFAULT_TOKENS, grid: int = ALPHA_GRID, clip: bool = True, seed: int = 0,
        mask_input: str | None = "attention_mask", gptq: bool = False):
    """Return a copy of the FP32 `model` with AWQ's scales and clips folded in, and what was found.

    `mask_input`: a model input of shape [batch, tokens] whose zeros mark padding; activation rows
    of padding tokens are left out of the statistics when the activation has one row per token.
    `gptq`: round the scaled weights by GPTQ (trtpipe.calibrators.gptq, on X^T X of every calibration row)
    instead of to nearest, with AWQ's block scales; the folded weights are then the INT4 values
    times their scales, which `--precision int4` rounds back to exactly those values.
    """
    if block not in INT4_BLOCK_SIZES:
        raise TrtpipeError(f"--block-size {block}: TensorRT takes INT4 blocks of {', '.join(map(str, INT4_BLOCK_SIZES))}")
    model = toolkit.copy(model)
    layers = awq_layers(model, block)
    if not layers:
        raise TrtpipeError(f"nothing for AWQ: no MatMul with a constant 2-D FP32 weight whose rows split into blocks of {block}")
    rng = np.random.default_rng(seed)
    samples = {name: ActivationSample() for name in layers}
    current: dict = {}

    def remembered(batches):
        for batch in batches:
            current["mask"] = np.asarray(batch[mask_input]) if mask_input and mask_input in batch else None
            yield batch

    for values in exposed_activations(model, list(layers), remembered(batches)):
        for name, value in values.items():
            samples[name].update(value, max(tokens // 4, 64), rng, current.get("mask"), with_gram=gptq)
        del values
    if not samples[next(iter(samples))].count:
        raise TrtpipeError("--data: no samples were read; AWQ needs calibration data")

    summary = AwqSummary(block)
    folder = ChannelScales(model, "__awq", "__awq_inverse", "AWQ")
    for activation, nodes in layers.items():
        arrays = [folder.weight(n) for n in nodes]
        sample = samples[activation]
        if any(a.shape[0] != sample.mean().shape[0] for a in arrays):
            continue  # the weight's rows are not the activation's channels
        x = sample.sample(tokens, rng)
        result = search_layer(x, sample.mean(), arrays, block, grid, clip)
        summary.layers[activation] = result
        scaled = [array * result.scales[:, None] for array in arrays]
        if gptq:
            assert sample.gram is not None  # update() gathers it when gptq is asked for
            folded, summary.gptq_errors[activation] = _gptq_rounded(sample.gram, x, result, scaled, block)
        else:
            folded = [clipped(array, amax, block) for array, amax in zip(scaled, result.clips)]
        folder.fold(activation, nodes, result.scales, folded)
    folder.finish()
    if clip:
        summary.tables = clip_tables(model, block)
    return with_block_size(model, block), summary


def clip_tables(model, block: int) -> list[str]:
    """Clip each embedding table (Gather on a 2-D FP32 initializer) in place to the block ranges that
    minimise its INT4 rounding error, blocks along its rows as int4 stores them; return their names."""
    from onnx import TensorProto, numpy_helper

    inits = {init.name: init for init in model.graph.initializer}
    readers = toolkit.readers(model.graph)
    done = []
    for node in model.graph.node:
        # A table another layer also reads (tied embeddings) keeps its values: the clip is the table's alone.
        init = inits.get(node.input[0]) if node.op_type == "Gather" and readers[node.input[0]] == 1 else None
        axis = toolkit.attribute(node, "axis", 0)
        if (init is None or axis != 0 or init.data_type != TensorProto.FLOAT or len(init.dims) != 2
                or init.dims[1] % block or init.dims[0] < MIN_TABLE_ROWS or init.name in done):
            continue
        table_t = numpy_helper.to_array(init).T  # [width, rows]: blocks along axis 0
        init.CopyFrom(numpy_helper.from_array(clipped(table_t, search_clip_mse(table_t, block), block).T.copy(), init.name))
        done.append(init.name)
    return done


def _gptq_rounded(gram: np.ndarray, x: np.ndarray, result: AwqLayerResult, scaled: list[np.ndarray],
                  block: int) -> tuple[list[np.ndarray], float]:
    """Return the AWQ-scaled weights rounded by GPTQ (dequantized, on their INT4 grid), and their
    summed output error on the rows `x` AWQ searched on."""
    s = result.scales.astype(np.float64)
    hessian = gram / np.outer(s, s)  # the layers read x / s
    rounded = [gptq_int4(w, hessian, block, amax).dequantize() for w, amax in zip(scaled, result.clips)]
    xs = x / result.scales
    return rounded, sum(output_error(xs, w, q) for w, q in zip(scaled, rounded))
