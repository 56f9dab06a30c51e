//! A phase's fingerprint: everything its work depends on, part by part, so that a change can be
//! named. The compiled phase and its agent (canonical JSON, flattened to named parts), the
//! environment the pipeline declares for it (secret values hashed), the first attempt's prompt
//! (rendered, without feedback), the content of its inputs, and the fingerprints of the phases
//! it depends on. The inherited environment of the shell is not part of it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::attempt::fingerprint_prompt;
use crate::model::{Input, Phase, Pipeline, Prompt, RemoteOrigin, Worker};
use crate::redact::Redactor;
use crate::store::passed::{FileStamp, PhaseRecord, RECORD_VERSION};
use crate::verify::gates::{clean, glob_files};
use crate::workspace::{FileStat, Stats, file_clock_now};

/// What a phase is now, before its inputs are read.
#[derive(Debug, Clone)]
pub(crate) struct Definition {
    /// Named parts of the compiled phase, its agent and its declared environment.
    pub parts: BTreeMap<String, String>,
    /// The template the phase was made from.
    pub template: Option<String>,
    /// The first attempt's prompt, redacted.
    pub prompt: String,
    /// BLAKE3 of the prompt before redaction.
    pub prompt_hash: String,
    /// The agent and template the phase takes from git repositories (``agent `claude` ``,
    /// ``template `python-module` ``), with the import and commit each came from. Not part of the
    /// digest: a pin that moves changes a phase only where its content changed.
    pub remote: BTreeMap<String, RemoteOrigin>,
}

/// The definition of `phase` as it stands in `pipeline`.
pub(crate) fn definition(pipeline: &Pipeline, phase: &Phase, redactor: &Redactor) -> Definition {
    let mut parts = BTreeMap::new();
    if let Ok(Value::Object(mut fields)) = serde_json::to_value(phase) {
        for key in [
            "name",
            "prompt",
            "prompt-includes",
            "prompt_includes",
            "template",
            "attempts",
            "made-by",
        ] {
            fields.remove(key);
        }
        flatten("", &Value::Object(fields), &mut parts);
    }
    attempt_blocks(pipeline, phase, &mut parts);
    if let Some(item) = phase.item() {
        // The item's value, once: the variables that carry it to shell commands follow from
        // it, and its place in the list is not part of its work (a prompt that shows it
        // changes with it).
        parts.retain(|part, _| !part.starts_with("env.HELIXFLOW_ITEM"));
        // Unless a command or the agent's argv shows it.
        if parts
            .values()
            .any(|v| v.contains("${HELIXFLOW_ITEM_INDEX}") || v.contains("item.index"))
        {
            parts.insert("item.index".to_owned(), item.index.to_string());
        }
        match &item.value {
            Value::Object(fields) => {
                for (field, value) in fields {
                    parts.insert(format!("item.{field}"), text(value));
                }
            }
            value => {
                parts.insert("item".to_owned(), text(value));
            }
        }
    }
    if let Worker::Agent(name) = &phase.worker
        && let Some(agent) = pipeline.agents.get(&name.value)
        && let Ok(Value::Object(mut fields)) = serde_json::to_value(agent)
    {
        fields.remove("name");
        fields.remove("file");
        flatten("agent", &Value::Object(fields), &mut parts);
    }
    for (name, value) in &pipeline.env {
        parts.insert(format!("pipeline env.{name}"), value.clone());
    }
    // Secret values: only their hash is kept.
    for (part, value) in &mut parts {
        let name = part.rsplit_once("env.").map(|(_, name)| name);
        if name.is_some_and(|name| pipeline.secrets.iter().any(|s| s == name)) {
            *value = format!("secret, blake3 {}", &hex(value.as_bytes())[..16]);
        }
    }
    let prompt = match phase.worker {
        // A `for-each` phase's prompt is rendered for each item: its own is the template.
        Worker::Agent(_) if phase.for_each.is_some() => {
            phase.prompt.as_ref().map_or("", Prompt::text).to_owned()
        }
        Worker::Agent(_) => fingerprint_prompt(phase)
            .unwrap_or_else(|e| format!("(the prompt cannot be rendered: {e})")),
        Worker::Run(_) => String::new(),
    };
    Definition {
        parts,
        template: phase.template.clone(),
        prompt_hash: hex(prompt.as_bytes()),
        prompt: redactor.redact(&prompt),
        remote: remote_origins(pipeline, phase),
    }
}

