"""Data directories to batches: .npy (a sample or a batch), .npz keyed by input name, and images."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trtpipe.deadline import OutOfTime
from trtpipe.errors import TrtpipeError
from trtpipe.files import read_text_input, regular_file
from trtpipe.graph.sessions import ort_reason
from trtpipe.spec import InputSpec, ModelSpec, Preprocess

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".jfif", ".bmp", ".webp", ".tif", ".tiff", ".gif", ".pgm", ".ppm", ".pnm")
DATA_SUFFIXES = (".npy", ".npz") + IMAGE_SUFFIXES
# Pictures Pillow does not open (or, raw, not as the camera's picture): a sample left out without a word
# would shrink the set the scales and the verdict rest on.
UNREAD_IMAGES = {".heic": "HEIC", ".heif": "HEIF", ".avif": "AVIF", ".svg": "SVG", ".dng": "raw camera",
                 ".cr2": "raw camera", ".nef": "raw camera", ".arw": "raw camera", ".raw": "raw camera"}

log = logging.getLogger(__name__)


@dataclass
class Batch:
    """Input arrays of one batch and the ids of its samples (file names, `file[i]` inside a batch file)."""

    ids: list[str]
    arrays: dict[str, np.ndarray]

    @property
    def size(self) -> int:
        """Return how many samples the batch holds: one id each, whichever axis (batch_axis) an input stacks them on."""
        return len(self.ids)

    def __len__(self) -> int:
        return self.size


def feeds(batches: Iterable[Batch], on_batch: Callable[[int], None] | None = None) -> Iterator[dict[str, np.ndarray]]:
    """Yield each batch's input arrays, for a pass that runs the model on them; `on_batch` gets the
    batch's Batch.size once the pass has used it (asks for the next), so progress counts samples."""
    for batch in batches:
        yield batch.arrays
        if on_batch is not None:
            on_batch(batch.size)


def list_files(directory: str | os.PathLike, flag: str = "--data") -> list[Path]:
    """Return the data files in `directory`, sorted by name, or raise when there are none, or when a name of a
    sample is not a file of samples (a folder, a FIFO, a link to nothing) or a picture of a kind not read: it
    would be left out without a word. Hidden names (".") are not samples: macOS writes "._photo.png" beside
    each file a copy takes from its disks, a few bytes of metadata under an image's name."""
    directory = Path(directory)
    if directory.is_file():
        raise TrtpipeError(f"{flag} {directory}: a file, not a directory of samples; pass the directory that holds "
                           f"it ({directory.parent}), or move it into one of its own")
    if not directory.is_dir():
        raise TrtpipeError(f"{flag} {directory}: no such directory; pass a directory of .npy, .npz or image files")
    names = sorted(p for p in directory.iterdir() if not p.name.startswith("."))
    unread = next((p for p in names if p.suffix.lower() in UNREAD_IMAGES), None)
    if unread is not None:
        raise TrtpipeError(f"{unread}: a {UNREAD_IMAGES[unread.suffix.lower()]} picture, which trtpipe does not read; "
                           f"convert it to PNG or JPEG, or move it out of {flag} {directory}")
    files = [p for p in names if p.suffix.lower() in DATA_SUFFIXES]
    for path in files:
        regular_file(path, str(path), f"a sample is a file of samples: move it out of {flag} {directory}, or fix the link")
    if not files:
        raise TrtpipeError(f"{flag} {directory}: {_instead_of_samples(names)}")
    return files


# Files users keep their samples in that trtpipe does not read, by what to do about them.
ARCHIVES = (".zip", ".tar", ".tgz", ".gz", ".bz2", ".xz", ".7z", ".rar")
MEDIA = {".wav": "audio", ".flac": "audio", ".mp3": "audio", ".ogg": "audio", ".m4a": "audio", ".mp4": "video",
         ".avi": "video", ".mov": "video", ".mkv": "video", ".webm": "video", ".csv": "a table", ".parquet": "a table",
         ".pt": "a torch file", ".pth": "a torch file",
         ".pkl": "a pickle", ".h5": "an HDF5 file", ".hdf5": "an HDF5 file", ".tfrecord": "a TFRecord"}


