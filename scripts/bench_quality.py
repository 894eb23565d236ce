"""Benchmark: INT8/FP8 accuracy of trtpipe (default and tuned) against NVIDIA Model Optimizer's ONNX
PTQ and ONNX Runtime's quantize_static, on the shipped models, with the same data and trtpipe's validator.

Every candidate is a Q/DQ ONNX judged the same way: simulated in ONNX Runtime on the CPU against the
FP32 model on the spec's validation set (`trtpipe.quality.validate.compare`, the spec's thresholds).
The peers quantize the FP32 model from the same calibration samples, stacked into one .npz; they run
in their own environment (build/peers-venv, made by `make bench-quality`). Each row also carries the
estimated latency of the layers it quantizes (trtpipe.quality.cost, --target): an estimate, not a
measurement.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODELS = ("digits", "efficientnet-lite0", "minilm")
PRECISIONS = ("int8", "fp8")
PEERS = {"modelopt": "Model Optimizer 0.47", "onnxruntime": "ONNX Runtime quantize_static"}  # --peers: row name


def stack_calibration(spec, out: Path) -> Path:
    """Write every calibration sample as one .npz keyed by input name (what both peers read), once."""
    import numpy as np

    if out.is_file() and out.stat().st_mtime >= Path(spec.calibration).stat().st_mtime:
        return out
    from trtpipe import data

    arrays: dict[str, list] = {}
    for batch in data.iter_batches(spec, spec.calibration, 64):
        for name, value in batch.arrays.items():
            arrays.setdefault(name, []).append(value)
    for name, values in arrays.items():
        if any(np.ndim(v) == 0 for v in values):  # silero-vad's sample rate: one number, no batch axis to stack on
            raise RaggedSamples(f"the calibration samples' '{name}' is a scalar (no batch axis): no stacked array "
                                "holds them")
        shapes = sorted({tuple(v.shape[1:]) for v in values})
        if len(shapes) > 1:  # khmersm's phrases: each its own length
            raise RaggedSamples(f"the calibration samples' '{name}' differ in shape ({list(shapes[0])} to "
                                f"{list(shapes[-1])}): no stacked array holds them")
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, **{name: np.concatenate(values) for name, values in arrays.items()})
    return out


def sample_calibration(spec, out: Path) -> Path:
    """Write every calibration sample as the model takes it in one run, keyed SAMPLE/INPUT, once: what the
    peers read where no stacked array holds the samples (RaggedSamples: their own lengths, a scalar input),
    ONNX Runtime's and Model Optimizer's through a data reader (scripts/peer_*_quantize.py)."""
    import numpy as np

    if out.is_file() and out.stat().st_mtime >= Path(spec.calibration).stat().st_mtime:
        return out
    from trtpipe import data

    arrays = {f"{i:05d}/{name}": value for i, batch in enumerate(data.iter_batches(spec, spec.calibration, 1))
              for name, value in batch.arrays.items()}
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, **arrays)
    return out


def peer_error(log: Path) -> str:
    """Return the line of a failed peer's log that says why: Model Optimizer's last ERROR line, else the
    log's last line (a traceback's exception, or run_peer's timeout)."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()] if log.is_file() else []
    errors = [line.split(" - ERROR - ", 1)[1] for line in lines if " - ERROR - " in line]
    return errors[-1] if errors else lines[-1] if lines else f"no log at {log}"


class RaggedSamples(ValueError):
    """Calibration samples of different shapes, which no stacked array holds."""


def run_peer(command: list[str], output: Path, log: Path, timeout: float, inputs: list[Path]) -> Path | None:
    """Run one peer's quantizer; return its ONNX, or None (the log says why). An output newer than
    all its `inputs` (the model, the calibration samples, our script that drives the peer) is reused:
    the peers are deterministic and slow on a CPU."""
    if output.is_file() and all(output.stat().st_mtime > source.stat().st_mtime for source in inputs):
        print(f"  reusing {output}", file=sys.stderr)
        return output
    start = time.monotonic()
    if "/" in command[0]:  # a peers' interpreter named by path: it must still be found from the output's folder
        command = [str(Path(command[0]).absolute()), *command[1:]]
    with open(log, "w") as stream:
        try:
            # In the output's folder: the peers leave files where they run (Model Optimizer its external weights
            # under uuid names, ONNX Runtime sym_shape_infer_temp.onnx), which were the repository's root.
            code = subprocess.run(command, check=False, stdout=stream, stderr=subprocess.STDOUT, timeout=timeout,
                                  cwd=output.parent).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
            stream.write(f"\ntimed out after {timeout:.0f} s\n")  # the log's last line says why there is no output
    print(f"  {Path(command[2] if command[1] == '-m' else command[1]).name}: exit {code} in "
          f"{time.monotonic() - start:.0f} s (log {log})", file=sys.stderr)
    return output if code == 0 and output.is_file() else None