/// The `attempt` blocks of a phase as named parts, each by its range (`` attempt `3..` agent ``),
/// with the definition of each agent a block names: a tier is part of the phase's definition.
fn attempt_blocks(pipeline: &Pipeline, phase: &Phase, parts: &mut BTreeMap<String, String>) {
    for block in &phase.attempts {
        let prefix = format!("attempt `{}`", block.label());
        if let Ok(Value::Object(mut fields)) = serde_json::to_value(block) {
            fields.remove("range");
            fields.remove("from");
            for (key, value) in &fields {
                flatten(&format!("{prefix} {key}"), value, parts);
            }
        }
        if let Some(agent) = block
            .agent
            .as_ref()
            .and_then(|a| pipeline.agents.get(&a.value))
            && let Ok(Value::Object(mut fields)) = serde_json::to_value(agent)
        {
            fields.remove("name");
            fields.remove("file");
            flatten(&format!("{prefix} agent"), &Value::Object(fields), parts);
        }
    }
}

/// The agent and template of `phase` that came from git repositories, with where each came from.
fn remote_origins(pipeline: &Pipeline, phase: &Phase) -> BTreeMap<String, RemoteOrigin> {
    let mut found = BTreeMap::new();
    if let Worker::Agent(name) = &phase.worker
        && let Some(origin) = pipeline.remote.agents.get(&name.value)
    {
        found.insert(format!("agent `{}`", name.value), origin.clone());
    }
    if let Some(template) = &phase.template
        && let Some(origin) = pipeline.remote.templates.get(template)
    {
        found.insert(format!("template `{template}`"), origin.clone());
    }
    found
}

/// Flattens a JSON value into named parts: objects by key (`agent.command`), each gate by its
/// name (``gate `tests` command``), other arrays and scalars as compact JSON.
fn flatten(prefix: &str, value: &Value, out: &mut BTreeMap<String, String>) {
    let join = |key: &str| {
        if prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{prefix}.{key}")
        }
    };
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                flatten(&join(key), value, out);
            }
        }
        Value::Array(items) if prefix == "gates" => {
            for (i, item) in items.iter().enumerate() {
                let mut item = item.clone();
                let name = item
                    .as_object_mut()
                    .and_then(|o| o.remove("name"))
                    .and_then(|n| n.as_str().map(str::to_owned))
                    .unwrap_or_else(|| i.to_string());
                if let Value::Object(fields) = item {
                    for (key, value) in fields {
                        // A `command` gate's command is serialized as `run`.
                        let key = if key == "run" { "command" } else { &key };
                        out.insert(format!("gate `{name}` {key}"), text(&value));
                    }
                }
            }
        }
        other => {
            out.insert(prefix.to_owned(), text(other));
        }
    }
}

/// A JSON value as a person reads it: strings without quotes.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// BLAKE3 in hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// The workspace-relative paths a phase reads: its `inputs`, or by default the outputs of the
/// phases it depends on and its prompt file.
pub(crate) fn input_paths(
    pipeline: &Pipeline,
    phase: &Phase,
    exclude: &[PathBuf],
    stats: &Stats,
) -> Vec<String> {
    let workspace = &pipeline.workspace;
    let mut paths: Vec<String> = Vec::new();
    if let Some(inputs) = &phase.inputs {
        let mut globs = Vec::new();
        for input in inputs {
            match input {
                Input::File { path } => paths.push(clean(path)),
                Input::Glob { pattern } => globs.push(pattern.clone()),
            }
        }
        if !globs.is_empty() {
            paths.extend(glob_files(workspace, exclude, &globs).unwrap_or_default());
        }
    } else {
        for dependency in &phase.depends_on {
            if let Some(upstream) = pipeline.phase(&dependency.value) {
                paths.extend(crate::verify::gates::existing_outputs(
                    workspace, upstream, exclude, stats,
                ));
            }
        }
        if let Some(Prompt::File { path, .. }) = &phase.prompt {
            paths.push(clean(&path.to_string_lossy()));
        }
    }
    paths.sort();
    paths.dedup();
    paths
}

/// Whether the record of `phase`, once it passed having changed no file, stamps no file: it
/// declares no outputs, and no inputs (or none of its dependencies declares outputs and its
/// prompt is no file). Such a record is written in no time.
pub(crate) fn stamps_no_file(pipeline: &Pipeline, phase: &Phase) -> bool {
    let no_inputs = match &phase.inputs {
        Some(inputs) => inputs.is_empty(),
        None => {
            !matches!(phase.prompt, Some(Prompt::File { .. }))
                && phase.depends_on.iter().all(|dependency| {
                    pipeline
                        .phase(&dependency.value)
                        .is_none_or(|upstream| upstream.outputs.is_empty())
                })
        }
    };
    no_inputs && phase.outputs.is_empty()
}

