#!/usr/bin/env python3
"""Agreement of helixflow's `syntax` gate with CPython's `compile(source, path, "exec")`.

Three corpora, each judged by both sides file by file:

- stdlib: every .py file of CPython's standard library (site-packages excluded);
- mutants: files of the standard library, each changed once at random (seeded): an assignment,
  augmented assignment, `for`, `with`, `del` or comprehension target replaced by one that cannot
  be assigned to; a broken or valid escape put into a string; a statement such as `return`,
  `yield`, `break`, `await`, `nonlocal`, `global`, `from __future__ import …` or `from m import *`
  put before a statement somewhere; one token deleted; a parameter or keyword argument repeated;
  a value starred;
- cpython-tests: CPython's own syntax-error examples, when this install has them: the doctests
  and the snippets given to `_check_error`/`check_syntax_error`/`compile` in test_syntax.py,
  test_grammar.py, test_exceptions.py, test_future_stmt and test_string_literals.py, and the
  badsyntax files.

A verdict is CPython's when compile() raises SyntaxError (IndentationError, TabError) or
ValueError (a null byte), helixflow's when `check_file` finds an error. Warnings are ignored:
an unknown escape such as '\\d' is a DeprecationWarning in 3.11, not an error.

Usage: bench/python_agreement.py [--mutants N] [--seed S] [--keep DIR] [--json OUT]
                                 [--corpus stdlib,mutants,cpython-tests]
"""

import argparse
import ast
import doctest
import io
import json
import os
import random
import re
import subprocess
import sys
import sysconfig
import tempfile
import tokenize
import warnings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_files(root):
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "site-packages")
        files.extend(os.path.join(folder, n) for n in sorted(names) if n.endswith(".py"))
    return files


def cpython_verdict(path):
    try:
        with open(path, "rb") as f:
            source = f.read()
        compile(source, path, "exec", dont_inherit=True)
        return None
    except SyntaxError as e:
        return f"{e.lineno}:{e.offset}: {type(e).__name__}: {e.msg}"
    except (ValueError, UnicodeDecodeError, RecursionError, MemoryError) as e:
        return f"{type(e).__name__}: {e}"


def helixflow_verdicts(paths, work):
    list_path = os.path.join(work, "files.txt")
    invalid_path = os.path.join(work, "helixflow-invalid.txt")
    with open(list_path, "w", encoding="utf-8") as f:
        f.write("".join(p + "\n" for p in paths))
    run = subprocess.run(
        ["cargo", "bench", "--quiet", "--bench", "syntax", "--", list_path, invalid_path],
        cwd=REPO, capture_output=True, text=True,
    )
    if run.returncode != 0:
        sys.exit(f"cargo bench --bench syntax failed:\n{run.stdout}\n{run.stderr}")
    verdicts = {}
    with open(invalid_path, encoding="utf-8") as f:
        for line in f:
            path, _, message = line.rstrip("\n").partition("\t")
            verdicts[path] = message
    return verdicts


# --- mutations -------------------------------------------------------------------------------

BAD_TARGETS = ["f()", "x + 1", "None", "1", "(a, b())", "[x for x in y]", "a if b else c", "*t"]
BAD_AUGMENTED = ["a, b", "(a, b)", "[a]", "f()", "x + 1"]
ESCAPES = ["\\x4", "\\xZZ", "\\u12", "\\U1234", "\\U00110000", "\\N{", "\\N", "\\N{DIGIT ONE}",
           "\\x41", "\\d", "\\777", "\\u00e9", "\\N{NO SUCH NAME}"]
STATEMENTS = ["return", "return 1", "yield x", "yield from x", "break", "continue", "await x",
              "nonlocal x", "global x", "from __future__ import annotations",
              "from __future__ import braces", "from os import *", "async with a: pass",
              "async for a in b: pass", "del f()", "x = *y", "*x = y", "__debug__ = 1",
              "async def f():\n    yield 1\n    return 2", "(a.b := 1)", "[i := 0 for i in x]",
              "f(a=1, a=2)", "def f(a, a): pass", "x = 'a' b'b'", "x = f'{y!z}'"]


def line_starts(text):
    starts = [0]
    for i, c in enumerate(text):
        if c == "\n":
            starts.append(i + 1)
    return starts


def offset(text, starts, line, col_bytes):
    """A (1-based line, UTF-8 byte column) of ast as an index into text."""
    line_start = starts[line - 1]
    line_text = text[line_start:]
    return line_start + len(line_text.encode("utf-8")[:col_bytes].decode("utf-8", "ignore"))


def replace_node(text, node, new):
    starts = line_starts(text)
    a = offset(text, starts, node.lineno, node.col_offset)
    b = offset(text, starts, node.end_lineno, node.end_col_offset)
    return text[:a] + new + text[b:]


