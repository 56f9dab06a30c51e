//! Rendering prompts (`MiniJinja`) and agent argv placeholders.

use std::collections::BTreeMap;

use minijinja::Value;

pub(crate) use crate::language::placeholders::{placeholders, prompt_environment};
use crate::model::{Output, Phase};

/// The prompt variables of one attempt.
#[derive(Debug, Clone)]
pub(crate) struct PromptContext<'a> {
    /// The phase.
    pub phase: &'a Phase,
    /// Counting from 1.
    pub attempt: u32,
    /// `retries + 1`.
    pub max_attempts: u32,
    /// The previous attempt's feedback; empty on the first attempt.
    pub feedback: &'a str,
    /// Instructions for `self` verification; empty for other modes.
    pub verify_instructions: &'a str,
}

/// How an output is described to the agent.
pub(crate) fn describe_output(output: &Output) -> String {
    match output {
        Output::File { path } => path.clone(),
        Output::Glob { pattern, min } => format!(
            "{pattern} (at least {min} file{})",
            if *min == 1 { "" } else { "s" }
        ),
        Output::From { doc, key } => format!("every path listed under `{key}` in {doc}"),
    }
}

/// Shell-style quoting, for showing a command to a person or an agent; nothing helixflow runs
/// goes through it.
pub(crate) fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c))
    {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// Renders the phase's prompt. When the template does not use `feedback` and there is feedback,
/// it is appended, so that a retry always sees what failed.
pub(crate) fn render_prompt(
    template: &str,
    context: &PromptContext<'_>,
) -> Result<String, minijinja::Error> {
    let phase = context.phase;
    let env = prompt_environment(&phase.prompt_includes);
    let compiled = env.template_from_str(template)?;
    let uses = compiled.undeclared_variables(false);
    let mut values: BTreeMap<String, Value> = BTreeMap::new();
    // Template parameters and `vars` are available by name as well as under `vars`, without
    // shadowing the built-in variables.
    for (name, value) in &phase.vars {
        values.insert(name.clone(), Value::from(value.clone()));
    }
    values.insert("vars".into(), Value::from(phase.vars.clone()));
    values.insert("phase".into(), Value::from(phase.name.value.clone()));
    values.insert(
        "description".into(),
        Value::from(phase.description.clone().unwrap_or_default()),
    );
    values.insert(
        "outputs".into(),
        Value::from(
            phase
                .outputs
                .iter()
                .map(describe_output)
                .collect::<Vec<_>>(),
        ),
    );
    values.insert(
        "gates".into(),
        Value::from(
            phase
                .gates
                .iter()
                .map(|g| g.name.clone())
                .collect::<Vec<_>>(),
        ),
    );
    if let Some(item) = phase.item() {
        values.insert("item".into(), Value::from_object(ItemValue(item.clone())));
    }
    values.insert("attempt".into(), Value::from(context.attempt));
    values.insert("max_attempts".into(), Value::from(context.max_attempts));
    values.insert("feedback".into(), Value::from(context.feedback));
    values.insert(
        "verify_instructions".into(),
        Value::from(context.verify_instructions),
    );
    let mut text = compiled.render(Value::from(values))?;
    if !context.feedback.is_empty() && !uses.contains("feedback") {
        text.push_str("\n\n");
        text.push_str(context.feedback);
    }
    if !context.verify_instructions.is_empty() && !uses.contains("verify_instructions") {
        text.push_str("\n\n");
        text.push_str(context.verify_instructions);
    }
    Ok(text)
}

/// The item of a `for-each` phase as its prompt sees it: `{{ item }}` is the value (a string as it
/// is, anything else as JSON), `{{ item.key }}` and `{{ item.index }}` its key and place, and
/// `{{ item.FIELD }}` a field of an object.
#[derive(Debug)]
struct ItemValue(crate::model::Item);

impl minijinja::value::Object for ItemValue {
    fn repr(self: &std::sync::Arc<Self>) -> minijinja::value::ObjectRepr {
        minijinja::value::ObjectRepr::Plain
    }

    fn get_value(self: &std::sync::Arc<Self>, key: &Value) -> Option<Value> {
        let item = &self.0;
        match key.as_str()? {
            "key" => Some(Value::from(item.key.clone())),
            "index" => Some(Value::from(item.index)),
            field => item.value.as_object()?.get(field).map(json_value),
        }
    }

    fn render(self: &std::sync::Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::language::item::value_text(&self.0.value))
    }
}

