"""Benchmark: each calibration method, and `auto`, on zoo models: INT8 and FP8 typed ONNX judged against FP32.

For each model (fetched and given inputs as `make zoo` does) and precision, every method runs through
the documented commands, each a subprocess: `trtpipe calibrate --method M` on the zoo's calibration
samples, `trtpipe quantize`, and `trtpipe validate --json` of the typed ONNX against the FP32 ONNX
on the zoo's validation samples, simulated in ONNX Runtime's CPU provider. A row is validate's
verdict and the lowest cosine over the float outputs (as docs/zoo.md's table; the zoo's weight
coverage and engine size do not depend on the method and are left out). Rows go to
build/bench-methods/results.json, kept across runs per model and precision, and the table to stdout.
`--methods modelopt` adds NVIDIA Model Optimizer's ONNX PTQ (its defaults, from the same samples),
`--methods onnxruntime` ONNX Runtime's quantize_static (INT8 only: scripts/peer_ort_quantize.py),
both judged the same way. `--table peers` prints the zoo's peer table instead of the methods table:
per model and precision trtpipe's default (`auto`), Model Optimizer and ONNX Runtime, each with the
metric that decides validate's verdict (the failing check of the lowest margin, else the passing one
closest to its minimum), measured on each peer's graph too; `--docs` merges those rows into docs/zoo.md's
peer table, keeping the rows of models not rerun.

    python scripts/bench_methods.py --only ppocr-rec,yolov8n --precisions int8
    python scripts/bench_methods.py --only yolov8n --methods auto,modelopt,onnxruntime --table peers --docs
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_quality  # scripts/bench_quality.py: the calibration .npz and the peer's runner
import zoo  # scripts/zoo.py: the zoo's entries, data and subprocess steps

OUT = ROOT / "build" / "bench-methods"
DOC = ROOT / "docs" / "zoo.md"
PEERS_START, PEERS_END = "<!-- bench-peers:table -->", "<!-- /bench-peers:table -->"
# (row name, calibrate's arguments): TensorRT's entropy, each fixed method, and auto.
METHODS = {
    "entropy": ["--method", "entropy"],
    "max": ["--method", "max"],
    "percentile 99.99": ["--method", "percentile", "--percentile", "99.99"],
    "percentile 99.999": ["--method", "percentile", "--percentile", "99.999"],
    "mse": ["--method", "mse"],
    "auto": ["--method", "auto"],
}
MODELOPT = "modelopt"  # NVIDIA Model Optimizer 0.47's ONNX PTQ with its defaults (--peers-python)
ONNXRUNTIME = "onnxruntime"  # ONNX Runtime 1.24's quantize_static as scripts/peer_ort_quantize.py sets it up
PEERS = {MODELOPT: "Model Optimizer 0.47", ONNXRUNTIME: "ONNX Runtime quantize_static"}


def modelopt_onnx(entry: zoo.Entry, precision: str, python: str, timeout: float) -> Path | None:
    """Return Model Optimizer's Q/DQ ONNX of the model from the zoo's calibration samples, or None (its log says why).

    Calibrated at the samples' own shapes, a batch of up to 16 (1 where the spec fixes the batch),
    on the CPU, as bench_quality runs it on the shipped models; samples no stacked array holds (their own
    lengths, a scalar input) one run each through its Python API (scripts/peer_modelopt_quantize.py),
    its shapes (which only its rule on small MatMuls reads) the first sample's at the same batch."""
    import numpy as np

    from trtpipe.spec import load_spec

    spec = load_spec(entry.spec_path)
    work = OUT / entry.name
    out = work / f"{entry.name}.{precision}.{MODELOPT}.onnx"
    model = bench_quality.private_copy(entry.onnx, out)
    stacked = True
    try:
        calibration = bench_quality.stack_calibration(spec, work / "calibration.npz")
        with np.load(calibration) as archive:
            shape_of = {name: archive[name].shape for name in archive.files}  # the first axis: the samples
    except bench_quality.RaggedSamples:
        stacked, calibration = False, bench_quality.sample_calibration(spec, work / "samples.npz")
        with np.load(calibration) as archive:
            runs = sorted({key.split("/", 1)[0] for key in archive.files})
            shape_of = {key.split("/", 1)[1]: (len(runs), *archive[key].shape[1:]) if archive[key].ndim else ()
                        for key in archive.files if key.startswith(runs[0] + "/")}
    shapes = []
    for spec_input in spec.inputs:
        shape = list(shape_of[spec_input.name])
        if not shape:  # a scalar: Model Optimizer's shapes name none
            continue
        shape[0] = spec_input.shape[0] if spec_input.shape and spec_input.shape[0] > 0 else min(16, shape[0])
        shapes.append(f"{spec_input.name}:" + "x".join(map(str, shape)))
    if not stacked:
        script = ROOT / "scripts" / "peer_modelopt_quantize.py"
        command = [python, str(script), "--onnx", str(model), "--calibration", str(calibration),
                   "--calibration-shapes", ",".join(shapes), "--quantize-mode", precision, "--output", str(out)]
        return bench_quality.run_peer(command, out, out.with_suffix(".log"), timeout,
                                      [entry.onnx, calibration, script, ROOT / "scripts" / "peer_ort_quantize.py"])
    command = [python, "-m", "modelopt.onnx.quantization", "--onnx_path", str(model), "--quantize_mode", precision,
               "--calibration_data_path", str(calibration), "--calibration_shapes", ",".join(shapes),
               "--calibration_eps", "cpu", "--output_path", str(out)]
    return bench_quality.run_peer(command, out, out.with_suffix(".log"), timeout, [entry.onnx, calibration])


