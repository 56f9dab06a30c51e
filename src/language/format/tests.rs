//! The formatter's promises: comments kept, meaning kept, idempotent, on samples and on
//! generated documents.

use super::format_source;
use kdl::KdlDocument;

/// The big example from the language reference, with its comments.
const REFERENCE_EXAMPLE: &str = r##"pipeline "adr-042-payments" {
    description "Implement the payment module described in ADR-042"
    max-parallel 2
    retry-budget 6
}

import "templates/python.kdl"          // agents and templates shared across repos

agent "claude" {
    command "claude" "-p" "{{ prompt }}" "--output-format" "stream-json" "--verbose"
    resume "claude" "-p" "{{ feedback }}" "--continue"
    response "claude-stream-json"
    timeout "20m"
    idle-timeout "5m"
}

agent "reviewer" {
    command "claude" "-p" "{{ prompt }}" "--model" "haiku" "--permission-mode" "plan" "--output-format" "stream-json" "--verbose"
    response "claude-stream-json"
    evidence #""type":"tool_use""#
    timeout "3m"
}

defaults {
    agent "claude"
    retries 2
    verify "external"
}

phase "parser" {
    description "Write the ADR parser"
    prompt file="prompts/parser.md"
    outputs {
        file "src/helix/adr/parser.py"
        file "tests/adr/test_parser.py"
        glob "docs/adr/*.md" min=1
        from "adr/ADR-042.md" key="files.create"
    }
    scope "src/helix/adr/**" "tests/adr/**" "docs/adr/**"
    protect "tests/fixtures/**"
    gates {
        syntax
        command "pytest -q tests/adr" name="tests" timeout="5m"
        matches "response" #"<!-- STEP: (what|why|constraints|generate|finalize|done) -->"# name="step-marker"
        front-matter "adr/ADR-042.md" "adr_id" "title" "status"
        sections "adr/ADR-042.md" "Kontext" "Entscheidung" "Akzeptanzkriterien"
    }
    verify "both"
    retries 2
}

phase "docs" {
    depends-on "parser"
    prompt "Document the parser in docs/adr/parser.md"
    outputs { file "docs/adr/parser.md" }
    verify "sub-agent"
    verifier "reviewer"
}

phase "lexer" use="python-module" module="adr/lexer"
"##;

const TEMPLATE_EXAMPLE: &str = r#"template "python-module" {
    param "module"
    param "tests" default="tests"
    prompt "Implement {{ module }} with tests under {{ tests }}"
    outputs { file "src/{{ module }}.py"; file "{{ tests }}/test_{{ module | replace(\"/\", \"_\") }}.py" }
    gates { syntax; command "pytest -q {{ tests }}" name="tests" }
}
phase "lexer" use="python-module" module="adr/lexer" { depends-on "parser" }
"#;

/// Inputs that exercise every rule; each is valid KDL v2.
const TRICKY: &[&str] = &[
    REFERENCE_EXAMPLE,
    TEMPLATE_EXAMPLE,
    "\n\n// leading\n\n\n\na 1;b 2 ;  c { d;e }\n\n\n\n// end\n",
    "a { // after brace\n\n\n    b // trailing\n    /* own line */\n    c /* inline */ 1 // end\n\n}\n",
    "/* block\n   spanning lines */ node 1\n/* before */ /* twice */ other\nx; /* after semi */\ny; // after semi\n",
    "a /-1 /- \"two\" /-key=3 b=(u8)  4 /- { x }\n/-\nnode\n/- // why\n  gone 1\n(t) typed (t)1 ( t )\"s\"\n",
    "node 1 \\\n   2 \\ // continued\n 3\nnext\n",
    "text \"\"\"\n      keep   \n  these\n     lines\n  \"\"\" after\nraw #\"\"\"\n   \"# still\n   \"\"\"#\n",
    "r ##\"quote \"# inside\"## #\"a\"#\nempty {}\nspaced {   }\nlines {\n\n}\nkw #true #false #null #inf #-inf\n",
    "a {\n\tb {\n\t\tc {\n\t\t\td\n\t\t}\n\t}\n}\n",
    "a {b {c}} // all on one line\nz{}",
    "\u{feff}a \"x\"\r\nb {\r\n  c \"\"\"\r\n  line\r\n  \"\"\"\r\n}\r\n",
    "m k  =  \"v\" {\n  /*c*/ n\n} /-{ old }\n",
    "a\n/* only comment, nested /* inner */ */\n\n\n\n",
];

