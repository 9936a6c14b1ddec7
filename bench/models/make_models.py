#!/usr/bin/env python3
"""Writes kiln's real-model set as ONNX files, plus models.json describing their inputs.

    /usr/bin/python3 bench/models/make_models.py OUT_DIR [--only NAME,NAME...]

Every model has random weights drawn with a fixed seed, so the set is the same on every
machine with the same PyTorch; the files are not checked in (they are megabytes and
reproducible). Each model covers a family of real deployments:

  resnet18, mobilenet_v2, squeezenet1_1   torchvision classifiers, 1x3x224x224
  ocr_det      a small DBNet-style text detector (conv backbone, FPN with Resize, sigmoid),
               dynamic H/W
  ocr_rec      a CRNN text recognizer (conv stack, BiLSTM, linear), 1x1x32xW
  vad          a Silero-style voice-activity model (conv features, LSTM with h/c state in and
               out, a data-dependent If)
  gpt_prefill  a small GPT decoder over a prompt: input_ids [1, seq] -> logits + present K/V
  gpt_decode   the same weights for one step: input_ids [1, 1] + past K/V -> logits + present
  digits       the trained example model (examples/digits/digits.onnx, copied) on its ten
               committed test images
  gpt_large_prefill, gpt_large_decode
               the GPT pair at 6 layers, width 512 and 8192 tokens (about 110 MB of weights),
               for the memory benchmark (bench/memory_bench.mjs --gpt gpt_large)

models.json lists, per model, its file, opset and one or more input cases (cases.py): for each
input its shape, dtype and distribution (the scripts draw seeded random data from it), or a .npy
file in OUT_DIR to use as it is. The first case of each model is the one the benchmark measures
(GPT: prefill over 128 tokens, decode after 128 past tokens); the comparison checks them all.
"""

import argparse
import json
import math
import os
import shutil
import sys

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

from cases import (CASES, GPT_CONFIGS, SEED, parse_only,
                   past_names)


def randomize_batch_norms(module, generator):
    """Gives every BatchNorm non-trivial statistics and affine weights.

    Fresh torchvision models have mean 0, var 1, weight 1, bias 0, which makes eval-mode
    BatchNorm the identity and hides mistakes in it.
    """
    for m in module.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            n = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
                m.weight.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(n, generator=generator) * 0.1)


def calibrate_output(model, layer, example, target_std=2.0):
    """Rescales the last linear layer so that on the example input its output is centred with
    standard deviation target_std. Default initialization shrinks activations layer by layer,
    which leaves a sigmoid or softmax output nearly constant and hides errors upstream of it."""
    seen = []
    handle = layer.register_forward_hook(lambda m, i, o: seen.append(o.detach()))
    model.eval()
    with torch.no_grad():
        model(*example)
        out = seen[0]
        factor = target_std / float(out.std())
        layer.weight.mul_(factor)
        # f * (o - b) + f * (b - mean(o)) = f * (o - mean(o)); channel offsets are kept.
        layer.bias.copy_((layer.bias - out.mean()) * factor)
    handle.remove()


# ---------------------------------------------------------------------------------------------
# OCR text detector: DBNet-like.


