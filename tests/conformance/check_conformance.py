#!/usr/bin/env python3
"""Checks `kiln conformance` against the list of cases known to pass.

Runs `KILN conformance DIR` (or reads a saved output with --output), parses its lines

    <case>: pass
    <case>: fail: <why>
    <case>: unsupported: <what>
    N passed, N failed, N unsupported

and compares the passing cases with EXPECTED (one case name per line, sorted). It fails, listing
each one with its reason, when a case of the list no longer passes; new passes are printed as a
hint to add them (--update rewrites the list). --report prints the counts per folder and the most
common failure and unsupported reasons.

Exit status: 0 when every expected pass still passes, 1 otherwise, 77 (CTest's skip code) when
DIR does not exist.

Usage: check_conformance.py --kiln KILN --dir DIR --expected FILE [--backend B] [--update]
                            [--report] [--output SAVED_OUTPUT]
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import time

SKIP = 77
CASE_LINE = re.compile(r"^(?P<name>\S+): (?P<outcome>pass|fail|unsupported)(?:: (?P<detail>.*))?$")
SUMMARY_LINE = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) unsupported$")


def parse(text):
    """Returns ({name: (outcome, detail)}, (passed, failed, unsupported) or None, errors)."""
    results, summary, errors = {}, None, []
    for line in text.splitlines():
        if not line.strip():
            continue
        m = SUMMARY_LINE.match(line)
        if m:
            summary = tuple(int(g) for g in m.groups())
            continue
        m = CASE_LINE.match(line)
        if m:
            results[m.group("name")] = (m.group("outcome"), m.group("detail") or "")
        else:
            errors.append(f"unexpected line: {line}")
    if summary is None:
        errors.append("no summary line 'N passed, N failed, N unsupported' (did the run stop?)")
    else:
        counts = collections.Counter(outcome for outcome, _ in results.values())
        if summary != (counts["pass"], counts["fail"], counts["unsupported"]):
            errors.append(f"summary {summary} disagrees with the case lines "
                          f"({counts['pass']}, {counts['fail']}, {counts['unsupported']})")
    return results, summary, errors


def read_expected(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def reason_key(detail):
    """Groups similar details: node and value names and numbers are blanked out."""
    key = re.sub(r"^test_data_set_\d+: ", "", detail)
    key = re.sub(r"has dtype \w+", "has dtype T", key)
    key = re.sub(r"'[^']*'", "'*'", key)
    key = re.sub(r"\[[-0-9, ]*\]", "[*]", key)
    key = re.sub(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b", "N", key)
    return key


def report(results, top):
    folders = collections.defaultdict(collections.Counter)
    for name, (outcome, _) in results.items():
        folder = name.split("/")[0] if "/" in name else "."
        folders[folder][outcome] += 1
    print("per folder (pass / fail / unsupported):")
    for folder in sorted(folders):
        c = folders[folder]
        print(f"  {folder:20s} {c['pass']:5d} {c['fail']:5d} {c['unsupported']:5d}")
    for outcome in ("fail", "unsupported"):
        reasons = collections.Counter(reason_key(d) for o, d in results.values() if o == outcome)
        print(f"top {outcome} reasons:")
        for key, n in reasons.most_common(top):
            print(f"  {n:4d}  {key}")
    # A case may miss several operators; count each one (the cases a new kernel would unblock,
    # at most).
    operators = collections.Counter()
    for outcome, detail in results.values():
        if outcome == "unsupported" and detail.startswith("operator "):
            operators.update(op.strip() for op in detail[len("operator "):].split(","))
    print("missing operators (cases that need each):")
    for op, n in operators.most_common(top):
        print(f"  {n:4d}  {op}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kiln", help="the kiln tool")
    parser.add_argument("--dir", required=True, help="conformance cases root")
    parser.add_argument("--expected", required=True, help="expected_passes.txt")
    parser.add_argument("--backend", default="portable")
    parser.add_argument("--output", help="read this saved output instead of running kiln")
    parser.add_argument("--update", action="store_true", help="rewrite EXPECTED with the passes")
    parser.add_argument("--report", action="store_true", help="print per-folder counts and reasons")
    parser.add_argument("--top", type=int, default=15, help="reasons shown by --report")
    args = parser.parse_args()

    if not os.path.isdir(args.dir):
        print(f"check_conformance: skipped: no conformance cases at '{args.dir}'")
        return SKIP

    if args.output:
        with open(args.output, encoding="utf-8") as f:
            text = f.read()
    else:
        if not args.kiln:
            parser.error("--kiln is required unless --output is given")
        start = time.monotonic()
        run = subprocess.run([args.kiln, "conformance", args.dir, "--backend", args.backend],
                             capture_output=True, text=True, errors="replace")
        elapsed = time.monotonic() - start
        text = run.stdout
        if run.returncode != 0:
            print(f"check_conformance: '{args.kiln} conformance' exited with {run.returncode}:\n"
                  f"{run.stderr}")
            return 1
        print(f"check_conformance: the run took {elapsed:.1f} s")

    results, summary, errors = parse(text)
    for error in errors:
        print(f"check_conformance: {error}")
    if errors:
        return 1
    passes = sorted(name for name, (outcome, _) in results.items() if outcome == "pass")
    print(f"check_conformance: {summary[0]} passed, {summary[1]} failed, "
          f"{summary[2]} unsupported")
    if args.report:
        report(results, args.top)

    if args.update:
        with open(args.expected, "w", encoding="utf-8") as f:
            f.writelines(name + "\n" for name in passes)
        print(f"check_conformance: wrote {len(passes)} cases to {args.expected}")
        return 0

    expected = read_expected(args.expected)
    regressions = [name for name in expected if name not in passes]
    new = [name for name in passes if name not in set(expected)]
    if new:
        print(f"check_conformance: {len(new)} new pass(es); add them to {args.expected} "
              f"(or run with --update):")
        for name in new:
            print(f"  {name}")
    if regressions:
        print(f"check_conformance: {len(regressions)} expected pass(es) no longer pass:")
        for name in regressions:
            outcome, detail = results.get(name, ("not run", "the case was not found"))
            print(f"  {name}: {outcome}" + (f": {detail}" if detail else ""))
        return 1
    print(f"check_conformance: all {len(expected)} expected passes pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
