"""The interface every runner shares, so validation compares any two of them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.runtime.buffers import is_device_array


@dataclass(frozen=True)
class IOSpec:
    """A runner's input or output: name, numpy dtype, shape with -1 for dynamic dimensions; `ranked` False
    for an ONNX input that gives no shape (any rank: ONNX Runtime reports it as a scalar's [])."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    ranked: bool = True


class Runner:
    """Base of OnnxRunner and Engine: a context manager whose call maps inputs to outputs.

    `runner(inputs)` takes a dict by name or a sequence in input order and returns a dict of
    numpy arrays by output name. `measured` says whether it runs what it stands for (an engine on
    its GPU) or simulates it (a typed ONNX in ONNX Runtime).
    """

    name = "runner"
    measured = True
    inputs: list[IOSpec]
    outputs: list[IOSpec]

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        pass

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def __call__(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        return self.infer(self.feeds(inputs))

    def feeds(self, inputs) -> dict:
        """Return `inputs` as {name: array}, checked against the runner's inputs."""
        if not isinstance(inputs, Mapping):
            inputs = list(inputs)
            if len(inputs) != len(self.inputs):
                raise TrtpipeError(f"{self.name}: got {len(inputs)} inputs, the model takes {len(self.inputs)} "
                                   f"({', '.join(i.name for i in self.inputs)})")
            inputs = {spec.name: value for spec, value in zip(self.inputs, inputs)}
        names = {spec.name for spec in self.inputs}
        missing = names - set(inputs)
        extra = set(inputs) - names
        if missing or extra:
            raise TrtpipeError(f"{self.name}: inputs {sorted(inputs)} do not match the model's {sorted(names)}")
        for spec in self.inputs:
            value = inputs[spec.name]
            if is_device_array(value):
                continue  # device memory: checked by the engine itself
            value = np.asarray(value)
            check_shape(self.name, spec, value.shape)
            if value.dtype != np.dtype(spec.dtype):
                raise TrtpipeError(f"{self.name}: input '{spec.name}' is {value.dtype}, the model takes {spec.dtype}; "
                                   f"convert it with .astype('{spec.dtype}')")
        return dict(inputs)


def check_shape(runner: str, spec: IOSpec, shape: Sequence[int]) -> None:
    if not spec.ranked:
        return
    if len(shape) != len(spec.shape) or any(d >= 0 and d != s for d, s in zip(spec.shape, shape)):
        raise TrtpipeError(f"{runner}: input '{spec.name}' has shape {list(shape)}, the model takes "
                           f"{list(spec.shape)} (-1 is any size)")