def mutate_target(text, tree, rng):
    candidates = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            candidates.extend(("assign", t) for t in node.targets)
        elif isinstance(node, ast.AugAssign):
            candidates.append(("augmented", node.target))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            candidates.append(("assign", node.target))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            candidates.extend(("assign", i.optional_vars) for i in node.items if i.optional_vars)
        elif isinstance(node, ast.Delete):
            candidates.extend(("assign", t) for t in node.targets)
    if not candidates:
        return None
    kind, target = rng.choice(candidates)
    new = rng.choice(BAD_AUGMENTED if kind == "augmented" else BAD_TARGETS)
    return replace_node(text, target, new)


def string_tokens(text):
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    return [t for t in tokens if t.type == tokenize.STRING]


def mutate_escape(text, tree, rng):
    strings = string_tokens(text)
    if not strings:
        return None
    token = rng.choice(strings)
    quote = re.match(r"[A-Za-z]*('''|\"\"\"|'|\")", token.string)
    if not quote:
        return None
    starts = line_starts(text)
    at = starts[token.start[0] - 1] + token.start[1] + quote.end()
    escape = rng.choice(ESCAPES + ["é"])
    return text[:at] + escape + text[at:]


def statement_lines(tree):
    return [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]


def mutate_misplace(text, tree, rng):
    statements = statement_lines(tree)
    if not statements:
        return None
    target = rng.choice(statements)
    starts = line_starts(text)
    line_start = starts[target.lineno - 1]
    line = text[line_start:].split("\n", 1)[0]
    indent = line[: len(line) - len(line.lstrip())]
    if line[len(indent):len(indent) + 1] in ("", "#") or target.col_offset != len(indent.encode()):
        return None
    statement = rng.choice(STATEMENTS).replace("\n", "\n" + indent)
    return text[:line_start] + indent + statement + "\n" + text[line_start:]


def mutate_delete_token(text, tree, rng):
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                  if t.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING)]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    if not tokens:
        return None
    token = rng.choice(tokens)
    starts = line_starts(text)
    a = starts[token.start[0] - 1] + token.start[1]
    b = starts[token.end[0] - 1] + token.end[1]
    return text[:a] + text[b:]


def mutate_repeat(text, tree, rng):
    candidates = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node.args.args:
            candidates.append(("parameter", node.args.args[-1]))
        elif isinstance(node, ast.Call) and node.keywords and node.keywords[-1].arg:
            candidates.append(("keyword", node.keywords[-1]))
    if not candidates:
        return None
    kind, node = rng.choice(candidates)
    starts = line_starts(text)
    end = offset(text, starts, node.end_lineno, node.end_col_offset)
    if kind == "parameter":
        return text[:end] + ", " + node.arg + text[end:]
    return text[:end] + ", " + node.arg + "=None" + text[end:]


def mutate_starred(text, tree, rng):
    values = [n.value for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.Return)) and n.value]
    if not values:
        return None
    value = rng.choice(values)
    starts = line_starts(text)
    a = offset(text, starts, value.lineno, value.col_offset)
    return text[:a] + "*" + text[a:]


MUTATIONS = {
    "target": mutate_target,
    "escape": mutate_escape,
    "misplace": mutate_misplace,
    "delete-token": mutate_delete_token,
    "repeat": mutate_repeat,
    "starred": mutate_starred,
}


def make_mutants(files, count, seed, folder):
    rng = random.Random(seed)
    sources = []
    for path in files:
        if os.path.getsize(path) > 40_000:
            continue
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            tree = ast.parse(text)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        sources.append((path, text, tree))
    os.makedirs(folder, exist_ok=True)
    mutants = []
    kinds = list(MUTATIONS)
    attempts = 0
    while len(mutants) < count and attempts < count * 20:
        attempts += 1
        kind = kinds[len(mutants) % len(kinds)]
        path, text, tree = rng.choice(sources)
        mutated = MUTATIONS[kind](text, tree, rng)
        if mutated is None or mutated == text:
            continue
        name = f"{len(mutants):05}-{kind}-{os.path.basename(path)}"
        out = os.path.join(folder, name)
        with open(out, "w", encoding="utf-8") as f:
            f.write(mutated)
        mutants.append((out, kind))
    return mutants


# --- CPython's own test data -----------------------------------------------------------------

SNIPPET_CALLS = {"_check_error", "check_syntax_error", "compile", "check", "_check_in_scopes",
                 "assertInvalid", "check_error", "_check_noerror"}


