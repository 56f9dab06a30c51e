//! The `syntax` gate's parser layer on real files: every grammar loads and parses, errors are
//! placed and rendered as users see them.

use std::path::{Path, PathBuf};

use helixflow::Language;
use helixflow::syntax::{SyntaxError, check, check_file};

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/syntax")
        .join(path)
}

fn errors_of(path: &str) -> Vec<SyntaxError> {
    check_file(&fixture(path)).unwrap_or_else(|| panic!("{path} has no language"))
}

fn render_all(path: &str, errors: &[SyntaxError]) -> String {
    errors
        .iter()
        .map(|e| e.render(path))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One valid sample per language, named by extension.
fn valid_sample(language: Language) -> &'static str {
    match language {
        Language::Python => "valid/sample.py",
        Language::Rust => "valid/sample.rs",
        Language::JavaScript => "valid/sample.js",
        Language::TypeScript => "valid/sample.ts",
        Language::Tsx => "valid/sample.tsx",
        Language::Json => "valid/sample.json",
        Language::Yaml => "valid/sample.yaml",
        Language::Toml => "valid/sample.toml",
        Language::Bash => "valid/sample.sh",
        Language::Go => "valid/sample.go",
        Language::Kdl => "valid/sample.kdl",
    }
}

/// One invalid sample per language (more for Python and TOML), with the first error's place.
const INVALID: [(&str, usize, usize); 14] = [
    ("invalid/missing_paren.py", 3, 10),
    ("invalid/python2_print.py", 4, 5),
    ("invalid/missing_block.py", 7, 5),
    ("invalid/missing_semicolon.rs", 3, 24),
    ("invalid/double_comma.js", 2, 16),
    ("invalid/missing_paren.ts", 1, 35),
    ("invalid/mismatched_tag.tsx", 5, 5),
    ("invalid/trailing_comma.json", 3, 34),
    ("invalid/bad_indentation.yaml", 4, 9),
    ("invalid/duplicate_key.toml", 4, 1),
    ("invalid/unterminated_string.toml", 2, 8),
    ("invalid/missing_fi.sh", 5, 1),
    ("invalid/missing_value.go", 4, 6),
    ("invalid/unclosed_block.kdl", 1, 17),
];

#[test]
fn every_grammar_loads_and_accepts_its_valid_sample() {
    for &language in Language::all() {
        let path = valid_sample(language);
        assert_eq!(
            Language::for_path(Path::new(path)),
            Some(language),
            "{path}"
        );
        let errors = errors_of(path);
        assert!(
            errors.is_empty(),
            "{} rejects {path}:\n{}",
            language.name(),
            render_all(path, &errors)
        );
    }
}

#[test]
fn every_language_places_the_first_error_of_its_invalid_sample() {
    let mut covered: Vec<Language> = Vec::new();
    for (path, line, column) in INVALID {
        let errors = errors_of(path);
        let first = errors
            .first()
            .unwrap_or_else(|| panic!("{path} was accepted"));
        assert_eq!(
            (first.line, first.column),
            (line, column),
            "{}",
            render_all(path, &errors)
        );
        covered.extend(Language::for_path(Path::new(path)));
    }
    for language in Language::all() {
        assert!(
            covered.contains(language),
            "{} has no invalid sample",
            language.name()
        );
    }
}

#[test]
fn rendered_errors_of_invalid_samples() {
    for (path, _, _) in INVALID {
        let name = path.trim_start_matches("invalid/").replace('.', "_");
        insta::assert_snapshot!(name, render_all(path, &errors_of(path)));
    }
}

#[test]
fn render_shows_the_place_the_line_and_a_caret() {
    let errors = check(Language::Json, b"{\n\t\"a\": [1, 2,]\n}\n");
    assert_eq!(errors.len(), 1);
    assert_eq!(
        errors[0].render("conf/a.json"),
        "conf/a.json:2:13: missing number\n\t\"a\": [1, 2,]\n\t           ^"
    );
}

