"""Make a typed ONNX runnable on ONNX Runtime's CPU provider without changing its numerics.

FP16, Q/DQ and INT4 graphs run as they are. BF16 graphs do not (the CPU provider has no bf16 kernels),
so each bf16 tensor becomes float32 rounded to bf16 after the node that makes it: the same values
TensorRT stores, computed with float32 arithmetic inside each op. NVFP4 graphs do not either (no FP4
kernels, no TRT_FP4DynamicQuantize): see fp4_for_cpu below.
"""

from __future__ import annotations

import numpy as np

from trtpipe.graph import onnxio, toolkit


def has_bfloat16(model) -> bool:
    from onnx import TensorProto

    return TensorProto.BFLOAT16 in onnxio.tensor_types(model).values()


def for_cpu(model):
    """Return `model` if the CPU provider runs it, else the rewrite that does (bf16 or NVFP4)."""
    from onnx import TensorProto, helper, numpy_helper

    if has_fp4(model):
        model = fp4_for_cpu(model)
    if not has_bfloat16(model):
        return model
    model = toolkit.copy(model)
    graph = model.graph
    names = toolkit.NewNames(graph)
    bf16 = {name for name, t in onnxio.tensor_types(model).items() if t == TensorProto.BFLOAT16}
    for init in graph.initializer:
        if init.data_type == TensorProto.BFLOAT16:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float32), init.name))
    for value in list(graph.input) + list(graph.output):
        if value.type.tensor_type.elem_type == TensorProto.BFLOAT16:
            value.type.tensor_type.elem_type = TensorProto.FLOAT
    nodes = []
    for node in graph.node:
        value = toolkit.attribute(node, "value")
        if isinstance(value, TensorProto) and value.data_type == TensorProto.BFLOAT16:
            value.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(value).astype(np.float32), value.name))
        rounding = []
        for i, name in enumerate(node.output):
            if name in bf16:
                node.output[i], rounded = names.new(f"{name}__unrounded"), names.new(f"{name}__bf16")
                rounding += [helper.make_node("Cast", [node.output[i]], [rounded], to=TensorProto.BFLOAT16),
                             helper.make_node("Cast", [rounded], [name], to=TensorProto.FLOAT)]
        if node.op_type == "Cast" and toolkit.attribute(node, "to") == TensorProto.BFLOAT16:
            toolkit.set_attribute(node, "to", TensorProto.FLOAT)  # the rounding casts after it do the narrowing
        nodes.append(node)
        nodes.extend(rounding)
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    return model


# ---- NVFP4 ------------------------------------------------------------------------------------
# ONNX Runtime has no FP4 kernels and no TRT_FP4DynamicQuantize. The rewrite computes the same
# numbers with standard ops: weights dequantized once in numpy (exact in float32), activations
# quantized per block of 16 by a subgraph that rounds the block scale through FP8 E4M3 (a saturating
# Cast) and the values to E2M1 (Round, which ties to even, on the grid step of each binade). The
# quantized MatMul then runs in float32 on the exact dequantized operands, as an FP4 tensor core
# accumulates, and its result is cast back to FP16 for the rest of the graph.

def has_fp4(model) -> bool:
    from onnx import TensorProto

    return (any(init.data_type == TensorProto.FLOAT4E2M1 for init in model.graph.initializer)
            or any(node.op_type == "TRT_FP4DynamicQuantize" for node in model.graph.node))


def fp4_qdq_nodes(x: str, global_scale: str, out: str, prefix: str) -> tuple[list, list]:
    """Return (nodes, initializers) taking float32 `x` through NVFP4 along its last axis into `out`.

    `global_scale` is a float32 scalar. The numbers equal trtpipe.calibrators.lowbit.fp4_quantize_dequantize.
    """
    from onnx import TensorProto, helper, numpy_helper

    def const(name, value, dtype=np.float32):
        return numpy_helper.from_array(np.asarray(value, dtype), f"{prefix}{name}")

    inits = [const("block_shape", [-1, 16], np.int64), const("axes", [1], np.int64), const("six", 6.0),
             const("one", 1.0), const("zero", 0.0), const("half", 0.5), const("two", 2.0), const("four", 4.0)]
    p = prefix
    make = helper.make_node
    nodes = [
        make("Shape", [x], [f"{p}shape"]),
        make("Reshape", [x, f"{p}block_shape"], [f"{p}blocks"]),
        make("Abs", [f"{p}blocks"], [f"{p}abs"]),
        make("ReduceMax", [f"{p}abs", f"{p}axes"], [f"{p}amax"], keepdims=1),
        make("Div", [f"{p}amax", f"{p}six"], [f"{p}amax6"]),
        make("Div", [f"{p}amax6", global_scale], [f"{p}scale_wide"]),
        make("Cast", [f"{p}scale_wide"], [f"{p}scale_fp8"], to=TensorProto.FLOAT8E4M3FN, saturate=1),
        make("Cast", [f"{p}scale_fp8"], [f"{p}scale_e4m3"], to=TensorProto.FLOAT),
        make("Mul", [f"{p}scale_e4m3", global_scale], [f"{p}scale"]),
        make("Equal", [f"{p}scale", f"{p}zero"], [f"{p}scale_is_zero"]),
        make("Where", [f"{p}scale_is_zero", f"{p}one", f"{p}scale"], [f"{p}safe_scale"]),
        make("Div", [f"{p}blocks", f"{p}safe_scale"], [f"{p}scaled"]),
        make("Abs", [f"{p}scaled"], [f"{p}mag"]),
        make("Sign", [f"{p}scaled"], [f"{p}sign"]),
        # E2M1's grid step: 0.5 below 2, 1 below 4, 2 above (where it saturates at 6)
        make("Less", [f"{p}mag", f"{p}two"], [f"{p}below2"]),
        make("Less", [f"{p}mag", f"{p}four"], [f"{p}below4"]),
        make("Where", [f"{p}below4", f"{p}one", f"{p}two"], [f"{p}step_high"]),
        make("Where", [f"{p}below2", f"{p}half", f"{p}step_high"], [f"{p}step"]),
        make("Div", [f"{p}mag", f"{p}step"], [f"{p}steps"]),
        make("Round", [f"{p}steps"], [f"{p}steps_rounded"]),
        make("Mul", [f"{p}steps_rounded", f"{p}step"], [f"{p}grid"]),
        make("Min", [f"{p}grid", f"{p}six"], [f"{p}e2m1"]),
        make("Mul", [f"{p}e2m1", f"{p}sign"], [f"{p}signed"]),
        make("Mul", [f"{p}signed", f"{p}scale"], [f"{p}dequantized"]),
        make("Reshape", [f"{p}dequantized", f"{p}shape"], [out]),
    ]
    return nodes, inits


