"""A starting `model.toml` for a model nobody has described yet: its inputs, shapes and a guessed task.

`trtpipe init` writes it; every guess carries a comment that says what it was guessed from, so the
user knows which lines to check. The text it returns loads with `config.load_spec`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from trtpipe.data import IMAGE_SUFFIXES, list_files, load_arrays
from trtpipe.errors import TrtpipeError

# Batch sizes of the guessed build profile: MIN/OPT/MAX as trtexec writes them.
PROFILE_BATCHES = (1, 8, 32)


@dataclass
class TensorFacts:
    """What the ONNX says of one input or output: name, dims (-1 where dynamic) and numpy dtype."""

    name: str
    shape: list[int]
    dtype: str


@dataclass
class TaskGuess:
    """A task and the one-line reason it was guessed."""

    task: str
    why: str


def tensor_facts(model) -> tuple[list[TensorFacts], list[TensorFacts]]:
    """Return the model's graph inputs (initializers left out) and outputs."""
    from onnx import helper

    initializers = {init.name for init in model.graph.initializer}

    def facts(value) -> TensorFacts:
        tensor = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
        dtype = str(helper.tensor_dtype_to_np_dtype(tensor.elem_type)) if tensor.elem_type else "float32"
        return TensorFacts(value.name, shape, dtype)

    inputs = [facts(v) for v in model.graph.input if v.name not in initializers]
    return inputs, [facts(v) for v in model.graph.output]


def guess_task(inputs: list[TensorFacts], outputs: list[TensorFacts]) -> TaskGuess:
    """Return the task the shapes suggest; 'generic' (cosine and SNR on every output) when none fits."""
    floats = [o for o in outputs if o.dtype.startswith("float")]
    if not floats:
        return TaskGuess("generic", "no float output to judge by a task")
    first = floats[0]
    token_input = any(i.dtype.startswith("int") and len(i.shape) == 2 for i in inputs)
    image = next((i for i in inputs if len(i.shape) == 4), None)
    if token_input and len(first.shape) in (2, 3):
        return TaskGuess("embedding", f"integer token inputs and a {len(first.shape)}-D float output '{first.name}'")
    if len(first.shape) == 2 and (first.shape[1] == -1 or first.shape[1] >= 2):
        return TaskGuess("classification", f"output '{first.name}' is [batch, {_dim(first.shape[1])}]: one score per class")
    if len(first.shape) == 3 and image is not None:
        return TaskGuess("detection", f"image input and output '{first.name}' of rank 3, as YOLO-style detectors write "
                                      "[batch, 4+classes, boxes]; check the layout")
    if len(first.shape) == 4 and image is not None and first.shape[2:] == image.shape[2:]:
        return TaskGuess("dense", f"output '{first.name}' has the input's height and width: a per-pixel map")
    return TaskGuess("generic", f"no task recognised from output '{first.name}' {first.shape}")


def _dim(d: int) -> str:
    return "?" if d < 0 else str(d)


def profile_shapes(spec_shape: list[int], sample_shape: tuple[int, ...] | None) -> str | None:
    """Return "MIN/OPT/MAX" for a dynamic input, dims other than the batch taken from a data sample; None if unknown."""
    dims = list(spec_shape[1:])
    if any(d < 0 for d in dims):
        if sample_shape is None or len(sample_shape) != len(dims):
            return None
        dims = [s if d < 0 else d for d, s in zip(dims, sample_shape)]
    return "/".join("x".join(str(d) for d in [batch, *dims]) for batch in PROFILE_BATCHES)


def _sample_shape(directory: Path, name: str, rank: int) -> tuple[int, ...] | None:
    """Return one sample's shape (no batch axis) for input `name`, read from the first .npy/.npz file."""
    for path in list_files(directory):
        if path.suffix.lower() not in (".npy", ".npz"):
            continue
        arrays = load_arrays(path)
        array = arrays.get("" if path.suffix.lower() == ".npy" else name)
        if array is None:
            continue
        return tuple(array.shape[1:]) if array.ndim == rank else tuple(array.shape)
    return None


def starting_spec(model, model_path: str | os.PathLike, data_dir: str | os.PathLike | None = None) -> str:
    """Return the text of a model.toml for `model`: inputs, build shapes, a guessed task, and data paths."""
    inputs, outputs = tensor_facts(model)
    guess = guess_task(inputs, outputs)
    name = Path(model_path).stem
    lines = [f"# {name}: a starting spec written by 'trtpipe init'. Check every line marked CHECK.",
             f'name = "{name}"',
             f'task = "{guess.task}"  # CHECK: guessed because {guess.why}', ""]
    data_dir = Path(data_dir) if data_dir is not None else None
    images = data_dir is not None and any(p.suffix.lower() in IMAGE_SUFFIXES for p in list_files(data_dir))
    shapes = {}
    for tensor in inputs:
        lines += ["[[inputs]]", f'name = "{tensor.name}"', f"shape = {tensor.shape}", f'dtype = "{tensor.dtype}"', ""]
        if all(d > 0 for d in tensor.shape):
            continue
        sample = None
        if data_dir is not None and not images:
            sample = _sample_shape(data_dir, tensor.name, len(tensor.shape))
        elif images and len(tensor.shape) == 4:
            sample = _image_dims(tensor.shape)
        shapes[tensor.name] = profile_shapes(tensor.shape, sample)
    if images:
        image_input = next((t for t in inputs if len(t.shape) == 4), None)
        if image_input is None:
            raise TrtpipeError(f"--data {data_dir}: holds images, but no input of {Path(model_path).name} is an image "
                               "(rank 4); pass a directory of .npy or .npz samples")
        lines += _preprocess_lines(image_input)
    if shapes:
        lines.append("[shapes]  # MIN/OPT/MAX per dynamic input, dims joined by x, as trtexec writes them")
        for input_name, value in shapes.items():
            if value is None:
                lines.append(f'# {input_name} = "..."  # CHECK: no sample to read the dynamic dims from; fill in')
            else:
                lines.append(f'{input_name} = "{value}"  # CHECK: batch {PROFILE_BATCHES[0]} to {PROFILE_BATCHES[-1]}')
        lines.append("")
    lines.append("[data]")
    if data_dir is not None:
        relative = os.path.relpath(data_dir.resolve(), Path(model_path).resolve().parent)
        lines.append(f'calibration = "{relative}"  # CHECK: a different directory of the same kind for validation')
        lines.append(f'validation = "{relative}"')
    else:
        lines += ['# calibration = "data/calib"  # .npy, .npz or images: see docs/data.md',
                  '# validation = "data/val"']
    return "\n".join(lines) + "\n"


def _image_dims(shape: list[int]) -> tuple[int, ...]:
    """Return a sample's dims with 224 for dynamic ones: the usual size of an image classifier's input."""
    return tuple(d if d > 0 else 224 for d in shape[1:])


def _preprocess_lines(image: TensorFacts) -> list[str]:
    nchw = image.shape[1] in (1, 3) or image.shape[3] not in (1, 3)
    channels = image.shape[1] if nchw else image.shape[3]
    height, width = (image.shape[2], image.shape[3]) if nchw else (image.shape[1], image.shape[2])
    size = [d if d > 0 else 224 for d in (height, width)]
    return ["[preprocess]  # CHECK: how the model was trained to see images",
            f"size = {size}",
            f'color = "{"L" if channels == 1 else "RGB"}"',
            "scale = 0.00392156862745098  # 1/255",
            f"mean = {[0.0] * max(channels, 1)}",
            f"std = {[1.0] * max(channels, 1)}",
            f'layout = "{"NCHW" if nchw else "NHWC"}"', ""]
