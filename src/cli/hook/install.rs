//! `helixflow hook install` and `uninstall`: helixflow's Stop hook merged into the project's
//! `.claude/settings.json` (Claude Code) or `.codex/hooks.json` (Codex), next to whatever else is
//! there, and taken out again without touching the rest. A hook is helixflow's when its command
//! is `helixflow hook claude-stop …` (or `codex-stop`, by any path to helixflow).

use std::path::{Path, PathBuf};

use super::json::Json;
use super::{Cli, InstallArgs, UninstallArgs};
use crate::cli::failure::{Failure, Outcome};

/// How long the agent's CLI lets the hook run, in seconds, as written into its settings: the
/// hook's own `--timeout` (5 minutes by default) is well inside it.
const HOOK_LIMIT_SECS: u64 = 600;

impl Cli {
    /// The settings file, relative to the project folder.
    fn settings(self) -> &'static str {
        match self {
            Cli::Claude => ".claude/settings.json",
            Cli::Codex => ".codex/hooks.json",
        }
    }
}

/// The project folder (the pipeline file's) and the pipeline file's argument in the hook's
/// command: none when the hook finds that very file by itself.
fn project(file: Option<PathBuf>) -> Result<(PathBuf, Option<String>), String> {
    let path = crate::cli::pipeline_path(file)?;
    let path =
        std::fs::canonicalize(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let folder = path
        .parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_owned);
    let found = crate::cli::pipeline_path_from(&folder).ok();
    let argument = if found.as_deref() == Some(path.as_path()) {
        None
    } else {
        Some(
            path.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        )
    };
    Ok((folder, argument))
}

