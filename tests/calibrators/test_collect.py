"""Activation collection within a memory budget: tensors exposed in groups give what one run gives,
and hold a group's activations, not a batch's."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from trtpipe.calibrators import collect

ROOT = Path(__file__).resolve().parents[2]


def _photo_net(tmp_path):
    """A conv net, 24 crops of scikit-image's astronaut at 32x32, and a spec that reads them."""
    from skimage import data

    import models

    models.save(models.conv_net(batch="N", height=32, width=32), tmp_path / "m.onnx")
    photo = data.astronaut().astype(np.float32).transpose(2, 0, 1) / 255
    crops = np.stack([photo[:, r * 32:(r + 1) * 32, c * 32:(c + 1) * 32] for r in range(2, 8) for c in range(4, 8)])
    models.save_batches(tmp_path / "data", crops, per_file=8)
    (tmp_path / "m.toml").write_text('[data]\ncalibration = "data"\nvalidation = "data"\n')
    return tmp_path / "m.onnx", tmp_path / "m.toml"


def test_a_batch_past_the_budget_comes_in_groups_of_its_tensors(tmp_path):
    model_path, _spec = _photo_net(tmp_path)
    model = onnx.load(model_path)
    tensors = [out for node in model.graph.node for out in node.output]
    batch = {"input": np.random.default_rng(0).random((8, 3, 32, 32), np.float32)}
    # c0, b0, r0, c1, b1, res, r1 are 8x8x32x32 floats: 256 KiB each at a batch of 8
    whole = list(collect.exposed_activations(model, tensors, [batch]))
    grouped = list(collect.exposed_activations(model, tensors, [batch], budget=600 << 10))
    assert len(whole) == 1 and len(grouped) > 2
    assert all(sum(v.nbytes for v in values.values()) <= 600 << 10 for values in grouped)
    seen = [name for values in grouped for name in values]
    assert sorted(seen) == sorted(tensors)  # each tensor once
    for values in grouped:
        for name, value in values.items():
            np.testing.assert_allclose(value, whole[0][name], rtol=1e-5, atol=1e-6)  # see collect: fusions


def test_a_unit_stays_whole_and_a_tensor_two_units_read_comes_with_each(tmp_path):
    model = onnx.load(_photo_net(tmp_path)[0])
    batch = {"input": np.random.default_rng(1).random((8, 3, 32, 32), np.float32)}
    units = [["r0", "c1"], ["r0", "res"], ["r1", "logits"]]  # conv1's input and output; the residual; the head
    got = list(collect.exposed_groups(model, units, [batch], budget=600 << 10))
    assert sorted(i for indices, _ in got for i in indices) == [0, 1, 2]
    for indices, values in got:
        for i in indices:
            assert set(units[i]) <= set(values)


def test_calibration_within_a_small_budget_writes_the_same_cache(tmp_path, cli, monkeypatch):
    """The histograms, `auto`'s layer errors and its choice see every batch in order either way, so
    INT8 and FP8 caches come out byte for byte the same with every tensor exposed alone (the values
    differ in float rounding where a group's session fuses nodes, and no scale moved here)."""
    model, spec = _photo_net(tmp_path)
    for grid in ("int8", "fp8"):
        written = {}
        for run in ("whole", "grouped"):
            if run == "grouped":
                monkeypatch.setattr(collect, "activation_budget", lambda: 1)
            cache = tmp_path / f"{grid}.{run}.cache"
            code, _out, err = cli("calibrate", model, "--spec", spec, "--precision", grid, "-o", cache)
            assert code == 0, err
            written[run] = (cache.read_bytes(), json.loads(cache.with_name(cache.name + ".json").read_text())["methods"])
            monkeypatch.undo()
        assert written["grouped"] == written["whole"]


def test_the_peak_memory_is_a_group_not_the_batch(tmp_path):
    """A chain of 24 elementwise nodes, each 16 MiB at a batch of 16: one run holds 384 MiB of them;
    within a 48 MiB budget the process's peak stays far below (measured as the child's peak RSS)."""
    nodes = [helper.make_node("Tile", ["x", "repeats"], ["t0"])]
    for i in range(1, 24):
        nodes.append(helper.make_node("Abs" if i % 2 else "Neg", [f"t{i - 1}"], [f"t{i}"]))
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1024])],
                              [helper.make_tensor_value_info("t23", TensorProto.FLOAT, ["n", 262144])],
                              [onnx.numpy_helper.from_array(np.array([1, 256], np.int64), "repeats")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, tmp_path / "chain.onnx")
    script = textwrap.dedent("""
        import sys
        import numpy as np, onnx
        from trtpipe.calibrators.collect import collect_histograms
        model = onnx.load(sys.argv[1])
        tensors = [node.output[0] for node in model.graph.node]
        batches = [{"x": np.random.default_rng(i).random((16, 1024), np.float32)} for i in range(2)]
        budget = None if sys.argv[2] == "none" else int(sys.argv[2])
        histograms = collect_histograms(model, tensors, batches, budget=budget)
        assert all(not h.empty for h in histograms.values())
        # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so it would report the forking pytest's peak
        print(next(int(l.split()[1]) // 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:")))
    """)
    peaks = {}
    for budget in ("none", str(48 << 20)):
        done = subprocess.run([sys.executable, "-c", script, tmp_path / "chain.onnx", budget], cwd=ROOT,
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        peaks[budget] = int(done.stdout.split()[-1])  # MiB
    assert peaks["none"] - peaks[str(48 << 20)] > 250, peaks  # the 384 MiB a run held, less a group's 48
