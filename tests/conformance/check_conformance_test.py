#!/usr/bin/env python3
"""Tests of check_conformance.py on saved runner outputs (no kiln binary needed)."""

import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_conformance.py")

OUTPUT = """node/test_abs: pass
node/test_add: fail: test_data_set_0: output 'y': element [0] (flat 0) is 1 (expected 2)
node/test_loop: unsupported: operator Loop
simple/test_relu: pass
2 passed, 1 failed, 1 unsupported
"""


class CheckConformanceTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.output = os.path.join(self.dir, "out.txt")
        self.expected = os.path.join(self.dir, "expected_passes.txt")

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, output, expected, *extra):
        with open(self.output, "w") as f:
            f.write(output)
        if expected is not None:
            with open(self.expected, "w") as f:
                f.write("".join(name + "\n" for name in expected))
        run = subprocess.run([sys.executable, SCRIPT, "--dir", self.dir, "--expected",
                              self.expected, "--output", self.output, *extra],
                             capture_output=True, text=True)
        return run.returncode, run.stdout

    def test_all_expected_passes_pass(self):
        rc, out = self.check(OUTPUT, ["node/test_abs", "simple/test_relu"])
        self.assertEqual(rc, 0, out)
        self.assertIn("all 2 expected passes pass", out)

    def test_regression_fails_naming_the_case_and_reason(self):
        rc, out = self.check(OUTPUT, ["node/test_abs", "node/test_add", "node/test_gone"])
        self.assertEqual(rc, 1, out)
        self.assertIn("2 expected pass(es) no longer pass", out)
        self.assertIn("node/test_add: fail: test_data_set_0: output 'y'", out)
        self.assertIn("node/test_gone: not run", out)

    def test_new_passes_are_a_hint(self):
        rc, out = self.check(OUTPUT, ["node/test_abs"])
        self.assertEqual(rc, 0, out)
        self.assertIn("1 new pass(es)", out)
        self.assertIn("simple/test_relu", out)

    def test_update_rewrites_the_list_sorted(self):
        rc, out = self.check(OUTPUT, [], "--update")
        self.assertEqual(rc, 0, out)
        with open(self.expected) as f:
            self.assertEqual(f.read(), "node/test_abs\nsimple/test_relu\n")

    def test_missing_summary_fails(self):
        rc, out = self.check(OUTPUT.rsplit("2 passed", 1)[0], ["node/test_abs"])
        self.assertEqual(rc, 1, out)
        self.assertIn("no summary line", out)

    def test_summary_must_agree_with_lines(self):
        rc, out = self.check(OUTPUT.replace("2 passed", "3 passed"), ["node/test_abs"])
        self.assertEqual(rc, 1, out)
        self.assertIn("disagrees", out)

    def test_report_counts_folders_and_operators(self):
        rc, out = self.check(OUTPUT, ["node/test_abs"], "--report")
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r"node\s+1\s+1\s+1")
        self.assertRegex(out, r"1\s+Loop")

    def test_missing_cases_folder_skips(self):
        run = subprocess.run([sys.executable, SCRIPT, "--dir", os.path.join(self.dir, "none"),
                              "--expected", self.expected, "--kiln", "/bin/false"],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 77, run.stdout)


if __name__ == "__main__":
    unittest.main()
