//! The fast parser against the `kdl` crate: every document it accepts must read the same way.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kdl::KdlDocument;
use proptest::prelude::*;

use crate::language::kdl::compat;
use crate::language::kdl::lexer::tokenize;

/// Everything the decoder reads from a document, spans included, as text.
fn dump(document: &KdlDocument) -> String {
    let mut out = String::new();
    dump_into(document, 0, &mut out);
    out
}

fn dump_into(document: &KdlDocument, depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    let span = document.span();
    let _ = writeln!(out, "{pad}document {}+{}", span.offset(), span.len());
    for node in document.nodes() {
        let (name, span) = (node.name(), node.span());
        let _ = writeln!(
            out,
            "{pad}node {:?} at {}+{} repr {:?} ty {:?}, span {}+{}",
            name.value(),
            name.span().offset(),
            name.span().len(),
            name.repr(),
            node.ty()
                .map(|t| (t.value(), t.span().offset(), t.span().len())),
            span.offset(),
            span.len()
        );
        for entry in node.entries() {
            let _ = writeln!(
                out,
                "{pad}  entry {:?} = {:?} repr {:?} ty {:?}, span {}+{}",
                entry
                    .name()
                    .map(|n| (n.value(), n.span().offset(), n.span().len())),
                entry.value(),
                entry.format().map(|f| &f.value_repr),
                entry.ty().map(kdl::KdlIdentifier::value),
                entry.span().offset(),
                entry.span().len()
            );
        }
        if let Some(children) = node.children() {
            dump_into(children, depth + 1, out);
        }
    }
}

/// Parses with both parsers; when the fast one answers, the kdl crate (as `compat` has it read the
/// current specification) must agree exactly. Says whether the fast parser answered.
fn agree(src: &str) -> bool {
    let tokens = tokenize(src);
    let Ok(fast) = super::parse(src, &tokens) else {
        return false;
    };
    match compat::parse_v2(src, &tokens) {
        Ok(reference) => {
            assert_eq!(
                dump(&fast),
                dump(&reference),
                "different documents for {src:?}"
            );
        }
        Err(e) => panic!("the fast parser accepted what kdl rejects: {src:?}\n{e:?}"),
    }
    true
}

fn rejects(src: &str) {
    assert!(
        super::parse(src, &tokenize(src)).is_err(),
        "the fast parser should leave {src:?} to the kdl crate"
    );
}

#[test]
fn agrees_on_every_construct_it_accepts() {
    let cases = [
        "",
        "a",
        "a\n",
        "a;b;c",
        "a 1 2.5 -3 +4 0x1F 0o17 0b101 1_000 1e3 1.5E-2 -0.0 0X1f",
        "a #true #false #null #inf #-inf #nan",
        "a \"x\" \"esc \\\" \\\\ \\n \\t \\s \\b \\f \\r \\u{1F600} \\u{41}\"",
        "a #\"raw \\n\"# ##\"with \"# inside\"## #\"\"#",
        "a key=1 \"quoted key\"=2 k = 3 k=(t)4 (u)5 (u) 6",
        "(ty)node; (\"quoted ty\")other",
        "\"quoted name\" 1; #\"raw name\"# 2",
        "a {\n  b\n  c 1 { d; }\n}\n",
        "a { b }",
        "a{b}",
        "a {}",
        "a { }",
        "a {\n}\n",
        "a /- 1 2 /- k=v",
        "node \"string\"/-1",
        "node \"string\"/-foo=1",
        "node \"string\"/-{}\nnode \"string\" {}/-{}",
        "node/-1 a/-2 #true/-3 k=1/-k=2 #\"r\"#/-4 5",
        "a 1/-2/-3 4",
        "/- a\nb",
        "/-a 1 { x }\nb",
        "a /- { x } { y }",
        "a { y } /- { x }",
        "a { b; /- c }",
        "a { /- b }",
        "a 1 \\\n  2",
        "a 1 \\ // comment\n  2",
        "a /* c */ 1 /* d */ ; b",
        "a 1 // comment\nb",
        "// only a comment",
        "a\r\nb\r\n",
        "a \"\"\"\n  line one\n\n    indented\n  \"\"\"",
        "a \"\"\"\n\"\"\"",
        "a \"\"\"\n  x\n   \n  \"\"\"",
        "a #\"\"\"\n  raw \\d+ \"quoted\"\n  \"\"\"#",
        "a ##\"\"\"\n\t\tx\n\t\t\"\"\"##",
        "a - + . -. .a -a +b a.b",
        "a é 日本 \"ü\"",
        "a\u{2028}b",
        "a\u{00A0}1",
        "pipeline \"x\" max-parallel=2 { // hi\n    phase  a  (t)\"b\" c=1 /- d=2 e= 0x1F {\n        x; y 1.5e3\n    } ;\n}\n",
    ];
    for case in cases {
        assert!(agree(case), "the fast parser should accept {case:?}");
    }
}