/// The paths of a phase's own outputs that exist now.
pub(crate) fn output_paths(
    pipeline: &Pipeline,
    phase: &Phase,
    exclude: &[PathBuf],
    stats: &Stats,
) -> Vec<String> {
    crate::verify::gates::existing_outputs(&pipeline.workspace, phase, exclude, stats)
}

/// Stamps of the files at `paths` that exist (an absent file has none). A file whose metadata
/// proves it unchanged since its stamp in `known` was taken (size, modification and inode change
/// times, inode number, and a change well before it was read: [`FileStat::unchanged`]) keeps that
/// stamp, unread; any other is read and hashed.
pub(crate) fn stamps(
    workspace: &Path,
    paths: &[String],
    known: Option<&BTreeMap<String, FileStamp>>,
    stats: &Stats,
) -> BTreeMap<String, FileStamp> {
    let mut out = BTreeMap::new();
    for path in paths {
        let full = workspace.join(path);
        let Some(meta) = stats.metadata(&full) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let stat = FileStat::of(&meta);
        if let Some(stamp) = known
            .and_then(|k| k.get(path))
            .filter(|s| s.stat().unchanged(s.read_ns, &stat))
        {
            out.insert(path.clone(), stamp.clone());
            continue;
        }
        let read_ns = file_clock_now();
        let Ok(hash) = hash_file(&full) else {
            continue;
        };
        out.insert(
            path.clone(),
            FileStamp {
                size: stat.size,
                mtime_ns: stat.mtime_ns,
                ctime_ns: stat.ctime_ns,
                inode: stat.inode,
                read_ns,
                hash,
            },
        );
    }
    out
}

fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut hasher = blake3::Hasher::new();
    let mut file = std::fs::File::open(path)?;
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hasher.finalize().to_hex().to_string())
}

/// The fingerprint recorded for a dependency that has no record of a pass.
pub(crate) const NOT_PASSED: &str = "none";

/// The fingerprint of each phase `phase` depends on, as `fingerprint_of` finds it in the
/// records ([`NOT_PASSED`] for one that has no record of a pass).
pub(crate) fn upstream(
    phase: &Phase,
    mut fingerprint_of: impl FnMut(&str) -> Option<String>,
) -> BTreeMap<String, String> {
    phase
        .depends_on
        .iter()
        .map(|d| {
            let fingerprint = fingerprint_of(&d.value).unwrap_or_else(|| NOT_PASSED.to_owned());
            (d.value.clone(), fingerprint)
        })
        .collect()
}

/// The one hash of a definition, inputs and upstream fingerprints.
pub(crate) fn digest(
    definition: &Definition,
    inputs: &BTreeMap<String, FileStamp>,
    upstream: &BTreeMap<String, String>,
) -> String {
    let mut hasher = blake3::Hasher::new();
    let mut field = |label: &str, value: &str| {
        hasher.update(label.as_bytes());
        hasher.update(&[0]);
        hasher.update(&(value.len() as u64).to_le_bytes());
        hasher.update(value.as_bytes());
    };
    for (part, value) in &definition.parts {
        field(&format!("part {part}"), value);
    }
    field("template", definition.template.as_deref().unwrap_or(""));
    field("prompt", &definition.prompt_hash);
    for (path, stamp) in inputs {
        field(&format!("input {path}"), &stamp.hash);
    }
    for (phase, fingerprint) in upstream {
        field(&format!("upstream {phase}"), fingerprint);
    }
    hasher.finalize().to_hex().to_string()
}

