"""Make a typed ONNX runnable on ONNX Runtime's CPU provider without changing its numerics.

FP16 and Q/DQ graphs run as they are. BF16 graphs do not (the CPU provider has no bf16 kernels),
so each bf16 tensor becomes float32 rounded to bf16 after the node that makes it: the same values
TensorRT stores, computed with float32 arithmetic inside each op.
"""

from __future__ import annotations

import numpy as np

from trtpipe.graph import onnxio


def has_bfloat16(model) -> bool:
    from onnx import TensorProto

    return TensorProto.BFLOAT16 in onnxio.tensor_types(model).values()


def for_cpu(model):
    """Return `model` if the CPU provider runs it, else the bf16-rounding float32 rewrite."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    if not has_bfloat16(model):
        return model
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    bf16 = {name for name, t in onnxio.tensor_types(model).items() if t == TensorProto.BFLOAT16}
    for init in graph.initializer:
        if init.data_type == TensorProto.BFLOAT16:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float32), init.name))
    for value in list(graph.input) + list(graph.output):
        if value.type.tensor_type.elem_type == TensorProto.BFLOAT16:
            value.type.tensor_type.elem_type = TensorProto.FLOAT
    nodes = []
    for node in graph.node:
        for attr in node.attribute:
            if attr.name == "value" and attr.t.data_type == TensorProto.BFLOAT16:
                attr.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(attr.t).astype(np.float32), attr.t.name))
        rounding = []
        for i, name in enumerate(node.output):
            if name in bf16:
                node.output[i] = f"{name}__unrounded"
                rounding += [helper.make_node("Cast", [node.output[i]], [f"{name}__bf16"], to=TensorProto.BFLOAT16),
                             helper.make_node("Cast", [f"{name}__bf16"], [name], to=TensorProto.FLOAT)]
        if node.op_type == "Cast":
            for attr in node.attribute:
                if attr.name == "to" and attr.i == TensorProto.BFLOAT16:
                    attr.i = TensorProto.FLOAT  # the rounding casts after it do the narrowing
        nodes.append(node)
        nodes.extend(rounding)
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    return model