#[test]
fn extensions_choose_the_language() {
    let cases = [
        ("a.py", Some(Language::Python)),
        ("stubs/a.pyi", Some(Language::Python)),
        ("a.rs", Some(Language::Rust)),
        ("a.js", Some(Language::JavaScript)),
        ("a.mjs", Some(Language::JavaScript)),
        ("a.cjs", Some(Language::JavaScript)),
        ("a.jsx", Some(Language::JavaScript)),
        ("a.ts", Some(Language::TypeScript)),
        ("a.d.ts", Some(Language::TypeScript)),
        ("a.mts", Some(Language::TypeScript)),
        ("a.cts", Some(Language::TypeScript)),
        ("a.tsx", Some(Language::Tsx)),
        ("a.json", Some(Language::Json)),
        ("a.yaml", Some(Language::Yaml)),
        ("a.yml", Some(Language::Yaml)),
        ("Cargo.toml", Some(Language::Toml)),
        ("a.sh", Some(Language::Bash)),
        ("a.bash", Some(Language::Bash)),
        ("a.go", Some(Language::Go)),
        ("flow.kdl", Some(Language::Kdl)),
        ("README.md", None),
        ("Makefile", None),
        (".py", None),
    ];
    for (path, language) in cases {
        assert_eq!(Language::for_path(Path::new(path)), language, "{path}");
    }
    let names: Vec<&str> = Language::all().iter().map(|l| l.name()).collect();
    assert_eq!(
        names,
        [
            "Python",
            "Rust",
            "JavaScript",
            "TypeScript",
            "TSX",
            "JSON",
            "YAML",
            "TOML",
            "Bash",
            "Go",
            "KDL"
        ]
    );
}

#[test]
fn unsupported_extension_is_not_checked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "(((").expect("write");
    assert_eq!(check_file(&path), None);
}

#[test]
fn unreadable_file_is_an_error_at_the_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("gone.py");
    let errors = check_file(&missing).expect("a Python path");
    assert_eq!(errors.len(), 1);
    assert_eq!((errors[0].line, errors[0].column), (1, 1));
    assert!(
        errors[0].message.starts_with("cannot read the file: "),
        "{}",
        errors[0].message
    );
    let folder = dir.path().join("package.json");
    std::fs::create_dir(&folder).expect("mkdir");
    assert_eq!(check_file(&folder).map(|e| e.len()), Some(1));
}

#[test]
fn invalid_utf8_is_an_error_at_the_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("data.json");
    std::fs::write(&path, b"{\"a\": \"\xff\"}\n").expect("write");
    let errors = check_file(&path).expect("a JSON path");
    assert_eq!((errors[0].line, errors[0].column), (1, 1));
    assert_eq!(
        errors[0].message,
        "the file is not valid UTF-8 (first invalid byte at 1:8)"
    );
}

#[test]
fn empty_file_is_valid_except_in_json() {
    for &language in Language::all() {
        let errors = check(language, b"");
        assert_eq!(
            errors.is_empty(),
            language != Language::Json,
            "{}: {errors:?}",
            language.name()
        );
    }
}

#[test]
fn threads_check_in_parallel_with_their_own_parsers() {
    let paths: Vec<&str> = INVALID.iter().map(|(p, _, _)| *p).collect();
    let expected: Vec<Vec<SyntaxError>> = paths.iter().map(|p| errors_of(p)).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| paths.iter().map(|p| errors_of(p)).collect::<Vec<_>>()))
            .collect();
        for worker in workers {
            assert_eq!(worker.join().expect("worker"), expected);
        }
    });
}

#[test]
fn deeply_nested_input_does_not_overflow_the_stack() {
    // Deep enough that recursion over the tree would overflow a test thread's 2 MiB stack.
    let depth = 20_000;
    for (language, prefix, open) in [
        (Language::Json, "", "["),
        (Language::Python, "x = ", "("),
        (Language::JavaScript, "x = ", "["),
        (Language::Yaml, "x: ", "["),
        (Language::Toml, "x = ", "["),
        (Language::Kdl, "", "a{"),
    ] {
        let unclosed = format!("{prefix}{}", open.repeat(depth));
        assert!(
            !check(language, unclosed.as_bytes()).is_empty(),
            "{}",
            language.name()
        );
    }
    let nested = |open: &str, close: &str| format!("{}{}", open.repeat(depth), close.repeat(depth));
    assert!(check(Language::Json, nested("[", "]").as_bytes()).is_empty());
    let deep_toml = format!("x = {}", nested("[", "]"));
    assert!(check(Language::Toml, deep_toml.as_bytes()).is_empty());
    let deep_yaml = format!("x: {}", nested("[", "]"));
    assert!(check(Language::Yaml, deep_yaml.as_bytes()).is_empty());
    // helixflow's KDL parser recurses per block; too deep a file must not reach it.
    assert!(check(Language::Kdl, nested("a{", "}").as_bytes()).is_empty());
}

