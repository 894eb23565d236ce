"""The cost model: FLOPs and bytes per layer counted by hand, a roofline per kernel, the GPU table."""

import numpy as np
import pytest

from models import conv_net, mlp
from trtpipe.errors import TrtpipeError
from trtpipe.quality.cost import GPUS, LAUNCH_SECONDS, Layer, cost_model, gpu_for, layers_of, tensor_shapes
from trtpipe.targets import Target


def test_conv_net_kernels_fuse_pointwise_ops_and_count_flops_by_hand():
    model = conv_net(batch=2)
    layers = {layer.name: layer for layer in layers_of(model, tensor_shapes(model, {"input": np.zeros((2, 3, 16, 16), np.float32)}))}
    # BatchNorm, Relu and the residual Add join the convolutions; Flatten joins the pool.
    assert list(layers) == ["conv0", "conv1", "pool", "fc"]
    conv0 = layers["conv0"]
    assert conv0.flops == 2 * (2 * 16 * 16 * 16) * (3 * 3 * 3)  # 2 x outputs x MACs per output
    assert (conv0.act_bytes, conv0.weight_bytes, conv0.out_bytes) == (2 * 3 * 16 * 16, 16 * 3 * 3 * 3, 2 * 16 * 16 * 16)
    assert layers["conv1"].flops == 2 * (2 * 16 * 16 * 16) * (16 * 3 * 3)
    assert layers["fc"].flops == 2 * (2 * 16) * 16
    assert layers["pool"].flops == 0 and layers["pool"].act_bytes == 2 * 16 * 16 * 16


def test_matmul_flops_over_batch_dimensions():
    model = mlp(batch=4)
    layers = {layer.name: layer for layer in layers_of(model, tensor_shapes(model, {"x": np.zeros((4, 16), np.float32)}))}
    assert layers["fc0"].flops == 2 * 4 * 16 * 32 and layers["fc1"].flops == 2 * 4 * 32 * 8
    assert "softmax" in layers  # not fusible: a kernel of its own


def test_roofline_by_hand():
    l4 = GPUS["L4"]
    big = Layer("big", "MatMul", flops=2 * 4096.0**3, act_bytes=4096.0**2, weight_bytes=4096.0**2, out_bytes=4096.0**2)
    assert big.seconds(l4, "fp16") == pytest.approx(2 * 4096**3 / 121e12 + LAUNCH_SECONDS)  # compute-bound
    assert big.seconds(l4, "int8") == pytest.approx(2 * 4096**3 / 242.5e12 + LAUNCH_SECONDS)
    thin = Layer("thin", "Conv", flops=1e6, act_bytes=1e8, weight_bytes=0, out_bytes=1e8, grouped=True)
    assert thin.seconds(l4, "fp16") == pytest.approx((2e8 + 2e8) / 300e9 + LAUNCH_SECONDS)  # memory-bound
    assert thin.seconds(l4, "int8") == pytest.approx((1e8 + 2e8) / 300e9 + LAUNCH_SECONDS)


def test_quantizing_lowers_the_estimate_and_fp8_needs_the_hardware():
    model = conv_net(batch="N")
    feeds = {"input": np.zeros((64, 3, 16, 16), np.float32)}
    costs = cost_model(model, gpu_for(Target.parse("L4")), feeds)
    fp16, int8 = costs.seconds("int8", []), costs.seconds("int8", ["conv0", "conv1", "fc"])
    assert int8 < costs.seconds("int8", ["conv1"]) < fp16
    assert costs.per_layer("int8", ["conv1"])[0][2] >= costs.per_layer("int8", ["conv1"])[-1][2]
    a100 = cost_model(model, gpu_for(Target.parse("A100")), feeds)
    with pytest.raises(TrtpipeError, match="no fp8"):
        a100.seconds("fp8", ["conv0"])


@pytest.mark.parametrize("text, gpu", [("H200", "H200"), ("RTX 4090", "RTX4090"), ("sm_89", "L4"), ("sm_90", "H100"),
                                       ("sm_120", "RTX5090"), ("L40S", "L40S")])
def test_targets_map_to_table_gpus(text, gpu):
    assert gpu_for(Target.parse(text)).name == gpu


def test_a_target_outside_the_table_is_named():
    with pytest.raises(TrtpipeError, match="sm75.*L4"):
        gpu_for(Target.parse("T4"))


def test_every_gpu_cites_its_source():
    for gpu in GPUS.values():
        assert gpu.source and gpu.bandwidth_gbs > 0 and gpu.tflops["int8"] >= gpu.tflops["fp16"]