def _instead_of_samples(names: list[Path]) -> str:
    """Return what a directory without samples holds instead, and what to do: samples a level down (a
    class-per-folder layout, ImageNet's), an archive, or files of a kind to turn into the model's input."""
    held = [p.name for p in names if p.is_dir() and os.access(p, os.R_OK | os.X_OK)
            and any(q.suffix.lower() in DATA_SUFFIXES for q in p.iterdir())]
    if held:
        return (f"no samples in it, but its folders {', '.join(held[:3])}{' ...' if len(held) > 3 else ''} hold some; "
                "trtpipe reads the files of the directory itself: move the samples up into it, or pass one folder")
    archive = next((p for p in names if p.suffix.lower() in ARCHIVES), None)
    if archive is not None:
        return f"no samples in it; {archive.name} is an archive: unpack it into the directory"
    media = next((p for p in names if p.suffix.lower() in MEDIA), None)
    if media is not None:
        return (f"no samples in it: {media.name} is {MEDIA[media.suffix.lower()]}, which trtpipe does not read; "
                "save each sample as the model's input in .npy (one input) or .npz (by input name)")
    return "no .npy, .npz or image files in it; add calibration samples"


# What numpy raises for a file that is not an array it wrote: bad magic or header (ValueError), short
# reads (OSError, EOFError), a broken archive (BadZipFile, zlib.error), a header claiming more than fits.
_NOT_AN_ARRAY = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error, MemoryError, KeyError)


def load_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Return the arrays of a .npy file ({"": array}) or a .npz file (by key), or raise naming the file."""
    path = Path(path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            # Mapped, not read: a command that takes a few samples (--limit) of a file larger than memory reads
            # only their pages (and the checks of _samples look at the samples taken, a chunk at a time).
            array = np.load(path, allow_pickle=False, mmap_mode="r")
            if array.offset + array.nbytes == os.path.getsize(path):
                return {"": array}
            # np.load reads the first array and leaves the rest: a second np.save into the file, or a copy cut short
            raise TrtpipeError(f"{path}: holds more bytes than its array {list(array.shape)} (two arrays saved into one "
                               "file?); save one array a file, or the samples in one array")
        with np.load(path, allow_pickle=False) as archive:
            if not isinstance(archive, np.lib.npyio.NpzFile):
                return {"": archive}
            return {key: archive[key] for key in archive.files}
    except _NOT_AN_ARRAY as exc:
        raise TrtpipeError(f"{path}: not a readable {suffix} file ({exc.__class__.__name__}); re-save it with numpy") from None


# Pillow's modes whose channels are wider than 8 bits: converting them to L or RGB clips every value above 255.
WIDE_MODES = {"I": "32-bit integer", "F": "32-bit float", "I;16": "16-bit", "I;16L": "16-bit", "I;16B": "16-bit",
              "I;16N": "16-bit"}


@contextlib.contextmanager
def opened_image(path: Path) -> Iterator:
    """Yield the decoded image at `path` (Pillow's), or raise naming the file: one that does not decode (truncated,
    not an image), a decompression bomb, several frames (which would be the sample?), or channels wider than
    the 8 bits [preprocess] scale reads. Errors of the block (a resize Pillow cannot do) name the file too."""
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            # Pillow warns past MAX_IMAGE_PIXELS and raises past twice that: a small file that decodes
            # to gigabytes (a decompression bomb) is refused either way, before it is decoded.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(path)
        with img:
            frames = getattr(img, "n_frames", 1)
            if frames > 1:
                raise TrtpipeError(f"{path}: holds {frames} frames (an animation?); a sample is one picture: save the "
                                   "frame you mean as a file of its own")
            if img.mode in WIDE_MODES:
                raise TrtpipeError(f"{path}: {WIDE_MODES[img.mode]} pixels (mode {img.mode}), not 8 bits a channel, which "
                                   "is what [preprocess] scale reads (0..255); save it as an 8-bit image")
            img.load()
            yield img
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise TrtpipeError(f"{path}: the image is larger than {Image.MAX_IMAGE_PIXELS} pixels (a decompression bomb?); "
                           "resize it, or remove it") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, MemoryError, EOFError) as exc:
        raise TrtpipeError(f"{path}: not a readable image ({exc.__class__.__name__}); remove or replace the file") from None


def load_image(path: Path, pre: Preprocess) -> np.ndarray:
    """Return one preprocessed image as an array in the spec's layout, without a batch axis."""
    from PIL import Image

    with opened_image(path) as img:
        img = img.convert("L" if pre.color == "L" else "RGB")
        height, width = pre.size
        resample = Image.Resampling[pre.resample.upper()]
        if pre.resize:
            ratio = pre.resize / min(img.size)
            img = img.resize((max(width, round(img.size[0] * ratio)), max(height, round(img.size[1] * ratio))),
                             resample)
            left, top = (img.size[0] - width) // 2, (img.size[1] - height) // 2
            img = img.crop((left, top, left + width, top + height))
        else:
            img = img.resize((width, height), resample)
        array = np.asarray(img, dtype=np.float32)
    if array.ndim == 2:
        array = array[:, :, None]
    if pre.color == "BGR":
        array = array[:, :, ::-1]
    mean = np.asarray(pre.mean, np.float32)
    std = np.asarray(pre.std, np.float32)
    array = (array * pre.scale - mean) / std
    if pre.layout == "NCHW":
        array = array.transpose(2, 0, 1)
    return np.ascontiguousarray(array, dtype=pre.dtype)


