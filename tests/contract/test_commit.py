"""Results are whole and valid or absent: interrupted writes, stale caches, concurrent writers."""

from __future__ import annotations

import json
import multiprocessing
import os

import numpy as np
import pytest
from conftest import needs_rtx

import models
from trtpipe.errors import TrtpipeError
from trtpipe.files import sha256, write_bytes


def _data(directory, samples=32):
    return models.save_batches(directory, np.random.default_rng(0).normal(0, 1, (samples, 16)).astype(np.float32))


@pytest.fixture
def mlp(tmp_path):
    path = tmp_path / "mlp.onnx"
    models.save(models.dynamic_mlp(), path)
    _data(tmp_path / "data")
    return path


# ---- calibration caches -----------------------------------------------------------------------

def test_a_quantize_only_spec_takes_the_inputs_from_the_model(mlp, tmp_path, cli):
    """The README's snippet: a model.toml holding only [quantize] works (it failed with '0 inputs')."""
    spec = tmp_path / "model.toml"
    spec.write_text('[quantize]\nexclude = ["fc1"]\n')
    code, out, err = cli("calibrate", mlp, "--spec", spec, "--data", tmp_path / "data", "-o", tmp_path / "c.cache")
    assert code == 0, err
    code, out, err = cli("quantize", mlp, "--precision", "int8", "--cache", tmp_path / "c.cache", "--spec", spec,
                         "-o", tmp_path / "q.onnx")
    assert code == 0, err
    code, out, _ = cli("inspect", tmp_path / "q.onnx", "--json")
    assert json.loads(out)["qdq_pairs"] == 1  # fc0 quantized, fc1 excluded by the spec


def test_changing_preprocess_or_inputs_makes_a_cache_stale(mlp, tmp_path, cli):
    spec = tmp_path / "model.toml"
    spec.write_text('[[inputs]]\nname = "x"\nshape = [-1, 16]\n')
    args = ("calibrate", mlp, "--spec", spec, "--data", tmp_path / "data", "-o", tmp_path / "c.cache")
    assert cli(*args)[1].startswith("wrote")
    assert cli(*args)[1].startswith("up to date")
    spec.write_text('[[inputs]]\nname = "x"\nshape = [-1, 16]\n[preprocess]\nmean = [0.5]\n')
    assert cli(*args)[1].startswith("wrote")  # [preprocess] is part of what the cache was made from
    spec.write_text('[[inputs]]\nname = "x"\nshape = [-1, 16]\ndtype = "float32"\n[preprocess]\nmean = [0.5]\n')
    assert cli(*args)[1].startswith("up to date")  # the same inputs spelt out: nothing changed


def test_other_versions_make_a_cache_stale(mlp, tmp_path, cli):
    cache = tmp_path / "c.cache"
    args = ("calibrate", mlp, "--data", tmp_path / "data", "-o", cache)
    assert cli(*args)[0] == 0
    side = tmp_path / "c.cache.json"
    recorded = json.loads(side.read_text())
    assert set(recorded["versions"]) == {"trtpipe", "onnxruntime", "numpy"}
    recorded["versions"]["onnxruntime"] = "0.0.1"
    side.write_text(json.dumps(recorded))
    assert cli(*args)[1].startswith("wrote")


def test_a_calibration_killed_between_sidecar_and_cache_is_not_fresh(mlp, tmp_path, cli, monkeypatch):
    cache = tmp_path / "c.cache"
    args = ("calibrate", mlp, "--data", tmp_path / "data", "-o", cache)
    assert cli(*args)[0] == 0
    old = cache.read_bytes()
    from trtpipe import calibrate

    def killed(*_, **__):
        raise KeyboardInterrupt  # stands in for kill -9 after the sidecar's rename: the cache is never written

    monkeypatch.setattr(calibrate, "write_text", killed)
    code, _, err = cli(*args, "--method", "max")
    assert code == 130 and cache.read_bytes() == old
    monkeypatch.undo()
    # the sidecar now describes a max cache that was never written: the old cache is not taken as fresh
    code, _out, err = cli("inspect", cache)
    assert code == 2 and "does not match its sidecar's sha256" in err
    assert cli(*args, "--method", "max")[1].startswith("wrote")
    assert cli("inspect", cache)[0] == 0


def test_inspect_reads_what_calibrate_writes_and_refuses_an_edited_cache(mlp, tmp_path, cli):
    cache = tmp_path / "c.cache"
    assert cli("calibrate", mlp, "--data", tmp_path / "data", "--precision", "fp8", "-o", cache)[0] == 0
    code, out, err = cli("inspect", cache, "--json")
    assert code == 0, err
    description = json.loads(out)
    assert description["kind"] == "calibration cache" and description["precision"] == "fp8"
    assert description["method"] == "auto" and description["samples"] == 32
    assert set(description["methods"]) == set(description["amax"])  # the candidate each tensor's amax came from
    cache.write_text(cache.read_text().replace("TRT-101300", "TRT-101301"))
    code, _, err = cli("inspect", cache)
    assert code == 2 and "sha256" in err


# ---- engines ----------------------------------------------------------------------------------

