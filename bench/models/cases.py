#!/usr/bin/env python3
"""The input cases of the real-model set, and which models of a directory are out of date.

    /usr/bin/python3 bench/models/cases.py DIR [--only NAME,NAME...]

prints, one per line, the models (all of them, or those of --only) that DIR lacks or whose
entry in DIR/models.json is out of date: no .onnx file, or cases other than those below.
bench/common.sh remakes exactly those. This module needs no PyTorch, so the check is fast;
make_models.py imports the cases from here.

Each case gives, for every input, its shape, dtype and distribution (the scripts draw seeded
random data from it), or a .npy file next to the models. The FIRST case of a model is the one
bench/run_bench.mjs measures; bench/compare_ort.mjs checks every case.
"""

import argparse
import json
import os
import sys

SEED = 20261101

# The GPT decoders: the small one of the speed rows, and a larger one (about 110 MB of weights)
# whose weights outweigh a runtime's fixed memory, for bench/memory_bench.mjs.
GPT_CONFIGS = {
    "gpt": {"layers": 3, "heads": 4, "d": 128, "vocab": 1000},
    "gpt_large": {"layers": 6, "heads": 8, "d": 512, "vocab": 8192},
}
GPT_LAYERS = GPT_CONFIGS["gpt"]["layers"]
GPT_HEADS = GPT_CONFIGS["gpt"]["heads"]
GPT_D = GPT_CONFIGS["gpt"]["d"]
GPT_VOCAB = GPT_CONFIGS["gpt"]["vocab"]
# The sizes the speed targets name: GPT prefill over 128 tokens, decode after 128 past tokens.
GPT_BENCH_SEQ = 128
GPT_BENCH_PAST = 128


def normal(shape, std=1.0):
    return {"shape": shape, "dtype": "float32", "dist": "normal", "std": std}


def uniform(shape, low, high):
    return {"shape": shape, "dtype": "float32", "dist": "uniform", "low": low, "high": high}


def ints(shape, low, high):
    return {"shape": shape, "dtype": "int64", "dist": "int", "low": low, "high": high}


def past_names(config="gpt"):
    names = []
    for layer in range(GPT_CONFIGS[config]["layers"]):
        names += ["past_key_%d" % layer, "past_value_%d" % layer]
    return names


def torchvision_cases():
    return [{"name": "default", "inputs": {"input": normal([1, 3, 224, 224])}}]


def ocr_det_cases():
    return [{"name": "320x320", "inputs": {"image": normal([1, 3, 320, 320])}},
            {"name": "256x384", "inputs": {"image": normal([1, 3, 256, 384])}}]


def ocr_rec_cases():
    return [{"name": "32x128", "inputs": {"image": normal([1, 1, 32, 128])}},
            {"name": "32x200", "inputs": {"image": normal([1, 1, 32, 200])}}]


def vad_cases():
    state = normal([1, 1, 64], 0.5)
    # Mean |x| of uniform(-a, a) is a/2: 0.4 takes the loud branch, 0.02 the quiet one.
    return [{"name": "loud", "inputs": {"audio": uniform([1, 512], -0.8, 0.8), "h": state,
                                        "c": state}},
            {"name": "quiet", "inputs": {"audio": uniform([1, 512], -0.04, 0.04), "h": state,
                                         "c": state}}]


def gpt_prefill_cases(config="gpt", seqs=(GPT_BENCH_SEQ, 16, 5)):
    vocab = GPT_CONFIGS[config]["vocab"]
    return [{"name": "seq%d" % seq, "inputs": {"input_ids": ints([1, seq], 0, vocab)}}
            for seq in seqs]


def gpt_decode_cases(config="gpt", pasts=(GPT_BENCH_PAST, 16, 1)):
    c = GPT_CONFIGS[config]
    cases = []
    for past_len in pasts:
        inputs = {"input_ids": ints([1, 1], 0, c["vocab"])}
        for name in past_names(config):
            inputs[name] = normal([1, c["heads"], past_len, c["d"] // c["heads"]])
        cases.append({"name": "past%d" % past_len, "inputs": inputs})
    return cases


def digits_cases():
    return [{"name": "test_images",
             "inputs": {"x": {"shape": [10, 1, 8, 8], "dtype": "float32", "dist": "file",
                              "file": "digits_test_images.npy"}}}]


# In the order of models.json.
CASES = {
    "resnet18": torchvision_cases,
    "mobilenet_v2": torchvision_cases,
    "squeezenet1_1": torchvision_cases,
    "ocr_det": ocr_det_cases,
    "ocr_rec": ocr_rec_cases,
    "vad": vad_cases,
    "gpt_prefill": gpt_prefill_cases,
    "gpt_decode": gpt_decode_cases,
    "digits": digits_cases,
    "gpt_large_prefill": lambda: gpt_prefill_cases("gpt_large", (GPT_BENCH_SEQ,)),
    "gpt_large_decode": lambda: gpt_decode_cases("gpt_large", (GPT_BENCH_PAST,)),
}


def out_of_date(out_dir, names):
    """The models of `names` that out_dir lacks or whose models.json entry is out of date."""
    try:
        with open(os.path.join(out_dir, "models.json")) as f:
            models = json.load(f).get("models", {})
    except (OSError, ValueError):
        models = {}
    stale = []
    for name in names:
        entry = models.get(name)
        if (not entry or not os.path.isfile(os.path.join(out_dir, entry.get("file", ""))) or
                entry.get("cases") != CASES[name]()):
            stale.append(name)
    return stale


def parse_only(parser, only):
    names = [n for n in only.split(",") if n] or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error("unknown model(s) %s (expected some of %s)" %
                     (", ".join(unknown), ", ".join(CASES)))
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", help="directory of the .onnx files and models.json")
    parser.add_argument("--only", default="", help="comma-separated model names")
    args = parser.parse_args()
    for name in out_of_date(args.out_dir, parse_only(parser, args.only)):
        print(name)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
