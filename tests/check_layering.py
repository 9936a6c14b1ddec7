#!/usr/bin/env python3
"""Checks that every #include <kiln/...> under kiln/ respects the layering of DESIGN.md §1.

Each library folder may include its own headers and those of the layers listed for it in
RULES, nothing else. Unit tests (`*/test/*`) are cross-component by nature and are exempt,
like tests/. Every layer but the exporter is also checked for ONNX / protobuf includes (the
runtime must not link them).

Usage: check_layering.py [REPO_ROOT]   (default: the parent of this file's folder)
Exit status 0 when clean, 1 with one line per violation otherwise.
"""

import os
import re
import sys

# folder (prefix under the repo root) -> prefixes it may include besides its own folder.
# Longest matching folder wins. Keep in step with DESIGN.md §1.
RUNTIME = "kiln/runtime/"
# The kernels' registry: a leaf header over core through which kernels register and are
# looked up by op name. Kernels, and the engine that runs them (constant folding), may use it.
KERNEL_REGISTRY = "kiln/runtime/executor/kernel_registry.h"
# The program writer: ONNX-free, so the test helpers (ProgramBuilder) may write programs
# with it. It may itself use only the runtime (checked by its own rule below).
PROGRAM_WRITER = "kiln/exporter/writer/"
RULES = {
    "kiln/runtime/core/": [],
    "kiln/runtime/schema/": [],
    "kiln/runtime/backend/": ["kiln/runtime/core/"],
    "kiln/runtime/executor/": ["kiln/runtime/core/", "kiln/runtime/backend/",
                               "kiln/runtime/schema/"],
    "kiln/kernels/": ["kiln/runtime/core/", KERNEL_REGISTRY],
    "kiln/engine/": ["kiln/runtime/core/", "kiln/kernels/", KERNEL_REGISTRY],
    "kiln/backends/kiln/": [RUNTIME, "kiln/engine/"],
    "kiln/extension/module/": [RUNTIME],
    "kiln/exporter/": ["kiln/engine/", RUNTIME],
    PROGRAM_WRITER: [RUNTIME],
    "kiln/testing/": [RUNTIME, PROGRAM_WRITER],
}
# Layers that end up in the runtime library and must stay free of ONNX and protobuf.
NO_ONNX = ["kiln/runtime/", "kiln/kernels/", "kiln/extension/module/", "kiln/engine/",
           "kiln/backends/", "kiln/testing/", PROGRAM_WRITER]
FORBIDDEN_EXTERNAL = re.compile(r"^(onnx/|google/protobuf/)")

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
SOURCE_EXTS = (".h", ".hpp", ".cpp", ".cc", ".c", ".inc")


def rule_for(rel):
    best = None
    for folder in RULES:
        if rel.startswith(folder) and (best is None or len(folder) > len(best)):
            best = folder
    return best


def is_test_file(rel):
    return "/test/" in rel or "/tests/" in rel


def check(root):
    violations = []
    checked = 0
    kiln_dir = os.path.join(root, "kiln")
    for dirpath, dirnames, filenames in os.walk(kiln_dir):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(SOURCE_EXTS):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if is_test_file(rel):
                continue
            folder = rule_for(rel)
            if folder is None:
                violations.append(
                    f"{rel}: folder has no layering rule (add it to DESIGN.md §1 and "
                    f"tests/check_layering.py)")
                continue
            allowed = [folder] + RULES[folder]
            checked += 1
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = m.group(1)
                    if target.startswith("kiln/"):
                        if not any(target == a or (a.endswith("/") and target.startswith(a))
                                   for a in allowed):
                            violations.append(
                                f"{rel}:{lineno}: layer '{folder.rstrip('/')}' includes "
                                f"<{target}> (may use: "
                                f"{', '.join(a.rstrip('/') for a in RULES[folder]) or 'std only'})")
                    elif (FORBIDDEN_EXTERNAL.match(target)
                          and any(rel.startswith(p) for p in NO_ONNX)):
                        violations.append(
                            f"{rel}:{lineno}: runtime layer includes <{target}> "
                            f"(the runtime must not depend on ONNX or protobuf)")
    return checked, violations


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    checked, violations = check(root)
    for v in violations:
        print(v)
    if violations:
        print(f"check_layering: {len(violations)} violation(s); {checked} files checked")
        return 1
    print(f"check_layering: {checked} files OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
