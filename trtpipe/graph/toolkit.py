"""The graph toolkit: the one place trtpipe asks an ONNX graph who makes and who reads a tensor, reads
and sets node attributes, walks subgraphs, names new tensors, labels nodes and copies models.

Every pass works through these functions instead of its own loops, so a rule (what a node's label
is, what counts as a subgraph read) is decided once. Where a graph is walked:

- cleanup.py: constants folded and dims named (ONNX Runtime's basic optimizer does the folding);
- control.py: If conditions walked back to constants and shapes, decided Ifs replaced by a branch;
- keep.py: each node's reason to stay FP32 (shape computations walked back from their readers);
- half.py: every float tensor retyped to its maker's precision, subgraphs read their outer values in FP32;
- qdq.py: Q/DQ on the inputs of Conv/MatMul/Gemm (which inputs: trtpipe/calibrators/graph.py);
- lowbit.py, awq.py, smooth.py: MatMul weights and Gather tables rewritten;
- simulate.py: BF16 and NVFP4 graphs rewritten for the CPU provider;
- coverage.py: weights traced back through DequantizeLinear;
- trtpipe/quality/cost.py: the kernels of a graph for the latency estimate.

onnx is imported inside the functions that need it: `import trtpipe` never needs it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

Message = TypeVar("Message")

# Ops that only move a tensor's values (its layout, its rank), never change one: a weight stays that weight
# through them (coverage), a Softmax's probabilities stay probabilities (qdq).
MOVES_VALUES = ("Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Identity")


def copy(message: Message) -> Message:
    """Return a deep copy of a ModelProto, GraphProto or NodeProto: a pass never edits its caller's model."""
    clone = type(message)()
    clone.CopyFrom(message)  # type: ignore[attr-defined]
    return clone


def label(node) -> str:
    """Return the name a node goes by in --exclude lists, reports and sidecars: its name, else its
    first output, else its op type."""
    return node.name or (node.output[0] if node.output else node.op_type)


def producers(graph) -> dict[str, Any]:
    """Return {tensor: the node of `graph` that writes it} (top level; subgraphs not looked into)."""
    return {out: node for node in graph.node for out in node.output if out}


def producer_positions(graph) -> dict[str, int]:
    """Return {tensor: index in graph.node of the node that writes it} (top level)."""
    return {out: i for i, node in enumerate(graph.node) for out in node.output if out}


def consumers(graph) -> dict[str, list]:
    """Return {tensor: the nodes of `graph` that read it, in graph order} (top level)."""
    found: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            if name:
                found.setdefault(name, []).append(node)
    return found


def readers(graph) -> dict[str, int]:
    """Return how many node inputs of `graph` read each tensor (top level; subgraphs not counted)."""
    from collections import Counter

    return dict(Counter(name for node in graph.node for name in node.input))


def attribute(node, name: str, default: Any = None) -> Any:
    """Return the value of `node`'s attribute `name` (an int, float, string, tensor, graph or list), else `default`."""
    from onnx import helper

    for attr in node.attribute:
        if attr.name == name:
            return helper.get_attribute_value(attr)
    return default


def attributes(node) -> dict[str, Any]:
    """Return {name: value} of every attribute of `node`."""
    from onnx import helper

    return {attr.name: helper.get_attribute_value(attr) for attr in node.attribute}


def set_attribute(node, name: str, value: Any) -> None:
    """Set `node`'s attribute `name` to `value` in place, replacing an earlier value at its position."""
    from onnx import helper

    made = helper.make_attribute(name, value)
    for attr in node.attribute:
        if attr.name == name:
            attr.CopyFrom(made)
            return
    node.attribute.append(made)


def subgraphs(node) -> list:
    """Return the graphs `node` runs (If's branches, Loop's and Scan's bodies); [] for most nodes."""
    from onnx import AttributeProto

    found = []
    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH:
            found.append(attr.g)
        elif attr.type == AttributeProto.GRAPHS:
            found.extend(attr.graphs)
    return found