def empty_sample(path: Path, name: str, shape: tuple[int, ...]) -> TrtpipeError:
    """The error of a sample with a dim of 0: an engine's profile takes dims of 1 and more."""
    return TrtpipeError(f"{path}: input '{name}' has shape {list(shape)}, a sample with no values in it; "
                        "remove the file or re-export it with at least one value on every axis")


def check_finite(path: Path, name: str, array: np.ndarray, dtype=None, first: int = 0) -> None:
    """Raise naming the file and sample when a float `array` (samples first, the first of them sample `first` of
    the file) holds NaN or Inf, or values that `dtype` (what the model is fed) holds only as Inf: every command
    would calibrate, smooth or judge on it, a range, a scale or a verdict of NaN."""
    if array.dtype.kind != "f":
        return
    flat = array.reshape(max(len(array), 1) if array.ndim else 1, -1)
    if not np.isfinite(array).all():
        sample = first + int(np.argmax(~np.isfinite(flat).all(axis=1)))
        raise TrtpipeError(f"{path}: input '{name}' holds NaN or Inf (sample {sample} of the file); likely cause: a broken "
                           "export or preprocessing that divides by zero; fix or remove that sample")
    fed = np.dtype(dtype) if dtype is not None else array.dtype
    if fed.kind == "f" and fed.itemsize < array.dtype.itemsize:
        beyond = np.abs(flat) > np.finfo(fed).max
        if beyond.any():
            sample = first + int(np.argmax(beyond.any(axis=1)))
            raise TrtpipeError(f"{path}: input '{name}' holds {flat[beyond][0]:g} (sample {sample} of the file), beyond "
                               f"{fed}'s range (at most {np.finfo(fed).max:g}), which the model is fed: it would be Inf; "
                               "fix the preprocessing that scales it")


def _check(path: Path, name: str, array: np.ndarray, spec: InputSpec) -> np.ndarray:
    """Return `array` as a batch with its batch axis first (one added to single samples), or raise naming the file
    when its shape or dtype cannot be the input's; its values are checked as they are taken (_values).

    An input the batch shares (`batch_axis` None) comes back as a batch of one.
    """
    rank = len(spec.shape)
    axis = spec.batch_axis
    if axis is None:
        if array.ndim == rank:
            array = array[None]
    elif array.ndim in (rank - 1, rank):
        array = np.moveaxis(array if array.ndim == rank else np.expand_dims(array, axis), axis, 0)
    sample_dims = [d for i, d in enumerate(spec.shape) if i != axis]
    if array.ndim != len(sample_dims) + 1 or any(d > 0 and d != a for d, a in zip(sample_dims, array.shape[1:])):
        raise TrtpipeError(
            f"{path}: input '{name}' has shape {list(array.shape)}, the model expects {spec.shape} "
            "(-1 is any size); re-export the data in that shape"
        )
    if len(array) and 0 in array.shape[1:]:
        raise empty_sample(path, name, array.shape)
    castable(path, name, array, spec)
    return array


# Samples whose values _samples checks at once: as many as fill this many bytes (at least one), so that a
# file mapped from disk is read only as far as its samples are taken.
CHUNK_BYTES = 16 << 20