/// The hook's command line, as a shell reads it.
fn command(cli: Cli, phase: Option<&str>, file: Option<&str>) -> String {
    let mut words = vec![
        crate::engine::helixflow_program(),
        "hook".to_owned(),
        cli.subcommand().to_owned(),
    ];
    if let Some(phase) = phase {
        words.push("--phase".to_owned());
        words.push(phase.to_owned());
    }
    if let Some(file) = file {
        words.push(file.to_owned());
    }
    words
        .iter()
        .map(|w| shell_word(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `word` as one shell word: as it is when it needs no quotes, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Whether a hook command is helixflow's Stop hook for `cli`.
fn is_ours(cli: Cli, command: &str) -> bool {
    let words: Vec<String> = shell_words(command);
    let program = words.first().map(|w| Path::new(w.as_str()));
    program
        .and_then(Path::file_name)
        .is_some_and(|n| n == "helixflow")
        && words.get(1).is_some_and(|w| w == "hook")
        && words.get(2).is_some_and(|w| w == cli.subcommand())
}

/// The words of a command as `command` writes them (plain words, single quotes, `\'`).
fn shell_words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut any = false;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            '\\' if !quoted => word.extend(chars.next()),
            c if c.is_whitespace() && !quoted => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

/// The settings file's text and value; an empty object when it does not exist.
fn read_settings(path: &Path) -> Result<(Option<String>, Json), String> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok((Some(text), Json::Object(Vec::new()))),
        Ok(text) => {
            let json = Json::parse(&text).map_err(|e| {
                format!(
                    "{} is not valid JSON ({e}); nothing was changed",
                    path.display()
                )
            })?;
            if !matches!(json, Json::Object(_)) {
                return Err(format!(
                    "{} does not hold a JSON object; nothing was changed",
                    path.display()
                ));
            }
            Ok((Some(text), json))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((None, Json::Object(Vec::new()))),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The hook handler helixflow adds.
fn handler(command: &str) -> Json {
    Json::Object(vec![
        ("type".to_owned(), Json::String("command".to_owned())),
        ("command".to_owned(), Json::String(command.to_owned())),
        ("timeout".to_owned(), Json::Number(HOOK_LIMIT_SECS.into())),
    ])
}

/// The handlers of every matcher group of `Stop`, with where they are.
fn stop_groups(settings: &mut Json) -> Option<&mut Vec<Json>> {
    match settings
        .entry("hooks", Json::Object(Vec::new()))?
        .entry("Stop", Json::Array(Vec::new()))?
    {
        Json::Array(groups) => Some(groups),
        _ => None,
    }
}

/// Puts `wanted` in the settings in place of helixflow's hooks for `cli` (the first one keeps
/// its place, any other is removed), or adds it in a matcher group of its own.
fn merge(settings: &mut Json, cli: Cli, wanted: &Json) -> Result<(), String> {
    let groups = stop_groups(settings).ok_or(
        "its `hooks` or `hooks.Stop` is not what Claude Code and Codex read (an object of arrays)",
    )?;
    let mut placed = false;
    for group in groups.iter_mut() {
        let Some(Json::Array(handlers)) = group.entry("hooks", Json::Array(Vec::new())) else {
            continue;
        };
        handlers.retain_mut(|h| {
            if !h
                .get("command")
                .and_then(Json::as_str)
                .is_some_and(|c| is_ours(cli, c))
            {
                return true;
            }
            if placed {
                return false;
            }
            *h = wanted.clone();
            placed = true;
            true
        });
    }
    groups.retain(|g| !g.get("hooks").is_some_and(Json::is_empty_container));
    if !placed {
        groups.push(Json::Object(vec![(
            "hooks".to_owned(),
            Json::Array(vec![wanted.clone()]),
        )]));
    }
    Ok(())
}

/// Takes helixflow's hooks for `cli` out of the settings, and the groups, the `Stop` list and the
/// `hooks` object that only they were in. Returns how many were removed.
fn remove(settings: &mut Json, cli: Cli) -> usize {
    let mut removed = 0;
    let Some(Json::Array(groups)) = settings.get("hooks").and_then(|h| h.get("Stop")).cloned()
    else {
        return 0;
    };
    let mut kept_groups = Vec::new();
    for mut group in groups {
        if let Some(Json::Array(handlers)) = group.get("hooks").cloned() {
            let before = handlers.len();
            let kept: Vec<Json> = handlers
                .into_iter()
                .filter(|h| {
                    !h.get("command")
                        .and_then(Json::as_str)
                        .is_some_and(|c| is_ours(cli, c))
                })
                .collect();
            removed += before - kept.len();
            if kept.is_empty() && before > 0 {
                continue;
            }
            if let Some(slot) = group.entry("hooks", Json::Null) {
                *slot = Json::Array(kept);
            }
        }
        kept_groups.push(group);
    }
    if removed == 0 {
        return 0;
    }
    let hooks = settings
        .entry("hooks", Json::Object(Vec::new()))
        .expect("the settings are an object");
    if kept_groups.is_empty() {
        hooks.remove("Stop");
    } else if let Some(stop) = hooks.entry("Stop", Json::Null) {
        *stop = Json::Array(kept_groups);
    }
    if hooks.is_empty_container() {
        settings.remove("hooks");
    }
    removed
}

/// Writes `text` to `path` through a temporary file and a rename, making its folder.
fn write(path: &Path, text: &str) -> Result<(), String> {
    let folder = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder)
        .and_then(|()| crate::store::run::write_atomic(path, text.as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The change as a unified diff of the file.
fn diff(path: &Path, before: Option<&str>, after: &str) -> String {
    let name = path.display().to_string();
    similar::TextDiff::from_lines(before.unwrap_or(""), after)
        .unified_diff()
        .header(if before.is_some() { &name } else { "/dev/null" }, &name)
        .to_string()
}

pub(super) fn install(args: &InstallArgs) -> Outcome {
    let (folder, file) = match project(args.file.clone()) {
        Ok(found) => found,
        Err(e) => return Err(Failure::usage(e)),
    };
    if let Some(phase) = &args.phase {
        super::known_phase(args.file.clone(), phase)?;
    }
    let path = folder.join(args.cli.settings());
    let (before, mut settings) = match read_settings(&path) {
        Ok(read) => read,
        Err(e) => return Err(Failure::usage(e)),
    };
    let command = command(args.cli, args.phase.as_deref(), file.as_deref());
    if let Err(e) = merge(&mut settings, args.cli, &handler(&command)) {
        return Err(Failure::usage(format!(
            "{} cannot take the hook: {e}; nothing was changed",
            path.display()
        )));
    }
    let after = settings.pretty();
    let unchanged = before
        .as_deref()
        .is_some_and(|b| Json::parse(b).ok() == Json::parse(&after).ok());
    if args.dry_run {
        let text = if unchanged {
            format!(
                "{} already has the hook: nothing to change\n",
                path.display()
            )
        } else {
            diff(&path, before.as_deref(), &after)
        };
        return crate::cli::emit(&text);
    }
    if unchanged {
        return crate::cli::emit(&format!(
            "{} already has the hook: `{command}`\n",
            path.display()
        ));
    }
    if let Err(e) = write(&path, &after) {
        return Err(Failure::usage(e));
    }
    let mut out = format!(
        "installed the Stop hook `{command}` in {}\n",
        path.display()
    );
    if args.cli == Cli::Codex {
        out.push_str(
            "Codex runs it in a trusted project (`[projects.\"<folder>\"] trust_level = \"trusted\"` in its \
             config.toml) once the hook is trusted too: review it with `/hooks` in Codex \
             (`codex exec --dangerously-bypass-hook-trust` runs hooks without the review)\n",
        );
    }
    crate::cli::emit(&out)
}

pub(super) fn uninstall(args: &UninstallArgs) -> Outcome {
    let (folder, _) = match project(args.file.clone()) {
        Ok(found) => found,
        Err(e) => return Err(Failure::usage(e)),
    };
    let path = folder.join(args.cli.settings());
    let (before, mut settings) = match read_settings(&path) {
        Ok(read) => read,
        Err(e) => return Err(Failure::usage(e)),
    };
    let removed = remove(&mut settings, args.cli);
    if removed == 0 {
        return crate::cli::emit(&format!(
            "{} has no helixflow hook: nothing to remove\n",
            path.display()
        ));
    }
    let after = settings.pretty();
    if args.dry_run {
        return crate::cli::emit(&diff(&path, before.as_deref(), &after));
    }
    if let Err(e) = write(&path, &after) {
        return Err(Failure::usage(e));
    }
    crate::cli::emit(&format!(
        "removed helixflow's Stop hook from {} ({removed} entr{})\n",
        path.display(),
        if removed == 1 { "y" } else { "ies" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_through_quoting() {
        for word in ["plain", "two words", "it's", "", "a\"b", "$HOME"] {
            let command = format!("helixflow hook claude-stop --phase {}", shell_word(word));
            assert_eq!(shell_words(&command)[4], word, "{command}");
        }
        assert!(is_ours(
            Cli::Claude,
            "/usr/local/bin/helixflow hook claude-stop"
        ));
        assert!(!is_ours(Cli::Claude, "helixflow hook codex-stop"));
        assert!(!is_ours(Cli::Codex, "my-helixflow hook codex-stop"));
        assert!(!is_ours(Cli::Claude, "echo helixflow hook claude-stop"));
    }
}
