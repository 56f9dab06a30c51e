//! Checks of prompt templates and agent argv placeholders. A prompt renders with undefined
//! variables as errors, so every variable, filter, test and included template it uses must exist,
//! and every `{{ name }}` in an agent's argv must be one that helixflow replaces: what lint accepts
//! here renders at run time.
//!
//! The prompt is compiled by `MiniJinja` itself and its instructions are read (the
//! `unstable_machinery` interface), so what is checked is exactly what runs: names inside string
//! literals, comments and `{% raw %}` blocks are never mistaken for uses.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use minijinja::machinery::{self, Instruction, Instructions};
use minijinja::{Environment, ErrorKind};

use super::decode::{Decoder, PromptDecl, text_span};
use super::loader::normalize;
use super::placeholders::{
    COMMAND_PLACEHOLDERS, PROMPT_VARIABLES, RESUME_PLACEHOLDERS, placeholders, prompt_environment,
};
use crate::diagnostics::{Diagnostic, FileId, Span, did_you_mean, rules};
use crate::model::{Prompt, Spanned};

/// `MiniJinja`'s filters, for "did you mean"; whether a filter exists is asked of `MiniJinja` itself.
const FILTERS: &[&str] = &[
    "abs",
    "attr",
    "batch",
    "bool",
    "capitalize",
    "chain",
    "count",
    "d",
    "default",
    "dictsort",
    "e",
    "escape",
    "first",
    "float",
    "format",
    "groupby",
    "indent",
    "int",
    "items",
    "join",
    "last",
    "length",
    "lines",
    "list",
    "lower",
    "map",
    "max",
    "min",
    "pprint",
    "reject",
    "rejectattr",
    "replace",
    "reverse",
    "round",
    "safe",
    "select",
    "selectattr",
    "slice",
    "sort",
    "split",
    "string",
    "sum",
    "title",
    "trim",
    "unique",
    "upper",
    "zip",
];

/// `MiniJinja`'s tests, for "did you mean".
const TESTS: &[&str] = &[
    "boolean",
    "defined",
    "divisibleby",
    "endingwith",
    "eq",
    "equalto",
    "escaped",
    "even",
    "false",
    "filter",
    "float",
    "ge",
    "greaterthan",
    "gt",
    "in",
    "integer",
    "iterable",
    "le",
    "lessthan",
    "lower",
    "lt",
    "mapping",
    "ne",
    "none",
    "number",
    "odd",
    "safe",
    "sameas",
    "sequence",
    "startingwith",
    "string",
    "test",
    "true",
    "undefined",
    "upper",
];

/// How deep includes may nest before lint stops following them (`MiniJinja`'s own limit is higher;
/// a prompt nested this deep is almost certainly a cycle).
const MAX_INCLUDE_DEPTH: usize = 16;

/// What each prompt file and included template uses, kept for the compilation: however many
/// phases name a file, it is compiled once. `None` for one that does not compile.
#[derive(Debug, Default)]
pub(crate) struct UsesCache(HashMap<FileId, Option<Rc<Uses>>>);

/// What a compiled template uses.
#[derive(Debug, Default)]
struct Uses {
    /// Variables looked up and never assigned in the template, dotted for plain attribute
    /// lookups (`vars.lang`).
    variables: BTreeSet<String>,
    /// Every variable lookup: the name, the attribute looked up on it right after, the place.
    lookups: Vec<(String, Option<String>, Option<Range<usize>>)>,
    /// Names the template assigns anywhere (`set`, loop variables, macro arguments).
    assigned: BTreeSet<String>,
    filters: Vec<(String, Option<Range<usize>>)>,
    tests: Vec<(String, Option<Range<usize>>)>,
    includes: Vec<Include>,
}

/// An `{% include %}`, `{% import %}`, `{% from … import %}` or `{% extends %}`.
#[derive(Debug)]
struct Include {
    /// The names tried in order, or `None` when the name is computed at run time.
    names: Option<Vec<String>>,
    /// `ignore missing`.
    ignore_missing: bool,
    range: Option<Range<usize>>,
}