def _values(path: Path, name: str, array: np.ndarray, spec: InputSpec, first: int) -> np.ndarray:
    """Return samples `first`.. of the file (`array`, samples first) in the input's dtype, or raise naming the file
    when a value is not finite or not the spec's fixed `value`."""
    check_finite(path, name, array, spec.dtype, first)  # before the cast: a float64 beyond float32 would be Inf after it
    array = as_input_dtype(path, name, array, spec)
    if spec.value is not None and not np.isclose(array, spec.value, rtol=1e-6, atol=0).all():
        # The graph was folded for that value (graph.control): other data would run a branch that is gone.
        found = array[~np.isclose(array, spec.value, rtol=1e-6, atol=0)].flat[0]
        raise TrtpipeError(f"{path}: input '{name}' holds {found:g}, but the spec's [[inputs]] {name} value = "
                           f"{spec.value:g} fixes it; give data with that value, or change or remove value")
    return array


def castable(path: Path, name: str, array: np.ndarray, spec: InputSpec) -> None:
    """Raise naming the file unless `array`'s dtype casts to the input's: the one rule for every sample, an
    array's or an image's (a float32 image for a model that takes float16 is cast, as a float64 .npy is)."""
    expected = np.dtype(spec.dtype)
    if array.dtype != expected and not np.can_cast(array.dtype, expected, casting="same_kind"):
        raise TrtpipeError(f"{path}: input '{name}' is {array.dtype}, the model expects {expected}; convert the data")


def as_input_dtype(path: Path, name: str, array: np.ndarray, spec: InputSpec) -> np.ndarray:
    """Return `array` in the input's dtype, or raise naming the file (castable)."""
    castable(path, name, array, spec)
    return array.astype(spec.dtype, copy=False)


