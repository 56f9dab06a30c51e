#!/usr/bin/env python3
"""A scripted stand-in for two Claude models and a local one, so the escalation example runs offline.

Called as `agent.py MODEL [--session-id ID | --resume ID]` from the workspace, with the prompt (or,
on a resume, the feedback) on standard input. Each run of the pipeline is another day, told by
how many runs the state folder holds: on day 1 Sonnet writes a syntax error and so does Opus on
its first try, which passes only with the strict prompt; on day 2 Sonnet gets it right; on day 3
Sonnet fails again and Opus passes at once. It reports what it did as Claude Code does with
`--output-format stream-json` (Sonnet at $0.04 an attempt, Opus at $0.60); the local model
reports nothing.
"""

import json
import os
import sys
import uuid
from pathlib import Path

GOOD = '''def parse(text):
    """The ADR's title: its first heading."""
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return None
'''

BROKEN = GOOD.replace("def parse(text):", "def parse(text)")

COST = {"claude-sonnet": 0.04, "claude-opus": 0.60}


def day():
    runs = Path(os.environ["HELIXFLOW_RUN_DIR"]).parent
    # `latest` is a link to the newest run, not a run of its own.
    return sum(1 for run in runs.iterdir() if run.is_dir() and not run.is_symlink())


def passes(model, attempt):
    if model == "claude-sonnet":
        return day() == 2
    # Opus: on day 1 only its second try, with the strict prompt, gets it right.
    return day() != 1 or attempt >= 3


def main():
    model = sys.argv[1]
    sys.stdin.read()
    out = Path("out")
    out.mkdir(exist_ok=True)
    if model == "local":
        (out / "parser.md").write_text("# parser\n\n`parse(text)` returns the ADR's title.\n")
        print("wrote out/parser.md")
        return
    session = sys.argv[3] if len(sys.argv) > 3 else str(uuid.uuid4())
    attempt = int(os.environ["HELIXFLOW_ATTEMPT"])
    (out / "parser.py").write_text(GOOD if passes(model, attempt) else BROKEN)
    print(json.dumps({"type": "system", "subtype": "init", "session_id": session, "model": model}))
    print(json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "wrote out/parser.py"}]}}))
    print(json.dumps({
        "type": "result", "subtype": "success", "is_error": False, "num_turns": 4,
        "result": "wrote out/parser.py", "session_id": session,
        "total_cost_usd": COST[model],
        "usage": {"input_tokens": 2000, "output_tokens": 400},
    }))


main()