def conv_bn_relu(cin, cout, stride=1, kernel=3):
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class TextDetector(nn.Module):
    """Backbone at strides 4/8/16/32, FPN top-down with nearest 2x upsampling, all levels
    resized (bilinear) to 1/4, concatenated, and a head that upsamples back to full size with
    transposed convolutions and ends in a sigmoid probability map [N, 1, H, W]."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(conv_bn_relu(3, 16, 2), conv_bn_relu(16, 16, 1),
                                  nn.MaxPool2d(3, 2, 1))
        self.stage2 = nn.Sequential(conv_bn_relu(16, 32, 1), conv_bn_relu(32, 32, 1))
        self.stage3 = nn.Sequential(conv_bn_relu(32, 64, 2), conv_bn_relu(64, 64, 1))
        self.stage4 = nn.Sequential(conv_bn_relu(64, 96, 2), conv_bn_relu(96, 96, 1))
        self.stage5 = nn.Sequential(conv_bn_relu(96, 128, 2), conv_bn_relu(128, 128, 1))
        inner = 64
        self.lateral = nn.ModuleList([nn.Conv2d(c, inner, 1) for c in (32, 64, 96, 128)])
        self.smooth = nn.ModuleList([nn.Conv2d(inner, inner // 4, 3, padding=1)
                                     for _ in range(4)])
        self.head = nn.Sequential(
            conv_bn_relu(inner, inner // 4),
            nn.ConvTranspose2d(inner // 4, inner // 4, 2, 2),
            nn.BatchNorm2d(inner // 4),
            nn.ReLU(inplace=True),
            nn.ConvTranspose2d(inner // 4, 1, 2, 2),
        )

    def forward(self, x):
        c2 = self.stage2(self.stem(x))
        c3 = self.stage3(c2)
        c4 = self.stage4(c3)
        c5 = self.stage5(c4)
        p5 = self.lateral[3](c5)
        p4 = self.lateral[2](c4) + F.interpolate(p5, scale_factor=2.0, mode="nearest")
        p3 = self.lateral[1](c3) + F.interpolate(p4, scale_factor=2.0, mode="nearest")
        p2 = self.lateral[0](c2) + F.interpolate(p3, scale_factor=2.0, mode="nearest")
        outs = []
        for i, (p, scale) in enumerate(zip((p2, p3, p4, p5), (1, 2, 4, 8))):
            p = self.smooth[i](p)
            if scale != 1:
                p = F.interpolate(p, scale_factor=float(scale), mode="bilinear",
                                  align_corners=False)
            outs.append(p)
        fused = torch.cat(outs, dim=1)
        return torch.sigmoid(self.head(fused))


# ---------------------------------------------------------------------------------------------
# OCR text recognizer: CRNN.


class TextRecognizer(nn.Module):
    """Conv stack that turns a 32-pixel-high line into a sequence of W/4 feature columns,
    a 2-layer bidirectional LSTM, and a linear layer to 37 classes (CTC blank + 0-9 + a-z),
    as log-probabilities [T, N, 37]."""

    def __init__(self, classes=37, hidden=96):
        super().__init__()
        self.cnn = nn.Sequential(
            conv_bn_relu(1, 32), nn.MaxPool2d(2, 2),            # 16 x W/2
            conv_bn_relu(32, 64), nn.MaxPool2d(2, 2),           # 8 x W/4
            conv_bn_relu(64, 128), conv_bn_relu(128, 128),
            nn.MaxPool2d((2, 1), (2, 1)),                       # 4 x W/4
            conv_bn_relu(128, 160), nn.MaxPool2d((2, 1), (2, 1)),  # 2 x W/4
            nn.Conv2d(160, 160, (2, 1)),                         # 1 x W/4
            nn.ReLU(inplace=True),
        )
        self.rnn = nn.LSTM(160, hidden, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        f = self.cnn(x).squeeze(2)          # [N, C, T]
        f = f.permute(2, 0, 1)              # [T, N, C]
        y, _ = self.rnn(f)
        return F.log_softmax(self.fc(y), dim=2)


# ---------------------------------------------------------------------------------------------
# Voice activity: Silero-like.


@torch.jit.script
def normalize_level(x: torch.Tensor) -> torch.Tensor:
    # Data-dependent: a loud chunk is peak-normalized, a quiet one only gets a fixed gain.
    # Scripted so that the export keeps both branches as an ONNX If.
    if bool(x.abs().mean() > 0.05):
        y = x / (x.abs().max() + 1e-3)
    else:
        y = x * 4.0
    return y


class VoiceActivity(nn.Module):
    """512-sample chunk [N, 512] plus LSTM state h, c [1, N, 64] -> speech probability [N, 1]
    and the new h, c. Features: a learned filterbank (strided Conv1d pair as real and
    imaginary parts, magnitude via sqrt), log compression, a conv encoder, then the LSTM."""

    def __init__(self, bins=65, hidden=64):
        super().__init__()
        self.real = nn.Conv1d(1, bins, 128, stride=64, padding=64, bias=False)
        self.imag = nn.Conv1d(1, bins, 128, stride=64, padding=64, bias=False)
        self.encoder = nn.Sequential(
            nn.Conv1d(bins, 64, 3, padding=1), nn.ReLU(),
            nn.Conv1d(64, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv1d(64, 64, 3, stride=2, padding=1), nn.ReLU(),
        )
        self.lstm = nn.LSTM(64, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 1)

    def forward(self, audio, h, c):
        x = normalize_level(audio).unsqueeze(1)                 # [N, 1, 512]
        mag = torch.sqrt(self.real(x) ** 2 + self.imag(x) ** 2 + 1e-6)
        feat = self.encoder(torch.log(mag + 1e-3))              # [N, 64, 3]
        feat = feat.mean(dim=2, keepdim=True).transpose(1, 2)   # [N, 1, 64]
        y, (h2, c2) = self.lstm(feat, (h, c))
        prob = torch.sigmoid(self.out(y[:, -1]))
        return prob, h2, c2


# ---------------------------------------------------------------------------------------------
# GPT-style decoder.


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x, past_k, past_v, mask):
        n, t, d = x.shape
        dh = d // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.reshape(n, t, self.heads, dh).transpose(1, 2)
        k = k.reshape(n, t, self.heads, dh).transpose(1, 2)
        v = v.reshape(n, t, self.heads, dh).transpose(1, 2)
        if past_k is not None:
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(dh)
        if mask is not None:
            scores = scores.masked_fill(mask, torch.finfo(torch.float32).min)
        att = torch.matmul(torch.softmax(scores, dim=-1), v)
        att = att.transpose(1, 2).reshape(n, t, d)
        x = x + self.proj(att)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x, k, v


class GPT(nn.Module):
    def __init__(self, vocab=1000, d=128, heads=4, layers=3, positions=512):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(positions, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02 if isinstance(m, nn.Linear) else 0.5)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.normal_(m.bias, std=0.02)
            if isinstance(m, nn.LayerNorm):
                nn.init.normal_(m.weight, mean=1.0, std=0.1)
                nn.init.normal_(m.bias, std=0.1)

    def run(self, ids, past):
        t = ids.shape[1]
        start = 0 if past is None else past[0].shape[2]
        positions = torch.arange(start, start + t, device=ids.device).unsqueeze(0)
        x = self.tok(ids) + self.pos(positions)
        mask = None
        if past is None:
            # Causal: query i may not see key j > i.
            i = torch.arange(t, device=ids.device)
            mask = (i.unsqueeze(0) > i.unsqueeze(1)).unsqueeze(0).unsqueeze(0)
        presents = []
        for layer, block in enumerate(self.blocks):
            pk = None if past is None else past[2 * layer]
            pv = None if past is None else past[2 * layer + 1]
            x, k, v = block(x, pk, pv, mask)
            presents += [k, v]
        return (self.head(self.ln_f(x)), *presents)


class GPTPrefill(nn.Module):
    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, input_ids):
        return self.gpt.run(input_ids, None)


class GPTDecode(nn.Module):
    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, input_ids, *past):
        return self.gpt.run(input_ids, list(past))


# ---------------------------------------------------------------------------------------------


def export(model, args, path, opset, input_names, output_names, dynamic_axes=None):
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, args, path, opset_version=opset, input_names=input_names,
                          output_names=output_names, dynamic_axes=dynamic_axes or {},
                          do_constant_folding=True)
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    ops = sorted({node.op_type for node in proto.graph.node})
    return ops


def make_torchvision(name, opset):
    def make(out_dir):
        torch.manual_seed(SEED)
        model = getattr(torchvision.models, name)(weights=None)
        randomize_batch_norms(model, torch.Generator().manual_seed(SEED + 1))
        path = os.path.join(out_dir, name + ".onnx")
        ops = export(model, (torch.randn(1, 3, 224, 224),), path, opset, ["input"], ["logits"])
        return path, opset, ops
    return make


def make_ocr_det(out_dir):
    opset = 17
    torch.manual_seed(SEED)
    model = TextDetector()
    randomize_batch_norms(model, torch.Generator().manual_seed(SEED + 1))
    calibrate_output(model, model.head[4], (torch.randn(1, 3, 320, 320),))
    path = os.path.join(out_dir, "ocr_det.onnx")
    ops = export(model, (torch.randn(1, 3, 320, 320),), path, opset, ["image"], ["prob"],
                 {"image": {0: "batch", 2: "height", 3: "width"},
                  "prob": {0: "batch", 2: "height", 3: "width"}})
    return path, opset, ops


def make_ocr_rec(out_dir):
    opset = 14
    torch.manual_seed(SEED)
    model = TextRecognizer()
    randomize_batch_norms(model, torch.Generator().manual_seed(SEED + 1))
    calibrate_output(model, model.fc, (torch.randn(1, 1, 32, 128),))
    path = os.path.join(out_dir, "ocr_rec.onnx")
    ops = export(model, (torch.randn(1, 1, 32, 128),), path, opset, ["image"], ["log_probs"],
                 {"image": {3: "width"}, "log_probs": {0: "steps"}})
    return path, opset, ops


def make_vad(out_dir):
    opset = 16
    torch.manual_seed(SEED)
    model = VoiceActivity()
    path = os.path.join(out_dir, "vad.onnx")
    example = (torch.randn(1, 512) * 0.3, torch.zeros(1, 1, 64), torch.zeros(1, 1, 64))
    calibrate_output(model, model.out, (torch.rand(64, 512) * 1.6 - 0.8,
                                        torch.randn(1, 64, 64) * 0.5, torch.randn(1, 64, 64) * 0.5))
    ops = export(model, example, path, opset, ["audio", "h", "c"], ["prob", "hn", "cn"])
    if "If" not in ops:
        raise RuntimeError("vad: the export has no If node (ops: %s)" % ", ".join(ops))
    return path, opset, ops


def make_gpt(config):
    torch.manual_seed(SEED)
    c = GPT_CONFIGS[config]
    return GPT(vocab=c["vocab"], d=c["d"], heads=c["heads"], layers=c["layers"])


def present_names(config):
    names = []
    for layer in range(GPT_CONFIGS[config]["layers"]):
        names += ["present_key_%d" % layer, "present_value_%d" % layer]
    return names


def make_gpt_prefill(config):
    def make(out_dir):
        opset = 17
        gpt = make_gpt(config)
        path = os.path.join(out_dir, "%s_prefill.onnx" % config)
        outputs = ["logits"] + present_names(config)
        axes = {"input_ids": {1: "seq"}, "logits": {1: "seq"}}
        for name in present_names(config):
            axes[name] = {2: "seq"}
        ids = torch.randint(0, GPT_CONFIGS[config]["vocab"], (1, 8))
        ops = export(GPTPrefill(gpt), (ids,), path, opset, ["input_ids"], outputs, axes)
        return path, opset, ops
    return make


def make_gpt_decode(config):
    def make(out_dir):
        opset = 17
        gpt = make_gpt(config)
        c = GPT_CONFIGS[config]
        path = os.path.join(out_dir, "%s_decode.onnx" % config)
        past = past_names(config)
        axes = {name: {2: "past"} for name in past}
        for name in present_names(config):
            axes[name] = {2: "past_plus_1"}
        example = [torch.randn(1, c["heads"], 7, c["d"] // c["heads"]) for _ in past]
        ids = torch.randint(0, c["vocab"], (1, 1))
        ops = export(GPTDecode(gpt), (ids, *example), path, opset, ["input_ids"] + past,
                     ["logits"] + present_names(config), axes)
        return path, opset, ops
    return make


def make_digits(out_dir):
    # Trained, not random: copied from the example together with its test images.
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                          "digits")
    path = os.path.join(out_dir, "digits.onnx")
    shutil.copyfile(os.path.join(source, "digits.onnx"), path)
    shutil.copyfile(os.path.join(source, "test_images.npy"),
                    os.path.join(out_dir, "digits_test_images.npy"))
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    ops = sorted({node.op_type for node in proto.graph.node})
    return path, opset, ops


MODELS = {
    "resnet18": make_torchvision("resnet18", 13),
    "mobilenet_v2": make_torchvision("mobilenet_v2", 15),
    "squeezenet1_1": make_torchvision("squeezenet1_1", 13),
    "ocr_det": make_ocr_det,
    "ocr_rec": make_ocr_rec,
    "vad": make_vad,
    "gpt_prefill": make_gpt_prefill("gpt"),
    "gpt_decode": make_gpt_decode("gpt"),
    "digits": make_digits,
    "gpt_large_prefill": make_gpt_prefill("gpt_large"),
    "gpt_large_decode": make_gpt_decode("gpt_large"),
}
assert list(MODELS) == list(CASES), "make_models.MODELS and cases.CASES name other models"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", help="directory for the .onnx files and models.json")
    parser.add_argument("--only", default="", help="comma-separated model names")
    args = parser.parse_args()
    names = parse_only(parser, args.only)
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_num_threads(1)

    manifest_path = os.path.join(args.out_dir, "models.json")
    manifest = {"seed": SEED, "torch": torch.__version__, "models": {}}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest["models"] = json.load(f).get("models", {})
    for name in names:
        path, opset, ops = MODELS[name](args.out_dir)
        manifest["models"][name] = {"file": os.path.basename(path), "opset": opset, "ops": ops,
                                    "cases": CASES[name]()}
        print("%s: %s (opset %d, %d bytes; ops %s)" %
              (name, path, opset, os.path.getsize(path), " ".join(ops)))
        sys.stdout.flush()
    ordered = {n: manifest["models"][n] for n in MODELS if n in manifest["models"]}
    manifest["models"] = ordered
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
