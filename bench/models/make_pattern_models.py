#!/usr/bin/env python3
"""Writes the models of the pattern benchmark (bench/pattern_bench.mjs) as ONNX files.

    /usr/bin/python3 bench/models/make_pattern_models.py OUT_DIR

Two models of the bench's set, exported the way other exporters leave them, so that the
graph holds the patterns kiln's importer rewrites:

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


if __name__ == "__main__":
    main()