def private_copy(model: Path, out: Path) -> Path:
    """Return a copy of `model` beside `out` for a peer to read: Model Optimizer 0.47 rewrites the file
    at its --onnx_path in place (it adds value_info), which would make the FP32 baseline newer than
    everything built from it. The copy keeps the original's time, so reuse checks still hold, and has the
    files the model keeps its weights in beside it, under the names the model gives them."""
    import shutil

    import onnx

    from trtpipe.graph.onnxio import external_files

    copy = out.parent / f"input.{model.name}"
    for name in (model.name, *external_files(onnx.load(str(model), load_external_data=False))):
        source, target = model.parent / name, copy if name == model.name else out.parent / name
        if not target.is_file() or target.stat().st_mtime < source.stat().st_mtime:
            shutil.copy2(source, target)
    return copy


def modelopt(python: str, model: Path, precision: str, calibration: Path, spec, out: Path, timeout: float) -> Path | None:
    """Model Optimizer's ONNX PTQ with its defaults, calibrating at the spec's batch on the CPU."""
    original, model = model, private_copy(model, out)
    shapes = ",".join(f"{i.name}:" + "x".join(str(16 if d < 0 and k == 0 else 64 if d < 0 else d)
                                                 for k, d in enumerate(i.shape)) for i in spec.inputs)
    command = [python, "-m", "modelopt.onnx.quantization", "--onnx_path", str(model), "--quantize_mode", precision,
               "--calibration_data_path", str(calibration), "--calibration_shapes", shapes,
               "--calibration_eps", "cpu", "--output_path", str(out)]
    return run_peer(command, out, out.with_suffix(".log"), timeout, [original, calibration])


def onnxruntime_peer(python: str, model: Path, calibration: Path, out: Path, timeout: float,
                     batch_size: int = 16) -> Path | None:
    """ONNX Runtime's quantize_static (scripts/peer_ort_quantize.py), calibrating `batch_size` samples at a time."""
    script = ROOT / "scripts" / "peer_ort_quantize.py"
    command = [python, str(script), "--onnx", str(model), "--calibration", str(calibration), "--output", str(out),
               "--batch-size", str(batch_size)]
    return run_peer(command, out, out.with_suffix(".log"), timeout, [model, calibration, script])


