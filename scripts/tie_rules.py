"""Measure: `auto`'s tie rules at the outputs check, on zoo rows (docs/zoo.md, "`auto` judged at the outputs").

For one zoo model and precision, calibrates with `auto` as `trtpipe calibrate` does (the zoo's 32
calibration samples, its batch size), but in place of calibrate's outputs check it judges every
candidate (`auto`'s own per-tensor choice, entropy, max, percentile, mse) at the outputs on the first
16 and on all 32 calibration samples, by tune_judge.margins over task_metrics as checked_at_outputs
does, and records the full margin tuples. The cache it writes holds `auto`'s own choice, which is then
quantized and validated on the zoo's validation samples as scripts/bench_methods.py validates a method
(the row goes to --results with the method "auto-own"). Then it says which candidate each rule picks:

    current  the best tuple on 16 samples (a tie on the worst check: the next worst decides)
    A        as current, but a tie with `auto`'s own choice on the worst check keeps `auto`'s
    B        as current, on 32 samples
    A+B      A on 32 samples

A passing `auto` (worst margin >= 0) is kept under every rule. trtpipe's own default is not changed:
calibrate's outputs check is replaced in this process only.

    python scripts/tie_rules.py --only yolov8n --precision fp8
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

import bench_methods  # scripts/bench_methods.py: validate's row as the methods benchmark makes it
import zoo  # scripts/zoo.py: the zoo's entries, data and subprocess steps

TIE = 1e-9
CANDIDATES = ("auto", "entropy", "max", "percentile", "mse")


def pick(scores: dict[str, tuple[float, ...]], keep_auto_on_tie: bool) -> str:
    """Return the candidate a rule picks from the margin tuples (calibrate's order, auto first)."""
    if scores["auto"][0] >= 0:
        return "auto"
    best = max(scores, key=lambda name: scores[name])
    if keep_auto_on_tie and abs(scores[best][0] - scores["auto"][0]) <= TIE:
        return "auto"
    return best


def judge_all(found: dict):
    """Return a stand-in for calibrate.checked_at_outputs that judges every candidate on 16 and 32 samples
    into `found` and keeps `auto`'s own choice."""

    def checked(model, spec, data_dir, histograms, options, amax, chosen, show_progress=True, deadline=None):
        import numpy as np

        from trtpipe import data
        from trtpipe.calibrate import CalibrationTable, Precision, uniform_amax
        from trtpipe.graph.typed import typed_model
        from trtpipe.quality.tasks import Degenerate
        from trtpipe.quality.tune import baseline_outputs
        from trtpipe.quality.tune_judge import margins, task_metrics
        from trtpipe.quality.validate import thresholds_for

        precision = Precision.parse(options.grid)
        thresholds = thresholds_for(str(precision), spec)
        splits = {}
        with data.model_runs_on(data_dir):
            for n in (16, 32):
                batches = list(data.iter_batches(spec, data_dir, options.batch_size, n, options.shuffle, options.seed))
                splits[n] = batches
            whole = splits[32]
            # The 16 are the first batches of the 32 when the batch size divides 16: one run serves both.
            prefix = len(splits[16]) <= len(whole) and all(
                a.arrays.keys() == b.arrays.keys() and all(np.array_equal(a.arrays[k], b.arrays[k]) for k in a.arrays)
                for a, b in zip(splits[16], whole))
            wanted32 = baseline_outputs(model, whole)
            if prefix:
                splits[16], wanted16 = whole[:len(splits[16])], wanted32[:len(splits[16])]
            else:
                wanted16 = baseline_outputs(model, splits[16])
        wanted = {16: wanted16, 32: wanted32}
        found.update(samples={n: sum(len(b) for b in splits[n]) for n in splits}, one_run=prefix, margins={16: {}, 32: {}},
                     metrics={16: {}, 32: {}}, thresholds=dict(thresholds))
        for name in CANDIDATES:
            table = amax if name == "auto" else uniform_amax(histograms, name, options.grid, options.percentile)
            typed = typed_model(model, precision, CalibrationTable(amax=table), exclude=spec.exclude,
                                min_weights=spec.min_weights)
            for n in (32, 16):
                try:
                    metrics, counts = task_metrics(typed, spec, splits[n], wanted[n], thresholds)
                except Degenerate as exc:
                    found.setdefault("degenerate", {})[f"{name}/{n}"] = str(exc)
                    continue
                found["margins"][n][name] = list(margins(metrics, thresholds, counts))
                found["metrics"][n][name] = {"values": metrics, "counts": counts}
                print(f"{name} on {n}: {[round(v, 4) for v in found['margins'][n][name]]}", flush=True)
            _RUNS.clear()  # one candidate's outputs at a time
        return amax, chosen, {}

    return checked


_RUNS: dict = {}  # (id(model), id(batch)) -> the typed model's outputs, so the 16 reuse the 32's run


def cached_judge_model(model, tasks, batches, wanted, name="candidate"):
    """tasks.judge_model, with each typed model run once per batch (the 16 are a prefix of the 32)."""
    from trtpipe.runtime.onnxrt import OnnxRunner

    keep = _RUNS.setdefault(("model", id(model)), {"model": model})
    if "outputs" not in keep or any((id(model), id(b)) not in _RUNS for b in batches):
        with OnnxRunner(name, model=model) as runner:
            keep["outputs"] = runner.outputs
            for batch in batches:
                if (id(model), id(batch)) not in _RUNS:
                    _RUNS[(id(model), id(batch))] = (batch, runner(batch))
    judged = tasks(keep["outputs"])
    for batch, want in zip(batches, wanted):
        got = _RUNS[(id(model), id(batch))][1]
        ids = [f"sample {j}" for j in range(len(next(iter(want.values()))))]
        for task in judged:
            task.update(got, want, ids, batch)
    for task in judged:
        task.finish()
    return [(task, task.summary()) for task in judged]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", required=True, help="one zoo model")
    parser.add_argument("--precision", required=True, choices=("int8", "fp8"))
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--results", default=str(bench_methods.OUT / "tie-own.json"), help="validate rows, as bench_methods")
    parser.add_argument("--out", default=str(ROOT / "build" / "tie"), help="the margins and picks, one JSON per row")
    args = parser.parse_args()

    from trtpipe import calibrate
    from trtpipe.quality import tasks
    from trtpipe.spec import load_spec

    entry = zoo.entries([args.only])[0]
    zoo.fetch(entry, args.timeout)
    zoo.make_data(entry, args.samples)
    work = bench_methods.OUT / entry.name
    work.mkdir(parents=True, exist_ok=True)
    spec = load_spec(entry.spec_path)
    found: dict = {"model": entry.name, "precision": args.precision}
    calibrate.checked_at_outputs = judge_all(found)  # this process only
    tasks.judge_model = cached_judge_model
    stem = f"{entry.name}.{args.precision}.auto-own"
    cache, typed = work / f"{stem}.cache", work / f"{stem}.onnx"
    options = calibrate.CalibrationOptions("auto", entry.batch_size, args.samples, grid=args.precision)
    calibrate.calibrate(entry.onnx, spec.calibration, cache, options, spec, force=True, show_progress=False)

    picks = {}
    for rule, n, keep in (("current", 16, False), ("A", 16, True), ("B", 32, False), ("A+B", 32, True)):
        scores = {k: tuple(v) for k, v in found["margins"][n].items()}
        picks[rule] = pick(scores, keep) if set(scores) == set(CANDIDATES) else None
    found["picks"] = picks
    print(json.dumps(picks), flush=True)

    row = {"model": entry.name, "precision": args.precision, "method": "auto-own"}
    step = zoo.run_step(["quantize", entry.onnx, "--precision", args.precision, "--cache", cache,
                         "--spec", entry.spec_path, "-o", typed], args.timeout)
    if step.ok:
        row = bench_methods.validated(row, entry, typed, args.samples, args.timeout)
    else:
        row["reason"] = f"quantize: {step.reason}"
    print(json.dumps(row), flush=True)
    found["auto_own_validation"] = row
    path = Path(args.results)
    rows = json.loads(path.read_text()) if path.is_file() else []
    rows = [r for r in rows if (r["model"], r["precision"], r["method"]) != (entry.name, args.precision, "auto-own")]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([*rows, row], indent=1) + "\n")
    out = Path(args.out) / f"{entry.name}.{args.precision}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(found, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
