//! Robustness of the language layer on broken pipelines.
//!
//! Valid pipelines (the examples and a few inline ones) are mutated at random — characters and
//! whole lines deleted, inserted and duplicated, with a bias towards KDL's own syntax — and compiled
//! in-process against an in-memory file system. Whatever the input, `compile` must return, every
//! span it reports must point into its file's text on character boundaries (renderers slice the
//! text with them), and a file without a pipeline must say why with an error.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

use helixflow::{Compilation, Loader, Options};
use helixflow::{Diagnostic, Span};
use proptest::prelude::*;
use proptest::sample::{Index, select};

/// Files the compiled pipelines may import or name as prompts, by path; nothing else exists.
#[derive(Debug, Default)]
struct MemoryLoader {
    files: BTreeMap<PathBuf, String>,
}

impl Loader for MemoryLoader {
    fn read(&self, path: &Path) -> io::Result<String> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn is_file(&self, path: &Path) -> bool {
        self.files.contains_key(path)
    }

    fn search_path(&self) -> Vec<PathBuf> {
        Vec::new()
    }
}

/// Short, so that a regression to an exponential parse fails the test instead of stalling it; a
/// parse of these small files takes well under a millisecond.
const PARSE_BUDGET: Duration = Duration::from_secs(2);

fn options() -> Options {
    Options {
        parse_budget: PARSE_BUDGET,
        ..Options::default()
    }
}

const INLINE_PIPELINES: &[&str] = &[
    r##"pipeline "inline" {
    description "Inline pipeline with a template, a cycle-free DAG and every gate kind"
    max-parallel 2
    env "A" "b"
}

agent "claude" {
    command "claude" "-p" "{{ prompt }}"
    resume "claude" "-p" "{{ feedback }}" "--continue"
    timeout "10m"
}

template "module" {
    param "name"
    param "tests" default="tests"
    prompt "Write {{ name }}. {{ feedback }}"
    outputs { file "src/{{ name }}.py"; glob "{{ tests }}/*.py" min=1; }
    scope "src/{{ name }}.py" "{{ tests }}/**"
    gates { syntax; command "pytest -q {{ tests }}" name="tests" timeout="5m"; }
}

defaults { agent "claude"; retries 1; }