def ort_onnx(entry: zoo.Entry, python: str, timeout: float) -> Path | None:
    """Return ONNX Runtime quantize_static's INT8 Q/DQ ONNX from the zoo's calibration samples, or None (its log says why)."""
    from trtpipe.spec import load_spec

    work = OUT / entry.name
    spec = load_spec(entry.spec_path)
    try:
        calibration = bench_quality.stack_calibration(spec, work / "calibration.npz")
    except bench_quality.RaggedSamples:  # ONNX Runtime takes them one run each
        calibration = bench_quality.sample_calibration(spec, work / "samples.npz")
    out = work / f"{entry.name}.int8.{ONNXRUNTIME}.onnx"
    return bench_quality.onnxruntime_peer(python, bench_quality.private_copy(entry.onnx, out), calibration, out, timeout,
                                          entry.batch_size)  # 1 where the model fixes its batch


def run_method(entry: zoo.Entry, precision: str, method: str, samples: int, timeout: float, peers_python: str) -> dict:
    """Return one row: calibrate with `method`, quantize, validate; any failure is the row's reason."""
    work = OUT / entry.name
    stem = f"{entry.name}.{precision}.{method.replace(' ', '-')}"
    cache, typed = work / f"{stem}.cache", work / f"{stem}.onnx"
    spec = ["--spec", entry.spec_path]
    row = {"model": entry.name, "precision": precision, "method": method}
    if method in PEERS:
        if method == ONNXRUNTIME and precision != "int8":
            row["reason"] = "quantize_static writes no FP8 activations TensorRT reads"
            return row
        typed = modelopt_onnx(entry, precision, peers_python, timeout) if method == MODELOPT else \
            ort_onnx(entry, peers_python, timeout)
        if typed is None:  # the cell says why (the log's error line), not where the log is
            log = work / f"{entry.name}.{precision}.{method}.log"
            row["reason"] = f"{PEERS[method]} failed: {bench_quality.peer_error(log)}"
            row["log"] = str(log.relative_to(ROOT))
            return row
        import onnx

        # A peer that quantizes nothing (silero-vad's layers inside its Ifs, rivagan-dec's small Convs) judges FP32's graph.
        row["quantized_layers"] = len(bench_quality.quantized_layers(onnx.load(str(typed), load_external_data=False)))
        return validated(row, entry, typed, samples, timeout)
    if method == "auto":
        reuse_zoo_cache(entry, precision, cache)
    steps = [["calibrate", entry.onnx, "--precision", precision, *METHODS[method], "--limit", samples,
              "--batch-size", entry.batch_size, *spec, "-o", cache],
             ["quantize", entry.onnx, "--precision", precision, "--cache", cache, *spec, "-o", typed]]
    for args in steps:
        step = zoo.run_step(args, timeout)
        row[f"{args[0]}_seconds"] = round(step.seconds, 1)
        if not step.ok:
            row["reason"] = f"{args[0]}: {step.reason}"
            return row
        if args[0] == "calibrate":
            row["calibrate_says"] = step.stdout.strip().splitlines()[-1] if step.stdout.strip() else ""
    return validated(row, entry, typed, samples, timeout)