def names_read(nodes: Iterable) -> set[str]:
    """Return every tensor name `nodes` read, their subgraphs included: a subgraph's nodes and outputs
    may name values of the outer scope."""
    names: set[str] = set()
    for node in nodes:
        names.update(name for name in node.input if name)
        for graph in subgraphs(node):
            names |= names_read(graph.node) | {out.name for out in graph.output}
    return names


def keep_needed(graph, names: Iterable[str]) -> set[str]:
    """Keep only the nodes of `graph` that `names` need, in place, and return every name they need (`names`,
    and what the kept nodes read, subgraphs included). One pass from the end: ONNX orders nodes topologically."""
    needed = set(names)
    kept = []
    for node in reversed(graph.node):
        if any(out in needed for out in node.output):
            kept.append(node)
            needed |= names_read([node])
    del graph.node[:]
    graph.node.extend(reversed(kept))
    return needed


def names_needed(graph, nodes: Iterable) -> set[str]:
    """Return the names a graph made of `nodes` still needs: what they read (subgraphs included, see
    names_read) and the graph's outputs. A pass that drops unread initializers keeps these."""
    return names_read(nodes) | {out.name for out in graph.output}


def constant_value(node) -> np.ndarray | None:
    """Return the value a Constant node makes (its tensor, float or float list), None for other forms."""
    from onnx import numpy_helper

    for attr in node.attribute:
        if attr.name == "value":
            return numpy_helper.to_array(attr.t)
        if attr.name == "value_float":
            return np.array(attr.f, np.float32)
        if attr.name == "value_floats":
            return np.array(list(attr.floats), np.float32)
    return None


def tensor_names(graph) -> set[str]:
    """Return every tensor name `graph` defines or reads: inputs, outputs, initializers, node inputs
    and outputs, subgraphs included."""
    names = {v.name for v in list(graph.input) + list(graph.output) + list(graph.value_info)}
    names.update(init.name for init in graph.initializer)
    for node in graph.node:
        names.update(node.input)
        names.update(node.output)
        for inner in subgraphs(node):
            names |= tensor_names(inner)
    names.discard("")
    return names


class NewNames:
    """Names for the tensors a pass adds, each checked against every name the graph already has.

    Passes build names from a tensor's name and a suffix (`x__scale`, `w__int4`) so that a reader
    sees where each came from; a model that already holds such a name would have two tensors under
    one, which ONNX forbids. `new(stem)` gives `stem` when it is free and `stem_1`, `stem_2`, ... when not.
    """

    def __init__(self, graph):
        self.taken = tensor_names(graph)

    def new(self, stem: str) -> str:
        """Return a tensor name not yet taken: `stem` if free, else `stem_<n>` for the least n free."""
        name, n = stem, 0
        while name in self.taken:
            n += 1
            name = f"{stem}_{n}"
        self.taken.add(name)
        return name


def inferred_shapes(model, inputs: Mapping[str, Sequence[int]]) -> dict[str, tuple[list[int], int]]:
    """Return {tensor: (dims, element type)} of every input, value and output ONNX shape inference types
    with `inputs` fixed at these shapes and the outputs' declared shapes set aside (-1 for a dim it
    cannot tell); {} when inference fails. A copy is inferred: `model` is not changed."""
    import onnx

    fixed = copy(model)
    for value in fixed.graph.input:
        if value.name in inputs and value.type.HasField("tensor_type"):
            shape = value.type.tensor_type.shape
            shape.Clear()
            for length in inputs[value.name]:
                shape.dim.add().dim_value = int(length)
    for output in fixed.graph.output:
        output.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(fixed, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - inference is a hint to every caller: without it the graph's own dims decide
        return {}
    return {value.name: ([d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1
                          for d in value.type.tensor_type.shape.dim], value.type.tensor_type.elem_type)
            for value in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output)
            if value.type.tensor_type.HasField("shape")}