def cpython_snippets(stdlib, folder):
    test = os.path.join(stdlib, "test")
    if not os.path.isdir(test):
        return []
    sources = ["test_syntax.py", "test_grammar.py", "test_exceptions.py", "test_string_literals.py",
               "test_named_expressions.py", "test_positional_only_arg.py", "test_keywordonlyarg.py",
               "test_unpack_ex.py", "test_global.py", "test_scope.py", "test_coroutines.py",
               "test_genexps.py", "test_generators.py", "test_future_stmt/test_future.py",
               "test_eof.py", "test_patma.py", "test_except_star.py", "test_fstring.py"]
    snippets = []
    for name in sources:
        path = os.path.join(test, name)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if callee in SNIPPET_CALLS:
                    for arg in node.args[:2]:
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                            snippets.append((name, arg.value))
                            break
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc and ">>>" in doc:
                    for example in doctest.DocTestParser().get_examples(doc):
                        snippets.append((name + " doctest", example.source))
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str) and ">>>" in node.value.value:
                for example in doctest.DocTestParser().get_examples(node.value.value):
                    snippets.append((name + " doctest", example.source))
    os.makedirs(folder, exist_ok=True)
    out = []
    seen = set()
    for origin, source in snippets:
        if source in seen or "\0" in source:
            continue
        seen.add(source)
        path = os.path.join(folder, f"{len(out):05}.py")
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(source)
        out.append((path, origin))
    for folder_name, dirs, names in os.walk(test):
        for n in sorted(names):
            if n.endswith(".py") and ("badsyntax" in n or "bad_coding" in n or "future_test" in n):
                out.append((os.path.join(folder_name, n), "badsyntax file"))
    return out


# --- comparison ------------------------------------------------------------------------------

def compare(name, entries, work):
    """entries: (path, category); prints and returns the figures and disagreements."""
    paths = [p for p, _ in entries]
    theirs = {p: cpython_verdict(p) for p in paths}
    ours = helixflow_verdicts(paths, work)
    rows = {}
    disagreements = []
    same_line = both = 0
    for path, category in entries:
        t, o = theirs[path], ours.get(path)
        row = rows.setdefault(category, [0, 0, 0])
        row[0] += 1
        row[1] += t is not None
        if (t is None) != (o is None):
            row[2] += 1
            disagreements.append({"file": path, "category": category,
                                  "cpython": t or "compiles", "helixflow": o or "passes"})
        elif t is not None and o is not None:
            both += 1
            line = re.match(r"(\d+):", t)
            if line and o.startswith(line.group(1) + ":"):
                same_line += 1
    total = len(entries)
    agree = total - len(disagreements)
    print(f"{name}: {total} files, CPython rejects {sum(r[1] for r in rows.values())}, "
          f"agreement {agree}/{total} ({100 * agree / max(total, 1):.2f}%); "
          f"both reject {both}, same first line {same_line}")
    for category, (count, rejected, disagree) in sorted(rows.items()):
        print(f"  {category:<24} {count:6} files  {rejected:6} rejected by CPython  {disagree:4} disagreements")
    for d in disagreements:
        print(f"  DISAGREE [{d['category']}] {d['file']}\n    CPython:   {d['cpython']}\n    helixflow: {d['helixflow']}")
    return {"files": total, "agree": agree, "both_reject": both, "same_line": same_line,
            "by_category": rows, "disagreements": disagreements}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--keep", help="write the mutants, snippets and verdicts here")
    parser.add_argument("--json", help="also write the figures and disagreements here")
    parser.add_argument("--corpus", default="stdlib,mutants,cpython-tests")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    sys.setrecursionlimit(10_000)

    stdlib = sysconfig.get_paths()["stdlib"]
    work = args.keep or tempfile.mkdtemp(prefix="helixflow-python-agreement-")
    os.makedirs(work, exist_ok=True)
    files = python_files(stdlib)
    print(f"CPython {sys.version.split()[0]}, stdlib {stdlib}: {len(files)} files")
    subprocess.run(["cargo", "bench", "--quiet", "--bench", "syntax", "--no-run"], cwd=REPO, check=True)
    results = {}
    corpora = args.corpus.split(",")
    if "stdlib" in corpora:
        results["stdlib"] = compare("stdlib", [(p, "stdlib") for p in files], work)
    if "mutants" in corpora:
        mutants = make_mutants(files, args.mutants, args.seed, os.path.join(work, "mutants"))
        results["mutants"] = compare(f"mutants (seed {args.seed})", mutants, work)
    if "cpython-tests" in corpora:
        snippets = cpython_snippets(stdlib, os.path.join(work, "cpython-tests"))
        if snippets:
            results["cpython-tests"] = compare("cpython-tests", snippets, work)
        else:
            print("cpython-tests: this install has no test package; skipped")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
