#!/usr/bin/env python3
"""Trains the digits example model and exports it to ONNX.

    /usr/bin/python3 examples/digits/train.py [OUT_DIR]      (default: this directory)

A small CNN on scikit-learn's bundled 8x8 handwritten digits (load_digits: 1797 images, no
download), trained on CPU in seconds with a fixed seed. Writes:

  digits.onnx          input  x     f32 [N, 1, 8, 8], raw pixel values 0..16
                       output probs f32 [N, 10], class probabilities (softmax)
  test_images.npy      f32 [10, 1, 8, 8], the first ten held-out images
  test_labels.npy      i64 [10], their true digits
  expected_probs.npy   f32 [10, 10], what PyTorch computes for them

Needs python3-torch, python3-onnx, python3-sklearn and python3-numpy (Debian 12; see
scripts/install-bench-deps.sh).
"""

import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

SEED = 0
EPOCHS = 30
BATCH = 64
OPSET = 13


class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 16 x 4 x 4
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 2 x 2
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(32 * 2 * 2, 64), nn.ReLU(), nn.Linear(64, 10))

    def logits(self, x):
        return self.classifier(self.features(x / 16.0))

    def forward(self, x):
        return torch.softmax(self.logits(x), dim=1)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(SEED)
    torch.set_num_threads(1)

    digits = load_digits()
    images = digits.images.astype(np.float32).reshape(-1, 1, 8, 8)
    labels = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=0.2, random_state=SEED, stratify=labels)
    x_train, y_train = torch.from_numpy(x_train), torch.from_numpy(y_train)

    model = DigitsCNN()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(SEED)
    for epoch in range(EPOCHS):
        model.train()
        order = torch.randperm(len(x_train), generator=generator)
        total = 0.0
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            optimizer.zero_grad()
            loss = loss_fn(model.logits(x_train[batch]), y_train[batch])
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
        if epoch % 10 == 9 or epoch == EPOCHS - 1:
            print("epoch %2d: train loss %.4f" % (epoch + 1, total / len(x_train)))

    model.eval()
    with torch.no_grad():
        probs = model(torch.from_numpy(x_test)).numpy()
    accuracy = float((probs.argmax(axis=1) == y_test).mean())
    print("test accuracy: %.4f (%d of %d held-out images)" %
          (accuracy, int(round(accuracy * len(y_test))), len(y_test)))

    path = os.path.join(out_dir, "digits.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (torch.from_numpy(x_test[:1]),), path, opset_version=OPSET,
                          input_names=["x"], output_names=["probs"],
                          dynamic_axes={"x": {0: "batch"}, "probs": {0: "batch"}},
                          do_constant_folding=True)
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    print("wrote %s (%d bytes; ops %s)" % (path, os.path.getsize(path),
                                           " ".join(sorted({n.op_type for n in proto.graph.node}))))

    np.save(os.path.join(out_dir, "test_images.npy"), x_test[:10])
    np.save(os.path.join(out_dir, "test_labels.npy"), y_test[:10])
    np.save(os.path.join(out_dir, "expected_probs.npy"), probs[:10].astype(np.float32))
    print("test labels:     %s" % " ".join(str(v) for v in y_test[:10]))
    print("predicted (torch): %s" % " ".join(str(v) for v in probs[:10].argmax(axis=1)))


if __name__ == "__main__":
    main()
