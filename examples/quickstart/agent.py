#!/usr/bin/env python3
"""A scripted stand-in for a coding agent, so the quickstart runs offline.

It is called as `agent.py PHASE PROMPT` from the workspace, writes the phase's files, and prints
what it did. Like a hurried real agent, its first attempt at "code" contains a syntax error; on a
retry it reads the feedback helixflow gives it (HELIXFLOW_FEEDBACK_FILE) and fixes the error.
"""

import os
import sys
from pathlib import Path

PLAN = """# Calculator plan

## Goal
A module `calc` with `add` and `mul`.

## Steps
1. Implement `out/calc.py`.
2. Document it in `out/docs/calc.md`.
3. Test it in `out/test_calc.py`.
"""

CALC_BROKEN = """def add(a, b):
    return a + b


def mul(a, b)
    return a * b
"""

CALC = """def add(a, b):
    return a + b


def mul(a, b):
    return a * b
"""

DOCS = """# calc

## Usage
    from calc import add, mul

## Functions
- `add(a, b)`: the sum.
- `mul(a, b)`: the product.
"""

TESTS = """import unittest

from calc import add, mul


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mul(self):
        self.assertEqual(mul(2, 3), 6)


if __name__ == "__main__":
    unittest.main()
"""


def write(path, text):
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    print(f"wrote {path} ({len(text)} bytes)")


def main():
    phase, prompt = sys.argv[1], sys.stdin.read()
    attempt = int(os.environ.get("HELIXFLOW_ATTEMPT", "1"))
    print(f"[{phase}] attempt {attempt}: {prompt.splitlines()[0]}")
    if phase == "plan":
        write("out/PLAN.md", PLAN)
    elif phase == "code":
        feedback_file = os.environ.get("HELIXFLOW_FEEDBACK_FILE")
        feedback = Path(feedback_file).read_text() if feedback_file else ""
        if "out/calc.py:" in feedback and "syntax" in feedback:
            print("the feedback reports a syntax error in out/calc.py; fixing it")
            write("out/calc.py", CALC)
        else:
            write("out/calc.py", CALC_BROKEN)
    elif phase == "docs":
        write("out/docs/calc.md", DOCS)
    elif phase == "tests":
        write("out/test_calc.py", TESTS)
    else:
        print(f"unknown phase {phase}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