phase "a" use="module" name="a"
phase "b" use="module" name="b" tests="t/b" { depends-on "a"; }
phase "c" {
    depends-on "a" "b"
    prompt #"""
        Raw "text" with {{ feedback }}
        """#
    outputs { file "docs/c.md"; }
    scope "docs/**"
    gates {
        absent "docs/**" "TODO" name="no-todos"
        matches "response" #"done"#
        sections "docs/c.md" "Intro"
        changes min=1
        approval prompt="ok?"
    }
    /- retries 3
    on-failure "continue"
}
"##,
    "pipeline \"tiny\"\nagent \"x\" { command \"x\"; }\nphase \"only\" { agent \"x\"; prompt \"go\"; }\n",
    "pipeline \"runs\" { max-parallel 1; }\nphase \"fmt\" { run \"cargo fmt\"; scope \"src/**\"; }\nphase \"lint\" { depends-on \"fmt\"; run \"cargo clippy\"; gates { command \"cargo clippy\" fix=\"cargo clippy --fix\"; } }\n",
];

/// A pipeline to mutate: the path it is compiled as, and its text.
#[derive(Debug, Clone)]
struct Base {
    path: PathBuf,
    text: String,
}

/// The examples and the inline pipelines, and a loader that holds every file of the examples; read
/// once, as the cases only need them in memory.
static CORPUS: LazyLock<(Vec<Base>, MemoryLoader)> = LazyLock::new(corpus);

fn corpus() -> (Vec<Base>, MemoryLoader) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut loader = MemoryLoader::default();
    let mut bases = Vec::new();
    let mut folders = vec![root.join("examples")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("examples folder") {
            let path = entry.expect("examples entry").path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            // Relative paths keep failures short to read; compile resolves against them alike.
            let relative = path
                .strip_prefix(root)
                .expect("inside the crate")
                .to_owned();
            if relative.file_name() == Some("pipeline.kdl".as_ref()) {
                bases.push(Base {
                    path: relative.clone(),
                    text: text.clone(),
                });
            }
            loader.files.insert(relative, text);
        }
    }
    assert!(
        bases.len() >= 3,
        "expected the examples' pipeline.kdl files"
    );
    bases.sort_by(|a, b| a.path.cmp(&b.path));
    bases.extend(INLINE_PIPELINES.iter().enumerate().map(|(i, text)| Base {
        path: PathBuf::from(format!("inline/{i}/pipeline.kdl")),
        text: (*text).to_owned(),
    }));
    (bases, loader)
}

/// Characters rich in KDL syntax, plus letters, digits, whitespace and KDL's non-ASCII newlines,
/// spaces and identifier characters.
const CHARS: &[char] = &[
    '{', '}', '"', '#', '/', '-', '*', ';', '=', '\\', '(', ')', '\n', '\r', ' ', '\t', 'a', 'z',
    'r', 'e', 'x', '0', '1', '.', '+', '_', ',', '[', ']', '<', '>', '\'', 'é', 'ß', '日', '🦀',
    '\u{0085}', '\u{00a0}', '\u{2028}', '\u{feff}', '\u{200b}', '\u{0}',
];

/// Whole lines that open or close constructs the parser must recover from.
const LINES: &[&str] = &[
    "/-{",
    "/-phase \"x\" {",
    "phase \"x\" {",
    "}",
    "{",
    "\"\"\"",
    "#\"\"\"",
    "\"\"\"#",
    "/*",
    "*/",
    "/* /* */",
    "depends-on \"a\" \"a\"",
    "phase \"a\" use=\"module\" name=(t)\"x\" nope=#true",
    "scope \"**\" \"src/[\"",
    "gates { syntax \"*.py\"; command \"true\" timeout=\"-1s\"; }",
    "import \"lib/python.kdl\"",
    "import \"pipeline.kdl\"",
    "outputs { glob \"*\" min=0; from \"a.md\" key=\"\"; }",
    "prompt file=\"../../../etc/passwd\"",
    "verify \"both\" \"sub-agent\" \"nope\"",
    "retries 99999999999999999999",
    "#\"unterminated raw",
    "\"unterminated \\u{110000}",
    "node \\",
    "phase \"🦀\" { agent \"日本\"; }",
];

#[derive(Debug, Clone)]
enum Mutation {
    DeleteChar(Index),
    InsertChar(Index, char),
    DuplicateChar(Index),
    DeleteLine(Index),
    InsertLine(Index, &'static str),
    DuplicateLine(Index, Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => any::<Index>().prop_map(Mutation::DeleteChar),
        4 => (any::<Index>(), select(CHARS)).prop_map(|(at, c)| Mutation::InsertChar(at, c)),
        2 => any::<Index>().prop_map(Mutation::DuplicateChar),
        2 => any::<Index>().prop_map(Mutation::DeleteLine),
        2 => (any::<Index>(), select(LINES)).prop_map(|(at, l)| Mutation::InsertLine(at, l)),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(from, to)| Mutation::DuplicateLine(from, to)),
    ]
}

/// Byte offsets of every character, and the end of the text.
fn boundaries(text: &str) -> Vec<usize> {
    text.char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect()
}

/// Byte offsets where lines start, and the end of the text.
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .filter(|&i| i < text.len())
        .chain(std::iter::once(text.len()))
        .collect()
}

fn apply(text: &mut String, mutation: &Mutation) {
    let chars = boundaries(text);
    let lines = line_starts(text);
    // `lines` always holds at least the end of the text, so this names a line's start and end.
    let line = |at: &Index| {
        let i = at.index(lines.len());
        (lines[i], lines.get(i + 1).copied().unwrap_or(text.len()))
    };
    match mutation {
        Mutation::DeleteChar(at) => {
            if chars.len() > 1 {
                let i = at.index(chars.len() - 1);
                text.replace_range(chars[i]..chars[i + 1], "");
            }
        }
        Mutation::InsertChar(at, c) => text.insert(chars[at.index(chars.len())], *c),
        Mutation::DuplicateChar(at) => {
            if chars.len() > 1 {
                let i = at.index(chars.len() - 1);
                let c = text[chars[i]..chars[i + 1]].to_owned();
                text.insert_str(chars[i], &c);
            }
        }
        Mutation::DeleteLine(at) => {
            let (start, end) = line(at);
            text.replace_range(start..end, "");
        }
        Mutation::InsertLine(at, inserted) => {
            let (start, _) = line(at);
            text.insert_str(start, &format!("{inserted}\n"));
        }
        Mutation::DuplicateLine(from, to) => {
            let (start, end) = line(from);
            let mut copied = text[start..end].to_owned();
            if !copied.ends_with('\n') {
                copied.push('\n');
            }
            let (at, _) = line(to);
            text.insert_str(at, &copied);
        }
    }
}

/// Every span of a diagnostic: its own, its notes' and its fix's.
fn spans(diagnostic: &Diagnostic) -> impl Iterator<Item = Span> + '_ {
    std::iter::once(diagnostic.span)
        .chain(diagnostic.notes.iter().map(|n| n.span))
        .chain(
            diagnostic
                .fix
                .iter()
                .flat_map(|f| f.edits.iter().map(|(s, _)| *s)),
        )
}

/// The invariants every compilation keeps, as a description of the first one broken.
fn check(compilation: &Compilation) -> Result<(), String> {
    let files = compilation.sources.iter().count();
    for diagnostic in &compilation.diagnostics {
        for span in spans(diagnostic) {
            if span.file.0 as usize >= files {
                return Err(format!(
                    "{} points at unknown file {span:?}",
                    diagnostic.code()
                ));
            }
            let text = &compilation.sources.get(span.file).text;
            if span.end() > text.len()
                || !text.is_char_boundary(span.offset)
                || !text.is_char_boundary(span.end())
            {
                return Err(format!(
                    "{} ({}) has span {span:?} outside the {}-byte text or not on a character \
                     boundary",
                    diagnostic.code(),
                    diagnostic.message,
                    text.len()
                ));
            }
        }
    }
    if compilation.pipeline.is_none() && !compilation.has_errors() {
        return Err("no pipeline and no error explaining why".to_owned());
    }
    Ok(())
}

proptest! {
    // proptest's default of 256 cases takes a few seconds in a debug build; PROPTEST_CASES=20000
    // hunts longer.
    #![proptest_config(ProptestConfig {
        // Shrinking re-runs compile many times; the failing input is printed either way.
        max_shrink_iters: 512,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_pipelines_compile_with_sound_diagnostics(
        base in any::<Index>(),
        mutations in proptest::collection::vec(mutation(), 1..8),
    ) {
        let (bases, loader) = &*CORPUS;
        let base = &bases[base.index(bases.len())];
        let mut text = base.text.clone();
        for m in &mutations {
            apply(&mut text, m);
        }
        let compilation = helixflow::compile(&base.path, &text, loader, options());
        if let Err(problem) = check(&compilation) {
            return Err(TestCaseError::fail(format!("{problem}\n--- {} ---\n{text}", base.path.display())));
        }
    }
}

#[test]
fn unmutated_corpus_compiles_cleanly() {
    let (bases, loader) = &*CORPUS;
    for base in bases {
        let compilation = helixflow::compile(&base.path, &base.text, loader, options());
        check(&compilation).unwrap();
        let errors: Vec<_> = compilation
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| format!("{} {}", d.code(), d.message))
            .collect();
        assert!(
            errors.is_empty(),
            "{} has errors: {errors:?}",
            base.path.display()
        );
        assert!(compilation.pipeline.is_some());
    }
}

/// Found by the property test above (one case in about 5,000): minijinja reports the error at the
/// `é`, and the diagnostic's span, widened to one byte, ends inside the character. Renderers cope,
/// but anything that slices the text with the span (an editor applying a fix, the language server
/// converting to UTF-16) does not.
#[test]
fn prompt_template_error_spans_stay_on_character_boundaries() {
    let text = "pipeline \"p\"\nagent \"a\" { command \"a\"; }\n\
                phase \"x\" { agent \"a\"; prompt \"{{é feedback }}\"; }\n";
    let compilation = helixflow::compile(
        Path::new("pipeline.kdl"),
        text,
        &MemoryLoader::default(),
        options(),
    );
    assert!(compilation.diagnostics.iter().any(|d| d.code() == "HF304"));
    check(&compilation).unwrap();
}

/// Inputs on which the KDL parser's error recovery is exponential; the brace screening must catch
/// them before the parser runs. A regression makes these run into the parse budget (HF003) instead.
#[test]
fn unclosed_slashdashed_blocks_are_reported_without_parsing() {
    let inputs = [
        "a /-{\n".repeat(16),
        "a /-{\n".repeat(64),
        "/-{\n".repeat(32),
        "a /-{ \"s\" /-{ \"t\"\n".repeat(16),
        format!("pipeline \"p\" {{\n{}", "node /-{ \"x\" {\n".repeat(16)),
        format!("phase \"a\" {{ {}", "/-{ #\"raw\"# /-{ ".repeat(20)),
        format!("{}}}", "a /-{\n".repeat(24)),
        "a /-{ \"\"\"\n".repeat(8),
    ];
    for input in &inputs {
        let compilation = helixflow::compile(
            Path::new("pathological.kdl"),
            input,
            &MemoryLoader::default(),
            options(),
        );
        check(&compilation).unwrap();
        let codes: Vec<&str> = compilation
            .diagnostics
            .iter()
            .map(helixflow::Diagnostic::code)
            .collect();
        assert!(
            codes.contains(&"HF002"),
            "expected HF002 (unbalanced braces) for {input:?}, got {codes:?}"
        );
    }
}

/// A hostile change to a pipeline: a slice of it repeated many times, or a long run of one
/// character (a line or a number past what a terminal lays out).
#[derive(Debug, Clone)]
enum BlowUp {
    Repeat { at: Index, len: usize, times: usize },
    Run { at: Index, byte: u8, len: usize },
}

fn blow_up() -> impl Strategy<Value = BlowUp> {
    prop_oneof![
        (any::<Index>(), 1..40usize, 100..3_000usize).prop_map(|(at, len, times)| BlowUp::Repeat {
            at,
            len,
            times
        }),
        (
            any::<Index>(),
            select(b"x9{}\"; \n/-#".to_vec()),
            60_000..90_000usize
        )
            .prop_map(|(at, byte, len)| BlowUp::Run { at, byte, len }),
    ]
}

fn apply_blow_up(text: &mut String, change: &BlowUp) {
    let floor = |text: &str, mut at: usize| {
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    match change {
        BlowUp::Repeat { at, len, times } => {
            let start = floor(text, at.index(text.len() + 1));
            let end = floor(text, (start + len).min(text.len()));
            let chunk = text[start..end].repeat(*times);
            text.insert_str(end, &chunk);
        }
        BlowUp::Run { at, byte, len } => {
            let at = floor(text, at.index(text.len() + 1));
            text.insert_str(at, &char::from(*byte).to_string().repeat(*len));
        }
    }
}

proptest! {
    // Each case runs the real binary twice; a few dozen cases keep `cargo test` quick.
    #![proptest_config(ProptestConfig {
        cases: 24,
        max_shrink_iters: 64,
        ..ProptestConfig::default()
    })]

    /// Whatever a pipeline is blown up to, `lint` answers (no panic) with a bounded report: at
    /// most 100 findings per file and a count of the rest, snippets cut to a window.
    #[test]
    fn blown_up_pipelines_get_a_bounded_lint_report(
        base in any::<Index>(),
        changes in proptest::collection::vec(blow_up(), 1..4),
    ) {
        let (bases, _) = &*CORPUS;
        let base = &bases[base.index(bases.len())];
        let mut text = base.text.clone();
        for change in &changes {
            apply_blow_up(&mut text, change);
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pipeline.kdl"), &text).unwrap();
        for format in ["human", "json"] {
            let output = std::process::Command::new(env!("CARGO_BIN_EXE_helixflow"))
                .args(["lint", "--format", format, "pipeline.kdl"])
                .current_dir(dir.path())
                .env("NO_COLOR", "1")
                .env_remove("HELIXFLOW_PATH")
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            prop_assert!(
                !stderr.contains("panicked") && output.status.code() != Some(101),
                "{format}: {stderr}"
            );
            // 101 findings of a few kilobytes each at most.
            prop_assert!(output.stdout.len() < 1 << 20, "{format}: {} bytes", output.stdout.len());
        }
    }
}