#[test]
fn leaves_malformed_and_unusual_input_to_the_kdl_crate() {
    for case in [
        "a {",
        "a }",
        "}",
        "a \"unterminated",
        "a 1.",
        "a 1e",
        "a .5",
        "a 0x",
        "a 1abc",
        "a true",
        "a #yes",
        "a=1",
        "a b=c=d",
        "a 1=2",
        "a\"b\"",
        "a /-",
        "a \"s\"/-",
        "a (t)/-1",
        "a k=/-1",
        "a (t/-u)1",
        "a {}/-1",
        "a 1/-/-2 3",
        "a {} b",
        "a; ; b",
        "/- a; b",
        "a { /- b; c }",
        "a \"x \\   y\"",
        "a \"\"\"x\"\"\"",
        "a \"\"\"\n  x\n y\n  \"\"\"",
        "a \"\"\"\n  \\n\n  \"\"\"",
        "a 170141183460469231731687303715884105728",
        "\u{FEFF}a",
        "a \u{7}",
        "a [1]",
    ] {
        rejects(case);
    }
}

/// The KDL specification's test suite, shipped with the kdl crate's source.
fn spec_cases() -> Vec<PathBuf> {
    let home = std::env::var_os("CARGO_HOME").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cargo"),
        PathBuf::from,
    );
    let registry = home.join("registry").join("src");
    let mut found = Vec::new();
    for index in std::fs::read_dir(&registry).expect("the cargo registry exists") {
        let input = index
            .expect("readable registry")
            .path()
            .join(format!("kdl-{}", kdl_version()))
            .join("tests/test_cases/input");
        if let Ok(entries) = std::fs::read_dir(&input) {
            found.extend(entries.map(|e| e.expect("readable test case").path()));
            break;
        }
    }
    found.sort();
    found
}

/// The version of the kdl crate this build uses, from Cargo.lock.
fn kdl_version() -> String {
    let lock = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock"))
        .expect("Cargo.lock is readable");
    let at = lock
        .find("name = \"kdl\"\nversion = \"")
        .expect("kdl is locked");
    let rest = &lock[at + "name = \"kdl\"\nversion = \"".len()..];
    rest[..rest.find('"').expect("closing quote")].to_owned()
}

#[test]
fn agrees_with_the_kdl_crate_on_the_specification_test_suite() {
    let cases = spec_cases();
    assert!(
        cases.len() > 100,
        "the KDL test suite was not found in the cargo registry ({} files)",
        cases.len()
    );
    let mut accepted = 0;
    for path in &cases {
        let src = std::fs::read_to_string(path).expect("readable test case");
        if agree(&src) {
            accepted += 1;
        }
    }
    // Most valid cases take the fast path; the rest exercise unusual corners on purpose.
    assert!(
        accepted > cases.len() / 3,
        "only {accepted} of {} accepted",
        cases.len()
    );
}

/// Every pipeline in the repository: examples and lint fixtures.
fn corpus() -> &'static [String] {
    static CORPUS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(read_corpus)
}

fn read_corpus() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    let mut folders = vec![root.join("examples"), root.join("tests/fixtures")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(folder).expect("readable folder") {
            let path = entry.expect("readable entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "kdl") {
                files.push(std::fs::read_to_string(&path).expect("readable pipeline"));
            }
        }
    }
    files
}

#[test]
fn takes_the_fast_path_on_every_valid_example_and_fixture() {
    let corpus = corpus();
    assert!(corpus.len() > 50, "{} files", corpus.len());
    for src in corpus {
        let valid = KdlDocument::parse_v2(src).is_ok();
        let fast = agree(src);
        assert!(
            fast || !valid || src.contains('\\'),
            "a valid pipeline did not take the fast path:\n{src}"
        );
    }
}

