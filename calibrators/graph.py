"""Which tensors get Q/DQ: the inputs of the layers TensorRT runs in INT8/FP8 from Q/DQ.

Calibration and Q/DQ insertion both ask this module, so the cache always holds the scales that
quantization needs. Inputs of excluded nodes are calibrated too: changing `--exclude` never needs
a new calibration.
"""

from __future__ import annotations

# op type -> (input slots that are activations when not constant, the weight slot)
QUANTIZED_OPS = {
    "Conv": ((0,), 1),
    "ConvTranspose": ((0,), 1),
    "Gemm": ((0,), 1),
    "MatMul": ((0, 1), 1),
}


def constant_names(model) -> set[str]:
    """Return the names of initializers and Constant outputs: the tensors that are weights."""
    names = {init.name for init in model.graph.initializer}
    names.update(node.output[0] for node in model.graph.node if node.op_type == "Constant")
    return names


def activation_inputs(node, constants: set[str]) -> list[str]:
    """Return the inputs of `node` that need a per-tensor activation scale."""
    slots, _ = QUANTIZED_OPS.get(node.op_type, ((), None))
    return [node.input[i] for i in slots if i < len(node.input) and node.input[i] not in constants]


def weight_input(node, constants: set[str]) -> str | None:
    """Return the constant weight input of `node`, if it has one."""
    _, slot = QUANTIZED_OPS.get(node.op_type, ((), None))
    if slot is not None and slot < len(node.input) and node.input[slot] in constants:
        return node.input[slot]
    return None


def quantized_activations(model) -> list[str]:
    """Return the activation tensors to calibrate, in graph order, each once."""
    constants = constant_names(model)
    names: dict[str, None] = {}
    for node in model.graph.node:
        for name in activation_inputs(node, constants):
            names[name] = None
    return list(names)