/// The first error of a Python source as (line, column, message), or None when it passes.
fn python_first_error(source: &str) -> Option<(usize, usize, String)> {
    check(Language::Python, source.as_bytes())
        .into_iter()
        .next()
        .map(|e| (e.line, e.column, e.message))
}

/// Each source must fail at CPython's line (`compile(source, path, "exec")` agrees with every
/// place below, columns included unless a comment says why) with the message given.
fn assert_python_errors(cases: &[(&str, (usize, usize), &str)]) {
    for &(source, (line, column), message) in cases {
        assert_eq!(
            python_first_error(source),
            Some((line, column, message.to_owned())),
            "{source:?}"
        );
    }
}

fn assert_python_passes(sources: &[&str]) {
    for source in sources {
        assert_eq!(python_first_error(source), None, "{source:?}");
    }
}

#[test]
fn python_targets_that_cannot_be_assigned_or_deleted() {
    assert_python_errors(&[
        ("del f()\n", (1, 5), "cannot delete function call"),
        ("del (a + b)\n", (1, 6), "cannot delete expression"),
        ("del *a\n", (1, 5), "cannot delete starred"),
        (
            "a, b += 1, 2\n",
            (1, 1),
            "'tuple' is an illegal expression for augmented assignment",
        ),
        (
            "[a] += 1\n",
            (1, 1),
            "'list' is an illegal expression for augmented assignment",
        ),
        (
            "with a as b(): pass\n",
            (1, 11),
            "cannot assign to function call",
        ),
        (
            "with a as (b, c()): pass\n",
            (1, 15),
            "cannot assign to function call",
        ),
        (
            "for *a in b: pass\n",
            (1, 5),
            "starred assignment target must be in a list or tuple",
        ),
        (
            "*a = 1\n",
            (1, 1),
            "starred assignment target must be in a list or tuple",
        ),
        (
            "a, *b, *c = x\n",
            (1, 1),
            "multiple starred expressions in assignment",
        ),
        (
            "(a, b): int = 1\n",
            (1, 1),
            "only single target (not tuple) can be annotated",
        ),
        // CPython points at the second `=` (1:12), helixflow at the assignment it starts.
        ("x: int = y = 1\n", (1, 10), "invalid syntax"),
    ]);
    assert_python_passes(&[
        "(o.a) += 1\n(pars): bool = True\ndel a.b, a[1], (a), [b, (c, d)]\n*a, = x\n[b, *c] = y\n\
         with a as (b, *c): pass\nfor a, *b in c: pass\nx = [y for (z) in w]\n",
    ]);
}

#[test]
fn python_starred_expressions_where_no_sequence_takes_them() {
    assert_python_errors(&[
        ("x = *a\n", (1, 5), "can't use starred expression here"),
        ("*a\n", (1, 1), "can't use starred expression here"),
        // tree-sitter-python reads `*f(x)` as a call of `*f`.
        ("d = *f(x)\n", (1, 5), "can't use starred expression here"),
        ("x = (*a)\n", (1, 6), "cannot use starred expression here"),
        (
            "[*x for x in xs]\n",
            (1, 2),
            "iterable unpacking cannot be used in comprehension",
        ),
        // CPython places f-string errors at the start of the string (1:2).
        (
            "f'{*a}'\n",
            (1, 4),
            "f-string: cannot use starred expression here",
        ),
    ]);
    assert_python_passes(&["x = *a, b\nprint(*a, *b)\nx = [*a]\na[*b]\nf(*g(x))\n"]);
}

