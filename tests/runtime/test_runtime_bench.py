"""`trtpipe bench`: trtexec's statistics against hand-computed cases, and the command on real ONNX
models in ONNX Runtime (engines need a GPU: scripts/h200_bench_proof.py proves that path)."""

import json

import numpy as np
import pytest
from conftest import needs_rtx

from models import dynamic_mlp, save
from trtpipe.runtime.bench import median, percentile, summarize, warnings_for
from trtpipe.targets import Target


def test_percentiles_follow_trtexecs_index_rule_in_float32():
    values = list(range(1, 101))  # 1..100
    # N=100: exclude int((1 - 0.9f) * 100) = 10 -> index 89 -> 90 (doubles would truncate 9.999... to 9 -> 91)
    assert percentile(values, 90) == 90
    assert percentile(values, 95) == 95 and percentile(values, 100) == 100
    assert percentile(values, 99) == 100  # (1 - 0.99f) * 100 = 0.99999... truncates to 0: trtexec's p99 of 100 is the max
    assert percentile(list(range(10)), 95) == 9  # exclude int(0.05 * 10) = 0 -> the maximum
    assert percentile([5.0], 50) == 5.0 and percentile([1, 2, 3], 0) == 1
    with pytest.raises(ValueError):
        percentile(values, 101)


def test_median_of_even_counts_is_the_mean_of_the_middle_two():
    assert median([1, 2, 3]) == 2 and median([1, 2, 3, 10]) == 2.5


def test_summary_and_the_unstable_gpu_time_warning():
    steady = summarize([2.0] * 50)
    assert (steady.min, steady.max, steady.mean, steady.median, steady.cov) == (2.0, 2.0, 2.0, 2.0, 0.0)
    noisy = summarize([1.0, 3.0])
    assert noisy.cov == pytest.approx(50.0)  # population std 1 over mean 2
    assert not warnings_for({"gpu_compute": summarize([2.0, 2.02])})  # 0.5%
    [warning] = warnings_for({"gpu_compute": summarize([2.0, 2.2])})  # 4.8%
    assert "unstable" in warning and "4.76%" in warning
    bound = warnings_for({"gpu_compute": steady, "h2d": summarize([3.0]), "enqueue": summarize([1.9])})
    assert any("enqueue" in w for w in bound) and any("host-to-device" in w for w in bound)


@pytest.fixture(scope="module")
def onnx_models(tmp_path_factory):
    from trtpipe.graph.typed import write_typed_onnx
    from trtpipe.targets import Precision

    root = tmp_path_factory.mktemp("bench")
    save(dynamic_mlp(), root / "mlp.onnx")
    import onnx

    write_typed_onnx(onnx.load(root / "mlp.onnx"), Precision.FP16, root / "mlp.fp16.onnx", None)
    return root


def test_an_fp32_onnx_is_the_baseline_and_a_typed_one_is_labelled_simulated(onnx_models, cli):
    code, out, _ = cli("bench", onnx_models / "mlp.onnx", "--batch", "8", "--warmup-ms", "20", "--duration-s", "0.2", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["measured"] is True and "FP32 baseline" in result["label"] and result["shapes"] == {"x": [8, 16]}
    assert result["queries"] >= 10 and result["throughput_qps"] == pytest.approx(result["queries"] / result["walltime_s"])
    latency = result["metrics"]["latency"]
    assert latency["min"] <= latency["median"] <= latency["percentiles"]["99"] <= latency["max"]
    code, out, _ = cli("bench", onnx_models / "mlp.fp16.onnx", "--shapes", "x:4x16", "--iterations", "5", "--duration-s", "0")
    assert code == 0 and "SIMULATED" in out and "Latency: min =" in out and "x 4x16" in out


@pytest.mark.parametrize("args, message", [
    (["--iterations", "0"], "'--iterations': 0 is not in the range x>=1"),
    (["--batch", "0"], "'--batch': 0 is not in the range x>=1"),
    (["--duration-s", "nan"], "'--duration-s': nan is not a finite number"),
    (["--warmup-ms", "-1"], "'--warmup-ms': -1.0 is not in the range x>=0"),
    (["--shapes", "x:0x16"], "--shapes x:0x16: every dim must be at least 1"),
    (["--shapes", "x=8x16"], "--shapes x=8x16: write NAME:DIMS"),
    (["--shapes", "x:8x16,"], "--shapes x:8x16,: write NAME:DIMS"),  # trtexec's commas, with nothing after the last
    (["--shapes", "x:8x16,y:2"], "--shapes y: no such input"),
    (["--shapes", "y:8x16"], "--shapes y: no such input"),
    (["--shapes", "x:8x15"], "does not fit the input's shape"),
    ([], "input 'x' has dynamic shape"),
    (["--batch", "2", "--cuda-graph"], "--cuda-graph and --no-transfers apply to engines"),
])
def test_bad_flags_are_one_line_errors(onnx_models, cli, args, message):
    code, _, err = cli("bench", onnx_models / "mlp.onnx", *args)
    assert code == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_missing_candidate_is_named(cli, tmp_path):
    code, _, err = cli("bench", tmp_path / "nothing.engine")
    assert code == 2 and "nothing.engine: no such file" in err


@needs_rtx
def test_an_engine_without_a_gpu_is_a_one_line_error(tmp_path, cli):
    from trtpipe.build import BuildOptions, build
    from trtpipe.spec import parse_shapes

    save(dynamic_mlp(), tmp_path / "mlp.onnx")
    options = BuildOptions(target=Target(8, 9), backend="tensorrt-rtx", shapes=parse_shapes(["x:1x16/8x16/64x16"]))
    engine = build(tmp_path / "mlp.onnx", tmp_path, ["fp32"], options)[0].engine
    code, _, err = cli("bench", engine)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bench_inputs_have_the_dtype_and_shape_asked_for():
    from trtpipe.runtime.bench import bench_inputs
    from trtpipe.runtime.runner import IOSpec

    arrays = bench_inputs([IOSpec("ids", "int64", (-1, 7)), IOSpec("mask", "bool", (-1, 7)), IOSpec("x", "float16", (2,))],
                           {"ids": (3, 7), "mask": (3, 7), "x": (2,)})
    assert [(a.dtype, a.shape) for a in arrays.values()] == [(np.int64, (3, 7)), (np.bool_, (3, 7)), (np.float16, (2,))]


def _token_type_lookup():
    """A BERT-like token-type embedding: int64 ids of dynamic batch -> Cast -> Gather on a table of 2 rows."""
    from onnx import TensorProto, helper, numpy_helper

    table = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "token_type_embeddings")
    graph = helper.make_graph(
        [helper.make_node("Cast", ["token_type_ids"], ["ids32"], to=TensorProto.INT32),
         helper.make_node("Gather", ["token_type_embeddings", "ids32"], ["embedded"])],
        "lookup", [helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", 7])],
        [helper.make_tensor_value_info("embedded", TensorProto.FLOAT, ["batch", 7, 3])], [table])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def test_bench_feeds_ids_inside_the_table_they_index(tmp_path, cli):
    from trtpipe.graph.inputs import index_limits

    model = _token_type_lookup()
    assert index_limits(model.graph) == {"token_type_ids": 2}
    save(model, tmp_path / "lookup.onnx")
    # bench drew ids 0..99 here, and ONNX Runtime refused the Gather ("indices element out of data bounds").
    code, out, err = cli("bench", tmp_path / "lookup.onnx", "--batch", "64", "--iterations", "3", "--duration-s", "0")
    assert code == 0, err
    assert "Latency: min =" in out