/// Random documents built from KDL's pieces: values of every kind, properties, type
/// annotations, comments, slashdashes, line continuations and children blocks, with a
/// sprinkling of pieces out of place.
#[allow(
    clippy::too_many_lines,
    reason = "not yet cut into named steps; a known exception to remove"
)]
fn document() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        Just("1".to_owned()),
        Just("-0x1f".to_owned()),
        Just("0o17".to_owned()),
        Just("0b1_0".to_owned()),
        Just("1_000.5e-3".to_owned()),
        Just("+2.0".to_owned()),
        Just("#true".to_owned()),
        Just("#null".to_owned()),
        Just("#-inf".to_owned()),
        Just("bare".to_owned()),
        Just("-dash".to_owned()),
        Just(".dot".to_owned()),
        Just("\"quoted \\\"x\\\" \\u{e9}\"".to_owned()),
        Just("\"\"".to_owned()),
        Just("#\"raw \\d\"#".to_owned()),
        Just("##\"a \"# b\"##".to_owned()),
        Just("\"\"\"\n  one\n\n    two\n  \"\"\"".to_owned()),
        Just("#\"\"\"\n\tx\\y\n\t\"\"\"#".to_owned()),
        Just("\"\"\"\n\"\"\"".to_owned()),
        Just("(ty)1".to_owned()),
        Just("(\"t y\") \"v\"".to_owned()),
        "[a-z]{1,3}",
    ];
    let space = prop_oneof![
        Just(" ".to_owned()),
        Just("  ".to_owned()),
        Just("\t".to_owned()),
        Just(" /* c */ ".to_owned()),
        Just(" \\\n  ".to_owned()),
        Just(" \\ // c\n ".to_owned()),
        Just(String::new()),
    ];
    let entry = prop_oneof![
        value.clone(),
        (value.clone(), value.clone()).prop_map(|(k, v)| format!("{k}={v}")),
        ("[a-z]{1,3}", value.clone()).prop_map(|(k, v)| format!("{k} = {v}")),
        value.clone().prop_map(|v| format!("/-{v}")),
        value.clone().prop_map(|v| format!("/- {v}")),
        Just("=".to_owned()),
        Just("{".to_owned()),
        Just(";".to_owned()),
    ];
    let terminator = prop_oneof![
        Just("\n".to_owned()),
        Just(";".to_owned()),
        Just("; ".to_owned()),
        Just(" // end\n".to_owned()),
        Just("\r\n".to_owned()),
        Just("\n\n".to_owned()),
        Just(String::new()),
    ];
    let node = (
        prop_oneof![
            Just("node".to_owned()),
            Just("(t)node".to_owned()),
            Just("\"quoted name\"".to_owned()),
            Just("/- gone".to_owned()),
            Just("-".to_owned()),
        ],
        proptest::collection::vec((space.clone(), entry), 0..5),
        space,
        prop_oneof![
            Just(String::new()),
            Just("{}".to_owned()),
            Just("{ inner 1; }".to_owned()),
            Just("{\n    inner \"x\" k=#false\n    /- skipped { a }\n}".to_owned()),
            Just("/- { hidden } { shown }".to_owned()),
            Just("{ a } /- { b }".to_owned()),
        ],
        terminator,
    )
        .prop_map(|(name, entries, space, children, end)| {
            let mut out = name;
            for (space, entry) in entries {
                out.push_str(&space);
                out.push_str(&entry);
            }
            out.push_str(&space);
            out.push_str(&children);
            out.push_str(&end);
            out
        });
    proptest::collection::vec(node, 0..6).prop_map(|nodes| nodes.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Mutated pipelines: whatever the fast parser accepts, the kdl crate reads the same way.
    #[test]
    fn mutations_never_make_the_parsers_disagree(
        file in 0usize..1_000,
        edits in proptest::collection::vec((0usize..100_000, 0usize..24, 0u8..4), 1..6),
    ) {
        const PIECES: [&str; 24] = [
            "{", "}", ";", "\n", " ", "=", "/-", "\"", "#", "(t)", "\\", "//", "/*", "*/",
            "1", "-", ".", "e", "0x", "_", "\"\"\"", "#\"", "\"#", "\r",
        ];
        let corpus = corpus();
        let mut src = corpus[file % corpus.len()].clone();
        for (at, piece, op) in edits {
            let mut at = at % (src.len() + 1);
            while !src.is_char_boundary(at) {
                at -= 1;
            }
            match op {
                0 => src.insert_str(at, PIECES[piece]),
                1 => {
                    let end = src[at..].char_indices().nth(1).map_or(src.len(), |(i, _)| at + i);
                    src.replace_range(at..end, "");
                }
                2 => {
                    let end = src[at..].find('\n').map_or(src.len(), |i| at + i);
                    let dup = src[at..end].to_owned();
                    src.insert_str(at, &dup);
                }
                _ => {
                    let end = src[at..].char_indices().nth(1).map_or(src.len(), |(i, _)| at + i);
                    src.replace_range(at..end, PIECES[piece]);
                }
            }
        }
        agree(&src);
    }

    /// Random documents: whatever the fast parser accepts, the kdl crate reads the same way.
    #[test]
    fn random_documents_never_make_the_parsers_disagree(src in document()) {
        agree(&src);
    }
}
