"""Control flow the shapes decide: If nodes replaced by the branch they always take.

Exporters trace Python `if`s on tensor shapes into ONNX If nodes (`if x.shape[-1] == 1: x =
x.squeeze(-1)`, `if state is not None`), often with branches whose outputs differ in rank. TensorRT
refuses those unless it can prove the condition constant ("Must have inputs with equal ranks when
condition is not a build-time constant"), and TensorRT-RTX 1.7 fails on an LSTM or a second If
inside a conditional (an assertion in graphScope.cpp, a Myelin CHECK). silero-vad carries all three.

An If whose condition reads only constants, the shapes of tensors (through Shape or Size), and
inputs the caller fixes, is found by walking back from its condition; its branch is decided by
running the condition in ONNX Runtime at the profile's min, opt and max shapes, and when all three
agree the If is replaced by that branch's nodes. Limit: only those three corners are tried, so a
condition true at one size strictly inside a dynamic range (`x.shape[1] == 5` with 1..64) would be
folded as if it never held; a static profile (min = opt = max) leaves no such gap. Folding
repeats, so Ifs nested in a taken branch are decided in turn. An If whose branch depends on the
data is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from trtpipe.graph import sessions, toolkit
from trtpipe.graph.inputs import index_limits, random_inputs

# Ops whose output depends on their input's shape only, never on its values.
SHAPE_READERS = ("Shape", "Size")
MAX_ROUNDS = 16  # each round folds every decidable If of the top level; nesting deeper than this is not seen


@dataclass(frozen=True)
class FoldedIf:
    """One If replaced by a branch: which, and the condition it always had."""

    node: str
    branch: str  # "then_branch" or "else_branch"


def static_condition(graph, node, fixed: Sequence[str] = ()) -> bool:
    """Return True if the condition of If `node` reads only constants, shapes and the `fixed` inputs."""
    producers = toolkit.producers(graph)
    constants = {init.name for init in graph.initializer}
    inputs = {value.name for value in graph.input} - constants
    todo, seen = [node.input[0]], set()
    while todo:
        name = todo.pop()
        if name in seen or name in constants or name in fixed or not name:
            continue
        seen.add(name)
        if name in inputs:
            return False  # the data decides
        producer = producers.get(name)
        if producer is None:
            return False  # an outer-scope value: not decided here
        if producer.op_type in SHAPE_READERS:
            continue  # reads a shape; the shapes are the profile's
        if toolkit.subgraphs(producer):
            return False  # a value made by control flow
        todo.extend(producer.input)
    return True


def _profile_feeds(model, shapes: Mapping[str, Sequence[Sequence[int]]], fixed: Mapping[str, np.ndarray]) -> list[dict]:
    """Return random feeds (trtpipe.graph.inputs' rule) at each of the profile's shapes (min, opt, max).

    An input the profile does not name keeps its static dims; its dynamic ones take 1, 64 and 2 in
    turn, so that a condition on them is not taken for decided.
    """
    from onnx import helper

    constants = {init.name for init in model.graph.initializer}
    limits = index_limits(model.graph)
    feeds = []
    for corner in range(3):
        drawn = []
        feed = {}
        for value in model.graph.input:
            if value.name in constants:
                continue
            if value.name in fixed:
                feed[value.name] = np.asarray(fixed[value.name])
                continue
            tensor = value.type.tensor_type
            shape = (list(shapes[value.name][corner]) if value.name in shapes else
                     [d.dim_value if d.HasField("dim_value") else (1, 64, 2)[corner] for d in tensor.shape.dim])
            drawn.append((value.name, helper.tensor_dtype_to_np_dtype(tensor.elem_type), shape))
        feed.update(random_inputs(drawn, corner, limits))
        feeds.append(feed)
    return feeds


def _conditions(model, names: Sequence[str], feeds: Sequence[dict]) -> list[list[bool]]:
    """Return each named boolean tensor's value on each feed (ONNX Runtime, the CPU provider)."""
    from onnx import TensorProto, helper

    probe = toolkit.copy(model)
    del probe.graph.output[:]
    probe.graph.output.extend(helper.make_tensor_value_info(name, TensorProto.BOOL, None) for name in names)
    session = sessions.session(probe)
    runs = [session.run(list(names), feed) for feed in feeds]
    return [[bool(np.asarray(run[i]).reshape(-1)[0]) for run in runs] for i in range(len(names))]


def _inline(graph, node, branch_name: str) -> None:
    """Replace If `node` in `graph` by the nodes of its branch, in place."""
    from onnx import helper

    branch = toolkit.attribute(node, branch_name)
    rename = {out.name: wanted for out, wanted in zip(branch.output, node.output)}
    body = []
    for inner in branch.node:
        inner = toolkit.copy(inner)
        for i, name in enumerate(inner.output):
            inner.output[i] = rename.get(name, name)
        body.append(inner)
    made = {name for inner in body for name in inner.output}
    # A branch that hands back an outer value or one of its own initializers: an Identity makes the If's output.
    body += [helper.make_node("Identity", [out.name], [wanted], name=f"{node.name or wanted}/{branch_name}")
             for out, wanted in zip(branch.output, node.output) if wanted not in made]
    graph.initializer.extend(branch.initializer)
    nodes = list(graph.node)
    at = next(i for i, n in enumerate(nodes) if n.op_type == "If" and list(n.output) == list(node.output))
    nodes[at:at + 1] = body
    del graph.node[:]
    graph.node.extend(nodes)


def fold_ifs(model, shapes: Mapping[str, Sequence[Sequence[int]]] | None = None,
             fixed: Mapping[str, np.ndarray] | None = None) -> tuple[object, list[FoldedIf]]:
    """Return a copy of `model` with every If that the shapes (and `fixed` inputs) decide replaced by its branch.

    `shapes`: input name -> [min, opt, max] shapes (the build's profile); an input not named keeps
    its static dims, and a condition on one of its dynamic dims is not decided.
    `fixed`: inputs that always have this value (a sample rate); they stay inputs of the model.
    """
    if not any(node.op_type == "If" for node in model.graph.node):
        return model, []
    model = toolkit.copy(model)
    shapes, fixed = dict(shapes or {}), dict(fixed or {})
    folded: list[FoldedIf] = []
    for _ in range(MAX_ROUNDS):
        graph = model.graph
        decidable = [n for n in graph.node if n.op_type == "If" and static_condition(graph, n, list(fixed))]
        if not decidable:
            break
        try:
            values = _conditions(model, [n.input[0] for n in decidable], _profile_feeds(model, shapes, fixed))
        except Exception:  # noqa: BLE001 - a model that does not run on random inputs: nothing is decided
            break
        chosen = [(n, v[0]) for n, v in zip(decidable, values) if all(x == v[0] for x in v)]
        if not chosen:
            break
        for node, taken in chosen:
            branch = "then_branch" if taken else "else_branch"
            _inline(graph, toolkit.copy(node), branch)
            folded.append(FoldedIf(toolkit.label(node), branch))
    if folded:
        toolkit.keep_needed(model.graph, [out.name for out in model.graph.output])  # the folded Ifs' conditions go
    return model, folded