fn parse(src: &str) -> KdlDocument {
    let mut doc =
        KdlDocument::parse(src).unwrap_or_else(|e| panic!("does not parse: {e:?}\n{src}"));
    doc.clear_format_recursive();
    doc
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn every_sample_is_valid_kdl() {
    for src in TRICKY {
        parse(src);
    }
}

#[test]
fn keeps_every_comment() {
    for src in TRICKY {
        let out = format_source(src);
        assert_eq!(count(src, "//"), count(&out, "//"), "{out}");
        assert_eq!(count(src, "/*"), count(&out, "/*"), "{out}");
        assert_eq!(count(src, "*/"), count(&out, "*/"), "{out}");
    }
}

#[test]
fn is_idempotent() {
    for src in TRICKY {
        let once = format_source(src);
        assert_eq!(format_source(&once), once, "input:\n{src}");
    }
}

#[test]
fn output_parses_to_an_equivalent_document() {
    for src in TRICKY {
        let out = format_source(src);
        assert_eq!(parse(&out), parse(src), "input:\n{src}\noutput:\n{out}");
    }
}

#[test]
fn reference_example_changes_only_the_one_line_block() {
    let out = format_source(REFERENCE_EXAMPLE);
    let expected = REFERENCE_EXAMPLE
        .replace(
            r#"outputs { file "docs/adr/parser.md" }"#,
            "outputs {\n        file \"docs/adr/parser.md\"\n    }",
        )
        .replace(
            r#""templates/python.kdl"          //"#,
            r#""templates/python.kdl" //"#,
        );
    assert_eq!(out, expected);
}

#[test]
fn splits_semicolon_separated_nodes() {
    assert_eq!(format_source("a 1;b 2 ;  c;"), "a 1\nb 2\nc\n");
}

#[test]
fn expands_one_line_blocks() {
    assert_eq!(
        format_source("a {b {c}; d 1} // all\nz{}"),
        "a {\n    b {\n        c\n    }\n    d 1\n} // all\nz {}\n"
    );
}

#[test]
fn keeps_trailing_comments_on_the_node_line() {
    let src = "a 1    // one\nb { // two\n  c; // three\n  d /* four */\n} // five\n";
    let expected = "a 1 // one\nb { // two\n    c // three\n    d /* four */\n} // five\n";
    assert_eq!(format_source(src), expected);
}

#[test]
fn reindents_comments_on_their_own_line() {
    let src = "a {\n// x\n        /* y\n   z */\n  b\n}\n";
    assert_eq!(
        format_source(src),
        "a {\n    // x\n    /* y\n   z */\n    b\n}\n"
    );
}

#[test]
fn keeps_multi_line_strings_byte_exact() {
    let body = "\"\"\"\n      keep   \n\n  these \\\n   \"lines\"\n  \"\"\"";
    let src = format!("  a {{\n        text {body} after\n}}\n");
    assert_eq!(
        format_source(&src),
        format!("a {{\n    text {body} after\n}}\n")
    );
}

#[test]
fn keeps_raw_strings_with_hashes() {
    let src = "r ##\"quote \"# inside\"##   #\"a\"#\nm #\"\"\"\n  \"# x\n  \"\"\"#\n";
    assert_eq!(
        format_source(src),
        "r ##\"quote \"# inside\"## #\"a\"#\nm #\"\"\"\n  \"# x\n  \"\"\"#\n"
    );
}

#[test]
fn normalises_spacing_within_a_node() {
    let src = "( t )node   k = ( u8 )  1  /- \"x\"  /-\n y  z{\n}";
    assert_eq!(format_source(src), "(t)node k=(u8)1 /-\"x\" /-y z {}\n");
}

#[test]
fn attaches_slashdash_to_nodes_and_blocks() {
    let src = "/-\n  gone 1 {\n a\n }\nkept /- { old }\n";
    assert_eq!(
        format_source(src),
        "/-gone 1 {\n    a\n}\nkept /-{\n    old\n}\n"
    );
}

#[test]
fn indents_continuation_lines_one_level_deeper() {
    let src = "a {\nnode 1 \\\n2 \\   // why\n          3\n}\n";
    assert_eq!(
        format_source(src),
        "a {\n    node 1 \\\n        2 \\ // why\n        3\n}\n"
    );
}

#[test]
fn a_continuation_into_a_line_that_ends_the_node_keeps_a_blank_line() {
    // The continuation consumes one line break; the next one ends `a`.
    let cases = [
        ("a \\\n\nb", "a \\\n\nb\n"),
        ("a \\ // why\n\n\n  b 1", "a \\ // why\n\nb 1\n"),
        ("a \\\n;b", "a \\\n\nb\n"),
        (
            "a 1 \\\n  2 \\\n\n/* c */ b",
            "a 1 \\\n    2 \\\n\n/* c */ b\n",
        ),
        ("\\\n\nnode", "\\\n\nnode\n"),
        ("x {\n  a \\\n\n}", "x {\n    a \\\n}\n"),
        ("a \\\n", "a \\\n"),
    ];
    for (src, expected) in cases {
        let out = format_source(src);
        assert_eq!(out, expected, "input:\n{src}");
        assert_eq!(parse(&out), parse(src), "input:\n{src}\noutput:\n{out}");
        assert_eq!(format_source(&out), out);
    }
}

#[test]
fn collapses_blank_lines() {
    let src = "\n\n\na\n\n\n\nb {\n\n\n  c\n\n\n  d\n\n\n}\n\n\n";
    assert_eq!(format_source(src), "a\n\nb {\n    c\n\n    d\n}\n");
}

#[test]
fn writes_empty_blocks_compactly_unless_they_hold_comments() {
    assert_eq!(format_source("a {\n\n}\nb {   }"), "a {}\nb {}\n");
    assert_eq!(format_source("a { /* c */ }"), "a { /* c */\n}\n");
    assert_eq!(format_source("a {\n  // c\n}"), "a {\n    // c\n}\n");
}

#[test]
fn converts_crlf_to_lf() {
    let src = "a {\r\n  b \"\"\"\r\n  x\r\n  \"\"\"\r\n}\r\n";
    let out = format_source(src);
    assert!(!out.contains('\r'));
    assert_eq!(out, "a {\n    b \"\"\"\n  x\n  \"\"\"\n}\n");
    assert_eq!(parse(&out), parse(src));
}

#[test]
fn empty_input_stays_empty() {
    assert_eq!(format_source(""), "");
    assert_eq!(format_source(" \n\r\n\t"), "");
}

proptest::proptest! {
    #[test]
    fn never_panics_on_any_input(src in "[a-c{}();=/\\\\*#\"\\- \n\r\t\u{2028}é]{0,60}") {
        let once = format_source(&src);
        let twice = format_source(&once);
        for out in [once, twice] {
            proptest::prop_assert!(out.is_empty() || out.ends_with('\n'));
        }
    }
}

/// Random valid KDL documents with comments and unusual spacing everywhere the grammar allows
/// it, to check the formatter's promises beyond the hand-written samples.
mod generated {
    use proptest::prelude::*;
    use proptest::sample::select;

    use super::{count, parse};
    use crate::diagnostics::FileId;
    use crate::language::format::format_source;
    use crate::language::kdl::lexer::screen;

    const NAMES: &[&str] = &["a", "node", "x-y", "über", "\"quoted name\"", "#\"raw\"#"];
    const KEYS: &[&str] = &["k", "key-2", "\"q k\""];
    const TYPES: &[&str] = &["t", "u8", "\"my type\""];
    const VALUES: &[&str] = &[
        "v",
        "1",
        "-2.5",
        "0x1F",
        "1_000",
        "1e10",
        "\"s p\"",
        "\"esc \\\" \\n {\"",
        "\"\\u{1F600} }\"",
        "#\"r\"#",
        "##\"a\"#b\"##",
        "#true",
        "#false",
        "#null",
        "#-inf",
        "\"\"\"\n  line one\n    two // not a comment\n\n  \"\"\"",
        "#\"\"\"\n  raw \"# /*\n  \"\"\"#",
        "\"ws \\\n   escape\"",
    ];
    const SPACE: &[&str] = &[
        " ",
        "   ",
        "\t",
        " /* c */ ",
        " \\\n    ",
        " \\ // c\n  ",
        "\u{3000}",
    ];
    const BEFORE_BLOCK: &[&str] = &["", " ", " /* b */ ", " \\\n "];
    const AFTER_SLASHDASH: &[&str] = &["", " ", "\n", " /* s */ ", " // s\n"];
    const TIGHT: &[&str] = &["", " "];
    const TERMINATOR: &[&str] = &[
        "\n",
        ";",
        " ;",
        "; // t\n",
        " // t\n",
        "\n\n\n",
        " \\\n\n",
        "\n// own\n",
        "\n/* own */\n",
        "\r\n",
        " /* t */\n",
    ];
    const LAST_TERMINATOR: &[&str] = &["", " ", "\n", ";", " // t\n", "\n\n"];
    const LEADING: &[&str] = &[
        "",
        "\n",
        " // lead\n",
        "\n\n\n",
        " /* in */ ",
        "\n  /* a\n b */\n",
    ];

    #[derive(Debug, Clone)]
    struct Entry {
        slashdash: bool,
        key: Option<&'static str>,
        ty: Option<&'static str>,
        value: &'static str,
    }

    #[derive(Debug, Clone)]
    struct Node {
        slashdash: bool,
        ty: Option<&'static str>,
        name: &'static str,
        entries: Vec<Entry>,
        children: Option<Vec<Node>>,
        dashed_block: bool,
    }

    /// Picks the spacing; a seeded generator keeps the tree strategy small.
    struct Picker(u64);

    impl Picker {
        fn pick(&mut self, options: &[&'static str]) -> &'static str {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            options[usize::try_from(self.0 % options.len() as u64).unwrap_or_default()]
        }
    }

    fn entry() -> impl Strategy<Value = Entry> {
        (
            proptest::bool::weighted(0.2),
            proptest::option::weighted(0.3, select(KEYS)),
            proptest::option::weighted(0.2, select(TYPES)),
            select(VALUES),
        )
            .prop_map(|(slashdash, key, ty, value)| Entry {
                slashdash,
                key,
                ty,
                value,
            })
    }

    fn node() -> impl Strategy<Value = Node> {
        let leaf = node_with(Just(None).boxed());
        leaf.prop_recursive(3, 24, 4, |inner| {
            node_with(proptest::option::of(proptest::collection::vec(inner, 0..4)).boxed())
        })
    }

    fn node_with(children: BoxedStrategy<Option<Vec<Node>>>) -> BoxedStrategy<Node> {
        (
            proptest::bool::weighted(0.15),
            proptest::option::weighted(0.2, select(TYPES)),
            select(NAMES),
            proptest::collection::vec(entry(), 0..4),
            children,
            proptest::bool::weighted(0.15),
        )
            .prop_map(
                |(slashdash, ty, name, entries, children, dashed_block)| Node {
                    slashdash,
                    ty,
                    name,
                    entries,
                    children,
                    dashed_block,
                },
            )
            .boxed()
    }

    fn render_nodes(nodes: &[Node], picker: &mut Picker, out: &mut String) {
        out.push_str(picker.pick(LEADING));
        for (index, node) in nodes.iter().enumerate() {
            render_node(node, picker, out);
            let last = index + 1 == nodes.len();
            // The kdl crate rejects `;` after a slashdashed node (`/-a; b`), though the
            // grammar allows it.
            let terminators: Vec<_> = (if last { LAST_TERMINATOR } else { TERMINATOR })
                .iter()
                .copied()
                .filter(|t| !(node.slashdash && t.contains(';')))
                .collect();
            out.push_str(picker.pick(&terminators));
        }
    }

    fn render_node(node: &Node, picker: &mut Picker, out: &mut String) {
        if node.slashdash {
            out.push_str("/-");
            out.push_str(picker.pick(AFTER_SLASHDASH));
        }
        if let Some(ty) = node.ty {
            render_type(ty, picker, out);
        }
        out.push_str(node.name);
        for entry in &node.entries {
            out.push_str(picker.pick(SPACE));
            render_entry(entry, picker, out);
        }
        if let Some(children) = &node.children {
            out.push_str(picker.pick(BEFORE_BLOCK));
            out.push('{');
            render_nodes(children, picker, out);
            out.push('}');
        }
        if node.dashed_block {
            out.push_str(picker.pick(SPACE));
            out.push_str("/-");
            out.push_str(picker.pick(AFTER_SLASHDASH));
            out.push_str("{ gone 1 }");
        }
    }

    fn render_entry(entry: &Entry, picker: &mut Picker, out: &mut String) {
        if entry.slashdash {
            out.push_str("/-");
            out.push_str(picker.pick(AFTER_SLASHDASH));
        }
        if let Some(key) = entry.key {
            out.push_str(key);
            out.push_str(picker.pick(TIGHT));
            out.push('=');
            out.push_str(picker.pick(TIGHT));
        }
        if let Some(ty) = entry.ty {
            render_type(ty, picker, out);
        }
        out.push_str(entry.value);
    }

    fn render_type(ty: &str, picker: &mut Picker, out: &mut String) {
        out.push('(');
        out.push_str(picker.pick(TIGHT));
        out.push_str(ty);
        out.push_str(picker.pick(TIGHT));
        out.push(')');
        out.push_str(picker.pick(TIGHT));
    }

    fn document() -> impl Strategy<Value = String> {
        (proptest::collection::vec(node(), 0..5), any::<u64>()).prop_map(|(nodes, seed)| {
            let mut out = String::new();
            render_nodes(&nodes, &mut Picker(seed | 1), &mut out);
            out
        })
    }

    proptest! {
        #[test]
        fn formatting_keeps_meaning_and_comments_and_is_idempotent(src in document()) {
            let out = format_source(&src);
            prop_assert_eq!(parse(&out), parse(&src), "output:\n{}", out);
            prop_assert_eq!(format_source(&out), out.clone());
            for marker in ["//", "/*", "*/"] {
                prop_assert_eq!(count(&src, marker), count(&out, marker));
            }
            prop_assert!(!out.contains('\r'));
            prop_assert!(screen(&src, FileId(0)).is_empty());
            prop_assert!(out.lines().all(|line| !line.ends_with(' ') || line.trim().is_empty()));
        }
    }
}
