#!/usr/bin/env python3
"""A scripted stand-in for a coding agent, so the quickstart runs offline.

It is called as `agent.py PHASE` from the workspace with the prompt on standard input, writes the
phase's files, and reports what it did as Claude Code does with `--output-format stream-json`: one
JSON event per line, ending with a `result` event that carries the response, the tokens used and
the cost in US dollars (here made up from the prompt's length at Claude Sonnet's prices). Like a
hurried real agent, its first attempt at "code" contains a syntax error; on a retry it reads the
feedback helixflow gives it (HELIXFLOW_FEEDBACK_FILE) and fixes the error.
"""

import json
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


SAID = []
WRITTEN = []


def say(text):
    """One assistant message, as a stream-json event."""
    SAID.append(text)
    event = {"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}}
    print(json.dumps(event), flush=True)


def write(path, text):
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    WRITTEN.append(text)
    say(f"wrote {path} ({len(text)} bytes)")


def result(prompt, is_error=False):
    """The final `result` event: the response, the usage and what it cost."""
    input_tokens = len(prompt) // 4 + 2000
    output_tokens = sum(len(text) for text in WRITTEN) // 4 + 50
    # Claude Sonnet: $3 per million input tokens, $15 per million output tokens.
    cost = round((input_tokens * 3 + output_tokens * 15) / 1e6, 6)
    event = {
        "type": "result",
        "subtype": "success",
        "is_error": is_error,
        "num_turns": len(SAID),
        "result": "\n".join(SAID),
        "session_id": "quickstart",
        "total_cost_usd": cost,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        "modelUsage": {
            "claude-sonnet-4-5": {
                "inputTokens": input_tokens,
                "outputTokens": output_tokens,
                "costUSD": cost,
            }
        },
    }
    print(json.dumps(event), flush=True)


def main():
    phase, prompt = sys.argv[1], sys.stdin.read()
    attempt = int(os.environ.get("HELIXFLOW_ATTEMPT", "1"))
    print(json.dumps({"type": "system", "subtype": "init", "session_id": "quickstart"}))
    say(f"[{phase}] attempt {attempt}: {prompt.splitlines()[0]}")
    if phase == "plan":
        write("out/PLAN.md", PLAN)
    elif phase == "code":
        feedback_file = os.environ.get("HELIXFLOW_FEEDBACK_FILE")
        feedback = Path(feedback_file).read_text() if feedback_file else ""
        if "out/calc.py:" in feedback and "syntax" in feedback:
            say("the feedback reports a syntax error in out/calc.py; fixing it")
            write("out/calc.py", CALC)
        else:
            write("out/calc.py", CALC_BROKEN)
    elif phase == "docs":
        write("out/docs/calc.md", DOCS)
    elif phase == "tests":
        write("out/test_calc.py", TESTS)
    else:
        say(f"unknown phase {phase}")
        result(prompt, is_error=True)
        return 1
    result(prompt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