def quantized_layers(model) -> set[str]:
    """Return the Conv/MatMul/Gemm nodes whose activation input comes through a DequantizeLinear."""
    from trtpipe.graph import toolkit

    dequantized = {o for n in model.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    initializers = {i.name for i in model.graph.initializer}
    producers = toolkit.producers(model.graph)
    names = set()
    for node in model.graph.node:
        if node.op_type in ("Conv", "MatMul", "Gemm", "ConvTranspose"):
            activation = node.input[0]
            source = producers.get(activation)
            if activation in dequantized and source is not None and source.input[0] not in initializers:
                names.add(toolkit.label(node))
    return names


def judge(candidate, name: str, baseline: Path, spec, precision: str, costs) -> dict:
    """Return one row: the validator's metrics of `candidate` (a ModelProto) and its estimated latency."""
    from trtpipe import data
    from trtpipe.quality.validate import compare, thresholds_for
    from trtpipe.runtime.onnxrt import OnnxRunner

    labels = data.read_labels(spec.labels) if spec.labels else None
    with OnnxRunner(name, model=candidate) as runner, OnnxRunner(baseline) as base:
        report = compare(runner, base, spec, spec.validation, precision, labels, thresholds_for(precision, spec),
                         show_progress=False)
    first = report.outputs[next(iter(report.outputs))]
    quantized = quantized_layers(candidate)
    known = {layer.name for layer in costs.layers}
    return {"candidate": name, "samples": report.samples, "passed": report.passed,
            "top1_agreement": first.get("top1_agreement"), "cosine": first["cosine"], "cosine_min": first["cosine_min"],
            "quantized_layers": len(quantized),
            "estimated_ms": costs.seconds(precision, quantized) * 1e3 if quantized <= known else None}


def _typed(model_name: str, spec, precision: str, cache: Path, exclude):
    """Return the typed ONNX `make` builds from `cache` and `exclude`: from the smoothed graph when the
    spec smooths INT8."""
    from trtpipe.calibrate import load_table
    from trtpipe.graph import onnxio
    from trtpipe.graph.typed import typed_model
    from trtpipe.targets import Precision

    build = ROOT / "build" / model_name
    source = build / "smoothed" / f"{model_name}.onnx" if precision == "int8" and spec.smooth else build / f"{model_name}.onnx"
    return typed_model(onnxio.load(source), Precision.parse(precision), load_table(cache), exclude,
                       min_weights=spec.min_weights)


def trtpipe_default(model_name: str, spec, precision: str):
    """Return the typed ONNX `make` builds: the default cache and the spec's exclusions."""
    return _typed(model_name, spec, precision, ROOT / "build" / model_name / f"{model_name}.{precision}.cache", spec.exclude)


def trtpipe_tuned(model_name: str, spec, precision: str):
    """Return the typed ONNX of `trtpipe tune`'s choice, or None when it has not run."""
    from trtpipe.spec import load_exclusions

    cache = ROOT / "build" / model_name / f"{model_name}.{precision}.tuned.cache"
    if not cache.is_file():
        return None
    return _typed(model_name, spec, precision, cache, load_exclusions(cache.with_name(f"{model_name}.{precision}.tuned.toml")))


def rows_from_tune(model_name: str, spec, precision: str, costs, gpu: str) -> list[dict] | None:
    """Return trtpipe's default and tuned rows from `trtpipe tune`'s report, when it confirmed both
    on the validation set and priced `gpu`: the same validator on the same data as `judge`, already
    run. The estimated latency prices the layers the typed ONNX quantizes, on the FP32 graph, as the
    peers' rows are (a smoothed graph has more ops); counting every layer the configuration does not
    exclude would also price the depthwise convolutions trtpipe never quantizes (EfficientNet-lite0:
    1.30 ms for 1.54)."""
    path = ROOT / "build" / model_name / "reports" / f"{model_name}.{precision}.tune.json"
    if not path.is_file():
        return None
    report = json.loads(path.read_text())
    # What tune wrote (the search's choice, or the rung the confirmation found when that failed on
    # validation): the tuned cache and exclusions trtpipe_tuned builds from.
    tuned = report["confirmed"]["validation"] if report.get("confirmed") else report["validation"]
    if report["gpu"] != gpu or report["default_validation"] is None or tuned is None:
        return None
    rows = []
    for name, validation, typed in (("trtpipe default", report["default_validation"], trtpipe_default(model_name, spec, precision)),
                                    ("trtpipe tuned", tuned, trtpipe_tuned(model_name, spec, precision))):
        if typed is None:  # the report without its tuned cache
            return None
        first = next(iter(validation["outputs"].values()))
        quantized = quantized_layers(typed)
        rows.append({"model": model_name, "precision": precision, "candidate": name, "samples": validation["samples"],
                     "passed": validation["passed"], "top1_agreement": first.get("top1_agreement"),
                     "cosine": first["cosine"], "cosine_min": first["cosine_min"],
                     "quantized_layers": len(quantized),
                     "estimated_ms": costs.seconds(precision, quantized) * 1e3,
                     "from": str(path.relative_to(ROOT))})
    return rows


def fmt(value, kind: str) -> str:
    if value is None:
        return "-"
    return f"{value:.2%}" if kind == "pct" else f"{value:.5f}" if kind == "cos" else f"{value:.4g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers-python", default=str(ROOT / "build" / "peers-venv" / "bin" / "python"),
                        help="the python of the peers' environment (nvidia-modelopt, onnxruntime)")
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS))
    parser.add_argument("--target", default="sm_89", help="the GPU of the estimated latency")
    parser.add_argument("--peer-timeout", type=float, default=1200, help="seconds per peer run")
    parser.add_argument("--peers-only", action="store_true", help="only run the peers' quantizers (their outputs are reused)")
    parser.add_argument("--peers", nargs="+", choices=sorted(PEERS), default=sorted(PEERS),
                        help="the peers to run; the rows of the others are kept from the last results.json")
    parser.add_argument("-o", "--output", default=str(ROOT / "build" / "bench-quality"))
    args = parser.parse_args()

    from trtpipe.graph import onnxio
    from trtpipe.quality.cost import cost_model, gpu_for, synthetic_feeds
    from trtpipe.spec import load_spec
    from trtpipe.targets import Target

    out = Path(args.output)
    gpu = gpu_for(Target.parse(args.target))
    # Rows of models and precisions not run now are kept, so the table can be made a model at a time.
    previous = json.loads((out / "results.json").read_text()) if (out / "results.json").is_file() else []
    skipped = {PEERS[p] for p in PEERS if p not in args.peers}
    rows = [r for r in previous if not (r["model"] in args.models and r["precision"] in args.precisions)
            or r["candidate"] in skipped]
    for model_name in args.models:
        spec = load_spec(ROOT / "models" / model_name / "model.toml")
        fp32 = ROOT / "build" / model_name / f"{model_name}.onnx"
        calibration = stack_calibration(spec, out / model_name / "calibration.npz")
        opt = {name: shapes.opt for name, shapes in spec.shapes.items()}
        fp32_model = onnxio.load(fp32)
        costs = cost_model(fp32_model, gpu, synthetic_feeds(spec.inputs, opt))
        for precision in args.precisions:
            print(f"{model_name} {precision}", file=sys.stderr)
            from_tune = None if args.peers_only else rows_from_tune(model_name, spec, precision, costs, gpu.name)
            if from_tune is not None:
                rows += from_tune
                candidates = []
            elif args.peers_only:
                candidates = []
            else:  # no tuned row when tune has not run (None is for a peer that did not finish)
                tuned = trtpipe_tuned(model_name, spec, precision)
                candidates = [("trtpipe default", trtpipe_default(model_name, spec, precision))] + \
                    ([("trtpipe tuned", tuned)] if tuned is not None else [])
            if "modelopt" in args.peers:
                peer = modelopt(args.peers_python, fp32, precision, calibration, spec,
                                out / model_name / f"modelopt.{precision}.onnx", args.peer_timeout)
                candidates.append((PEERS["modelopt"], onnxio.load(peer) if peer else None))
            if "onnxruntime" in args.peers and precision == "int8":  # quantize_static has no FP8 activations TensorRT reads
                peer = onnxruntime_peer(args.peers_python, fp32, calibration, out / model_name / "ort.int8.onnx",
                                        args.peer_timeout)
                candidates.append((PEERS["onnxruntime"], onnxio.load(peer) if peer else None))
            if args.peers_only:
                continue
            for name, candidate in candidates:
                row = {"model": model_name, "precision": precision, "candidate": name}
                if candidate is not None:
                    row.update(judge(candidate, f"{model_name}.{precision}.{name.split()[0].lower()}.onnx", fp32, spec,
                                     precision, costs))
                    row["candidate"] = name
                rows.append(row)
                print(f"  {name}: {json.dumps({k: v for k, v in row.items() if k not in ('model', 'precision')})}",
                      file=sys.stderr)
            (out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [(f"Validation sets of the specs, trtpipe's validator (simulated in ONNX Runtime on the CPU); "
              f"estimated latency on the {gpu.name} at the spec's OPT shapes (trtpipe.quality.cost)."), "",
             "| model, precision | candidate | top-1 agreement | cosine (mean) | cosine (min) | layers quantized | estimated ms | spec |",
             "|---|---|---|---|---|---|---|---|"]
    order = {m: i for i, m in enumerate(MODELS)}
    ranks = {name: i for i, name in enumerate(["trtpipe default", "trtpipe tuned", *PEERS.values()])}
    # A kept peer row would otherwise come before the rows made now.
    rows.sort(key=lambda r: (order.get(r["model"], 99), r["precision"] != "int8", ranks.get(r["candidate"], 99)))
    for r in rows:
        if "samples" not in r:
            lines.append(f"| {r['model']} {r['precision']} | {r['candidate']} | did not finish (log in {out}) | | | | | |")
            continue
        lines.append(f"| {r['model']} {r['precision']} | {r['candidate']} | {fmt(r['top1_agreement'], 'pct')} | "
                     f"{fmt(r['cosine'], 'cos')} | {fmt(r['cosine_min'], 'cos')} | {r['quantized_layers']} | "
                     f"{fmt(r['estimated_ms'], 'ms')} | {'pass' if r['passed'] else 'FAIL'} |")
    table = "\n".join(lines) + "\n"
    (out / "results.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
