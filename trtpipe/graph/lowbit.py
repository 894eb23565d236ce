"""INT4 weight-only and NVFP4 typed ONNX: the FP16 graph with its MatMul weights (and the word
embedding table) stored in four bits, in the patterns TensorRT parses.

INT4 (SM 8.0+): a signed INT4 initializer W[K, N] -> DequantizeLinear(W, s FLOAT16 [K/bs, N],
axis=0, block_size=bs) -> MatMul on FP16 activations. Opset 21, no zero point.

NVFP4 (SM 10.0+): weights FLOAT4E2M1 [N, K] -> DequantizeLinear(FP8 E4M3 scales [N, K/16], global)
-> DequantizeLinear(W, that, axis=-1, block_size=16) -> Transpose -> MatMul; activations
quantized at run time by TensorRT's TRT_FP4DynamicQuantize (domain trt) -> two DequantizeLinear,
with a global scale from the calibration cache's amax. Opset 23.

Both start from the FP32 model and convert it to FP16 first (trtpipe.graph.half), so every other
op computes as in the fp16 engine; the quantized weights come from the FP32 values.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from trtpipe.calibrators.cache import CalibrationTable
from trtpipe.calibrators.lowbit import (
    DEFAULT_INT4_BLOCK,
    FP4_BLOCK,
    INT4_BLOCK_SIZES,
    fp4_global_scale,
    quantize_fp4,
    quantize_int4,
)
from trtpipe.errors import NothingToQuantize, TrtpipeError
from trtpipe.graph import onnxio, toolkit
from trtpipe.graph.half import to_half
from trtpipe.targets import Precision

INT4_OPSET = 21  # INT4 and blocked DequantizeLinear
FP4_OPSET = 23  # FLOAT4E2M1
TRT_DOMAIN = "trt"
FP8_E4M3FN = 17  # TensorProto.FLOAT8E4M3FN: TRT_FP4DynamicQuantize's scale_type
# What an AWQ-scaled model (trtpipe.graph.awq) records, so that int4 quantizes with its block size.
BLOCK_SIZE_KEY = "trtpipe.awq.block_size"
DEFAULT_EMBEDDING_BLOCK = 32  # fp4's INT4 embedding tables: a row of 384 has 12 scales
# Tables of fewer rows stay FP16: every sample reads most of their rows (positions, token types),
# so their rounding is a bias on every token, for bytes that hardly count. MiniLM's 2-row
# token-type table alone cost 0.0024 cosine in INT4, more than its 30522-row word table (0.0014).
MIN_TABLE_ROWS = 1024


@dataclass
class LowbitReport:
    """What a low-bit pass quantized: layer names, and weight bytes before (FP16) and after."""

    layers: list[str]
    embeddings: list[str]
    fp16_bytes: int = 0  # the quantized layers' weights in FP16
    quantized_bytes: int = 0  # the same weights as stored: 4-bit values and their scales
    embedding_fp16_bytes: int = 0
    embedding_bytes: int = 0

    def count(self, fp16: int, quantized: int, embedding: bool = False) -> None:
        if embedding:
            self.embedding_fp16_bytes += fp16
            self.embedding_bytes += quantized
        else:
            self.fp16_bytes += fp16
            self.quantized_bytes += quantized


def awq_block_size(model) -> int | None:
    """Return the INT4 block size an AWQ-scaled model was searched for, if it is one."""
    for prop in model.metadata_props:
        if prop.key == BLOCK_SIZE_KEY:
            if not prop.value.strip().isdigit():
                raise TrtpipeError(f"the model's metadata {BLOCK_SIZE_KEY} = {prop.value[:40]!r} is not a block size; "
                                   "rerun 'trtpipe awq' on the original model")
            return int(prop.value)
    return None


def int4_block(model, requested: int | None = None, default: int | None = None) -> int:
    """Return the INT4 block size for `model`: `requested` (--block-size), else the one an AWQ-scaled
    model was searched for, else `default` (the spec's), else 128.

    A requested size other than the AWQ model's is refused: its scales and clips were chosen for
    its own blocks (and GPTQ's rounding only survives in them).
    """
    recorded = awq_block_size(model)
    block = requested or recorded or default or DEFAULT_INT4_BLOCK
    if block not in INT4_BLOCK_SIZES:
        raise TrtpipeError(f"--block-size {block}: TensorRT takes INT4 blocks of {', '.join(map(str, INT4_BLOCK_SIZES))}")
    if requested and recorded and requested != recorded:
        raise TrtpipeError(f"--block-size {requested}: the model was AWQ-scaled for blocks of {recorded}; rerun "
                           f"'trtpipe awq --block-size {requested}' on the original model, or leave --block-size out")
    return block


def _layer_weights(half, exclude_names: set[str]):
    """Yield (node, input slot, weight name, transposed) for MatMul/Gemm reading a 2-D FP16 initializer."""
    from onnx import TensorProto

    inits = {init.name: init for init in half.graph.initializer}
    for node in half.graph.node:
        if node.op_type not in ("MatMul", "Gemm") or toolkit.label(node) in exclude_names:
            continue
        init = inits.get(node.input[1])
        if init is None or init.data_type != TensorProto.FLOAT16 or len(init.dims) != 2:
            continue  # an FP32 copy (a kept node), a computed or batched operand
        attrs = toolkit.attributes(node)
        # alpha = 1.0, as torch.onnx writes every Linear, is the product itself: only another scale stays out.
        if node.op_type == "Gemm" and (attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0):
            continue
        yield node, 1, node.input[1], node.op_type == "Gemm" and attrs.get("transB", 0) == 1


def _embedding_tables(half):
    """Yield (node, table name) for Gather axis 0 on a 2-D FP16 initializer: word embeddings."""
    from onnx import TensorProto

    inits = {init.name: init for init in half.graph.initializer}
    for node in half.graph.node:
        axis = toolkit.attribute(node, "axis", 0)
        init = inits.get(node.input[0]) if node.op_type == "Gather" else None
        if init is not None and axis == 0 and init.data_type == TensorProto.FLOAT16 and len(init.dims) == 2:
            yield node, node.input[0]


def _kept_names(model, exclude: Iterable[str]) -> set[str]:
    from trtpipe.graph.keep import node_matches

    exclude = list(exclude)
    return {toolkit.label(node) for node in model.graph.node if exclude and node_matches(node, exclude)}


def _finish(half, new_nodes_before: dict[str, list], new_inits: list):
    """Put each node's new DequantizeLinear chain right before it, drop unread initializers."""
    nodes = []
    for node in half.graph.node:
        nodes.extend(new_nodes_before.get(node.output[0], []))
        nodes.append(node)
    del half.graph.node[:]
    half.graph.node.extend(nodes)
    used = toolkit.names_needed(half.graph, nodes)
    kept = [init for init in half.graph.initializer if init.name in used]
    del half.graph.initializer[:]
    half.graph.initializer.extend(kept + new_inits)
    half.ir_version = max(half.ir_version, onnxio.IR_VERSION)  # INT4 needs IR 10 (an exported IR 8 keeps 8)
    return half


def _fp32_arrays(model) -> dict[str, np.ndarray]:
    from onnx import TensorProto, numpy_helper

    return {init.name: numpy_helper.to_array(init) for init in model.graph.initializer
            if init.data_type == TensorProto.FLOAT and len(init.dims) == 2}


def int4_model(model, exclude: Iterable[str] = (), block: int | None = None,
               embeddings: bool = True) -> tuple[object, LowbitReport]:
    """Return the INT4 weight-only typed ONNX of the FP32 `model`, and what it quantized.

    `block` rows share a scale (32, 64 or 128); None: the block size an AWQ-scaled model was
    searched for, else 128. Layers whose K does not split into blocks stay FP16. `embeddings`:
    word-embedding tables (Gather on an initializer) too, blocked along their rows' width.
    """
    block = int4_block(model, block)
    exclude = list(exclude)
    fp32 = _fp32_arrays(model)
    half = to_half(onnxio.with_opset(model, INT4_OPSET), Precision.FP16, keep=exclude)
    report = LowbitReport([], [])
    writer = _Int4Writer(block, report, toolkit.NewNames(half.graph))
    kept = _kept_names(model, exclude)
    for node, slot, name, transposed in list(_layer_weights(half, kept)):
        weight = fp32[name].T if transposed else fp32[name]  # Gemm(transB=1) reads W[N, K]: blocks run along K
        if weight.shape[0] % block:
            continue  # stays FP16, as the graph has it (transB included)
        if transposed:  # store W^T, read without transB
            toolkit.set_attribute(node, "transB", 0)
            name = f"{name}__t"
        node.input[slot] = writer.dequantized(name, weight, 0, node.output[0])
        report.layers.append(toolkit.label(node))
    if embeddings:
        writer.embeddings(half, fp32, kept)
    if not report.layers:
        raise NothingToQuantize(f"nothing was quantized to int4: no MatMul or Gemm with a constant 2-D weight whose rows split "
                           f"into blocks of {block}; check --exclude")
    return _finish(half, writer.before, writer.inits), report


class _Int4Writer:
    """Writes INT4 weights with their DequantizeLinear, each once, and counts the bytes."""

    def __init__(self, block: int, report: LowbitReport, names: toolkit.NewNames):
        self.block, self.report, self.names = block, report, names
        self.inits: list = []
        self.before: dict[str, list] = {}
        self.done: dict[str, str] = {}  # weight -> its DequantizeLinear output

    def dequantized(self, name: str, weight: np.ndarray, axis: int, reader: str, embedding: bool = False) -> str:
        """Return the DequantizeLinear output standing for `weight`, blocked along `axis`, run before `reader`."""
        import ml_dtypes
        from onnx import helper, numpy_helper

        if name not in self.done:
            q = quantize_int4(weight if axis == 0 else weight.T, self.block)
            values, scales = (q.values, q.scales) if axis == 0 else (q.values.T, q.scales.T)
            stored, scale, dq = (self.names.new(f"{name}{suffix}") for suffix in ("__int4", "__int4_scale", "__dq"))
            self.inits += [numpy_helper.from_array(values.astype(ml_dtypes.int4), stored),
                           numpy_helper.from_array(scales.astype(np.float16), scale)]
            self.before.setdefault(reader, []).append(helper.make_node(
                "DequantizeLinear", [stored, scale], [dq], axis=axis, block_size=self.block, name=f"{name}/DequantizeLinear"))
            self.done[name] = dq
            self.report.count(weight.size * 2, (weight.size + 1) // 2 + scales.size * 2, embedding)
        return self.done[name]

    def embeddings(self, half, fp32: dict[str, np.ndarray], kept: set[str]) -> None:
        """Quantize Gather tables, blocked along each row: a looked-up row dequantizes alone."""
        for node, name in list(_embedding_tables(half)):
            table = fp32.get(name)
            if (table is None or table.shape[1] % self.block or table.shape[0] < MIN_TABLE_ROWS
                    or toolkit.label(node) in kept):
                continue
            node.input[0] = self.dequantized(name, table, 1, node.output[0], embedding=True)
            self.report.embeddings.append(toolkit.label(node))


def fp4_model(model, table: CalibrationTable, exclude: Iterable[str] = (),
              embeddings: bool = True) -> tuple[object, LowbitReport]:
    """Return the NVFP4 typed ONNX of the FP32 `model` (weights and activations), and what it quantized.

    Each quantized layer's activation needs its amax in `table` (max calibration, e.g. the fp8
    cache): it sets the global scale that keeps the dynamic FP8 block scales in range.
    `embeddings`: word-embedding tables in INT4 (blocks of 32), as int4 stores them.
    """
    import ml_dtypes
    from onnx import helper, numpy_helper

    exclude = list(exclude)
    fp32 = _fp32_arrays(model)
    half = to_half(onnxio.with_opset(model, FP4_OPSET), Precision.FP16, keep=exclude)
    report = LowbitReport([], [])
    new_inits: list = []
    before: dict[str, list] = {}  # node output -> the nodes to put before that node
    weights_done: dict[str, str] = {}  # weight -> its dequantized name
    acts_done: dict[str, str] = {}  # activation -> its dequantized name
    names = toolkit.NewNames(half.graph)
    kept = _kept_names(model, exclude)
    missing = []
    for node, slot, name, transposed in list(_layer_weights(half, kept)):
        weight_nk = fp32[name] if transposed else fp32[name].T
        activation = _fp32_name(node.input[0])
        if weight_nk.shape[1] % FP4_BLOCK:
            continue
        if activation not in table.amax:
            missing.append(activation)
            continue
        if name not in weights_done:
            q = quantize_fp4(weight_nk)
            w = {part: names.new(f"{name}__{part}") for part in ("fp4", "fp4_scale", "fp4_global", "fp4_block", "dq_nk", "dq")}
            new_inits += [numpy_helper.from_array(q.values.astype(ml_dtypes.float4_e2m1fn), w["fp4"]),
                          numpy_helper.from_array(q.scales.astype(ml_dtypes.float8_e4m3fn), w["fp4_scale"]),
                          numpy_helper.from_array(np.array(q.global_scale, np.float16), w["fp4_global"])]
            before.setdefault(node.output[0], []).extend([
                helper.make_node("DequantizeLinear", [w["fp4_scale"], w["fp4_global"]], [w["fp4_block"]],
                                 name=f"{name}/DequantizeLinear_scale"),
                helper.make_node("DequantizeLinear", [w["fp4"], w["fp4_block"]], [w["dq_nk"]],
                                 axis=-1, block_size=FP4_BLOCK, name=f"{name}/DequantizeLinear"),
                helper.make_node("Transpose", [w["dq_nk"]], [w["dq"]], perm=[1, 0], name=f"{name}/Transpose"),
            ])
            weights_done[name] = w["dq"]
            report.count(weight_nk.size * 2, weight_nk.size // 2 + q.scales.size + 2)
        if transposed:
            toolkit.set_attribute(node, "transB", 0)
        node.input[slot] = weights_done[name]
        source = node.input[0]
        if source not in acts_done:
            a = {part: names.new(f"{source}__fp4_{part}") for part in ("global", "k", "lead", "shape", "in", "q", "scale",
                                                                     "block", "dq")}
            global_scale = fp4_global_scale(table.amax[activation])
            new_inits += [numpy_helper.from_array(np.array(global_scale, np.float16), a["global"]),
                          numpy_helper.from_array(np.array([weight_nk.shape[1]], np.int64), a["k"])]
            # TensorRT needs the blocked axis's extent at build time; a Reshape computed from shapes
            # (attention heads merged back) hides it, so restate it: [..., K].
            before.setdefault(node.output[0], []).extend([
                helper.make_node("Shape", [source], [a["lead"]], end=-1, name=f"{source}/Shape_fp4"),
                helper.make_node("Concat", [a["lead"], a["k"]], [a["shape"]], axis=0, name=f"{source}/Concat_fp4"),
                helper.make_node("Reshape", [source, a["shape"]], [a["in"]], name=f"{source}/Reshape_fp4"),
                helper.make_node("TRT_FP4DynamicQuantize", [a["in"], a["global"]], [a["q"], a["scale"]],
                                 domain=TRT_DOMAIN, axis=-1, block_size=FP4_BLOCK, scale_type=FP8_E4M3FN,
                                 name=f"{source}/TRT_FP4DynamicQuantize"),
                helper.make_node("DequantizeLinear", [a["scale"], a["global"]], [a["block"]],
                                 name=f"{source}/DequantizeLinear_scale"),
                helper.make_node("DequantizeLinear", [a["q"], a["block"]], [a["dq"]],
                                 axis=-1, block_size=FP4_BLOCK, name=f"{source}/DequantizeLinear"),
            ])
            acts_done[source] = a["dq"]
        node.input[0] = acts_done[source]
        report.layers.append(toolkit.label(node))
    if not report.layers:
        if missing:
            raise TrtpipeError(f"--cache: no amax for '{missing[0]}' (and {len(missing) - 1} more) that fp4 needs; "
                               "calibrate this model with 'trtpipe calibrate --precision fp8'")
        raise NothingToQuantize("nothing was quantized to fp4: no MatMul or Gemm with a constant 2-D weight whose "
                           f"input channels split into blocks of {FP4_BLOCK}; check --exclude")
    if embeddings:  # FP4 has no Gather; the tables take INT4, which every FP4 target runs too
        writer = _Int4Writer(DEFAULT_EMBEDDING_BLOCK, report, names)
        writer.embeddings(half, fp32, kept)
        new_inits += writer.inits
        for reader, nodes in writer.before.items():
            before.setdefault(reader, []).extend(nodes)
    half.opset_import.append(helper.make_opsetid(TRT_DOMAIN, 1))
    return _finish(half, before, new_inits), report


def _fp32_name(half_name: str) -> str:
    """Return the FP32 model's name of a tensor of the FP16 graph (to_half renames graph inputs)."""
    return half_name.removesuffix(f"__{Precision.FP16}")


def lowbit_model(model, precision: Precision, table: CalibrationTable | None, exclude: Iterable[str] = (),
                 block: int | None = None):
    """Return the typed ONNX of `model` for int4 (in blocks of `block`, see int4_block) or fp4 (the
    branch trtpipe.graph.typed calls)."""
    if precision is Precision.INT4:
        return int4_model(model, exclude, block)[0]
    if table is None:
        raise TrtpipeError("--precision fp4 needs --cache CACHE (max calibration, e.g. 'trtpipe calibrate --precision fp8')")
    return fp4_model(model, table, exclude)[0]
