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