#[test]
fn python_escapes_that_cannot_be_decoded() {
    // CPython reports these after the end of the string; the escape itself is the place to look.
    assert_python_errors(&[
        (
            "x = '\\x4'\n",
            (1, 6),
            "truncated `\\x` escape: `\\xXX` needs two hex digits",
        ),
        (
            "x = '\\u12'\n",
            (1, 6),
            "truncated `\\u` escape: `\\uXXXX` needs four hex digits",
        ),
        (
            "x = '\\U1234'\n",
            (1, 6),
            "truncated `\\U` escape: `\\UXXXXXXXX` needs eight hex digits",
        ),
        (
            "x = '\\N{foo'\n",
            (1, 6),
            "malformed `\\N` escape: `\\N{NAME}` needs a character name in braces",
        ),
        (
            "x = b'\\x4'\n",
            (1, 7),
            "truncated `\\x` escape: `\\xXX` needs two hex digits",
        ),
        (
            "x = f'{a}\\x4'\n",
            (1, 10),
            "truncated `\\x` escape: `\\xXX` needs two hex digits",
        ),
        // The names of Unicode characters and their aliases, as CPython knows them.
        (
            "x = 'é \\N{NO SUCH NAME}'\n",
            (1, 8),
            "unknown Unicode character name `NO SUCH NAME` in a `\\N{…}` escape",
        ),
        (
            "x = 'a' b'b'\n",
            (1, 9),
            "cannot mix bytes and nonbytes literals",
        ),
        (
            "x = f'{x!z}'\n",
            (1, 9),
            "f-string: invalid conversion character: expected 's', 'r', or 'a'",
        ),
    ]);
    // Unknown escapes are only warnings; bytes have no `\u`, `\N`; raw strings have no escapes.
    assert_python_passes(&[
        "x = '\\d \\777 \\x41 \\u00e9 \\U0001F600 \\N{DIGIT ONE} \\N{LATIN SMALL LETTER A WITH ACUTE}'\ny = b'\\u12 \\N \\x41'\nz = rb'\\x4' + r'\\u'\n\
         w = f'{a!r:>{n}} \\x41'\n",
    ]);
}

#[test]
fn python_statements_outside_their_scope() {
    assert_python_errors(&[
        ("return 1\n", (1, 1), "'return' outside function"),
        (
            "class C:\n    yield 1\n",
            (2, 5),
            "'yield' outside function",
        ),
        (
            "[(yield) for x in y]\n",
            (1, 3),
            "'yield' inside list comprehension",
        ),
        ("await x\n", (1, 1), "'await' outside function"),
        (
            "def f():\n    await x\n",
            (2, 5),
            "'await' outside async function",
        ),
        (
            "async def f():\n    class C:\n        await x\n",
            (3, 9),
            "'await' outside function",
        ),
        (
            "def f():\n    [await x for x in y]\n",
            (2, 5),
            "asynchronous comprehension outside of an asynchronous function",
        ),
        (
            "async with a: pass\n",
            (1, 1),
            "'async with' outside async function",
        ),
        (
            "async def f():\n    yield 1\n    return 2\n",
            (3, 5),
            "'return' with value in async generator",
        ),
        (
            "async def f():\n    yield from x\n",
            (2, 5),
            "'yield from' inside async function",
        ),
        ("break\n", (1, 1), "'break' outside loop"),
        ("continue\n", (1, 1), "'continue' not properly in loop"),
        (
            "for x in y:\n    pass\nelse:\n    break\n",
            (4, 5),
            "'break' outside loop",
        ),
        (
            "while x:\n    def f():\n        break\n",
            (3, 9),
            "'break' outside loop",
        ),
        (
            "for x in y:\n    try:\n        pass\n    except* E:\n        break\n",
            (5, 9),
            "'break', 'continue' and 'return' cannot appear in an except* block",
        ),
    ]);
    assert_python_passes(&[
        "async def f():\n    [await x for x in y]\n    async with a: pass\n    yield 1\n    return\n\
         def g():\n    (await x for x in y)\n    yield 1\n    return 2\n\
         while x:\n    try:\n        pass\n    finally:\n        break\nelse:\n    pass\n\
         for x in y:\n    for z in w:\n        continue\n    else:\n        break\n\
         (await x for x in y)\nlambda: (yield)\n",
    ]);
}

