#!/usr/bin/env python3
"""Writes the models of the pattern benchmark (bench/pattern_bench.mjs) as ONNX files.

    /usr/bin/python3 bench/models/make_pattern_models.py OUT_DIR

Models of the bench's set, and a style-transfer network, exported the way other exporters
leave them, so that the graph holds the patterns kiln's importer rewrites:

  resnet18_bn          torchvision ResNet-18 (the bench's weights) with each BatchNormalization
                       kept after its Conv (PyTorch folds them in eval mode unless asked to
                       preserve them; TensorFlow converters and many model-zoo files keep them)
  gpt_prefill_opset14  the bench's GPT prefill exported at opset 14, where PyTorch writes layer
                       normalization as ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul,
                       Add, and GELU as Div, Erf, Add, Mul, Mul
  gpt_prefill_rmsnorm  the bench's GPT prefill with Llama's RMSNorm in place of each
                       LayerNorm (x * rsqrt(mean(x^2) + eps) * weight, as Hugging Face writes
                       it), which ONNX has no op for before opset 23: Pow, ReduceMean, Add,
                       Sqrt, Reciprocal, Mul, Mul
  style_instancenorm   a fast-neural-style network (Johnson et al.'s shape, two residual blocks,
                       128x128 images) whose instance normalizations are written out as
                       TensorFlow's converters leave them: ReduceMean over H and W, Sub, Mul,
                       ReduceMean, Add, Sqrt, Div, then Mul and Add by per-channel constants
"""

import os
import sys

import onnx
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import SEED  # noqa: E402
from make_models import GPTPrefill, make_gpt, present_names, randomize_batch_norms  # noqa: E402,E501


class RMSNorm(torch.nn.Module):
    """Llama's RMSNorm as Hugging Face writes it."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


class SpelledInstanceNorm(torch.nn.Module):
    """Instance normalization written out, with a per-channel scale and shift."""

    def __init__(self, c, generator, eps=1e-5):
        super().__init__()
        self.weight = torch.nn.Parameter(1.0 + 0.1 * torch.randn(c, 1, 1, generator=generator))
        self.bias = torch.nn.Parameter(0.1 * torch.randn(c, 1, 1, generator=generator))
        self.eps = eps

    def forward(self, x):
        d = x - x.mean((2, 3), keepdim=True)
        var = (d * d).mean((2, 3), keepdim=True)
        return d / torch.sqrt(var + self.eps) * self.weight + self.bias


class StyleNet(torch.nn.Module):
    """Fast neural style's shape: Conv-norm-ReLU down, residual blocks, upsampling, Conv out."""

    def __init__(self, generator):
        super().__init__()

        def block(cin, cout, k, stride=1, relu=True):
            layers = [torch.nn.Conv2d(cin, cout, k, stride, k // 2),
                      SpelledInstanceNorm(cout, generator)]
            return torch.nn.Sequential(*layers, *([torch.nn.ReLU()] if relu else []))

        self.down = torch.nn.Sequential(block(3, 32, 9), block(32, 64, 3, 2), block(64, 128, 3, 2))
        self.res = torch.nn.ModuleList(
            torch.nn.Sequential(block(128, 128, 3), block(128, 128, 3, relu=False)) for _ in range(2))
        self.up1 = block(128, 64, 3)
        self.up2 = block(64, 32, 3)
        self.out = torch.nn.Conv2d(32, 3, 9, 1, 4)

    def forward(self, x):
        x = self.down(x)
        for r in self.res:
            x = x + r(x)
        x = self.up1(torch.nn.functional.interpolate(x, scale_factor=2.0, mode="nearest"))
        x = self.up2(torch.nn.functional.interpolate(x, scale_factor=2.0, mode="nearest"))
        return self.out(x)


def with_rms_norms(gpt, generator):
    """Replaces each LayerNorm of `gpt` by an RMSNorm of weights around 1."""
    for module in list(gpt.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, torch.nn.LayerNorm):
                norm = RMSNorm(child.normalized_shape[0])
                with torch.no_grad():
                    norm.weight.copy_(1.0 + 0.1 * torch.randn(norm.weight.shape,
                                                              generator=generator))
                setattr(module, name, norm)
    return gpt


def export(model, args, path, opset, input_names, output_names, dynamic_axes=None,
           training=torch.onnx.TrainingMode.EVAL):
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, args, path, opset_version=opset, input_names=input_names,
                          output_names=output_names, dynamic_axes=dynamic_axes or {},
                          do_constant_folding=True, training=training)
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    ops = {}
    for node in proto.graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    print("%s: opset %d, %d nodes (%s)" % (os.path.basename(path), opset, len(proto.graph.node),
                                          ", ".join("%s %d" % kv for kv in sorted(ops.items()))))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_pattern_models.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(1)

    torch.manual_seed(SEED)
    resnet = torchvision.models.resnet18(weights=None)
    randomize_batch_norms(resnet, torch.Generator().manual_seed(SEED + 1))
    export(resnet, (torch.randn(1, 3, 224, 224),), os.path.join(out_dir, "resnet18_bn.onnx"), 17,
           ["input"], ["logits"], training=torch.onnx.TrainingMode.PRESERVE)

    gpt = make_gpt("gpt")
    outputs = ["logits"] + present_names("gpt")
    axes = {"input_ids": {1: "seq"}, "logits": {1: "seq"}}
    for name in present_names("gpt"):
        axes[name] = {2: "seq"}
    ids = torch.randint(0, 1000, (1, 8))
    export(GPTPrefill(gpt), (ids,), os.path.join(out_dir, "gpt_prefill_opset14.onnx"), 14,
           ["input_ids"], outputs, axes)

    rms_gpt = with_rms_norms(make_gpt("gpt"), torch.Generator().manual_seed(SEED + 2))
    export(GPTPrefill(rms_gpt), (ids,), os.path.join(out_dir, "gpt_prefill_rmsnorm.onnx"), 17,
           ["input_ids"], outputs, axes)

    style = StyleNet(torch.Generator().manual_seed(SEED + 3))
    export(style, (torch.randn(1, 3, 128, 128),), os.path.join(out_dir, "style_instancenorm.onnx"),
           17, ["image"], ["styled"])


if __name__ == "__main__":
    main()