def reuse_zoo_cache(entry: zoo.Entry, precision: str, cache: Path) -> None:
    """Copy the zoo's own `auto` cache of this model and precision, with its sidecar, to `cache`: calibrate
    takes it where its sidecar records this model, data and options (the zoo's default run), and makes it
    anew otherwise, so the row is the same and the model's calibration (minutes on the larger ones) runs once."""
    import shutil

    from trtpipe.files import sidecar_path

    made = entry.dir / f"{entry.name}.{precision}.cache"
    if made.is_file() and sidecar_path(made).is_file():
        cache.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(made, cache)
        shutil.copyfile(sidecar_path(made), sidecar_path(cache))


def validated(row: dict, entry: zoo.Entry, typed: Path, samples: int, timeout: float) -> dict:
    """Return `row` with validate's verdict on the Q/DQ ONNX `typed` against the FP32 model."""
    spec = ["--spec", entry.spec_path]
    step = zoo.run_step(["validate", typed, "--baseline", entry.onnx, "--limit", entry.validation_count(samples),
                         "--batch-size", entry.batch_size, "--json", *spec], timeout)
    if step.returncode not in (0, 1):
        row["reason"] = f"validate: {step.reason}"
        return row
    judged = zoo.Row(entry.name, entry.family, row["precision"])
    failed = zoo.judge_report(judged, json.loads(step.stdout), zoo.float_outputs(entry.onnx))

    report = json.loads(step.stdout)
    # Every check, so a peer's cell can show the check that decides trtpipe's row: validate judges a
    # peer's graph (FP16 around the Q/DQ) by other minimums, and its own deciding check may be another.
    checks = [{k: c[k] for k in ("output", "metric", "value", "minimum", "passed")} for c in report["checks"]]
    row.update(passed=not failed, cosine=judged.cosine, cosine_output=judged.cosine_output, samples=judged.samples,
               reason="; ".join(failed), decided_by=report.get("decided_by"), checks=checks)
    return row