def _dequantize(values: np.ndarray, scale: np.ndarray, axis: int, block: int) -> np.ndarray:
    """Return DequantizeLinear's result in float32 (no zero point): per tensor, axis or block."""
    values = np.asarray(values).astype(np.float32)
    scale = np.asarray(scale).astype(np.float32)
    if scale.ndim == 0:
        return values * scale
    axis = axis % values.ndim
    if block:
        scale = np.repeat(scale, block, axis=axis)
    else:
        shape = [1] * values.ndim
        shape[axis] = -1
        scale = scale.reshape(shape)
    return values * scale


def fp4_for_cpu(model):
    """Return the NVFP4 typed `model` rewritten into ops ONNX Runtime's CPU provider runs."""
    from onnx import TensorProto, helper, numpy_helper

    model = toolkit.copy(model)
    graph = model.graph
    constants = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    # Only FP4 weights and their FP8 block scales are folded; INT4 tables (and all else) run as they are.
    foldable = {init.name for init in graph.initializer
                if init.data_type in (TensorProto.FLOAT4E2M1, TensorProto.FLOAT8E4M3FN)}
    exact: set[str] = set()  # float32 tensors that replace an FP16 one
    nodes, new_inits = [], []
    consumers = toolkit.consumers(graph)
    skip = set()
    for node in graph.node:
        if node.output[0] in skip:
            continue
        attrs = toolkit.attributes(node)
        if (node.op_type == "DequantizeLinear" and all(n in constants for n in node.input[:2])
                and node.input[0] in foldable):
            constants[node.output[0]] = _dequantize(constants[node.input[0]], constants[node.input[1]],
                                                    attrs.get("axis", 1), attrs.get("block_size", 0))
            exact.add(node.output[0])
            continue
        if node.op_type == "Transpose" and node.input[0] in constants and node.input[0] in exact:
            constants[node.output[0]] = np.transpose(constants[node.input[0]], attrs.get("perm"))
            exact.add(node.output[0])
            continue
        if node.op_type == "TRT_FP4DynamicQuantize":
            x, global_scale = node.input[:2]
            q, scale = node.output[:2]
            final = next(c for c in consumers[q] if c.op_type == "DequantizeLinear")
            skip.update({final.output[0]} | {c.output[0] for c in consumers[scale]})
            prefix = f"{x}__fp4sim_"
            nodes += [helper.make_node("Cast", [x], [f"{prefix}x"], to=TensorProto.FLOAT),
                      helper.make_node("Cast", [global_scale], [f"{prefix}global"], to=TensorProto.FLOAT)]
            sub_nodes, sub_inits = fp4_qdq_nodes(f"{prefix}x", f"{prefix}global", final.output[0], prefix)
            nodes += sub_nodes
            new_inits += sub_inits
            exact.add(final.output[0])
            continue
        if node.op_type in ("MatMul", "Gemm") and any(name in exact for name in node.input):
            for i, name in enumerate(node.input):
                if name not in exact and name:
                    node.input[i] = f"{name}__fp32"
                    nodes.append(helper.make_node("Cast", [name], [node.input[i]], to=TensorProto.FLOAT))
            out = node.output[0]
            node.output[0] = f"{out}__fp32"
            nodes += [node, helper.make_node("Cast", [node.output[0]], [out], to=TensorProto.FLOAT16)]
            continue
        nodes.append(node)
    used = toolkit.names_needed(graph, nodes)
    keep = [init for init in graph.initializer if init.name in used and init.data_type != TensorProto.FLOAT4E2M1]
    folded = [numpy_helper.from_array(constants[name].astype(np.float32), name)
              for name in sorted(exact) if name in constants and name in used]  # sorted: the same file every run
    del graph.initializer[:]
    graph.initializer.extend(keep + folded + new_inits)
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    for entry in list(model.opset_import):
        if entry.domain == "trt":
            model.opset_import.remove(entry)
    return model
