"""Streams: a model whose inputs carry state from step to step ([[inputs]] carry: an RNN's state, a streaming
model's caches) run as its package runs it, each data file's samples in order, each step fed the state the
step before returned. validate, tune, `auto`'s check at the outputs and sensitivity run their models
through one Stream each, so that a candidate's error builds up in all of them as it does in service."""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from trtpipe import data
from trtpipe.errors import TrtpipeError
from trtpipe.spec import ModelSpec


def carried_inputs(spec: ModelSpec | None, outputs: list) -> dict[str, str]:
    """Return {input: the output it is fed from on the next step} of the spec's [[inputs]] carry, checked
    against the model's outputs and batch: a stream runs one step at a time ({} without a spec)."""
    carried = {i.name: i.carry for i in spec.inputs if i.carry} if spec is not None else {}
    names = [o.name for o in outputs]
    for name, output in carried.items():
        if output not in names:
            raise TrtpipeError(f"--spec: [[inputs]] {name}: carry '{output}' is not an output of the model; name the "
                               f"output it is fed from, one of: {', '.join(names)}")
    fixed = data.fixed_batch(spec) if spec is not None else None
    if carried and fixed not in (None, 1):
        raise TrtpipeError(f"--spec: [[inputs]] {next(iter(carried))}: carry runs a stream one step at a time, and the "
                           f"model's batch is fixed at {fixed}; export it with a batch of 1 or a dynamic one")
    return carried


def stream_of(sample_id: str) -> str:
    """Return the data file a sample id is of ("chunks.npz[3]": chunks.npz): a file's samples are one stream."""
    return re.sub(r"\[\d+\]$", "", sample_id)


class Stream:
    """One runner over batches in data-file order (data.iter_batches gives a spec that carries batches of one):
    each carried input of a file's first sample is the file's, of each later one this runner's own output of
    the step before, as that input's dtype. Without carried inputs, the runner on each batch as it is."""

    def __init__(self, runner, carried: Mapping[str, str]):
        self.runner, self.carried = runner, dict(carried)
        self.file: str | None = None
        self.before: dict[str, np.ndarray] | None = None

    def __call__(self, batch: data.Batch) -> dict[str, np.ndarray]:
        if not self.carried:
            return self.runner(batch.arrays)
        if stream_of(batch.ids[0]) != self.file:
            self.file, self.before = stream_of(batch.ids[0]), None
        fed = dict(batch.arrays)
        for name, output in self.carried.items() if self.before is not None else ():
            value = np.asarray(self.before[output])
            if value.shape != np.shape(fed[name]):
                raise TrtpipeError(f"{self.runner.name}: output '{output}' is {list(value.shape)} and input '{name}', "
                                   f"which the spec carries it to, takes {list(np.shape(fed[name]))}; carry an output "
                                   "of the input's shape")
            fed[name] = value.astype(np.asarray(fed[name]).dtype)  # a copy: a runner may reuse its output buffers
        self.before = self.runner(fed)
        return self.before