def render(rows: list[dict]) -> str:
    columns = [*METHODS, MODELOPT]
    lines = ["| model | precision | " + " | ".join(columns) + " |", "|---|---|" + "---|" * len(columns)]
    keys = sorted({(r["model"], r["precision"]) for r in rows}, key=lambda k: (k[0], k[1] != "int8"))
    for model, precision in keys:
        cells = []
        for method in columns:
            row = next((r for r in rows if (r["model"], r["precision"], r["method"]) == (model, precision, method)), None)
            if row is None:
                cells.append("not run")
            elif row.get("cosine") is None:
                cells.append(f"failed: {row.get('reason', '')[:60]}")
            else:
                cells.append(f"{row['cosine']:.4f} {'pass' if row['passed'] else '**FAIL**'}")
        lines.append(f"| {model} | {precision} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def short_reason(reason: str) -> str:
    """Return why a row has no value, short enough for a table cell: paths and ONNX Runtime's boilerplate left out."""
    reason = re.sub(r"\S+\.onnx: |\[ONNXRuntimeError\] : \d+ : \w+ : |This is an invalid model\. |; check it with .*", "", reason)
    reason = reason.replace("Internal error: onnx.checker failed on input model ", "onnx.checker: ")  # Model Optimizer's
    return (reason[:110] + "...") if len(reason) > 110 else reason


def decided(row: dict | None, like: dict | None = None) -> str:
    """Return one peer-table cell: the value of the check `like` (trtpipe's deciding check) where the row
    measured it, else the row's own deciding check, with the row's verdict; or why there is none."""
    if row is None:
        return "not run"
    if row.get("cosine") is None:
        return short_reason(row.get("reason", "failed"))
    verdict = "pass" if row["passed"] else "**FAIL**"
    same = [c for c in row.get("checks", []) if like and (c["metric"], c["output"]) == (like["metric"], like["output"])]
    by = same[0] if same else row.get("decided_by")
    nothing = " (no layer quantized)" if row.get("quantized_layers") == 0 else ""
    if not by:
        return f"cosine {row['cosine']:.4f} {verdict}{nothing}"
    return f"{by['metric']} {by['value']:.4g} {verdict}{nothing}"


def render_peers(rows: list[dict]) -> str:
    """Return the zoo's peer table: trtpipe's default beside Model Optimizer and ONNX Runtime, per model and precision."""
    columns = {"auto": "trtpipe default (auto)", **PEERS}
    lines = ["| model | precision | minimum | " + " | ".join(columns.values()) + " |", "|---|---|---|" + "---|" * len(columns)]
    keys = sorted({(r["model"], r["precision"]) for r in rows}, key=lambda k: (k[0], k[1] != "int8"))
    for model, precision in keys:
        found = {m: next((r for r in rows if (r["model"], r["precision"], r["method"]) == (model, precision, m)), None)
                 for m in columns}
        if found["auto"] is None:
            continue
        by = found["auto"].get("decided_by") or {}
        minimum = f"{by['metric']} >= {by['minimum']:g}" if by.get("minimum") is not None else "-"
        cells = [decided(found[m], by or None) if not (m == ONNXRUNTIME and precision != "int8") else "-" for m in columns]
        lines.append(f"| {model} | {precision} | {minimum} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def merge_peers_table(table: str, doc: Path = DOC) -> None:
    """Write `table` into doc's bench-peers block: its rows replace the block's rows of the same model and
    precision, the block's other rows stay (each run measures a few models; the table holds them all), and
    a cell of a method not run keeps the block's (a change to trtpipe reruns its own column alone)."""
    from trtpipe.files import write_text

    text = doc.read_text()
    if PEERS_START not in text or PEERS_END not in text:
        sys.exit(f"bench_methods: {doc} has no {PEERS_START} ... {PEERS_END} block; add one where the table goes")
    head, rest = text.split(PEERS_START, 1)
    block, tail = rest.split(PEERS_END, 1)

    def keyed(lines: list[str]) -> dict[tuple[str, str], list[str]]:
        cells = [[c.strip() for c in line.split("|")[1:-1]] for line in lines]
        return {(row[0], row[1]): row for row in cells}

    header, new = table.splitlines()[:2], table.splitlines()[2:]
    old = keyed([line for line in block.strip().splitlines()[2:] if line.startswith("|")])
    rows = dict(old)
    for key, cells in keyed(new).items():
        kept = old.get(key, cells)
        rows[key] = [was if now == "not run" and len(kept) == len(cells) else now for now, was in zip(cells, kept)]
    lines = {key: "| " + " | ".join(cells) + " |" for key, cells in rows.items()}
    ordered = [lines[k] for k in sorted(lines, key=lambda k: (k[0], k[1] != "int8"))]
    write_text(doc, head + PEERS_START + "\n" + "\n".join(header + ordered) + "\n" + PEERS_END + tail)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated zoo model names (default: every zoo model)")
    parser.add_argument("--precisions", default="int8,fp8")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated subset of: {', '.join([*METHODS, *PEERS])}")
    parser.add_argument("--table", choices=("methods", "peers"), default="methods",
                        help="methods: every method's row; peers: trtpipe's default beside the peers")
    parser.add_argument("--peers-python", default=str(ROOT / "build" / "peers-venv" / "bin" / "python"),
                        help="the python with nvidia-modelopt and onnxruntime (make bench-quality makes it), "
                             f"for --methods {MODELOPT},{ONNXRUNTIME}")
    parser.add_argument("--samples", type=int, default=32, help="calibration and validation samples, as make zoo")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--docs", action="store_true",
                        help=f"with --table peers: merge the rows into {DOC.relative_to(ROOT)}'s peer table, keeping "
                             "the rows of models not run")
    parser.add_argument("--results", default=str(OUT / "results.json"),
                        help="the rows, kept across runs (one file per concurrent run)")
    args = parser.parse_args()
    if args.docs and args.table != "peers":
        parser.error("--docs merges the peer table only: add --table peers")
    methods = [m.strip() for m in args.methods.split(",")]
    unknown = sorted(set(methods) - {*METHODS, *PEERS})
    if unknown:
        sys.exit(f"bench_methods: --methods names unknown methods: {', '.join(unknown)}")
    path = Path(args.results)
    rows = json.loads(path.read_text()) if path.is_file() else []
    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    for entry in zoo.entries(only):
        zoo.fetch(entry, args.timeout)
        zoo.make_data(entry, args.samples)
        (OUT / entry.name).mkdir(parents=True, exist_ok=True)
        for precision in args.precisions.split(","):
            for method in methods:
                row = run_method(entry, precision, method, args.samples, args.timeout, args.peers_python)
                print(json.dumps(row), flush=True)
                rows = [r for r in rows if (r["model"], r["precision"], r["method"]) != (entry.name, precision, method)]
                rows.append(row)
                path.write_text(json.dumps(rows, indent=1) + "\n")
    table = render_peers(rows) if args.table == "peers" else render(rows)
    print(table)
    if args.docs and args.table == "peers":
        merge_peers_table(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