@needs_rtx
def test_an_engine_and_its_sidecar_are_committed_as_one(mlp, tmp_path, monkeypatch):
    """An interrupted build leaves the old engine, sidecar and typed ONNX untouched; kill -9 between
    the sidecar's rename and the engine's leaves an engine no reader accepts; a failed build leaves
    nothing of its own."""
    from trtpipe import build as building
    from trtpipe import files
    from trtpipe.build import BuildOptions, build
    from trtpipe.runtime.sidecar import verify_engine
    from trtpipe.spec import parse_shapes
    from trtpipe.targets import Target

    out = tmp_path / "engines"
    options = BuildOptions(Target(8, 9), "tensorrt-rtx", shapes=parse_shapes(["x:1x16/8x16/32x16"]))
    [first] = build(mlp, out, ["fp16"], options)
    assert verify_engine(first.engine).engine_sha256 == sha256(first.engine)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C after TensorRT built the plan, before anything is committed

    monkeypatch.setattr(building, "sealed", interrupted)
    options.exclude = ["fc1"]  # another build: another typed graph, another engine
    with pytest.raises(KeyboardInterrupt):
        build(mlp, out, ["fp16"], options)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temporary left, nothing replaced
    verify_engine(first.engine)

    real_replace = files.os.replace

    def killed_after_sidecar(tmp, path):
        if str(path).endswith(".engine"):
            raise SystemExit(137)  # as kill -9 would stop it: the sidecar is in place, the engine is not
        real_replace(tmp, path)

    monkeypatch.setattr(files.os, "replace", killed_after_sidecar)
    with pytest.raises(SystemExit):
        build(mlp, out, ["fp16"], options)
    monkeypatch.undo()
    assert first.engine.read_bytes() == before[first.engine.name]  # the old engine is still there...
    with pytest.raises(TrtpipeError, match="does not match its sidecar's sha256"):
        verify_engine(first.engine)  # ...and no reader takes it for the new one
    assert sorted(p.name for p in out.iterdir()) == ["mlp.fp16.onnx", "mlp.fp16.sm89.engine", "mlp.fp16.sm89.engine.json"]

    # a build that fails leaves no typed ONNX of its own
    with pytest.raises(TrtpipeError):
        build(mlp, tmp_path / "failed", ["fp16"], BuildOptions(Target(8, 9), "tensorrt-rtx"))  # no --shapes
    assert not [p for p in (tmp_path / "failed").rglob("*") if p.is_file()]


def test_ctrl_c_waits_until_every_staged_file_is_in_place(tmp_path, monkeypatch):
    """A real SIGINT that arrives between two renames of one commit is held until the last one."""
    import signal

    from trtpipe import files

    real_replace = files.os.replace

    def signalled(tmp, path):
        real_replace(tmp, path)
        os.kill(os.getpid(), signal.SIGINT)  # delivered now: the handler runs before the next rename

    monkeypatch.setattr(files.os, "replace", signalled)
    with pytest.raises(KeyboardInterrupt), files.staged_outputs() as outputs:
        outputs.write(tmp_path / "a.json", "{}")
        outputs.write(tmp_path / "b.engine", b"plan", last=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.engine"]  # both, and no temporary
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_interrupted_command_leaves_none_of_its_files(tmp_path):
    """Staged files are all removed when the block fails: none finished, no temporary."""
    from trtpipe.files import staged_outputs

    (tmp_path / "old.cache").write_text("old")
    with pytest.raises(KeyboardInterrupt), staged_outputs() as outputs:
        outputs.write(tmp_path / "new.toml", "new")
        outputs.write(tmp_path / "old.cache", "new")
        raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.cache"] and (tmp_path / "old.cache").read_text() == "old"


# ---- concurrent writers -----------------------------------------------------------------------

def _writer(path, byte, rounds):
    for _ in range(rounds):
        write_bytes(path, bytes([byte]) * 200_000)


def test_two_processes_writing_one_output_never_leave_a_mix(tmp_path):
    """make -j runs two commands that write one file (a shared cache, a report): each rename is whole."""
    path = tmp_path / "shared.bin"
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_writer, args=(path, b, 40)) for b in (1, 2)]
    for w in writers:
        w.start()
    seen = set()
    while any(w.is_alive() for w in writers):
        if path.exists():
            data = path.read_bytes()
            assert len(data) == 200_000 and len(set(data)) == 1  # one writer's whole file
            seen.add(data[0])
    for w in writers:
        w.join()
        assert w.exitcode == 0
    assert sorted(os.listdir(tmp_path)) == ["shared.bin"]  # no temporary left


def test_a_tune_that_fails_while_writing_leaves_no_cache_toml_or_report(mlp, tmp_path, monkeypatch, cli):
    """tune's cache, exclusions and report are committed as one: a failure writing the last leaves none."""
    from trtpipe.quality import tune_report

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    (tmp_path / "spec.toml").write_text('name = "mlp"\n[[inputs]]\nname = "x"\nshape = [-1, 16]\n'
                                        '[data]\ncalibration = "data"\nvalidation = "data"\n')
    monkeypatch.setattr(tune_report, "plot", disk_full)  # the picture is written after the cache and .toml are staged
    out = tmp_path / "out"
    with pytest.raises(OSError, match="No space"):
        cli("tune", mlp, "--spec", tmp_path / "spec.toml", "--precision", "int8", "--budget-min", "0.02",
            "-o", out / "mlp.int8.tuned.cache")
    assert not [p for p in out.rglob("*") if p.is_file()]
    monkeypatch.undo()
    code, _, err = cli("tune", mlp, "--spec", tmp_path / "spec.toml", "--precision", "int8", "--budget-min", "0.02",
                       "-o", out / "mlp.int8.tuned.cache")
    assert code == 0, err
    assert {p.name for p in out.rglob("*") if p.is_file()} >= {"mlp.int8.tuned.cache", "mlp.int8.tuned.toml",
                                                                 "mlp.int8.tune.json", "mlp.int8.tune.md"}