/// What the template uses, or `MiniJinja`'s error when it does not compile.
fn uses(env: &Environment<'_>, text: &str) -> Result<Uses, minijinja::Error> {
    let template = env.template_from_str(text)?;
    let mut uses = Uses {
        variables: template.undeclared_variables(true).into_iter().collect(),
        ..Uses::default()
    };
    let compiled = machinery::get_compiled_template(&template);
    for instructions in std::iter::once(&compiled.instructions).chain(compiled.blocks.values()) {
        read_instructions(instructions, &mut uses);
    }
    Ok(uses)
}

fn read_instructions(instructions: &Instructions<'_>, uses: &mut Uses) {
    let range = |idx: u32| {
        instructions.get_span(idx).and_then(|s| {
            let start = usize::try_from(s.start_offset).ok()?;
            let end = usize::try_from(s.end_offset).ok()?;
            (start < end).then_some(start..end)
        })
    };
    let mut previous: Option<&Instruction<'_>> = None;
    let mut idx = 0;
    while let Some(instruction) = instructions.get(idx) {
        match instruction {
            Instruction::Lookup(name) => {
                let attribute = match instructions.get(idx + 1) {
                    Some(Instruction::GetAttr(attribute)) => Some((*attribute).to_owned()),
                    _ => None,
                };
                uses.lookups
                    .push(((*name).to_owned(), attribute, range(idx)));
            }
            Instruction::StoreLocal(name) => {
                uses.assigned.insert((*name).to_owned());
            }
            Instruction::PushLoop(_) => {
                uses.assigned.insert("loop".to_owned());
            }
            Instruction::ApplyFilter(name, _, _) => {
                uses.filters.push(((*name).to_owned(), range(idx)));
            }
            Instruction::PerformTest(name, _, _) => {
                uses.tests.push(((*name).to_owned(), range(idx)));
            }
            Instruction::Include(ignore_missing) => uses.includes.push(Include {
                names: constant_names(previous),
                ignore_missing: *ignore_missing,
                range: range(idx),
            }),
            Instruction::LoadBlocks => uses.includes.push(Include {
                names: constant_names(previous),
                ignore_missing: false,
                range: range(idx),
            }),
            _ => {}
        }
        previous = Some(instruction);
        idx += 1;
    }
}

/// The template names an include loads, when they are written as a literal string or list.
fn constant_names(instruction: Option<&Instruction<'_>>) -> Option<Vec<String>> {
    let Some(Instruction::LoadConst(value)) = instruction else {
        return None;
    };
    if let Some(name) = value.as_str() {
        return Some(vec![name.to_owned()]);
    }
    value
        .try_iter()
        .ok()?
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// Whether `MiniJinja` has the filter (`test` false) or test (`test` true), asked by rendering a
/// probe: the lookup fails before anything is called.
fn exists(env: &Environment<'_>, name: &str, test: bool) -> bool {
    let (probe, missing) = if test {
        (format!("{{{{ none is {name} }}}}"), ErrorKind::UnknownTest)
    } else {
        (format!("{{{{ none | {name} }}}}"), ErrorKind::UnknownFilter)
    };
    !matches!(env.render_str(&probe, ()), Err(e) if e.kind() == missing)
}

/// Where a template's text lies, for pointing into it.
#[derive(Debug, Clone, Copy)]
struct Place {
    /// The text byte for byte in a source file, when it is.
    text: Option<Span>,
    /// What to point at otherwise.
    whole: Span,
}

impl Place {
    fn span(&self, text: &str, range: Option<Range<usize>>) -> Span {
        range
            .and_then(|r| text_span(text, self.text, r))
            .unwrap_or(self.whole)
    }
}

/// One prompt's check: the phase it belongs to and what is found along the way.
struct PromptCheck<'p> {
    phase: &'p str,
    /// Whether the phase has `for-each`, and so an `item`.
    items: bool,
    cache: &'p mut UsesCache,
    vars: &'p BTreeMap<String, String>,
    env: Environment<'static>,
    /// Whether each filter or test name exists, asked once.
    known: HashMap<(String, bool), bool>,
    /// The included templates read so far, by name.
    includes: BTreeMap<String, Arc<str>>,
}

