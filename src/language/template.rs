//! Template parameters: `{{ … }}` expressions that use only a template's parameters are evaluated
//! when a phase uses the template; every other expression (`{{ feedback }}`, `{{ attempt }}`) is
//! left for the prompt to render at run time. A template's definition is kept as nodes until a
//! phase uses it.

use std::collections::BTreeMap;

use kdl::KdlNode;

use crate::diagnostics::{FileId, Span};
use crate::model::Spanned;

/// A template definition, kept as nodes until a phase uses it.
#[derive(Debug, Clone)]
pub(crate) struct TemplateDef {
    /// Its name.
    pub name: Spanned<String>,
    /// The file it is defined in.
    pub file: FileId,
    /// Whether it comes from an imported file.
    pub imported: bool,
    /// Parameters: name, default, where declared.
    pub params: Vec<(String, Option<String>, Span)>,
    /// The `template` node itself.
    pub node: KdlNode,
    /// The bytes of its text, which each phase that uses it takes again of the front end's
    /// limits.
    pub bytes: usize,
}

/// The parameter values of one use of a template.
#[derive(Debug, Default)]
pub(crate) struct Substitution<'a> {
    params: Option<&'a BTreeMap<String, String>>,
}

impl<'a> Substitution<'a> {
    /// No substitution: strings are taken as written.
    pub(crate) fn none() -> Self {
        Self { params: None }
    }

    /// Substitutes these parameters.
    pub(crate) fn with(params: &'a BTreeMap<String, String>) -> Self {
        Self {
            params: Some(params),
        }
    }

    /// `text` with every parameter-only expression evaluated.
    pub(crate) fn apply(&self, text: &str) -> String {
        match self.params {
            Some(params) if text.contains("{{") => substitute(text, params),
            _ => text.to_owned(),
        }
    }
}

/// One `MiniJinja` environment with the default filters, shared: building one per expression costs
/// more than evaluating it.
pub(crate) fn environment() -> &'static minijinja::Environment<'static> {
    static ENVIRONMENT: std::sync::LazyLock<minijinja::Environment<'static>> =
        std::sync::LazyLock::new(minijinja::Environment::new);
    &ENVIRONMENT
}

fn substitute(text: &str, params: &BTreeMap<String, String>) -> String {
    let env = environment();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else {
            break;
        };
        let expression = &rest[start + 2..start + 2 + len];
        let end = start + 2 + len + 2;
        out.push_str(&rest[..start]);
        match evaluate(env, expression.trim_matches(['-', ' ', '\t', '\n']), params) {
            Some(value) => out.push_str(&value),
            None => out.push_str(&rest[start..end]),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn evaluate(
    env: &minijinja::Environment<'_>,
    expression: &str,
    params: &BTreeMap<String, String>,
) -> Option<String> {
    let compiled = env.compile_expression(expression).ok()?;
    let variables = compiled.undeclared_variables(false);
    if variables.is_empty() || !variables.iter().all(|v| params.contains_key(v)) {
        return None;
    }
    compiled.eval(params).ok().map(|value| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_parameter_expressions_and_keeps_run_time_ones() {
        let params = BTreeMap::from([("module".to_owned(), "adr/lexer".to_owned())]);
        let s = Substitution::with(&params);
        assert_eq!(
            s.apply(r#"tests/test_{{ module | replace("/", "_") }}.py"#),
            "tests/test_adr_lexer.py"
        );
        assert_eq!(
            s.apply("Do {{ module }}. {{ feedback }}"),
            "Do adr/lexer. {{ feedback }}"
        );
        assert_eq!(
            s.apply("{% if feedback %}{{ module }}{% endif %}"),
            "{% if feedback %}adr/lexer{% endif %}"
        );
        assert_eq!(s.apply("unclosed {{ module"), "unclosed {{ module");
        assert_eq!(Substitution::none().apply("{{ module }}"), "{{ module }}");
    }
}