/// The record of a phase that just passed.
pub(crate) fn record(
    pipeline: &Pipeline,
    phase: &Phase,
    run_id: &str,
    redactor: &Redactor,
    exclude: &[PathBuf],
    upstream: BTreeMap<String, String>,
    work: &[String],
) -> PhaseRecord {
    let definition = definition(pipeline, phase, redactor);
    // Looked up afresh: the files as the phase left them.
    let stats = Stats::default();
    let inputs = stamps(
        &pipeline.workspace,
        &input_paths(pipeline, phase, exclude, &stats),
        None,
        &stats,
    );
    // A phase that declares no outputs has the files it made or changed as its outputs: one
    // whose work someone undid since is not up to date. (Declared outputs say what a phase's
    // result is; the other files it touched then are incidental.)
    let mut paths = output_paths(pipeline, phase, exclude, &stats);
    if phase.outputs.is_empty() {
        paths.extend(work.iter().cloned());
    }
    paths.sort();
    paths.dedup();
    let outputs = stamps(&pipeline.workspace, &paths, None, &stats);
    PhaseRecord {
        version: RECORD_VERSION,
        phase: phase.name.value.clone(),
        run_id: run_id.to_owned(),
        fingerprint: digest(&definition, &inputs, &upstream),
        definition: definition.parts,
        template: definition.template,
        prompt: definition.prompt,
        prompt_hash: definition.prompt_hash,
        remote: definition.remote,
        inputs,
        outputs,
        upstream,
    }
}

/// The record of a `for-each` phase whose items all passed: its definition, its dependencies,
/// and each item's fingerprint as an upstream of its own, so that its fingerprint (what its
/// dependents record) changes when an item ran again, came or went.
pub(crate) fn fan_out_record(
    pipeline: &Pipeline,
    phase: &Phase,
    run_id: &str,
    redactor: &Redactor,
    mut upstream: BTreeMap<String, String>,
    items: BTreeMap<String, String>,
) -> PhaseRecord {
    let definition = definition(pipeline, phase, redactor);
    upstream.extend(items);
    PhaseRecord {
        version: RECORD_VERSION,
        phase: phase.name.value.clone(),
        run_id: run_id.to_owned(),
        fingerprint: digest(&definition, &BTreeMap::new(), &upstream),
        definition: definition.parts,
        template: definition.template,
        prompt: definition.prompt,
        prompt_hash: definition.prompt_hash,
        inputs: BTreeMap::new(),
        outputs: BTreeMap::new(),
        upstream,
        remote: remote_origins(pipeline, phase),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_said_to_stamp_no_file_stamps_none_and_the_others_do() {
        let dir = tempfile::tempdir().unwrap();
        for file in ["made.txt", "read.txt", "prompt.md"] {
            std::fs::write(dir.path().join(file), file).unwrap();
        }
        let text = r#"pipeline "p"
phase "makes" {
    run "true"
    outputs { file "made.txt"; }
}
phase "after-makes" {
    run "true"
    depends-on "makes"
}
phase "alone" {
    run "true"
}
phase "after-alone" {
    run "true"
    depends-on "alone"
}
phase "reads" {
    run "true"
    inputs { file "read.txt"; }
}
phase "reads-nothing" {
    run "true"
    depends-on "makes"
    inputs {}
}
phase "prompted" {
    agent "claude-code"
    prompt file="prompt.md"
}
"#;
        let pipeline = crate::language::compile(
            &dir.path().join("pipeline.kdl"),
            text,
            &crate::language::FsLoader,
            crate::language::Options::default(),
        )
        .pipeline
        .expect("compiles");
        let mut quick = Vec::new();
        for phase in pipeline.phases.iter() {
            let record = record(
                &pipeline,
                phase,
                "r",
                &Redactor::default(),
                &[],
                BTreeMap::new(),
                &[],
            );
            let stamps_none = record.inputs.is_empty() && record.outputs.is_empty();
            assert_eq!(
                stamps_no_file(&pipeline, phase),
                stamps_none,
                "{}",
                phase.name.value
            );
            if stamps_none {
                quick.push(phase.name.value.as_str());
            }
        }
        assert_eq!(quick, ["alone", "after-alone", "reads-nothing"]);
    }

    #[test]
    fn a_stamp_is_reused_only_while_the_metadata_proves_the_file_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("out.txt");
        std::fs::write(&file, "one").unwrap();
        let paths = vec!["out.txt".to_owned()];
        let mut known = stamps(dir.path(), &paths, None, &Stats::default());
        // As if it had been read well after it last changed: out of the racy window.
        known.get_mut("out.txt").unwrap().read_ns += 10_000_000_000;
        assert_eq!(
            stamps(dir.path(), &paths, Some(&known), &Stats::default()),
            known
        );

        // Another writer: the same size, other bytes, the modification time put back. Only the
        // inode change time tells.
        let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
        std::fs::write(&file, "two").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        let now = stamps(dir.path(), &paths, Some(&known), &Stats::default());
        assert_eq!(now["out.txt"].mtime_ns, known["out.txt"].mtime_ns);
        assert_eq!(now["out.txt"].hash, hex(b"two"));
    }
}