def _samples(path: Path, spec: ModelSpec, first_dtypes: dict[str, tuple[np.dtype, Path]]
             ) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """Yield (id, {input: sample}) for every sample in one file.

    `first_dtypes`: {input: (dtype, file)} of the files read before; a file of another dtype is refused
    (float64 beside float32 would be cast without a word, and the two halves calibrate differently).
    """
    suffix = path.suffix.lower()
    if suffix in IMAGE_SUFFIXES:
        if spec.preprocess is None or len(spec.inputs) != 1:
            raise TrtpipeError(f"{path}: images need a spec with one input and a [preprocess] table; pass --spec model.toml")
        image = spec.inputs[0]
        yield path.name, {image.name: as_input_dtype(path, image.name, load_image(path, spec.preprocess), image)}
        return
    if suffix == ".npy" and len(spec.inputs) != 1:
        raise TrtpipeError(f"{path}: the model has {len(spec.inputs)} inputs; store samples as .npz keyed by input name")
    held = load_arrays(path)
    if suffix == ".npy":
        arrays = {spec.inputs[0].name: held[""]}
    else:
        missing = [i.name for i in spec.inputs if i.name not in held]
        if missing:
            raise TrtpipeError(f"{path}: no array for input '{missing[0]}' (it holds {', '.join(held)}); add it")
        arrays = {i.name: held[i.name] for i in spec.inputs}
    for name, array in arrays.items():
        dtype, first = first_dtypes.setdefault(name, (array.dtype, path))
        if array.dtype != dtype:
            raise TrtpipeError(f"{path}: input '{name}' is {array.dtype}, but {first.name} holds {dtype}; "
                               f"re-save the data in one dtype ({spec.input(name).dtype})")
    batches = {name: _check(path, name, array, spec.input(name)) for name, array in arrays.items()}
    shared = {name for name in batches if spec.input(name).batch_axis is None}
    counts = {len(a) for name, a in batches.items() if name not in shared} or {1}
    if len(counts) != 1:
        raise TrtpipeError(f"{path}: inputs hold different numbers of samples; give each the same size on its batch axis")
    check_shared_dims(path, spec.shared_dims, _batch_size(spec, batches))
    count = counts.pop()
    if count == 0:  # every command would judge or calibrate on nothing, and say so only in zeros
        raise TrtpipeError(f"{path}: holds no samples (shape {list(next(iter(arrays.values())).shape)}); "
                           "remove it or re-export it with samples")
    batches.update({n: _values(path, n, batches[n], spec.input(n), 0) for n in shared})
    sample_bytes = sum(a[0].nbytes for n, a in batches.items() if n not in shared)
    step = max(1, CHUNK_BYTES // max(sample_bytes, 1))
    for start in range(0, count, step):
        chunk = {n: a if n in shared else _values(path, n, a[start:start + step], spec.input(n), start)
                 for n, a in batches.items()}
        for i in range(start, min(count, start + step)):
            yield (path.name if count == 1 else f"{path.name}[{i}]"), {n: a[0 if n in shared else i - start]
                                                                       for n, a in chunk.items()}


def check_shared_dims(path: Path, shared: Mapping[str, list[tuple[str, int]]],
                      size: Callable[[str, int], int | None]) -> None:
    """Raise naming the file when two inputs hold different sizes on a dimension the model names on both
    (ModelSpec.shared_dims); `size(input, axis)` is the size the file holds there, None where it holds no
    sample's size (the batch axis, an input it lacks)."""
    for dim, places in shared.items():
        held = [(name, axis, found) for name, axis in places if (found := size(name, axis)) is not None]
        other = next((h for h in held[1:] if h[2] != held[0][2]), None)
        if other is not None:
            (first, first_axis, first_size), (second, second_axis, second_size) = held[0], other
            raise TrtpipeError(f"{path}: inputs '{first}' and '{second}' share the model's dimension '{dim}' (axis "
                               f"{first_axis} and axis {second_axis}), but hold {first_size} and {second_size}; "
                               "give them the same size in every sample")


def sample_axis(axis: int, batch_axis: int | None) -> int | None:
    """Return where the model's `axis` falls in one sample's dims (its batch axis taken out); None for the batch axis."""
    if axis == batch_axis:
        return None
    return axis if batch_axis is None or axis < batch_axis else axis - 1


def _batch_size(spec: ModelSpec, batches: dict[str, np.ndarray]) -> Callable[[str, int], int | None]:
    """Return size(input, axis) of the model's axis in _check's batches (samples first; a shared input got one)."""
    def size(name: str, axis: int) -> int | None:
        at = sample_axis(axis, spec.input(name).batch_axis)
        return None if name not in batches or at is None else batches[name].shape[1 + at]
    return size


def fixed_batch(spec: ModelSpec) -> int | None:
    """Return the batch size the spec's inputs fix (the smallest fixed size on a batch axis), else None."""
    sizes = [i.shape[i.batch_axis] for i in spec.inputs
             if i.batch_axis is not None and i.batch_axis < len(i.shape) and i.shape[i.batch_axis] > 0]
    return min(sizes) if sizes else None


def iter_batches(spec: ModelSpec, directory: str | os.PathLike, batch_size: int = 16, limit: int | None = None,
                 shuffle: bool = False, seed: int = 0, flag: str = "--data") -> Iterator[Batch]:
    """Yield batches from `directory` in file-name order (or shuffled with `seed`), at most `limit` samples.

    Batches hold at most `batch_size` samples. A batch the spec's inputs fix on their batch axis is the
    one size the model runs, whatever `batch_size` says: a model exported for batch 1 (PP-PicoDet's
    layout detector) runs on batches of one, one exported for 3 (ONNX Runtime's logreg_iris) on batches
    of exactly 3, and samples that fill no such batch are left out. A batch holds samples of one shape:
    a sample of another shape starts the next one.
    """
    if batch_size < 1:
        raise TrtpipeError(f"--batch-size {batch_size}: must be at least 1")
    fixed = fixed_batch(spec)
    # A spec that carries a state runs one step at a time (trtpipe.quality.stream); batches of one for it alone.
    batch_size = fixed or (1 if any(i.carry for i in spec.inputs) else batch_size)
    left_out = yielded = 0
    files = list_files(directory, flag)
    if shuffle:
        random.Random(seed).shuffle(files)
    ids: list[str] = []
    pending: dict[str, list[np.ndarray]] = {i.name: [] for i in spec.inputs}
    seen = 0
    first_dtypes: dict[str, tuple[np.dtype, Path]] = {}
    for path in files:
        if limit is not None and seen >= limit:
            break  # files past the limit are never opened
        for sample_id, sample in _samples(path, spec, first_dtypes):
            if limit is not None and seen >= limit:
                break
            # Samples of their own lengths (phrases, name units) do not stack: one of another shape starts a batch.
            if len(ids) == batch_size or any(pending[n] and pending[n][0].shape != a.shape for n, a in sample.items()):
                if fixed is None or len(ids) == fixed:
                    yield Batch(ids, _stack(spec, pending, path))
                    yielded += 1
                else:
                    left_out += len(ids)
                ids, pending = [], {i.name: [] for i in spec.inputs}
            ids.append(sample_id)
            for name, array in sample.items():
                pending[name].append(array)
            seen += 1
    if ids and (fixed is None or len(ids) == fixed):
        yield Batch(ids, _stack(spec, pending, path))
        yielded += 1
    elif ids:
        left_out += len(ids)
    if left_out and not yielded:
        raise TrtpipeError(f"{flag} {directory}: {left_out} samples, and the model's inputs fix a batch of {fixed}: "
                           f"give at least {fixed} samples (of one shape)")
    if left_out:
        log.warning("%s samples of %s left out: the model's inputs fix a batch of %s, and they fill none", left_out,
                    directory, fixed)


def _stack(spec: ModelSpec, pending: dict[str, list[np.ndarray]], path: Path) -> dict[str, np.ndarray]:
    """Return the batch's arrays: samples stacked on each input's batch axis; a shared input once."""
    arrays = {}
    for name, samples in pending.items():
        axis = spec.input(name).batch_axis
        if axis is None:
            if any(not np.array_equal(s, samples[0]) for s in samples[1:]):
                raise TrtpipeError(f"{path}: input '{name}' is shared by the batch (batched = false) but differs "
                                   "between samples; give every sample the same value or use --batch-size 1")
            arrays[name] = samples[0]
        else:
            arrays[name] = np.stack(samples, axis=axis)
    return arrays


def count_samples(directory: str | os.PathLike, limit: int | None = None) -> int | None:
    """Return the number of samples when it is cheap to know (a directory of images), else `limit`."""
    files = list_files(directory)
    if any(p.suffix.lower() not in IMAGE_SUFFIXES for p in files):
        return limit
    return len(files) if limit is None else min(limit, len(files))


def chosen_directory(given: str | os.PathLike | None, from_spec: str | os.PathLike | None, kind: str) -> Path:
    """Return the data directory to read: --data as given, else the spec's data.<kind>; raise when neither names one."""
    if given is None and from_spec is None:
        raise TrtpipeError(f"--data DIR is needed (or a --spec with data.{kind})")
    return Path(given or from_spec)


LABELS_FILE = "labels.txt"


def labels_path(given: str | os.PathLike | None, from_spec: str | os.PathLike | None,
                directory: str | os.PathLike | None) -> Path | None:
    """Return the labels to read: --labels, else the spec's [data] labels, else a labels.txt inside the
    data directory (docs/data.md); None when there are none."""
    if given is not None or from_spec is not None:
        return Path(given if given is not None else from_spec)
    found = Path(directory) / LABELS_FILE if directory is not None else None
    return found if found is not None and found.is_file() else None


def read_labels(path: str | os.PathLike) -> dict[str, int]:
    """Return {sample id: class} from a file of `<sample id> <class>` lines."""
    labels = {}
    path = Path(path)
    lines = read_text_input(path, f"--labels {path}", "pass a file of '<sample id> <class>' lines").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.rsplit(maxsplit=1)
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
            raise TrtpipeError(f"--labels {path}: line {number} is not '<sample id> <class>'; fix it")
        labels[parts[0]] = int(parts[1])
    if not labels:
        raise TrtpipeError(f"--labels {path}: holds no labels; write one '<sample id> <class>' line per sample")
    return labels


@contextlib.contextmanager
def model_runs_on(directory: str | os.PathLike):
    """Turn ONNX Runtime's rejection of the data (wrong shape or dtype) into a one-line error."""
    try:
        yield
    except (TrtpipeError, OutOfTime, ImportError, NameError, AttributeError, SyntaxError, OSError):
        raise  # ours already one line, or the budget's; a file's (the model's path) says which file; the others are
        # bugs of ours, not of the data: show them whole
    except Exception as exc:  # noqa: BLE001 - ONNX Runtime raises its own types for bad feeds
        raise TrtpipeError(f"--data {directory}: the model cannot run on this data ({ort_reason(exc)}); "
                           "check shapes and dtypes against the model or --spec") from None