impl Decoder<'_> {
    /// Checks the prompt of phase `phase`, whose `vars` (template parameters included) are given,
    /// and returns the templates it includes, read from the workspace.
    pub(crate) fn check_prompt(
        &mut self,
        phase: &str,
        prompt: &PromptDecl,
        vars: &BTreeMap<String, String>,
        items: bool,
        cache: &mut UsesCache,
    ) -> BTreeMap<String, Arc<str>> {
        let mut check = PromptCheck {
            phase,
            items,
            cache,
            vars,
            env: prompt_environment(&BTreeMap::new()),
            known: HashMap::new(),
            includes: BTreeMap::new(),
        };
        let place = Place {
            text: prompt.text,
            whole: prompt.prompt.span,
        };
        // A prompt file is one of the sources; an inline prompt is a phase's own text.
        let file = match &prompt.prompt.value {
            Prompt::File { .. } => prompt.text.map(|span| span.file),
            Prompt::Inline(_) => None,
        };
        self.check_template(
            &mut check,
            (prompt.prompt.value.text(), file),
            place,
            &BTreeSet::new(),
            0,
        );
        check.includes
    }

    /// Checks one template: the prompt, or a template it includes, which also sees the names the
    /// including templates assign (`{% for item in outputs %}{% include "item.md" %}`).
    fn check_template(
        &mut self,
        check: &mut PromptCheck<'_>,
        (text, file): (&str, Option<FileId>),
        place: Place,
        outer: &BTreeSet<String>,
        depth: usize,
    ) {
        // A template that does not compile is reported where it is read.
        let found = match file {
            Some(file) => check
                .cache
                .0
                .entry(file)
                .or_insert_with(|| uses(&check.env, text).ok().map(Rc::new))
                .clone(),
            None => uses(&check.env, text).ok().map(Rc::new),
        };
        let Some(uses) = found else {
            return;
        };
        for variable in &uses.variables {
            self.check_variable(check, variable, &uses, text, place, outer);
        }
        for (list, test) in [(&uses.filters, false), (&uses.tests, true)] {
            for (name, range) in list {
                let env = &check.env;
                let found = *check
                    .known
                    .entry((name.clone(), test))
                    .or_insert_with(|| exists(env, name, test));
                if !found {
                    self.report_unknown_function(name, test, place.span(text, range.clone()));
                }
            }
        }
        let mut assigned = outer.clone();
        assigned.extend(uses.assigned.iter().cloned());
        for include in &uses.includes {
            let span = place.span(text, include.range.clone());
            self.check_include(check, include, span, &assigned, depth);
        }
    }

    fn check_variable(
        &mut self,
        check: &PromptCheck<'_>,
        variable: &str,
        uses: &Uses,
        text: &str,
        place: Place,
        outer: &BTreeSet<String>,
    ) {
        let mut parts = variable.split('.');
        let root = parts.next().unwrap_or_default();
        let attribute = parts.next();
        // A name the template assigns anywhere counts as defined: MiniJinja's analysis scopes
        // `{% set %}` inside `{% if %}` to the block, where rendering does not.
        let defined = PROMPT_VARIABLES.contains(&root)
            || (check.items && root == "item")
            || check.vars.contains_key(root)
            || outer.contains(root)
            || uses.assigned.contains(root)
            || check.env.globals().any(|(name, _)| name == root);
        if !defined && !optional(uses, text, root, None) {
            let at = uses
                .lookups
                .iter()
                .find(|(name, _, _)| name == root)
                .and_then(|(_, _, range)| range.clone());
            let span = name_in(text, place, at, root);
            if root == "item" && !check.vars.contains_key(root) {
                return self.item_outside_for_each(check.phase, span);
            }
            let candidates = PROMPT_VARIABLES
                .iter()
                .copied()
                .chain(check.vars.keys().map(String::as_str));
            let help = match did_you_mean(root, candidates) {
                Some(close) => format!("did you mean `{close}`?"),
                None => variables_help(check.vars),
            };
            self.diagnostics.push(
                Diagnostic::new(
                    &rules::UNKNOWN_PROMPT_VARIABLE,
                    span,
                    format!("`{root}` is not a prompt variable"),
                )
                .label("undefined when the prompt renders")
                .help(help),
            );
            return;
        }
        if root != "vars" {
            return;
        }
        let Some(name) = attribute else { return };
        if check.vars.contains_key(name) || optional(uses, text, "vars", Some(name)) {
            return;
        }
        let at = uses
            .lookups
            .iter()
            .find(|(n, attribute, _)| n == "vars" && attribute.as_deref() == Some(name))
            .and_then(|(_, _, range)| range.clone());
        let span = name_in(text, place, at, name);
        let help = match did_you_mean(name, check.vars.keys().map(String::as_str)) {
            Some(close) => format!("did you mean `vars.{close}`?"),
            None if check.vars.is_empty() => format!(
                "declare it in the phase: `vars {{ {name} \"…\" }}`; phase \"{}\" has no `vars`",
                check.phase
            ),
            None => format!(
                "declare it in the phase's `vars`, or use one of: {}",
                check
                    .vars
                    .keys()
                    .map(|k| format!("`vars.{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        self.diagnostics.push(
            Diagnostic::new(
                &rules::UNKNOWN_PROMPT_VARIABLE,
                span,
                format!(
                    "`vars.{name}` is not declared in the `vars` of phase \"{}\"",
                    check.phase
                ),
            )
            .label("undefined when the prompt renders")
            .help(help),
        );
    }

    /// `item` in the prompt of a phase without `for-each`.
    fn item_outside_for_each(&mut self, phase: &str, span: Span) {
        self.diagnostics.push(
            Diagnostic::new(
                &rules::ITEM_OUTSIDE_FOR_EACH,
                span,
                format!(
                    "the prompt of phase \"{phase}\" uses `item`, and the phase has no `for-each`"
                ),
            )
            .label("no item here")
            .help(rules::ITEM_OUTSIDE_FOR_EACH.help),
        );
    }

    fn report_unknown_function(&mut self, name: &str, test: bool, span: Span) {
        let (kind, candidates) = if test {
            ("test", TESTS)
        } else {
            ("filter", FILTERS)
        };
        let mut d = Diagnostic::new(
            &rules::UNKNOWN_TEMPLATE_FILTER,
            span,
            format!("MiniJinja has no {kind} `{name}`"),
        )
        .label(format!("unknown {kind}"));
        if let Some(close) = did_you_mean(name, candidates.iter().copied()) {
            d = d.help(format!("did you mean `{close}`?"));
        }
        self.diagnostics.push(d);
    }

    fn check_include(
        &mut self,
        check: &mut PromptCheck<'_>,
        include: &Include,
        span: Span,
        assigned: &BTreeSet<String>,
        depth: usize,
    ) {
        let Some(names) = &include.names else {
            self.diagnostics.push(
                Diagnostic::new(
                    &rules::PROMPT_INCLUDE_MISSING,
                    span,
                    "the name of the included template is computed when the prompt renders",
                )
                .label("not a literal name")
                .help(
                    "write the name as a string (or a list of strings): included templates are \
                     read and checked with the pipeline, before the run",
                ),
            );
            return;
        };
        let mut tried = Vec::new();
        for name in names {
            // Read and checked already (also what ends an include cycle).
            if check.includes.contains_key(name) {
                return;
            }
            let value = Spanned::new(name.clone(), span);
            if super::decode::escape_problem(name).is_some() {
                self.workspace_path(&value);
                return;
            }
            let absolute = normalize(&self.workspace, Path::new(name));
            match self.read_source(&absolute) {
                Ok((text, whole)) => {
                    check.includes.insert(name.clone(), Arc::clone(&text));
                    if !self.syntax_once(&text, whole) {
                        return;
                    }
                    if depth < MAX_INCLUDE_DEPTH {
                        let place = Place {
                            text: Some(whole),
                            whole,
                        };
                        let source = (&*text, Some(whole.file));
                        self.check_template(check, source, place, assigned, depth + 1);
                    }
                    return;
                }
                Err(_) => tried.push(absolute),
            }
        }
        if include.ignore_missing {
            return;
        }
        let looked: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
        let what = match names.as_slice() {
            [one] => format!("included template \"{one}\" does not exist"),
            _ => format!("none of the included templates {names:?} exists"),
        };
        self.diagnostics.push(
            Diagnostic::new(&rules::PROMPT_INCLUDE_MISSING, span, what)
                .label(format!("looked for {}", looked.join(", "))),
        );
    }

    /// Checks the `{{ name }}` placeholders of an agent's `command` (or `resume`) arguments.
    pub(crate) fn check_argv(&mut self, args: &[(Spanned<String>, Option<Span>)], resume: bool) {
        let known = if resume {
            RESUME_PLACEHOLDERS
        } else {
            COMMAND_PLACEHOLDERS
        };
        for (arg, at) in args {
            for placeholder in placeholders(&arg.value) {
                // Replaced in the phases of `for-each` items; elsewhere reported per phase.
                if super::item::uses_item(&arg.value[placeholder.range.clone()]) {
                    continue;
                }
                let span =
                    text_span(&arg.value, *at, placeholder.range.clone()).unwrap_or(arg.span);
                let word: &str = placeholder
                    .inner
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or_default();
                if placeholder.is_name() {
                    if placeholder.inner == "prompt" {
                        self.diagnostics.push(
                            Diagnostic::new(
                                &rules::PROMPT_IN_ARGV,
                                span,
                                "the prompt is passed as one argument, which Linux limits to 128 KiB",
                            )
                            .label("the whole prompt, in one argument"),
                        );
                    }
                    if known.contains(&placeholder.inner) {
                        continue;
                    }
                    let mut d = Diagnostic::new(
                        &rules::UNKNOWN_ARGV_PLACEHOLDER,
                        span,
                        format!(
                            "`{{{{ {} }}}}` is not replaced in an agent's argv",
                            placeholder.inner
                        ),
                    )
                    .label("passed to the agent as written");
                    d = if !resume && RESUME_PLACEHOLDERS.contains(&placeholder.inner) {
                        d.help(format!(
                            "`{{{{ {} }}}}` is replaced only in `resume`, the argv of retries",
                            placeholder.inner
                        ))
                    } else if let Some(close) =
                        did_you_mean(placeholder.inner, known.iter().copied())
                    {
                        d.help(format!("did you mean `{{{{ {close} }}}}`?"))
                    } else {
                        d.help(format!(
                            "the placeholders are {}",
                            known
                                .iter()
                                .map(|k| format!("`{{{{ {k} }}}}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ))
                    };
                    self.diagnostics.push(d);
                } else if RESUME_PLACEHOLDERS.contains(&word) {
                    // `{{ prompt | upper }}`: an expression, which argv does not evaluate.
                    self.diagnostics.push(
                        Diagnostic::new(
                            &rules::UNKNOWN_ARGV_PLACEHOLDER,
                            span,
                            format!(
                                "`{{{{ {} }}}}` is not replaced in an agent's argv: only a bare name is",
                                placeholder.inner
                            ),
                        )
                        .label("passed to the agent as written")
                        .help(format!(
                            "write `{{{{ {word} }}}}`; filters and expressions belong in the prompt"
                        )),
                    );
                }
            }
        }
    }
}

/// Whether the template treats `root` (or `root.attribute`) as possibly missing at one of its uses:
/// `x is defined`, `x is undefined`, `x | default(…)` (or `d`), or `x` as the condition of an `if`
/// or `elif`. Such a value is optional: a shared prompt may use it for the phases that set it, and
/// rendering allows all of these on an undefined value.
fn optional(uses: &Uses, text: &str, root: &str, attribute: Option<&str>) -> bool {
    let known = uses
        .lookups
        .iter()
        .filter(|(name, attr, _)| name == root && attr.as_deref() == attribute)
        .filter_map(|(_, _, range)| range.clone())
        .any(|range| guarded(text, range.start));
    // Not every lookup carries its place in the text: look at each whole-word occurrence too.
    let dotted = attribute.map_or_else(|| root.to_owned(), |a| format!("{root}.{a}"));
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '.';
    known
        || text.match_indices(&dotted).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + dotted.len()..].chars().next();
            !before.is_some_and(word) && !after.is_some_and(word) && guarded(text, at)
        })
}

/// Whether the dotted name that starts at `start` in `text` is tested, defaulted or used as an
/// `if` condition there.
fn guarded(text: &str, start: usize) -> bool {
    let Some(rest) = text.get(start..) else {
        return false;
    };
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(rest.len());
    let after = rest[end..].trim_start();
    let tested = after.strip_prefix("is").is_some_and(|test| {
        let test = test.trim_start();
        let test = test.strip_prefix("not").map_or(test, str::trim_start);
        test.starts_with("defined") || test.starts_with("undefined")
    });
    let defaulted = after.strip_prefix('|').is_some_and(|filter| {
        let filter = filter.trim_start();
        let name_len = filter
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(filter.len());
        matches!(&filter[..name_len], "default" | "d")
    });
    let before = text[..start].trim_end();
    let before = before.strip_suffix("not").map_or(before, str::trim_end);
    let keyword = before
        .rsplit(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default();
    tested || defaulted || matches!(keyword, "if" | "elif")
}

/// The span of `name` where it first appears as a whole word inside `range`, else of the range.
fn name_in(text: &str, place: Place, range: Option<Range<usize>>, name: &str) -> Span {
    let Some(range) = range else {
        return place.whole;
    };
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = text.as_bytes();
    let inside = text.get(range.clone()).unwrap_or_default();
    let found = inside
        .match_indices(name)
        .map(|(i, _)| range.start + i)
        .find(|&start| {
            let end = start + name.len();
            (start == 0 || !is_word(bytes[start - 1]))
                && bytes.get(end).is_none_or(|&b| !is_word(b))
        });
    match found {
        Some(start) => place.span(text, Some(start..start + name.len())),
        None => place.span(text, Some(range)),
    }
}

/// The help that lists the prompt variables.
fn variables_help(vars: &BTreeMap<String, String>) -> String {
    let mut help = format!(
        "the prompt variables are {}",
        PROMPT_VARIABLES
            .iter()
            .map(|v| format!("`{v}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if !vars.is_empty() {
        help.push_str(", and the phase's `vars`: ");
        help.push_str(
            &vars
                .keys()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    help
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suggested_filters_and_tests_exist() {
        let env = prompt_environment(&BTreeMap::new());
        for name in FILTERS {
            assert!(exists(&env, name, false), "filter {name}");
        }
        for name in TESTS {
            assert!(exists(&env, name, true), "test {name}");
        }
        assert!(!exists(&env, "uper", false));
        assert!(!exists(&env, "evn", true));
    }

    #[test]
    fn uses_are_read_from_the_compiled_template() {
        let env = prompt_environment(&BTreeMap::new());
        let text = "{% set x = 1 %}{{ feedbak | uper }}{% if vars.lang is evn %}{{ x }}{% endif %}\
                    {% include \"a.md\" %}{% include [\"b.md\", \"c.md\"] ignore missing %}\
                    {% include name %}{# {{ hidden }} #}{% raw %}{{ raw }}{% endraw %}";
        let uses = uses(&env, text).unwrap();
        // MiniJinja's analysis leaves out an include's name: a computed name is reported as such.
        assert_eq!(
            uses.variables
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            ["feedbak", "vars.lang"]
        );
        assert_eq!(uses.filters[0].0, "uper");
        let range = uses.filters[0].1.clone().unwrap();
        assert_eq!(&text[range], "uper");
        assert_eq!(uses.tests[0].0, "evn");
        let includes: Vec<(Option<Vec<String>>, bool)> = uses
            .includes
            .iter()
            .map(|i| (i.names.clone(), i.ignore_missing))
            .collect();
        assert_eq!(
            includes,
            [
                (Some(vec!["a.md".to_owned()]), false),
                (Some(vec!["b.md".to_owned(), "c.md".to_owned()]), true),
                (None, false),
            ]
        );
        assert!(uses.assigned.contains("x"));
    }
}
