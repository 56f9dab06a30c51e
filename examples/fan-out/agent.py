"""A scripted agent for the fan-out example: no model, the same answer every time.

As `plan` it writes the list of modules and one more phase; as an item of `migrate` it writes
that module (its first attempt at `lexer` has a syntax error, which the retry fixes).
"""

import json
import os
import sys

prompt = sys.stdin.read()
phase = os.environ["HELIXFLOW_PHASE"]
attempt = int(os.environ["HELIXFLOW_ATTEMPT"])

if phase == "plan":
    os.makedirs("plan", exist_ok=True)
    modules = [
        {"id": "parser", "path": "out/parser.py", "title": "the parser"},
        {"id": "lexer", "path": "out/lexer.py", "title": "the lexer"},
        {"id": "printer", "path": "out/printer.py", "title": "the printer"},
    ]
    with open("plan/modules.json", "w") as f:
        json.dump(modules, f, indent=2)
    with open("plan/phases.kdl", "w") as f:
        f.write(
            'phase "notes" {\n'
            '    depends-on "plan"\n'
            '    run "mkdir -p out && echo \'3 modules\' > out/NOTES.txt"\n'
            '    outputs {\n'
            '        file "out/NOTES.txt"\n'
            "    }\n"
            "}\n"
        )
else:
    key = os.environ["HELIXFLOW_ITEM_KEY"]
    path = os.environ["HELIXFLOW_ITEM_FIELD_path"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    body = f'def {key}(text):\n    return text\n\n\nprint({key}("ok"))\n'
    if key == "lexer" and attempt == 1:
        body = f"def {key}(text)\n    return text\n"
    with open(path, "w") as f:
        f.write(body)