#[test]
fn python_names_declared_global_or_nonlocal_and_repeated_names() {
    assert_python_errors(&[
        (
            "nonlocal x\n",
            (1, 1),
            "nonlocal declaration not allowed at module level",
        ),
        (
            "def f():\n    nonlocal x\n",
            (2, 5),
            "no binding for nonlocal 'x' found",
        ),
        (
            "def f():\n    global x\n    def g():\n        nonlocal x\n",
            (4, 9),
            "no binding for nonlocal 'x' found",
        ),
        (
            "def f(x):\n    global x\n",
            (2, 5),
            "name 'x' is parameter and global",
        ),
        (
            "def f():\n    x = 1\n    global x\n",
            (3, 5),
            "name 'x' is assigned to before global declaration",
        ),
        (
            "def f():\n    print(x)\n    global x\n",
            (3, 5),
            "name 'x' is used prior to global declaration",
        ),
        (
            "def f():\n    global x\n    x: int\n",
            (3, 5),
            "annotated name 'x' can't be global",
        ),
        (
            "def f(a, a): pass\n",
            (1, 10),
            "duplicate argument 'a' in function definition",
        ),
        (
            "lambda a, a: 0\n",
            (1, 11),
            "duplicate argument 'a' in function definition",
        ),
        ("f(a=1, a=2)\n", (1, 8), "keyword argument repeated: a"),
        ("__debug__ = 1\n", (1, 1), "cannot assign to __debug__"),
        // CPython places this one at the `def` (1:1); the name is where to look.
        (
            "def f(*, __debug__): pass\n",
            (1, 10),
            "cannot assign to __debug__",
        ),
        ("del __debug__\n", (1, 5), "cannot delete __debug__"),
        (
            "[i := 0 for i in x]\n",
            (1, 2),
            "assignment expression cannot rebind comprehension iteration variable 'i'",
        ),
        (
            "[x for x in (y := z)]\n",
            (1, 14),
            "assignment expression cannot be used in a comprehension iterable expression",
        ),
    ]);
    assert_python_passes(&[
        "def f():\n    x = 1\n    def g():\n        nonlocal x\n    import y\n    def h():\n        nonlocal y\n\
         def k(a):\n    class C:\n        def m(self):\n            nonlocal a\n\
         class A:\n    def f(self):\n        nonlocal __class__\n\
         def n():\n    global q\n    q = 1\n    import r\n    global r\n\
         x = __debug__\nf(x.__debug__)\nf(a=1, b=2, **k)\n",
    ]);
}

#[test]
fn python_future_imports_and_import_star() {
    assert_python_errors(&[
        (
            "import os\nfrom __future__ import annotations\n",
            (2, 1),
            "from __future__ imports must occur at the beginning of the file",
        ),
        (
            "\"\"\"doc\"\"\"\n\"\"\"doc2\"\"\"\nfrom __future__ import annotations\n",
            (3, 1),
            "from __future__ imports must occur at the beginning of the file",
        ),
        (
            "from __future__ import annotations\n\"s\"\nfrom __future__ import division\n",
            (3, 1),
            "from __future__ imports must occur at the beginning of the file",
        ),
        (
            "from __future__ import spam\n",
            (1, 1),
            "future feature spam is not defined",
        ),
        ("from __future__ import braces\n", (1, 1), "not a chance"),
        (
            "def f():\n    from os import *\n",
            (2, 20),
            "import * only allowed at module level",
        ),
    ]);
    assert_python_passes(&[
        "#!/usr/bin/env python3\n\"\"\"Doc.\"\"\"\n# comment\nfrom __future__ import annotations\n\
         from __future__ import (division,\n    print_function)\nfrom os import *\n",
    ]);
}

