"""Which tensors get Q/DQ: the inputs of the layers TensorRT runs in INT8/FP8 from Q/DQ.

Calibration and Q/DQ insertion both ask this module, so the cache always holds the scales that
quantization needs. Inputs of excluded nodes are calibrated too: changing `--exclude` never needs
a new calibration.
"""

from __future__ import annotations

# op type -> (input slots that are activations when not constant, slots that may hold the weight).
# MatMul and Gemm take a constant on either side (W @ x as well as x @ W); the second slot is asked first.
QUANTIZED_OPS = {
    "Conv": ((0,), (1,)),
    "ConvTranspose": ((0,), (1,)),
    "Gemm": ((0, 1), (1, 0)),
    "MatMul": ((0, 1), (1, 0)),
}


def constant_names(model) -> set[str]:
    """Return the names of initializers and Constant outputs: the tensors that are weights."""
    names = {init.name for init in model.graph.initializer}
    names.update(node.output[0] for node in model.graph.node if node.op_type == "Constant")
    return names


def activation_inputs(node, constants: set[str]) -> list[str]:
    """Return the inputs of `node` that need a per-tensor activation scale."""
    slots, _ = QUANTIZED_OPS.get(node.op_type, ((), ()))
    return [node.input[i] for i in slots if i < len(node.input) and node.input[i] and node.input[i] not in constants]


def weight_slot(node, constants: set[str]) -> int | None:
    """Return the input slot of `node`'s constant weight, if it has one."""
    _, slots = QUANTIZED_OPS.get(node.op_type, ((), ()))
    return next((i for i in slots if i < len(node.input) and node.input[i] in constants), None)


def weight_input(node, constants: set[str]) -> str | None:
    """Return the constant weight input of `node`, if it has one."""
    slot = weight_slot(node, constants)
    return node.input[slot] if slot is not None else None


def quantized_activations(model) -> list[str]:
    """Return the activation tensors to calibrate, in graph order, each once."""
    constants = constant_names(model)
    names: dict[str, None] = {}
    for node in model.graph.node:
        for name in activation_inputs(node, constants):
            names[name] = None
    return list(names)