/// A JSON value as a template value.
fn json_value(value: &serde_json::Value) -> Value {
    use serde_json::Value as Json;
    match value {
        Json::Null => Value::from(()),
        Json::Bool(b) => Value::from(*b),
        Json::Number(n) => n
            .as_i64()
            .map(Value::from)
            .or_else(|| n.as_u64().map(Value::from))
            .unwrap_or_else(|| Value::from(n.as_f64().unwrap_or_default())),
        Json::String(s) => Value::from(s.clone()),
        Json::Array(items) => Value::from(items.iter().map(json_value).collect::<Vec<_>>()),
        Json::Object(fields) => Value::from(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), json_value(v)))
                .collect::<BTreeMap<_, _>>(),
        ),
    }
}

/// Replaces the placeholders named in `values` inside single argv entries; everything else,
/// other `{{ … }}` included, is kept byte for byte. The values are inserted as they are: they are
/// never re-parsed, and the argv never goes through a shell.
pub(crate) fn render_argv(argv: &[String], values: &BTreeMap<&str, String>) -> Vec<String> {
    argv.iter()
        .map(|arg| {
            let mut out = String::with_capacity(arg.len());
            let mut copied = 0;
            for placeholder in placeholders(arg) {
                if let Some(value) = values.get(placeholder.inner) {
                    out.push_str(&arg[copied..placeholder.range.start]);
                    out.push_str(value);
                    copied = placeholder.range.end;
                }
            }
            out.push_str(&arg[copied..]);
            out
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_values_are_inserted_verbatim() {
        let values = BTreeMap::from([("prompt", "$(rm -rf /) `x` \"q\" {{ y }}\n".to_owned())]);
        let argv = render_argv(
            &["agent".into(), "-p".into(), "{{ prompt }}".into()],
            &values,
        );
        assert_eq!(argv[2], "$(rm -rf /) `x` \"q\" {{ y }}\n");
    }

    fn phase(prompt: &str) -> Phase {
        let text = format!(
            "pipeline \"p\"\nphase \"a\" {{\n    run \"true\"\n    vars {{ lang \"py\" }}\n    prompt \"{prompt}\"\n}}\n"
        );
        let pipeline = crate::language::compile(
            std::path::Path::new("/w/pipeline.kdl"),
            &text,
            &crate::language::FsLoader,
            crate::language::Options::default(),
        )
        .pipeline
        .expect("compiles");
        pipeline.phases[0].clone()
    }

    #[test]
    fn documented_variables_are_always_defined_and_others_are_errors() {
        let phase = phase("x");
        let context = |feedback| PromptContext {
            phase: &phase,
            attempt: 1,
            max_attempts: 3,
            feedback,
            verify_instructions: "",
        };
        let first = render_prompt(
            "{% if feedback %}R{% else %}F{% endif %}{{ verify_instructions }}{{ lang }}{{ vars.lang }}\n\n",
            &context(""),
        )
        .unwrap();
        assert_eq!(first, "Fpypy\n\n");
        let error = render_prompt("a {{ feedbak }} b", &context("")).unwrap_err();
        assert_eq!(error.kind(), minijinja::ErrorKind::UndefinedError);
        assert!(render_prompt("{{ vars.other }}", &context("")).is_err());
        assert!(render_prompt("{{ outputs[0] }}", &context("")).is_err());
    }

    #[test]
    fn only_named_placeholders_are_replaced_and_the_rest_is_kept() {
        let values = BTreeMap::from([("prompt", "P".to_owned()), ("attempt", "2".to_owned())]);
        let argv: Vec<String> = [
            "echo '{% if x %}' {{ x }} {{prompt}}",
            "{{  attempt\t}}/{{ prompt | upper }}",
            "{{{ prompt }}}",
            "{{ feedback }} {{ unclosed",
            "{#{{ prompt }}#}",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(
            render_argv(&argv, &values),
            [
                "echo '{% if x %}' {{ x }} P",
                "2/{{ prompt | upper }}",
                "{P}",
                "{{ feedback }} {{ unclosed",
                "{#P#}",
            ]
        );
    }

    #[test]
    fn placeholders_are_found_with_their_places() {
        let found = placeholders("a {{ b }} {{c.d}} {{{ e }}}");
        let inner: Vec<(&str, bool)> = found.iter().map(|p| (p.inner, p.is_name())).collect();
        assert_eq!(inner, [("b", true), ("c.d", false), ("e", true)]);
        assert_eq!(found[0].range, 2..9);
    }
}
