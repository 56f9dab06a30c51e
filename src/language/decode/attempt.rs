//! `attempt RANGE { … }` blocks: the settings of some attempts of a phase's work (its escalation
//! tiers), their range, and the check that the blocks of one body do not overlap.

use std::collections::BTreeMap;

use kdl::{KdlDocument, KdlNode, KdlValue};

use super::{Decoder, Origin, PromptDecl, int};
use crate::diagnostics::{Diagnostic, rules};
use crate::language::validate::{positional, value_span};
use crate::model::{AttemptBlock, AttemptRange, BlockOrigin, Spanned};

/// An `attempt` block as written, its prompt not yet checked against the phase's variables.
#[derive(Debug, Clone)]
pub(crate) struct AttemptDecl {
    /// The block; its `prompt` and `prompt_includes` are filled in once the prompt is checked.
    pub block: AttemptBlock,
    /// Its prompt, as written.
    pub prompt: Option<PromptDecl>,
}

/// Reads a range as written: `2`, `"2"`, `"3.."`, `"2..4"`; the reason when it cannot be read.
pub(crate) fn parse_range(text: &str) -> Result<AttemptRange, String> {
    text.parse()
}

impl Decoder<'_> {
    /// Decodes one `attempt RANGE { … }` block; `None` when its range cannot be read (HF140).
    pub(super) fn attempt_block(
        &mut self,
        node: &KdlNode,
        origin: Origin<'_>,
    ) -> Option<AttemptDecl> {
        let range = self.attempt_range(node, origin)?;
        let mut decl = AttemptDecl {
            block: AttemptBlock {
                range,
                from: BlockOrigin::Phase,
                agent: None,
                prompt: None,
                prompt_includes: BTreeMap::new(),
                vars: BTreeMap::new(),
                max_turns: None,
                timeout: None,
                idle_timeout: None,
                env: BTreeMap::new(),
                verifier: None,
                verifier_prompt: None,
                backoff: None,
            },
            prompt: None,
        };
        for child in node.children().map(KdlDocument::nodes).unwrap_or_default() {
            self.attempt_setting(child, origin, &mut decl);
        }
        Some(decl)
    }

    /// One setting of an `attempt` block. Nodes an attempt cannot set are reported by the
    /// schema walk (HF142) and left out here.
    fn attempt_setting(&mut self, child: &KdlNode, origin: Origin<'_>, decl: &mut AttemptDecl) {
        let block = &mut decl.block;
        let first = || origin.arg(child, 0);
        match child.name().value() {
            "agent" => block.agent = first(),
            "prompt" => decl.prompt = self.prompt(child, origin),
            "verifier-prompt" => {
                block.verifier_prompt = self.prompt(child, origin).map(|p| p.prompt.value);
            }
            "vars" => {
                for var in child.children().map(KdlDocument::nodes).unwrap_or_default() {
                    if let Some(value) = origin.arg(var, 0) {
                        block
                            .vars
                            .insert(var.name().value().to_owned(), value.value);
                    }
                }
            }
            "max-turns" => block.max_turns = int(positional(child).next()).filter(|&n| n > 0),
            "timeout" => block.timeout = first().and_then(|d| self.duration(&d)),
            "idle-timeout" => block.idle_timeout = first().and_then(|d| self.duration(&d)),
            "backoff" => block.backoff = first().and_then(|d| self.duration(&d)),
            "verifier" => block.verifier = first(),
            "env" => {
                if let (Some(k), Some(v)) = (origin.arg(child, 0), origin.arg(child, 1)) {
                    block.env.insert(k.value, v.value);
                }
            }
            _ => {}
        }
    }

    /// The range of an `attempt` block, reported when it cannot be read.
    fn attempt_range(
        &mut self,
        node: &KdlNode,
        origin: Origin<'_>,
    ) -> Option<Spanned<AttemptRange>> {
        let entry = positional(node).next()?;
        let span = value_span(origin.file, entry);
        let (text, written) = match entry.value() {
            KdlValue::Integer(n) => (n.to_string(), n.to_string()),
            KdlValue::String(_) => {
                let text = origin.string(entry)?;
                let written = format!("\"{text}\"");
                (text, written)
            }
            // Another type is reported by the schema walk (HF105).
            _ => return None,
        };
        match parse_range(&text) {
            Ok(range) => Some(Spanned::new(range, span)),
            Err(why) => {
                self.report(
                    Diagnostic::new(
                        &rules::ATTEMPT_RANGE,
                        span,
                        format!("`attempt {written}` covers no attempt: {why}"),
                    )
                    .label("not an attempt or a range"),
                );
                None
            }
        }
    }

    /// Reports `attempt` blocks of one body that cover the same attempt (HF141).
    pub(super) fn overlapping_attempts(&mut self, attempts: &[AttemptDecl]) {
        for (i, later) in attempts.iter().enumerate() {
            let Some(earlier) = attempts[..i]
                .iter()
                .find(|e| e.block.range.value.overlaps(later.block.range.value))
            else {
                continue;
            };
            let (a, b) = (earlier.block.range.value, later.block.range.value);
            let shared = a.first.max(b.first);
            self.report(
                Diagnostic::new(
                    &rules::OVERLAPPING_ATTEMPTS,
                    later.block.range.span,
                    format!(
                        "`attempt {}` overlaps `attempt {}`: both cover attempt {shared}",
                        written(b),
                        written(a)
                    ),
                )
                .label(format!("covers attempt {shared} again"))
                .note(earlier.block.range.span, "the earlier block"),
            );
        }
    }
}

