"""The runtime's checks that need no GPU, on real engines built by TensorRT-RTX for sm_89:
the sidecar, the engine file against it, and the GPU it was built for."""

import json

import pytest
from conftest import needs_rtx

from models import dynamic_mlp, save
from trtpipe.build import BuildOptions, build
from trtpipe.errors import TrtpipeError
from trtpipe.runtime.engine import check_capability
from trtpipe.runtime.sidecar import read_sidecar, verify_engine
from trtpipe.spec import parse_shapes
from trtpipe.targets import Target

pytestmark = needs_rtx


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    root = tmp_path_factory.mktemp("engine")
    save(dynamic_mlp(), root / "mlp.onnx")
    options = BuildOptions(target=Target(8, 9), backend="tensorrt-rtx", shapes=parse_shapes(["x:1x16/8x16/64x16"]))
    return build(root / "mlp.onnx", root, ["fp16"], options)[0].engine


def test_sidecar_describes_the_engine(engine):
    info = read_sidecar(engine)
    assert (info.backend, info.target, info.capability, info.precision) == ("tensorrt-rtx", "sm89", (8, 9), "fp16")
    [x], [probs] = info.inputs, info.outputs
    assert (x.name, x.dtype, x.shape, x.profile) == ("x", "float32", [-1, 16], [[1, 16], [8, 16], [64, 16]])
    assert (probs.name, probs.dtype) == ("probs", "float32")
    verify_engine(engine)
    check_capability(engine, info, (8, 9))


def test_a_truncated_or_replaced_engine_is_refused(engine, tmp_path):
    copy = tmp_path / engine.name
    copy.write_bytes(engine.read_bytes()[:-100])
    (tmp_path / f"{engine.name}.json").write_text(engine.with_name(f"{engine.name}.json").read_text())
    with pytest.raises(TrtpipeError, match="does not match its sidecar's sha256"):
        verify_engine(copy)


def test_an_engine_for_another_gpu_is_refused_with_the_fix(engine):
    with pytest.raises(TrtpipeError) as error:
        check_capability(engine, read_sidecar(engine), (9, 0))
    assert "built for sm89" in str(error.value) and "--target sm_90" in str(error.value)


def test_a_missing_or_corrupt_sidecar_is_named(engine, tmp_path):
    lone = tmp_path / engine.name
    lone.write_bytes(engine.read_bytes())
    with pytest.raises(TrtpipeError, match=r"mlp\.fp16\.sm89\.engine\.json: no sidecar"):
        read_sidecar(lone)
    (tmp_path / f"{engine.name}.json").write_text(json.dumps({"engine": "x"}))
    with pytest.raises(TrtpipeError, match="not a trtpipe engine sidecar"):
        read_sidecar(lone)


def test_validate_refuses_a_truncated_engine_before_needing_a_gpu(engine, tmp_path, cli):
    copy = tmp_path / engine.name
    copy.write_bytes(engine.read_bytes()[: engine.stat().st_size // 2])
    (tmp_path / f"{engine.name}.json").write_text(engine.with_name(f"{engine.name}.json").read_text())
    (tmp_path / "data").mkdir()
    code, _, err = cli("validate", copy, "--baseline", engine.parent / "mlp.onnx", "--data", tmp_path / "data")
    assert code == 2 and "sha256" in err and "Traceback" not in err
