//! The sarif format: SARIF 2.1.0, with every rule's documentation and fixes as artifact changes.

use std::io::{self, Write};
use std::path::Path;

use serde_json::{Value, json};

use super::{Range, message_with_help};
use crate::diagnostics::{ALL_RULES, Diagnostic, FileId, Fix, Rule, Sources, Span};

const SARIF_SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

pub(super) fn render_sarif(
    diagnostics: &[Diagnostic],
    sources: &Sources,
    out: &mut dyn Write,
) -> io::Result<()> {
    let log = json!({
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "helixflow",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/helixflow/helixflow",
                "rules": ALL_RULES.iter().map(|rule| sarif_rule(rule)).collect::<Vec<_>>(),
            }},
            // Our columns count characters; SARIF's default would be UTF-16 code units.
            "columnKind": "unicodeCodePoints",
            "results": diagnostics.iter().map(|d| sarif_result(d, sources)).collect::<Vec<_>>(),
        }],
    });
    serde_json::to_writer_pretty(&mut *out, &log)?;
    writeln!(out)
}

/// The reportingDescriptor of one rule, so viewers can show its documentation.
fn sarif_rule(rule: &Rule) -> Value {
    json!({
        "id": rule.code,
        "name": rule.name,
        "shortDescription": { "text": rule.summary },
        "fullDescription": { "text": rule.summary },
        "help": { "text": rule.help, "markdown": rule.docs },
        "defaultConfiguration": { "level": rule.severity.as_str() },
    })
}

fn sarif_result(diagnostic: &Diagnostic, sources: &Sources) -> Value {
    let mut result = json!({
        "ruleId": diagnostic.code(),
        "level": diagnostic.severity.as_str(),
        "message": { "text": message_with_help(diagnostic) },
        "locations": [{ "physicalLocation": sarif_physical_location(sources, diagnostic.span) }],
    });
    if let Some(index) = ALL_RULES
        .iter()
        .position(|rule| rule.code == diagnostic.code())
    {
        result["ruleIndex"] = json!(index);
    }
    if !diagnostic.notes.is_empty() {
        result["relatedLocations"] = diagnostic
            .notes
            .iter()
            .enumerate()
            .map(|(id, note)| {
                json!({
                    "id": id,
                    "physicalLocation": sarif_physical_location(sources, note.span),
                    "message": { "text": note.label },
                })
            })
            .collect();
    }
    if let Some(fix) = &diagnostic.fix {
        result["fixes"] = json!([sarif_fix(fix, sources)]);
    }
    result
}

fn sarif_physical_location(sources: &Sources, span: Span) -> Value {
    let file = sources.get(span.file);
    let range = Range::of(file, span);
    json!({
        "artifactLocation": { "uri": path_uri(&file.path) },
        "region": {
            "startLine": range.line,
            "startColumn": range.column,
            "endLine": range.end_line,
            "endColumn": range.end_column,
            "byteOffset": span.offset,
            "byteLength": span.len,
        },
    })
}

/// A fix as one artifactChange per file, its edits in the order given.
fn sarif_fix(fix: &Fix, sources: &Sources) -> Value {
    let mut changes: Vec<(FileId, Vec<Value>)> = Vec::new();
    for (span, text) in &fix.edits {
        let replacement = json!({
            "deletedRegion": { "byteOffset": span.offset, "byteLength": span.len },
            "insertedContent": { "text": text },
        });
        match changes.iter_mut().find(|(file, _)| *file == span.file) {
            Some((_, replacements)) => replacements.push(replacement),
            None => changes.push((span.file, vec![replacement])),
        }
    }
    json!({
        "description": { "text": fix.title },
        "artifactChanges": changes
            .into_iter()
            .map(|(file, replacements)| json!({
                "artifactLocation": { "uri": path_uri(&sources.get(file).path) },
                "replacements": replacements,
            }))
            .collect::<Vec<_>>(),
    })
}

const HEX_DIGITS: &[u8; 16] = b"0123456789ABCDEF";

/// A path as a URI reference: forward slashes, percent-encoded; absolute paths as `file:` URIs.
fn path_uri(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    let mut uri = String::with_capacity(text.len());
    if path.is_absolute() {
        uri.push_str(if text.starts_with('/') {
            "file://"
        } else {
            "file:///"
        });
    }
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push('%');
            uri.push(char::from(HEX_DIGITS[usize::from(byte >> 4)]));
            uri.push(char::from(HEX_DIGITS[usize::from(byte & 0xF)]));
        }
    }
    uri
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::Format;
    use super::super::tests::{example, parse, render_to_string};
    use super::*;

    #[test]
    fn sarif_points_at_the_rule_and_the_region() {
        let (sources, diagnostics) = example();
        let sarif = parse(&render_to_string(Format::Sarif, &diagnostics, &sources));
        assert_eq!(sarif["version"], "2.1.0");
        let run = &sarif["runs"][0];
        assert_eq!(run["columnKind"], "unicodeCodePoints");
        let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
        assert_eq!(rules.len(), ALL_RULES.len());

        let result = &run["results"][1];
        let index = usize::try_from(result["ruleIndex"].as_u64().unwrap()).unwrap();
        assert_eq!(rules[index]["id"], "HF604");
        assert_eq!(rules[index]["defaultConfiguration"]["level"], "warning");
        assert_eq!(result["ruleId"], "HF604");
        assert_eq!(result["level"], "warning");
        let location = &result["locations"][0]["physicalLocation"];
        assert_eq!(location["artifactLocation"]["uri"], "demo.kdl");
        assert_eq!(
            location["region"],
            json!({
                "startLine": 2, "startColumn": 11, "endLine": 2, "endColumn": 12,
                "byteOffset": 27, "byteLength": 1,
            })
        );

        let unknown = &run["results"][0];
        let related = &unknown["relatedLocations"][1];
        assert_eq!(related["message"]["text"], "imported here");
        assert_eq!(
            related["physicalLocation"]["artifactLocation"]["uri"],
            "lib/agents.kdl"
        );
        let change = &unknown["fixes"][0]["artifactChanges"][0];
        assert_eq!(
            change["replacements"][0],
            json!({
                "deletedRegion": { "byteOffset": 33, "byteLength": 9 },
                "insertedContent": { "text": "depends-on" },
            })
        );
    }

    #[test]
    fn paths_become_uri_references() {
        assert_eq!(path_uri(Path::new("dir/a b.kdl")), "dir/a%20b.kdl");
        assert_eq!(path_uri(Path::new("é#1.kdl")), "%C3%A9%231.kdl");
        if cfg!(unix) {
            assert_eq!(path_uri(Path::new("/srv/p.kdl")), "file:///srv/p.kdl");
        }
    }
}
