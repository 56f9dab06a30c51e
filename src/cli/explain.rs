//! `helixflow explain`: the documentation of a diagnostic code.

use super::failure::{Failure, Outcome};
use crate::diagnostics::{ALL_RULES, Rule, did_you_mean, find_rule};

/// Arguments of `helixflow explain`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A code such as HF101, or a rule name such as unknown-node.
    #[arg(required_unless_present = "list")]
    code: Option<String>,
    /// List every code with its summary.
    #[arg(long, conflicts_with = "code")]
    list: bool,
}

pub(crate) fn run(args: &Args) -> Outcome {
    if args.list {
        let list: String = ALL_RULES
            .iter()
            .map(|rule| {
                let severity = rule.severity.as_str();
                format!(
                    "{}  {severity:<8} {:<28} {}\n",
                    rule.code, rule.name, rule.summary
                )
            })
            .collect();
        return super::emit(&list);
    }
    let code = args.code.as_deref().unwrap_or_default();
    if let Some(rule) = find_rule(code) {
        super::emit(&explanation(rule))
    } else {
        let by_code = did_you_mean(&code.to_uppercase(), ALL_RULES.iter().map(|r| r.code));
        let by_name = did_you_mean(&code.to_lowercase(), ALL_RULES.iter().map(|r| r.name));
        Err(Failure::usage(match by_name.or(by_code) {
            Some(s) => format!("unknown code `{code}`; did you mean `{s}`?"),
            None => format!("unknown code `{code}`; `helixflow explain --list` lists them all"),
        }))
    }
}

/// The full text printed for one rule.
pub(crate) fn explanation(rule: &Rule) -> String {
    let docs: String = rule
        .docs
        .lines()
        .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
        .collect();
    format!(
        "{} ({}), {}\n\n{}\n\n{}\nHelp: {}\n",
        rule.code,
        rule.name,
        rule.severity.as_str(),
        rule.summary,
        docs.trim_end(),
        rule.help
    )
}
