//! The names a prompt template and an agent's argv may use, and the `MiniJinja` environment prompts
//! are checked (by lint) and rendered (by the agent layer) in: one definition for both.

use std::collections::BTreeMap;

use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, UndefinedBehavior};

/// The variables every prompt template has. Each is always defined, empty when it does not apply
/// (`feedback` on the first attempt), so `{% if feedback %}` works and any other name is an error.
pub(crate) const PROMPT_VARIABLES: &[&str] = &[
    "phase",
    "description",
    "outputs",
    "gates",
    "attempt",
    "max_attempts",
    "feedback",
    "verify_instructions",
    "vars",
];

/// The placeholders replaced inside the arguments of an agent's `command`.
pub(crate) const COMMAND_PLACEHOLDERS: &[&str] = &[
    "prompt",
    "prompt_file",
    "phase",
    "attempt",
    "workspace",
    "session_id",
];

/// The placeholders replaced inside the arguments of an agent's `resume`: the command's, and the
/// previous attempt's feedback.
pub(crate) const RESUME_PLACEHOLDERS: &[&str] = &[
    "prompt",
    "prompt_file",
    "phase",
    "attempt",
    "workspace",
    "session_id",
    "feedback",
    "feedback_file",
];

/// The `MiniJinja` environment prompts are checked and rendered in: printing an undefined variable is
/// an error rather than empty text (testing it with `is defined`, `default` or `{% if %}` is not),
/// a trailing newline is kept (prompts reach the agent byte-exact),
/// and `includes` are the templates `{% include %}` and its kin may name, read when the pipeline was
/// compiled.
pub(crate) fn prompt_environment(
    includes: &BTreeMap<String, std::sync::Arc<str>>,
) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::SemiStrict);
    env.set_syntax(
        SyntaxConfig::builder()
            .keep_trailing_newline(true)
            .build()
            .expect("the default delimiters are valid"),
    );
    for (name, text) in includes {
        // A template that does not compile is reported by lint; here it fails the include that
        // names it, with MiniJinja's message.
        let _ = env.add_template_owned(name.clone(), text.to_string());
    }
    env
}

/// One `{{ name }}` placeholder in an argument: its byte range and the name inside the braces,
/// trimmed, when the braces hold nothing but a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placeholder<'a> {
    /// Where it is, braces included.
    pub range: std::ops::Range<usize>,
    /// What is between the braces, without surrounding whitespace.
    pub inner: &'a str,
}

impl Placeholder<'_> {
    /// Whether the braces hold one name (letters, digits, `_`, not starting with a digit).
    pub(crate) fn is_name(&self) -> bool {
        let mut chars = self.inner.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    }
}

/// Every `{{ … }}` in `arg`, left to right. A `{` before a placeholder is text: in `{{{ prompt }}}`
/// the placeholder is `{{ prompt }}`.
pub(crate) fn placeholders(arg: &str) -> Vec<Placeholder<'_>> {
    let mut found = Vec::new();
    let mut from = 0;
    // The first `}}` at or after the last place it was looked for from: a run of `{` moves on
    // one brace at a time, and looking for the same `}}` again from each would take time
    // quadratic in the run's length.
    let mut close: Option<usize> = None;
    while let Some(at) = arg[from..].find("{{") {
        let start = from + at;
        let Some(close_at) = close
            .filter(|&c| c >= start + 2)
            .or_else(|| arg[start + 2..].find("}}").map(|len| start + 2 + len))
        else {
            break;
        };
        close = Some(close_at);
        let inner = &arg[start + 2..close_at];
        if inner.starts_with('{') {
            // `{{{`: the first brace is text.
            from = start + 1;
            continue;
        }
        let end = close_at + 2;
        found.push(Placeholder {
            range: start..end,
            inner: inner.trim(),
        });
        from = end;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(arg: &str) -> Vec<(std::ops::Range<usize>, &str)> {
        placeholders(arg)
            .into_iter()
            .map(|p| (p.range, p.inner))
            .collect()
    }

    /// The search as it was written first (it looked for `}}` again after each brace of a run).
    fn looked_for_again(arg: &str) -> Vec<(std::ops::Range<usize>, &str)> {
        let mut found = Vec::new();
        let mut from = 0;
        while let Some(at) = arg[from..].find("{{") {
            let start = from + at;
            let Some(len) = arg[start + 2..].find("}}") else {
                break;
            };
            let inner = &arg[start + 2..start + 2 + len];
            if inner.starts_with('{') {
                from = start + 1;
                continue;
            }
            found.push((start..start + len + 4, inner.trim()));
            from = start + len + 4;
        }
        found
    }

    #[test]
    fn placeholders_are_found_as_when_each_brace_looked_for_its_end_again() {
        let runs = "{".repeat(2_000);
        let cases = [
            "a {{ b }} {{c.d}} {{{ e }}} {{}} {{ f",
            "}} {{ x }}}}",
            "{{{{{{ a }} }}}} {{{",
            "{{}}}}{{ {{ }}",
            &format!("{runs}x}} {runs} y}}}} {{z}}"),
        ];
        for case in cases {
            assert_eq!(ranges(case), looked_for_again(case), "{case}");
        }
        assert_eq!(
            ranges("a {{ b }} {{{ e }}} {{}}"),
            [(2..9, "b"), (11..18, "e"), (20..24, "")]
        );
        // A long run of `{` before one `}}`: the last two braces open it.
        let run = format!("{}x}}}} {{{{y}}}}", "{".repeat(80_000));
        assert_eq!(ranges(&run), [(79_998..80_003, "x"), (80_004..80_009, "y")]);
    }
}
