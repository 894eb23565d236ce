"""SmoothQuant: move activation outliers into the weights before INT8 quantization.

Transformer activations have a few channels far larger than the rest, so one per-tensor INT8
scale wastes most of its levels on them. For a MatMul x @ W, dividing x's channel j by s_j and
multiplying W's row j by s_j leaves the product unchanged in FP32 and evens out x's channels:
s_j = max|x_j|^alpha / max|W_j|^(1 - alpha) (Xiao et al., 2023). The division is a Mul in front
of the layer, which TensorRT fuses into the quantize; the FP32 graph stays equivalent, so
calibration and Q/DQ insertion run on it unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from trtpipe.calibrators.collect import exposed_activations
from trtpipe.calibrators.graph import constant_names
from trtpipe.errors import TrtpipeError
from trtpipe.graph import toolkit

DEFAULT_ALPHA = 0.5


def smoothable_layers(model) -> dict[str, list]:
    """Return {activation: [MatMul nodes reading it with a 2-D float weight]}."""
    from onnx import TensorProto

    constants = constant_names(model)
    weights = {init.name: init for init in model.graph.initializer}
    layers: dict[str, list] = {}
    for node in model.graph.node:
        if node.op_type != "MatMul" or node.input[0] in constants:
            continue
        weight = weights.get(node.input[1])
        if weight is not None and len(weight.dims) == 2 and weight.data_type == TensorProto.FLOAT:
            layers.setdefault(node.input[0], []).append(node)
    return layers


def channel_amax(model, tensors: list[str], batches: Iterable[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Return max |x| per last-axis channel of each tensor over every batch."""
    amax: dict[str, np.ndarray] = {}
    for values in exposed_activations(model, tensors, batches):
        for name, value in values.items():
            per_channel = np.abs(value.reshape(-1, value.shape[-1])).max(axis=0)
            amax[name] = np.maximum(amax[name], per_channel) if name in amax else per_channel
        del values  # one batch's activations at a time
    return amax


def smooth_scales(x_amax: np.ndarray, w_amax: np.ndarray, alpha: float) -> np.ndarray:
    """Return s per channel; 1 where a channel is all zero in x or W (nothing to balance)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        s = x_amax ** alpha / w_amax ** (1.0 - alpha)
    return np.where((x_amax > 0) & (w_amax > 0) & np.isfinite(s), s, 1.0).astype(np.float32)


class ChannelScales:
    """Folds per-channel scales into a graph: a Mul by 1/s in front of the layers that read an
    activation, and their weights' rows replaced by the scaled ones. SmoothQuant and AWQ both do
    this; they differ in how they choose s (and AWQ also clips the scaled weights).

    `out` and `inverse` suffix the names of the scaled activation and of 1/s; `label` names the Mul.
    """

    def __init__(self, model, out: str, inverse: str, label: str):
        from onnx import numpy_helper

        self.model, self.out, self.inverse, self.label = model, out, inverse, label
        self.weights = {init.name: init for init in model.graph.initializer}
        self.readers = toolkit.readers(model.graph)
        self.position = {node.output[0]: i for i, node in enumerate(model.graph.node)}
        self.divide_nodes: dict = {}  # index of the activation's first scaled reader -> the Mul before it
        self._to_array = numpy_helper.to_array

    def weight(self, node) -> np.ndarray:
        """Return the float32 weight (input 1) of a layer."""
        return self._to_array(self.weights[node.input[1]]).astype(np.float32)

    def fold(self, activation: str, nodes: list, scales: np.ndarray, weights: list[np.ndarray]) -> None:
        """Divide `activation` by `scales` before `nodes` and give each node its scaled weight."""
        from onnx import helper, numpy_helper

        scaled, inverse = f"{activation}{self.out}", f"{activation}{self.inverse}"
        self.model.graph.initializer.append(numpy_helper.from_array((1.0 / scales).astype(np.float32), inverse))
        self.divide_nodes[self.position[nodes[0].output[0]]] = helper.make_node(
            "Mul", [activation, inverse], [scaled], name=f"{activation}/{self.label}")
        for node, array in zip(nodes, weights):
            tensor = numpy_helper.from_array(np.asarray(array, np.float32), node.input[1])
            if self.readers[node.input[1]] == 1:
                self.weights[node.input[1]].CopyFrom(tensor)
            else:  # shared with a layer that is not scaled the same way: this one gets its own copy
                tensor.name = f"{node.input[1]}{self.out}_{len(self.model.graph.initializer)}"
                self.model.graph.initializer.append(tensor)
                node.input[1] = tensor.name
            node.input[0] = scaled

    def finish(self) -> list[str]:
        """Put each Mul in front of its first reader; return the activations that were scaled."""
        nodes = list(self.model.graph.node)
        del self.model.graph.node[:]
        for i, node in enumerate(nodes):
            if i in self.divide_nodes:
                self.model.graph.node.append(self.divide_nodes[i])
            self.model.graph.node.append(node)
        return [node.input[0] for node in self.divide_nodes.values()]


def smooth(model, batches: Iterable[Mapping[str, np.ndarray]], alpha: float = DEFAULT_ALPHA):
    """Return a copy of the FP32 `model` with SmoothQuant scales folded in, and the activations smoothed."""
    if not 0.0 <= alpha <= 1.0:
        raise TrtpipeError(f"--alpha {alpha}: SmoothQuant's alpha is between 0 and 1 (0.5 is usual; more moves more into the weights)")
    model = toolkit.copy(model)
    layers = smoothable_layers(model)
    if not layers:
        raise TrtpipeError("nothing to smooth: the model has no MatMul with a 2-D float weight; quantize it without smoothing")
    amax = channel_amax(model, list(layers), batches)
    folder = ChannelScales(model, "__smoothed", "__smooth_inverse", "SmoothQuant")
    for activation, nodes in layers.items():
        arrays = [folder.weight(n) for n in nodes]
        if any(a.shape[0] != amax[activation].shape[0] for a in arrays):
            continue  # the weight's rows are not the activation's channels (a broadcast MatMul)
        s = smooth_scales(amax[activation], np.max([np.abs(a).max(axis=1) for a in arrays], axis=0), alpha)
        folder.fold(activation, nodes, s, [a * s[:, None] for a in arrays])
    return model, folder.finish()