#[test]
fn python_parser_rules_tree_sitter_lacks() {
    assert_python_errors(&[
        (
            "def foo(a, /, /, b): pass\n",
            (1, 15),
            "/ may appear only once",
        ),
        (
            "def foo(a, *b, c, /, d): pass\n",
            (1, 19),
            "/ must be ahead of *",
        ),
        (
            "lambda /, a: None\n",
            (1, 8),
            "at least one argument must precede /",
        ),
        (
            "def f(**k, a): pass\n",
            (1, 12),
            "arguments cannot follow var-keyword argument",
        ),
        (
            "def f(*a, *b): pass\n",
            (1, 11),
            "* argument may appear only once",
        ),
        ("def f6(x: *b): pass\n", (1, 11), "invalid syntax"),
        (
            "try:\n    pass\nexcept:\n    pass\nexcept E:\n    pass\n",
            (3, 1),
            "default 'except:' must be last",
        ),
        (
            "try:\n    pass\nexcept E:\n    pass\nexcept* F:\n    pass\n",
            (5, 1),
            "cannot have both 'except' and 'except*' on the same 'try'",
        ),
        // CPython points at the first type (3:9), helixflow at the one without parentheses.
        (
            "try:\n    pass\nexcept* A, B:\n    pass\n",
            (3, 12),
            "multiple exception types must be parenthesized",
        ),
        (
            "from t import x,\n",
            (1, 16),
            "trailing comma not allowed without surrounding parentheses",
        ),
        (
            "f(x for x in L,)\n",
            (1, 15),
            "Generator expression must be parenthesized",
        ),
        ("foo(,)\n", (1, 5), "invalid syntax"),
        // tree-sitter-python reads on into the next line (`x = y = 1`); CPython points after
        // the `=` (1:5).
        (
            "x = \ny = 1\n",
            (1, 3),
            "invalid syntax: nothing follows `=` on this line",
        ),
        (
            "d = a + b +\nprint(d)\n",
            (1, 11),
            "invalid syntax: nothing follows `+` on this line",
        ),
        (
            "x = 1\n\\\n",
            (2, 1),
            "unexpected end of file after a `\\` line continuation",
        ),
    ]);
    assert_python_passes(&[
        "def f(a, /, b, *, c): pass\ndef g(a, /): pass\ndef h(*args: *Ts): pass\n\
         from t import (x,)\nf(x for x in L)\nx = 1 \\\n    + 2\n\
         y = 1.\nz = ...\nfrom m import *\nw = (1 +\n     2)\nq = \"a=\"  # b =\n",
    ]);
}

/// Valid code tree-sitter's grammars reject, which the language's own tool (installed wherever
/// helixflow is built: bash, rustfmt, Node.js) accepts: the gate passes it.
#[test]
fn valid_code_tree_sitter_rejects_passes_when_the_language_accepts_it() {
    let cases: [(Language, &str); 5] = [
        // POSIX `for` without `in`, and `[` as the command it is (its `]` is only an argument).
        (Language::Bash, "#!/bin/sh\nfor i do\n  echo \"$i\"\ndone\n"),
        (
            Language::Bash,
            "#!/bin/sh\nif [ -x /usr/bin/vim; then\n  echo vim\nfi\n",
        ),
        // `try!` is a macro in Rust 2015; `$ name : ty` is a macro fragment with spaces.
        (
            Language::Rust,
            "fn f() -> Result<u8, ()> {\n    let x = try!(g());\n    Ok(x)\n}\n",
        ),
        (
            Language::Rust,
            "macro_rules! m {\n    ($ name : ty) => {};\n}\n",
        ),
        (
            Language::Rust,
            "unsafe extern \"C\" {\n    pub safe fn abs(x: i32) -> i32;\n}\n",
        ),
    ];
    for (language, source) in cases {
        let errors = check(language, source.as_bytes());
        assert!(
            errors.is_empty(),
            "{}: {source:?}: {errors:?}",
            language.name()
        );
    }
    // TypeScript that tree-sitter-typescript 0.23 rejects, parsed again in forms it knows.
    for source in [
        "export declare const add: import(\"./types.js\").FPFn2<\n  Date,\n  number\n>;\n",
        "interface I {\n  [Symbol.unscopables]: { [K in keyof readonly any[]]?: boolean };\n}\n",
        "export type * from './types';\nexport type * as t from './t';\n",
    ] {
        let errors = check(Language::TypeScript, source.as_bytes());
        assert!(errors.is_empty(), "{source:?}: {errors:?}");
    }
    // The second opinion never passes what the language rejects.
    for (language, source) in [
        (Language::Bash, "for i do\n  echo $i\n"),
        (Language::Rust, "fn f() { let x = try!(g()) }\nfn g( {}\n"),
        (Language::JavaScript, "let x = ;\n"),
        (
            Language::TypeScript,
            "export declare const add: import(\"./t\").F<\n  Date,\n>;\nlet x = ;\n",
        ),
    ] {
        assert!(
            !check(language, source.as_bytes()).is_empty(),
            "{}: {source:?}",
            language.name()
        );
    }
}