/// A range as it is written in a pipeline: `2`, `"3.."`.
fn written(range: AttemptRange) -> String {
    match range.last {
        Some(last) if last == range.first => last.to_string(),
        _ => format!("\"{range}\""),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_range;
    use crate::model::{AttemptRange, Millis};

    /// A phase's blocks apply over its template's, and those over `defaults`': they may cover
    /// the same attempts without overlapping, and each later one wins where it sets something.
    #[test]
    fn blocks_of_defaults_a_template_and_the_phase_apply_in_that_order() {
        let text = r#"pipeline "p"
agent "a" { command "a"; }
agent "b" { command "b"; }
agent "c" { command "c"; }
defaults {
    attempt "2.." { agent "b"; timeout "1m"; }
}
template "t" {
    attempt "3.." { timeout "2m"; env "X" "template"; }
}
phase "p" use="t" {
    agent "a"
    prompt "go"
    retries 4
    attempt 4 { agent "c"; env "X" "phase"; }
}
"#;
        let compiled = crate::language::compile(
            std::path::Path::new("/w/pipeline.kdl"),
            text,
            &crate::language::FsLoader,
            crate::language::Options::default(),
        );
        assert!(!compiled.has_errors(), "{:?}", compiled.diagnostics);
        let phase = &compiled.pipeline.unwrap().phases[0];
        let at = |n: u32| phase.for_attempt(n).into_owned();
        assert_eq!(at(1).agent_name(), Some("a"));
        assert_eq!(at(1).timeout, None);
        assert_eq!(
            (at(2).agent_name(), at(2).timeout),
            (Some("b"), Some(Millis(60_000)))
        );
        assert_eq!(
            (at(3).agent_name(), at(3).timeout),
            (Some("b"), Some(Millis(120_000)))
        );
        assert_eq!(at(3).env["X"], "template");
        assert_eq!(
            (at(4).agent_name(), at(4).timeout),
            (Some("c"), Some(Millis(120_000)))
        );
        assert_eq!(at(4).env["X"], "phase");
        let labels: Vec<String> = phase.blocks_for(4).iter().map(|b| b.label()).collect();
        assert_eq!(labels, ["defaults 2..", "template 3..", "4"]);
    }

    #[test]
    fn ranges_read_as_written_and_refuse_what_covers_nothing() {
        let range = |first, last| AttemptRange { first, last };
        assert_eq!(parse_range("2"), Ok(range(2, Some(2))));
        assert_eq!(parse_range("3.."), Ok(range(3, None)));
        assert_eq!(parse_range("2..4"), Ok(range(2, Some(4))));
        assert!(parse_range("0").is_err());
        assert!(parse_range("4..2").is_err());
        assert!(parse_range("3-4").is_err());
        assert!(parse_range("..3").is_err());
        assert!(parse_range("").is_err());
        assert!(range(2, None).overlaps(range(3, Some(3))));
        assert!(!range(2, Some(2)).overlaps(range(3, None)));
        assert!(range(2, Some(4)).overlaps(range(4, Some(9))));
        assert_eq!(range(3, None).to_string(), "3..");
        assert_eq!(range(2, Some(4)).to_string(), "2..4");
        assert_eq!(range(2, Some(2)).to_string(), "2");
    }
}
