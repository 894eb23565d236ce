"""digits: a small CNN trained on scikit-learn's bundled 8x8 digits, upsampled to 32x32.

Writes data/calib (training split) and data/val (test split, with labels.txt) as PNG files, trains
deterministically on exactly what the spec's preprocessing makes of those files, and exports ONNX
with a dynamic batch.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import deterministic, export_onnx, parse_output, replace_dir

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"


def write_data() -> None:
    from PIL import Image
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = (digits.images / 16.0 * 255.0).astype(np.uint8)
    train_x, test_x, train_y, test_y = train_test_split(images, digits.target, test_size=0.25, random_state=0,
                                                        stratify=digits.target)

    def fill(split_x, split_y, with_labels):
        def write(tmp: Path):
            lines = []
            for i, (image, label) in enumerate(zip(split_x, split_y)):
                name = f"{i:04d}.png"
                Image.fromarray(image).resize((32, 32), Image.BILINEAR).save(tmp / name)
                lines.append(f"{name} {label}")
            if with_labels:
                (tmp / "labels.txt").write_text("\n".join(lines) + "\n")
        return write

    replace_dir(DATA / "calib", fill(train_x, train_y, True))
    replace_dir(DATA / "val", fill(test_x, test_y, True))


def load_split(name: str):
    """Return the split as the spec's preprocessing makes it: (x/255 - 0.5) / 0.5, NCHW."""
    from trtpipe.data import load_image, read_labels
    from trtpipe.spec import load_spec

    spec = load_spec(HERE / "model.toml")
    labels = read_labels(DATA / name / "labels.txt")
    names = sorted(labels)
    x = np.stack([load_image(DATA / name / n, spec.preprocess) for n in names])
    return x, np.array([labels[n] for n in names])


def build_net(torch):
    nn = torch.nn

    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

    return nn.Sequential(*block(1, 16), nn.MaxPool2d(2), *block(16, 32), nn.MaxPool2d(2), *block(32, 64),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def train(torch, train_x, train_y, epochs: int = 30):
    """Return the net trained on the split: seeded order, full batches, one-cycle schedule."""
    net = build_net(torch)
    batch_size = 32
    optimizer = torch.optim.Adam(net.parameters(), lr=2e-3)
    steps = epochs * (len(train_x) // batch_size)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=4e-3, total_steps=steps)
    x, y = torch.from_numpy(train_x), torch.from_numpy(train_y)
    generator = torch.Generator().manual_seed(0)
    for epoch in range(epochs):
        net.train()
        order = torch.randperm(len(x), generator=generator)
        for start in range(0, len(x) - batch_size + 1, batch_size):  # full batches: BatchNorm needs them
            idx = order[start:start + batch_size]
            # Shift augmentation: a pixel either way, so the net does not memorize positions.
            batch = torch.roll(x[idx], shifts=(epoch % 3 - 1, epoch // 3 % 3 - 1), dims=(2, 3))
            loss = torch.nn.functional.cross_entropy(net(batch), y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
    return net


def main() -> None:
    output = parse_output()
    # The data is written on every export, so it is what this script makes, never a leftover of
    # an earlier version of it (a checkout kept data an old script wrote; a fresh clone did not).
    write_data()
    torch = deterministic(0)
    train_x, train_y = load_split("calib")
    test_x, test_y = load_split("val")
    net = train(torch, train_x, train_y)
    net.eval()
    with torch.no_grad():
        accuracy = (net(torch.from_numpy(test_x)).argmax(1).numpy() == test_y).mean()
    print(f"digits: test accuracy {accuracy:.2%} on {len(test_y)} held-out images")
    if accuracy < 0.98:
        raise SystemExit(f"digits: test accuracy {accuracy:.2%} is under 98%; training is broken")
    export_onnx(net, (torch.from_numpy(test_x[:1]),), output, ["image"], ["logits"],
                {"image": {0: "batch"}, "logits": {0: "batch"}})


if __name__ == "__main__":
    main()
