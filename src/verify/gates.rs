//! Running a phase's gates: the implicit `outputs`, `scope` and `protect` gates, then the declared
//! ones in order, each giving a [`GateReport`] whose details are precise enough to act on.
//!
//! Decisions the language contract leaves open:
//! - Paths are relative to the workspace and compared with `/` separators; globs use
//!   [`compile_glob`], so `*` stays within one folder and `**` crosses folders.
//! - `outputs` and `paths-exist` look at the file system for plain paths (so an output that the
//!   snapshot ignores still counts) and at the after-snapshot for globs and near misses.
//! - `from`, `paths-exist` and `front-matter` read the YAML front matter of a Markdown file (a block
//!   between `---` lines at the very top), or the whole document for `.yaml`/`.yml` files. A dotted
//!   key walks nested maps (`files.create`); a key that itself contains dots is found too. A key
//!   whose value is empty still counts as present.
//! - `sections` compares ATX headings (`#` … `######`, outside fenced code blocks and front matter)
//!   with the expected texts after trimming, ignoring closing `#`s and letter case. Setext headings
//!   (underlined with `===`) are not recognised.
//! - `syntax` checks only files in a supported language; when none is left it passes and says that
//!   nothing was checked (the lint warns about it statically). It never passes silently over an
//!   expected file that does not exist (the `outputs` gate fails for it): a pass names such files
//!   as not checked, and when nothing could be checked at all (the files are missing, or no file
//!   matches the globs) the gate is skipped, with the reason.
//! - `matches` on files matches multi-line (`^`/`$` at line ends) over each whole file, up to
//!   16 MiB of it; `absent` scans line by line. Both skip binary files (a NUL byte early on).
//! - A `command` gate that passes only after its `fix` ran passes, with a detail saying so.
//! - Every detail is redacted before it is reported.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use globset::{GlobSet, GlobSetBuilder};
use regex::{Regex, RegexBuilder};
use yaml_rust2::{Yaml, YamlLoader};

use crate::event::how_it_ended;
use crate::event::{ChildExit, GateReport, GateStatus};
use crate::glob::compile_glob;
use crate::language::escape_problem;
use crate::model::{Gate, GateKind, Output, Phase};
use crate::process::{self, Cancel, ChildSpec};
use crate::redact::Redactor;
use crate::verify::syntax::{self, Language, SyntaxError};
use crate::workspace::{Changes, ProtectedPaths, Snapshot, SnapshotOptions};

/// Largest part of a file `matches` and the front-matter gates read.
const READ_CAP: u64 = 16 * 1024 * 1024;
/// Most `absent` matches listed in one report.
const MAX_LISTED_MATCHES: usize = 20;
/// Most syntax errors listed in one report.
const MAX_LISTED_SYNTAX_ERRORS: usize = 25;
/// Most near misses named for one missing file.
const MAX_NEAR_MISSES: usize = 3;
/// Most lines of each stream of a failing command's output in its report.
const TAIL_LINES: usize = 40;
/// Most bytes of each stream of a failing command's output in its report.
const TAIL_BYTES: u64 = 4096;
/// Bytes looked at to tell a binary file (one with a NUL byte) from text.
const BINARY_SNIFF: usize = 8192;

/// Everything a gate may look at.
pub struct GateContext<'a> {
    /// The workspace root; every relative path is resolved against it.
    pub workspace: &'a Path,
    /// The phase whose gates run.
    pub phase: &'a Phase,
    /// The agent's final response (None for `run` steps).
    pub response: Option<&'a str>,
    /// The workspace before the attempt.
    pub before: &'a Snapshot,
    /// The workspace after the attempt.
    pub after: &'a Snapshot,
    /// What the attempt changed: the diff of `before` and `after`, without `bookkeeping`.
    pub changes: &'a Changes,
    /// What the attempt changed among the files its agent keeps for itself (`bookkeeping`):
    /// `scope` and `changes` do not count them; `protect` does.
    pub bookkeeping: &'a Changes,
    /// Pipeline env then phase env, added to helixflow's environment for gate commands.
    pub env: &'a [(std::ffi::OsString, std::ffi::OsString)],
    /// The attempt folder: command gates write `gate-<n>-<name>.stdout`/`.stderr` here.
    pub logs: &'a Path,
    /// Stops running gate commands when the run is cancelled.
    pub cancel: &'a Cancel,
    /// Removes secrets from command logs and from every detail.
    pub redactor: Arc<Redactor>,
    /// Time between TERM and KILL when a gate command is stopped.
    pub grace: Duration,
    /// Workspace-relative folders never listed (the state folder).
    pub exclude: &'a [PathBuf],
    /// The phases that ran at some time during the attempt. A change outside this phase's own
    /// `scope` and `outputs` that one of theirs claims is theirs: `scope` and `changes` leave it
    /// out. `protect` does not: a protected file stays byte-identical whoever changed it.
    pub alongside: &'a [&'a Phase],
}

/// Runs the implicit gates and the phase's gates in order, calling `on_report` as each finishes.
/// All run and all failures are reported together, unless the phase has fail_fast (then the rest
/// are reported as Skipped).
pub async fn run_gates(
    ctx: &GateContext<'_>,
    on_report: &mut (dyn FnMut(&GateReport) + Send),
) -> Vec<GateReport> {
    let planned = plan(ctx.phase);
    let mut reports = Vec::with_capacity(planned.len());
    let mut stopped: Option<&'static str> = None;
    let mut watch = ProtectWatch::new(ctx.phase);
    for (index, gate) in planned.iter().enumerate() {
        let started = Instant::now();
        if stopped.is_none() && ctx.cancel.is_cancelled() {
            stopped = Some("the run was cancelled");
        }
        let finding = match stopped {
            Some(reason) => Finding::skipped(reason),
            None => check(ctx, index + 1, gate, &mut watch).await,
        };
        if finding.status == GateStatus::Failed && ctx.phase.fail_fast {
            stopped = Some("an earlier gate failed and the phase has `fail-fast`");
        }
        if finding.cancelled {
            stopped = Some("the run was cancelled");
        }
        let report = GateReport {
            name: gate.name().to_owned(),
            kind: gate.kind().to_owned(),
            status: finding.status,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            details: finding
                .details
                .iter()
                .map(|d| ctx.redactor.redact(d))
                .collect(),
        };
        on_report(&report);
        reports.push(report);
    }
    reports
}

/// The paths the phase's outputs resolve to now (files, glob matches, paths listed by `from`
/// documents), relative to the workspace — used by `syntax` without globs, by receipts and by the
/// verifier later. Only paths that exist are returned, sorted and without duplicates; outputs that
/// cannot be resolved (a missing `from` document, a bad glob) contribute nothing.
pub fn resolve_outputs(workspace: &Path, phase: &Phase, exclude: &[PathBuf]) -> Vec<String> {
    let mut paths = BTreeSet::new();
    for output in &phase.outputs {
        match output {
            Output::File { path } => {
                let path = clean(path);
                if workspace.join(&path).is_file() {
                    paths.insert(path);
                }
            }
            Output::Glob { pattern, .. } => {
                if let Ok(found) = glob_files(workspace, exclude, std::slice::from_ref(pattern)) {
                    paths.extend(found);
                }
            }
            Output::From { doc, key } => {
                if let Ok(listed) = listed_paths(workspace, doc, key) {
                    paths.extend(listed.into_iter().filter(|p| workspace.join(p).is_file()));
                }
            }
        }
    }
    paths.into_iter().collect()
}

/// A gate in the order gates run: the implicit ones first.
enum Planned<'p> {
    Outputs,
    Scope,
    Protect,
    Declared(&'p Gate),
}

impl Planned<'_> {
    fn name(&self) -> &str {
        match self {
            Planned::Declared(gate) => &gate.name,
            implicit => implicit.kind(),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Planned::Outputs => "outputs",
            Planned::Scope => "scope",
            Planned::Protect => "protect",
            Planned::Declared(gate) => kind_name(&gate.kind),
        }
    }
}

/// The keyword a gate kind is written with.
fn kind_name(kind: &GateKind) -> &'static str {
    match kind {
        GateKind::Syntax { .. } => "syntax",
        GateKind::Command { .. } => "command",
        GateKind::Matches { .. } => "matches",
        GateKind::Absent { .. } => "absent",
        GateKind::FrontMatter { .. } => "front-matter",
        GateKind::Sections { .. } => "sections",
        GateKind::PathsExist { .. } => "paths-exist",
        GateKind::Changes { .. } => "changes",
        GateKind::Approval { .. } => "approval",
    }
}

fn plan(phase: &Phase) -> Vec<Planned<'_>> {
    let mut planned = Vec::with_capacity(phase.gates.len() + 3);
    if !phase.outputs.is_empty() {
        planned.push(Planned::Outputs);
    }
    if !phase.scope.is_empty() {
        planned.push(Planned::Scope);
    }
    if !phase.protect.is_empty() {
        planned.push(Planned::Protect);
    }
    planned.extend(phase.gates.iter().map(Planned::Declared));
    planned
}

/// What one gate found.
struct Finding {
    status: GateStatus,
    details: Vec<String>,
    /// The run was cancelled while the gate ran: later gates are skipped.
    cancelled: bool,
}

impl Finding {
    /// Failed when there are problems, else passed.
    fn from_problems(problems: Vec<String>) -> Self {
        let status = if problems.is_empty() {
            GateStatus::Passed
        } else {
            GateStatus::Failed
        };
        Self {
            status,
            details: problems,
            cancelled: false,
        }
    }

    fn passed_with(detail: String) -> Self {
        Self {
            status: GateStatus::Passed,
            details: vec![detail],
            cancelled: false,
        }
    }

    fn failed(detail: String) -> Self {
        Self::from_problems(vec![detail])
    }

    fn skipped(reason: impl Into<String>) -> Self {
        Self {
            status: GateStatus::Skipped,
            details: vec![reason.into()],
            cancelled: false,
        }
    }

    fn cancelled() -> Self {
        Self {
            cancelled: true,
            ..Self::skipped("stopped: the run was cancelled")
        }
    }
}

async fn check(
    ctx: &GateContext<'_>,
    number: usize,
    gate: &Planned<'_>,
    watch: &mut ProtectWatch,
) -> Finding {
    let gate = match gate {
        Planned::Outputs => return Finding::from_problems(outputs_gate(ctx)),
        Planned::Scope => return scope_gate(ctx),
        Planned::Protect => return protect_gate(ctx),
        Planned::Declared(gate) => gate,
    };
    match &gate.kind {
        GateKind::Syntax { globs } => syntax_gate(ctx, globs).await,
        GateKind::Command {
            run,
            timeout,
            cwd,
            fix,
        } => {
            let command = CommandGate {
                run,
                timeout: timeout.map(crate::model::Millis::duration),
                cwd: cwd.as_deref(),
                fix: fix.as_deref(),
                log_stem: format!(
                    "gate-{number}-{}",
                    file_safe(&ctx.redactor.redact(&gate.name))
                ),
            };
            let mut finding = command.check(ctx, watch).await;
            // `protect` was judged before this gate ran; what the gate did to a protected file
            // is judged here.
            if !watch.notes.is_empty() && !finding.cancelled {
                finding.status = GateStatus::Failed;
                finding.details.append(&mut watch.notes);
            }
            watch.notes.clear();
            finding
        }
        GateKind::Matches { target, pattern } => matches_gate(ctx, target, pattern).await,
        GateKind::Absent { target, pattern } => absent_gate(ctx, target, pattern).await,
        GateKind::FrontMatter { path, keys } => front_matter_gate(ctx.workspace, path, keys),
        GateKind::Sections { path, headings } => sections_gate(ctx.workspace, path, headings),
        GateKind::PathsExist { doc, key } => {
            let everywhere = std::cell::OnceCell::new();
            let all = || -> &[String] { everywhere.get_or_init(|| all_files(ctx)) };
            Finding::from_problems(missing_listed(ctx, doc, key, all))
        }
        GateKind::Changes { min } => changes_gate(ctx, *min),
        // A person decides (engine::approvals) once every other gate passed; the gate runner only
        // holds its place in the order.
        GateKind::Approval { .. } => {
            Finding::skipped("decided by a person once every other check passed")
        }
    }
}

/// Whether the phase's gate reported as `name` checks the agent's response, which exists only once
/// the agent has exited (so `helixflow verify`, run before that, cannot judge it).
pub fn checks_response(phase: &Phase, name: &str) -> bool {
    phase.gates.iter().any(|g| {
        g.name == name
            && matches!(&g.kind, GateKind::Matches { target, .. } | GateKind::Absent { target, .. } if target == "response")
    })
}

// ---------------------------------------------------------------------------------------------
// outputs, scope, protect, changes

fn outputs_gate(ctx: &GateContext<'_>) -> Vec<String> {
    let mut problems = Vec::new();
    // Every file on disk, ignored or not, listed once and only when an output is missing: the
    // near misses come from it (agents write into ignored folders like `build/` or `output/`).
    let everywhere = std::cell::OnceCell::new();
    let all = || -> &[String] { everywhere.get_or_init(|| all_files(ctx)) };
    for output in &ctx.phase.outputs {
        match output {
            Output::File { path } => {
                let path = clean(path);
                let full = ctx.workspace.join(&path);
                if full.is_dir() {
                    problems.push(format!("`{path}` is a folder; a file was expected"));
                } else if !full.is_file() {
                    problems.push(missing(&path, "", all()));
                }
            }
            Output::Glob { pattern, min } => {
                match glob_files(ctx.workspace, ctx.exclude, std::slice::from_ref(pattern)) {
                    Err(problem) => problems.push(problem),
                    Ok(found) => {
                        let found: Vec<&str> = found.iter().map(String::as_str).collect();
                        let min = usize::try_from(*min).unwrap_or(usize::MAX);
                        if found.len() < min {
                            problems.push(too_few_matches(all(), pattern, &found, min));
                        }
                    }
                }
            }
            Output::From { doc, key } => problems.extend(missing_listed(ctx, doc, key, all)),
        }
    }
    problems
}

/// A detail for each path listed under `key` in `doc` that does not exist, or why the list cannot
/// be had.
fn missing_listed<'f>(
    ctx: &GateContext<'_>,
    doc: &str,
    key: &str,
    all: impl Fn() -> &'f [String],
) -> Vec<String> {
    match listed_paths(ctx.workspace, doc, key) {
        Ok(paths) if paths.is_empty() => vec![format!(
            "`{doc}` lists no paths under `{key}`: an empty list of expected files never passes"
        )],
        Ok(paths) => paths
            .iter()
            .filter(|p| !ctx.workspace.join(p).exists())
            .map(|p| missing(p, &format!(" (listed under `{key}` in `{doc}`)"), all()))
            .collect(),
        Err(problem) => vec![problem],
    }
}

/// "missing `a/b.py`{note}", with same-named files found elsewhere in the workspace (`all`).
fn missing(path: &str, note: &str, all: &[String]) -> String {
    let mut detail = format!("missing `{path}`{note}");
    let name = path.rsplit('/').next().unwrap_or(path);
    let files = || all.iter().map(String::as_str);
    let same_name: Vec<&str> = files()
        .filter(|f| *f != path && f.rsplit('/').next() == Some(name))
        .collect();
    let (found, hint) = if same_name.is_empty() {
        let other_case: Vec<&str> = files()
            .filter(|f| {
                let other = f.rsplit('/').next().unwrap_or(f);
                other != name && other.eq_ignore_ascii_case(name)
            })
            .collect();
        (other_case, "wrong letter case?")
    } else {
        (same_name, "written to the wrong folder?")
    };
    if !found.is_empty() {
        let _ = write!(
            detail,
            "; found {} — {hint}",
            name_list(&found, MAX_NEAR_MISSES)
        );
    }
    detail
}

/// The detail for a glob output with fewer than `min` matches, naming files elsewhere whose
/// names match the glob's last part.
fn too_few_matches(all: &[String], pattern: &str, found: &[&str], min: usize) -> String {
    let mut detail = if found.is_empty() {
        format!("no file matches `{pattern}`; at least {min} expected")
    } else {
        format!(
            "`{pattern}` matches {} ({}); at least {min} expected",
            count(found.len(), "file"),
            name_list(found, 5)
        )
    };
    let last = pattern.rsplit('/').next().unwrap_or(pattern);
    if last != pattern
        && !last.contains("**")
        && let Ok(glob) = compile_glob(last)
    {
        let name_matcher = glob.compile_matcher();
        let elsewhere: Vec<&str> = all
            .iter()
            .map(String::as_str)
            .filter(|f| !found.contains(f))
            .filter(|f| name_matcher.is_match(f.rsplit('/').next().unwrap_or(f)))
            .collect();
        if !elsewhere.is_empty() {
            let _ = write!(
                detail,
                "; found {} — written to the wrong folder?",
                name_list(&elsewhere, MAX_NEAR_MISSES)
            );
        }
    }
    detail
}

/// Every changed path with what happened to it, in path order within each kind of change.
fn changed(changes: &Changes) -> impl Iterator<Item = (&str, &'static str)> {
    let created = changes.created.iter().map(|p| (p.as_str(), "created"));
    let modified = changes.modified.iter().map(|p| (p.as_str(), "modified"));
    let deleted = changes.deleted.iter().map(|p| (p.as_str(), "deleted"));
    created.chain(modified).chain(deleted)
}

/// The changes of an attempt that are another phase's: outside this phase's own `scope` and
/// `outputs`, and claimed by the `scope` or `outputs` of a phase that ran alongside it.
struct LeftToOthers<'c> {
    /// Each such path with the phase it is left to (the first in pipeline order that claims it).
    paths: BTreeMap<&'c str, &'c str>,
}

impl<'c> LeftToOthers<'c> {
    fn of(ctx: &GateContext<'c>) -> Self {
        let mut paths = BTreeMap::new();
        if ctx.alongside.is_empty() || ctx.changes.is_empty() {
            return Self { paths };
        }
        let own = claims(ctx.phase);
        let others: Vec<(&str, GlobSet)> = ctx
            .alongside
            .iter()
            .map(|phase| (phase.name.value.as_str(), claims(phase)))
            .collect();
        for (path, _) in changed(ctx.changes) {
            if own.is_match(path) {
                continue;
            }
            if let Some((name, _)) = others.iter().find(|(_, claim)| claim.is_match(path)) {
                paths.insert(path, *name);
            }
        }
        Self { paths }
    }

    fn contains(&self, path: &str) -> bool {
        self.paths.contains_key(path)
    }

    /// "1 change left to phase "b", which ran at the same time: `b/y`", one line per phase.
    fn notes(&self) -> Vec<String> {
        let mut by_phase: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (path, phase) in &self.paths {
            by_phase.entry(phase).or_default().push(path);
        }
        by_phase
            .into_iter()
            .map(|(phase, paths)| {
                format!(
                    "{} left to phase \"{phase}\", which ran at the same time: {}",
                    count(paths.len(), "change"),
                    name_list(&paths, 10)
                )
            })
            .collect()
    }
}

/// Whether a changed path is the work of a phase running alongside `phase`: outside `phase`'s
/// own `scope` and `outputs`, and claimed by one of theirs.
pub fn claimed_by_others(
    phase: &Phase,
    alongside: &[&Phase],
) -> impl Fn(&str) -> bool + Send + Sync + 'static {
    let own = claims(phase);
    let others: Vec<GlobSet> = alongside.iter().map(|p| claims(p)).collect();
    move |path: &str| !own.is_match(path) && others.iter().any(|claim| claim.is_match(path))
}

/// The files a phase declares as its own: its `scope` globs and its `file` and `glob` outputs.
/// Globs that do not compile claim nothing (the phase's own gates report them).
fn claims(phase: &Phase) -> GlobSet {
    let outputs = phase.outputs.iter().filter_map(|output| match output {
        Output::File { path } => Some(globset::escape(&clean(path))),
        Output::Glob { pattern, .. } => Some(clean(pattern)),
        Output::From { .. } => None,
    });
    let mut builder = GlobSetBuilder::new();
    for pattern in phase.scope.iter().map(|glob| clean(glob)).chain(outputs) {
        if let Ok(glob) = compile_glob(&pattern) {
            builder.add(glob);
        }
    }
    builder.build().unwrap_or_default()
}

fn scope_gate(ctx: &GateContext<'_>) -> Finding {
    let scope = &ctx.phase.scope;
    let set = match glob_set(scope) {
        Ok(set) => set,
        Err(problem) => return Finding::failed(problem),
    };
    let listed = scope
        .iter()
        .map(|g| format!("`{g}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let others = LeftToOthers::of(ctx);
    let mut finding = Finding::from_problems(
        changed(ctx.changes)
            .filter(|(path, _)| !set.is_match(path) && !others.contains(path))
            .map(|(path, how)| format!("`{path}` was {how}, but the phase's scope is {listed}"))
            .collect(),
    );
    finding.details.extend(others.notes());
    finding
}

fn protect_gate(ctx: &GateContext<'_>) -> Finding {
    let set = match glob_set(&ctx.phase.protect) {
        Ok(set) => set,
        Err(problem) => return Finding::failed(problem),
    };
    Finding::from_problems(
        changed(ctx.changes)
            .chain(changed(ctx.bookkeeping))
            .filter(|(path, _)| set.is_match(path))
            .map(|(path, how)| format!("protected file `{path}` was {how}"))
            .collect(),
    )
}

fn changes_gate(ctx: &GateContext<'_>, min: u32) -> Finding {
    let others = LeftToOthers::of(ctx);
    let paths: Vec<&str> = changed(ctx.changes)
        .map(|(path, _)| path)
        .filter(|path| !others.contains(path))
        .collect();
    let total = paths.len();
    let mut finding = if total >= usize::try_from(min).unwrap_or(usize::MAX) {
        Finding::from_problems(Vec::new())
    } else {
        let mut detail = format!(
            "the attempt changed {}; at least {min} expected",
            count(total, "file")
        );
        if total == 0 {
            detail.push_str(" — was the work done?");
        } else {
            let _ = write!(detail, " (changed: {})", name_list(&paths, 10));
        }
        Finding::failed(detail)
    };
    finding.details.extend(others.notes());
    finding
}

// ---------------------------------------------------------------------------------------------
// syntax

async fn syntax_gate(ctx: &GateContext<'_>, globs: &[String]) -> Finding {
    let (found, missing) = if globs.is_empty() {
        (
            resolve_outputs(ctx.workspace, ctx.phase, ctx.exclude),
            missing_outputs(ctx.workspace, ctx.phase),
        )
    } else {
        match glob_files(ctx.workspace, ctx.exclude, globs) {
            Ok(found) => (found, Vec::new()),
            Err(problem) => return Finding::failed(problem),
        }
    };
    // An expected file that is not there was not checked; the `outputs` gate fails for it.
    let not_checked = (!missing.is_empty()).then(|| {
        let names: Vec<&str> = missing.iter().map(String::as_str).collect();
        format!(
            "not checked: {} {} missing",
            name_list(&names, 10),
            if names.len() == 1 { "is" } else { "are" }
        )
    });
    let nothing_found = found.is_empty();
    let targets: Vec<String> = found
        .into_iter()
        .filter(|p| Language::for_path(Path::new(p)).is_some())
        .collect();
    if targets.is_empty() {
        return match not_checked {
            Some(note) => Finding::skipped(note),
            None if nothing_found && globs.is_empty() => {
                Finding::skipped("not checked: none of the phase's outputs exists")
            }
            None if nothing_found => {
                Finding::skipped("not checked: no file matches the gate's globs")
            }
            None => {
                let what = if globs.is_empty() {
                    "the phase's outputs"
                } else {
                    "the files matching the gate's globs"
                };
                Finding::passed_with(format!(
                    "0 files checked: none of {what} is in a supported language"
                ))
            }
        };
    }
    let workspace = ctx.workspace.to_owned();
    let parsed = tokio::task::spawn_blocking(move || parse_all(&workspace, targets)).await;
    let results = match parsed {
        Ok(results) => results,
        Err(error) => return Finding::failed(format!("the syntax check stopped: {error}")),
    };
    let total: usize = results.iter().map(|(_, errors)| errors.len()).sum();
    let mut details = Vec::new();
    for (path, errors) in &results {
        for error in errors {
            if details.len() == MAX_LISTED_SYNTAX_ERRORS {
                break;
            }
            details.push(error.render(path));
        }
    }
    if total > details.len() {
        let files = results.iter().filter(|(_, e)| !e.is_empty()).count();
        details.push(format!(
            "{} ({total} in all, in {})",
            more(total - details.len(), "syntax error"),
            count(files, "file")
        ));
    }
    // A failure's details are its syntax errors only (`verify --json` lists them as such); a pass
    // says what it did not cover.
    match not_checked {
        Some(note) if details.is_empty() => Finding::passed_with(note),
        _ => Finding::from_problems(details),
    }
}

/// The phase's expected files in a language the syntax gate parses that do not exist: `file`
/// outputs, and paths listed by `from` documents that can be read.
fn missing_outputs(workspace: &Path, phase: &Phase) -> Vec<String> {
    let mut missing = BTreeSet::new();
    let mut note = |path: String| {
        if Language::for_path(Path::new(&path)).is_some() && !workspace.join(&path).is_file() {
            missing.insert(path);
        }
    };
    for output in &phase.outputs {
        match output {
            Output::File { path } => note(clean(path)),
            Output::From { doc, key } => {
                for path in listed_paths(workspace, doc, key).unwrap_or_default() {
                    note(path);
                }
            }
            Output::Glob { .. } => {}
        }
    }
    missing.into_iter().collect()
}

/// Parses every file on as many threads as there are cores; returns each path with its errors,
/// in path order.
fn parse_all(workspace: &Path, mut paths: Vec<String>) -> Vec<(String, Vec<SyntaxError>)> {
    paths.sort();
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(paths.len())
        .max(1);
    let chunk = paths.len().div_ceil(workers);
    let mut results: Vec<(String, Vec<SyntaxError>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = paths
            .chunks(chunk)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|path| {
                            let errors = syntax::check_file(&workspace.join(path));
                            (path.clone(), errors.unwrap_or_default())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    results.sort_by(|a, b| a.0.cmp(&b.0));
    results
}

// ---------------------------------------------------------------------------------------------
// command

/// One `command` gate, ready to run.
struct CommandGate<'g> {
    run: &'g str,
    timeout: Option<Duration>,
    cwd: Option<&'g str>,
    fix: Option<&'g str>,
    /// `gate-<n>-<name>`: the start of its log files' names.
    log_stem: String,
}

/// One run of a shell command and where its output went.
struct ShellRun {
    exit: ChildExit,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl CommandGate<'_> {
    async fn check(&self, ctx: &GateContext<'_>, watch: &mut ProtectWatch) -> Finding {
        let cwd = match self.cwd {
            None => ctx.workspace.to_owned(),
            Some(cwd) => {
                let full = ctx.workspace.join(clean(cwd));
                if !full.is_dir() {
                    return Finding::failed(format!(
                        "the gate's working folder `{cwd}` does not exist"
                    ));
                }
                full
            }
        };
        let first = match self.shell(ctx, self.run, &cwd, "", watch).await {
            Ok(run) => run,
            Err(detail) => return Finding::failed(detail),
        };
        if first.exit.cancelled {
            return Finding::cancelled();
        }
        if first.exit.success() {
            return Finding::from_problems(Vec::new());
        }
        let Some(fix) = self.fix else {
            return Finding::failed(format!(
                "`{}` {}\n{}",
                self.run,
                ended(&first.exit, self.timeout),
                command_output(&first)
            ));
        };

        let fixed = match self.shell(ctx, fix, &cwd, ".fix", watch).await {
            Ok(run) => run,
            Err(detail) => {
                return Finding::failed(format!(
                    "`{}` {}; then the fix could not run: {detail}\n{}",
                    self.run,
                    ended(&first.exit, self.timeout),
                    command_output(&first)
                ));
            }
        };
        if fixed.exit.cancelled {
            return Finding::cancelled();
        }
        let second = match self.shell(ctx, self.run, &cwd, ".recheck", watch).await {
            Ok(run) => run,
            Err(detail) => return Finding::failed(detail),
        };
        if second.exit.cancelled {
            return Finding::cancelled();
        }
        let fix_said = if fixed.exit.success() {
            format!("the fix `{fix}` ran")
        } else {
            format!(
                "the fix `{fix}` ran and {}",
                ended(&fixed.exit, self.timeout)
            )
        };
        if second.exit.success() {
            return Finding::passed_with(format!(
                "`{}` {} at first; it passed after {fix_said}",
                self.run,
                ended(&first.exit, self.timeout)
            ));
        }
        let mut detail = format!(
            "`{}` {}; {fix_said}; then `{}` {} again\n{}",
            self.run,
            ended(&first.exit, self.timeout),
            self.run,
            ended(&second.exit, self.timeout),
            command_output(&second)
        );
        if !fixed.exit.success()
            && let Some(said) = output_tail(&fixed, "the fix's ")
        {
            let _ = write!(detail, "\n{said}");
        }
        Finding::failed(detail)
    }

    /// Runs `command` with the gate's limits, logging to `<stem><suffix>.stdout`/`.stderr`;
    /// `watch` notes each protected file that changed while it ran.
    async fn shell(
        &self,
        ctx: &GateContext<'_>,
        command: &str,
        cwd: &Path,
        suffix: &str,
        watch: &mut ProtectWatch,
    ) -> Result<ShellRun, String> {
        watch.start(ctx).await;
        let stdout = ctx.logs.join(format!("{}{suffix}.stdout", self.log_stem));
        let stderr = ctx.logs.join(format!("{}{suffix}.stderr", self.log_stem));
        let mut spec = ChildSpec::shell(command, cwd, &stdout, &stderr);
        spec.timeout = self.timeout;
        spec.env = ctx.env.to_vec();
        spec.redactor = Arc::clone(&ctx.redactor);
        spec.grace = ctx.grace;
        let ran = process::run(spec, ctx.cancel).await;
        let what = if suffix == ".fix" {
            format!("the fix `{command}`")
        } else {
            format!("`{command}`")
        };
        watch.look(ctx, &what).await;
        match ran {
            Ok(exit) => Ok(ShellRun {
                exit,
                stdout,
                stderr,
            }),
            Err(error) => Err(format!("`{command}` could not be started: {error}")),
        }
    }
}

/// Protected files as they were when last looked at, to catch a gate command or fix that changes
/// one: the `protect` gate judged them before any declared gate ran.
struct ProtectWatch {
    /// `None` when the phase protects nothing.
    protected: Option<ProtectedPaths>,
    /// The protected files when last looked at; `None` before the first command ran.
    last: Option<Snapshot>,
    /// A detail for each protected file changed by the gate running now.
    notes: Vec<String>,
}

impl ProtectWatch {
    fn new(phase: &Phase) -> Self {
        Self {
            protected: ProtectedPaths::new(&phase.protect).ok().flatten(),
            last: None,
            notes: Vec::new(),
        }
    }

    /// Takes note of the protected files before the first command runs.
    async fn start(&mut self, ctx: &GateContext<'_>) {
        if self.protected.is_some() && self.last.is_none() {
            match self.take(ctx).await {
                Ok((_, now)) => self.last = Some(now),
                Err(error) => self.notes.push(error),
            }
        }
    }

    /// Notes each protected file that changed while `what` (a command, named for people) ran.
    async fn look(&mut self, ctx: &GateContext<'_>, what: &str) {
        if self.protected.is_none() {
            return;
        }
        match self.take(ctx).await {
            Ok((Some(last), now)) => {
                let changes = last.diff(&now);
                self.notes.extend(changed(&changes).map(|(path, how)| {
                    format!(
                        "protected file `{path}` was {how} while {what} ran; protected files must \
                         stay byte-identical"
                    )
                }));
                self.last = Some(now);
            }
            Ok((None, now)) => self.last = Some(now),
            Err(error) => self.notes.push(error),
        }
    }

    /// The protected files now, walking only where they can be, and those last looked at.
    async fn take(
        &mut self,
        ctx: &GateContext<'_>,
    ) -> Result<(Option<Snapshot>, Snapshot), String> {
        let Some(protected) = self.protected.clone() else {
            return Ok((None, Snapshot::default()));
        };
        let last = self.last.take();
        let reuse = match &last {
            Some(last) => last.clone(),
            None => ctx.after.only_protected(&protected),
        };
        let options = SnapshotOptions {
            exclude: ctx.exclude.to_vec(),
            protected: Some(protected),
            only_protected: true,
            ..SnapshotOptions::default()
        };
        let workspace = ctx.workspace.to_owned();
        let taken =
            tokio::task::spawn_blocking(move || Snapshot::take(&workspace, &options, Some(&reuse)))
                .await;
        match taken {
            Ok(Ok(now)) => Ok((last, now)),
            Ok(Err(error)) => Err(format!("the protected files could not be checked: {error}")),
            Err(error) => Err(format!("the protected files could not be checked: {error}")),
        }
    }
}

/// "exited with code 1", "timed out after 5m and was stopped", "was ended by signal 9 (SIGKILL)".
fn ended(exit: &ChildExit, limit: Option<Duration>) -> String {
    if exit.timeout.is_some() {
        let limit = limit.unwrap_or(Duration::from_secs(exit.duration_ms / 1000));
        return format!(
            "timed out after {} and was stopped",
            humantime::format_duration(limit)
        );
    }
    how_it_ended(exit.code, exit.signal)
}

/// The labelled tails (`{whose}stdout:`, `{whose}stderr:`) of a run's standard output and
/// standard error; None when it wrote nothing.
fn output_tail(run: &ShellRun, whose: &str) -> Option<String> {
    let mut text = String::new();
    for (label, path) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        let tail = match process::tail(path, TAIL_BYTES) {
            Ok(tail) => {
                // A tail cut from a longer log starts mid-line: drop that partial line.
                let cut = std::fs::metadata(path).is_ok_and(|m| m.len() > TAIL_BYTES);
                match tail.split_once('\n') {
                    Some((_, rest)) if cut && !rest.trim().is_empty() => {
                        last_lines(rest, TAIL_LINES)
                    }
                    // One long last line: its end is what matters (an assertion, an error).
                    _ if cut => format!("…{}", last_lines(&tail, TAIL_LINES)),
                    _ => last_lines(&tail, TAIL_LINES),
                }
            }
            Err(error) => format!("(could not read {}: {error})", path.display()),
        };
        if tail.trim().is_empty() {
            continue;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        let _ = write!(text, "{whose}{label}:\n{tail}");
    }
    (!text.is_empty()).then_some(text)
}

/// The output tail of a run of the gate's command, which says so when there was none.
fn command_output(run: &ShellRun) -> String {
    output_tail(run, "").unwrap_or_else(|| "(no output)".to_owned())
}

/// The last `max` lines of `text`, without trailing blank lines.
fn last_lines(text: &str, max: usize) -> String {
    let text = text.trim_end();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(max);
    lines[start..].join("\n")
}

// ---------------------------------------------------------------------------------------------
// matches, absent

/// What a `matches` or `absent` gate looks at.
enum Target<'t> {
    Response(&'t str),
    Files(Vec<String>),
}

/// Resolves a gate's TARGET: the response, a glob over the after-snapshot, or a plain path.
fn target<'t>(ctx: &GateContext<'t>, target: &str) -> Result<Target<'t>, String> {
    if target == "response" {
        return ctx.response.map(Target::Response).ok_or_else(|| {
            "there is no agent response to check: this phase is a `run` step".to_owned()
        });
    }
    let path = clean(target);
    let mut files: BTreeSet<String> = BTreeSet::new();
    if target.contains(['*', '?', '[', '{']) {
        files.extend(glob_files(
            ctx.workspace,
            ctx.exclude,
            std::slice::from_ref(&path),
        )?);
    }
    if ctx.workspace.join(&path).is_file() {
        files.insert(path);
    }
    Ok(Target::Files(files.into_iter().collect()))
}

/// The regex of a `matches` or `absent` pattern: `^` and `$` match at every line's start and end,
/// whether lines end with `\n` or `\r\n`.
fn line_regex(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .multi_line(true)
        .crlf(true)
        .build()
}

async fn matches_gate(ctx: &GateContext<'_>, target_text: &str, pattern: &str) -> Finding {
    let regex = match line_regex(pattern) {
        Ok(regex) => regex,
        Err(error) => return Finding::failed(format!("invalid pattern `{pattern}`: {error}")),
    };
    match target(ctx, target_text) {
        Err(problem) => Finding::failed(problem),
        Ok(Target::Response(response)) => {
            if regex.is_match(response) {
                return Finding::from_problems(Vec::new());
            }
            let ending = if response.trim().is_empty() {
                "; the response is empty".to_owned()
            } else {
                format!("; the response ended with:\n{}", last_lines(response, 10))
            };
            Finding::failed(format!("the response does not match `{pattern}`{ending}"))
        }
        Ok(Target::Files(files)) if files.is_empty() => Finding::failed(format!(
            "`{target_text}` matches no file, so `{pattern}` cannot match"
        )),
        Ok(Target::Files(files)) => {
            let workspace = ctx.workspace.to_owned();
            let checked = files.clone();
            let found = tokio::task::spawn_blocking(move || {
                checked.iter().any(|path| {
                    read_text(&workspace.join(path), READ_CAP)
                        .ok()
                        .flatten()
                        .is_some_and(|text| regex.is_match(&text))
                })
            })
            .await
            .unwrap_or(false);
            if found {
                return Finding::from_problems(Vec::new());
            }
            let detail = if files.len() == 1 {
                format!("`{pattern}` matches nowhere in `{}`", files[0])
            } else {
                let names: Vec<&str> = files.iter().map(String::as_str).collect();
                format!(
                    "`{pattern}` matches nowhere in the {} matching `{target_text}` ({})",
                    count(files.len(), "file"),
                    name_list(&names, 10)
                )
            };
            Finding::failed(detail)
        }
    }
}

async fn absent_gate(ctx: &GateContext<'_>, target_text: &str, pattern: &str) -> Finding {
    let regex = match line_regex(pattern) {
        Ok(regex) => regex,
        Err(error) => return Finding::failed(format!("invalid pattern `{pattern}`: {error}")),
    };
    let hits = match target(ctx, target_text) {
        Err(problem) => return Finding::failed(problem),
        Ok(Target::Response(response)) => {
            let mut hits = Hits::default();
            hits.text(&regex, "response", response);
            hits
        }
        // Nothing to look in passes (generated files may not be there), but says so: a typo in
        // the path must not look like a clean check.
        Ok(Target::Files(files)) if files.is_empty() => {
            return Finding::passed_with(format!(
                "`{target_text}` matches no file: nothing was checked for `{pattern}`"
            ));
        }
        Ok(Target::Files(files)) => {
            let workspace = ctx.workspace.to_owned();
            tokio::task::spawn_blocking(move || {
                let mut hits = Hits::default();
                for path in &files {
                    if let Err(error) = scan_lines(&workspace.join(path), path, &regex, &mut hits) {
                        hits.unreadable
                            .push(format!("`{path}` could not be read: {error}"));
                    }
                }
                hits
            })
            .await
            .unwrap_or_default()
        }
    };
    let mut details = hits.unreadable;
    if hits.total > 0 {
        details.insert(
            0,
            format!(
                "`{pattern}` must not appear, but it matches {}",
                count(hits.total, "line")
            ),
        );
        details.extend(hits.listed);
        if hits.total > MAX_LISTED_MATCHES {
            details.push(more(hits.total - MAX_LISTED_MATCHES, "matching line"));
        }
    }
    Finding::from_problems(details)
}

/// Matches an `absent` gate found.
#[derive(Default)]
struct Hits {
    total: usize,
    /// `path:line: text`, at most [`MAX_LISTED_MATCHES`].
    listed: Vec<String>,
    unreadable: Vec<String>,
}

impl Hits {
    /// Counts the lines of `text` where a match starts (a match may span lines), listing each as
    /// `label:line: text`.
    fn text(&mut self, regex: &Regex, label: &str, text: &str) {
        let mut line_number = 1;
        let mut counted_to = 0;
        let mut last_listed_line = 0;
        for found in regex.find_iter(text) {
            line_number += text.as_bytes()[counted_to..found.start()]
                .iter()
                .filter(|&&byte| byte == b'\n')
                .count();
            counted_to = found.start();
            if line_number == last_listed_line {
                continue;
            }
            last_listed_line = line_number;
            let start = text[..found.start()].rfind('\n').map_or(0, |at| at + 1);
            let end = text[found.start()..]
                .find('\n')
                .map_or(text.len(), |at| found.start() + at);
            let line = text[start..end].trim_end_matches('\r');
            self.total += 1;
            if self.listed.len() < MAX_LISTED_MATCHES {
                let clamp = |at: usize| at.clamp(start, start + line.len()) - start;
                let matched = clamp(found.start())..clamp(found.end());
                self.listed
                    .push(format!("{label}:{line_number}: {}", excerpt(line, matched)));
            }
        }
    }

    fn line(&mut self, regex: &Regex, label: &str, number: usize, line: &str) {
        let Some(found) = regex.find(line) else {
            return;
        };
        self.total += 1;
        if self.listed.len() < MAX_LISTED_MATCHES {
            self.listed.push(format!(
                "{label}:{number}: {}",
                excerpt(line, found.range())
            ));
        }
    }
}

/// Feeds a text file to `hits`; binary files are skipped. A file of up to [`READ_CAP`] bytes is
/// searched whole, so a pattern may span lines; a larger one line by line, in constant memory.
fn scan_lines(full: &Path, label: &str, regex: &Regex, hits: &mut Hits) -> io::Result<()> {
    if std::fs::metadata(full)?.len() <= READ_CAP {
        if let Some(text) = read_text(full, READ_CAP)? {
            hits.text(regex, label, &text);
        }
        return Ok(());
    }
    let mut reader = BufReader::new(std::fs::File::open(full)?);
    if reader
        .fill_buf()?
        .iter()
        .take(BINARY_SNIFF)
        .any(|b| *b == 0)
    {
        return Ok(());
    }
    let mut buffer = Vec::new();
    let mut number = 0;
    loop {
        buffer.clear();
        if reader.read_until(b'\n', &mut buffer)? == 0 {
            return Ok(());
        }
        number += 1;
        let line = String::from_utf8_lossy(&buffer);
        hits.line(regex, label, number, line.trim_end_matches(['\n', '\r']));
    }
}

/// The line trimmed, or, for a long line, a window around the match.
fn excerpt(line: &str, matched: std::ops::Range<usize>) -> String {
    const WIDTH: usize = 160;
    let trimmed = line.trim();
    if trimmed.len() <= WIDTH {
        return trimmed.to_owned();
    }
    let mut start = matched.start.saturating_sub(WIDTH / 2);
    while !line.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + WIDTH).max(matched.end).min(line.len());
    while !line.is_char_boundary(end) {
        end += 1;
    }
    let before = if start > 0 { "…" } else { "" };
    let after = if end < line.len() { "…" } else { "" };
    format!("{before}{}{after}", &line[start..end])
}

/// A file's text (lossy UTF-8, at most `cap` bytes), or None for a binary file.
fn read_text(full: &Path, cap: u64) -> io::Result<Option<String>> {
    let mut bytes = Vec::new();
    std::fs::File::open(full)?
        .take(cap)
        .read_to_end(&mut bytes)?;
    if bytes.iter().take(BINARY_SNIFF).any(|b| *b == 0) {
        return Ok(None);
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

// ---------------------------------------------------------------------------------------------
// front matter, sections, listed paths

fn front_matter_gate(workspace: &Path, path: &str, keys: &[String]) -> Finding {
    let document = match load_document(workspace, path) {
        Ok(document) => document,
        Err(problem) => return Finding::failed(problem),
    };
    let mut problems: Vec<String> = keys
        .iter()
        .filter(|key| lookup(&document, key).is_none())
        .map(|key| format!("the front matter of `{path}` has no key `{key}`"))
        .collect();
    if !problems.is_empty() {
        let present: Vec<String> = match &document {
            Yaml::Hash(map) => map.keys().filter_map(scalar_text).collect(),
            _ => Vec::new(),
        };
        problems.push(if present.is_empty() {
            format!("the front matter of `{path}` has no keys at all")
        } else {
            let present: Vec<&str> = present.iter().map(String::as_str).collect();
            format!("keys present: {}", name_list(&present, 20))
        });
    }
    Finding::from_problems(problems)
}

fn sections_gate(workspace: &Path, path: &str, expected: &[String]) -> Finding {
    let text = match read_document(workspace, path) {
        Ok(text) => text,
        Err(problem) => return Finding::failed(problem),
    };
    let found = headings(&text);
    let found_folded: Vec<String> = found.iter().map(|h| h.to_lowercase()).collect();
    let mut problems: Vec<String> = expected
        .iter()
        .filter(|heading| {
            let wanted = heading_text(heading.trim().trim_start_matches('#')).to_lowercase();
            !found_folded.contains(&wanted)
        })
        .map(|heading| format!("`{path}` has no heading `{}`", heading.trim()))
        .collect();
    if !problems.is_empty() {
        problems.push(if found.is_empty() {
            format!("`{path}` has no headings at all")
        } else {
            let found: Vec<&str> = found.iter().map(String::as_str).collect();
            format!("headings found: {}", name_list(&found, 30))
        });
    }
    Finding::from_problems(problems)
}

/// The texts of a Markdown document's headings (ATX `# …` and setext, underlined with `===` or
/// `---`), outside front matter and fenced code blocks.
fn headings(text: &str) -> Vec<String> {
    let body = match front_matter(text) {
        FrontMatter::Block { rest, .. } => rest,
        FrontMatter::None | FrontMatter::Unclosed => text,
    };
    let mut headings = Vec::new();
    // The fence character and length of the open fenced code block.
    let mut fence: Option<(char, usize)> = None;
    // The lines of the paragraph read so far: a setext underline (`===` or `---`) below them makes
    // them a heading.
    let mut paragraph: Vec<&str> = Vec::new();
    for line in body.lines() {
        let trimmed = line.trim_start_matches(' ');
        let indented = line.len() - trimmed.len() > 3;
        if let Some((ch, len)) = fence {
            let run = trimmed.chars().take_while(|c| *c == ch).count();
            if !indented && run >= len && trimmed[run..].trim().is_empty() {
                fence = None;
            }
            continue;
        }
        if indented {
            // An indented line continues a paragraph; otherwise it is code.
            if !paragraph.is_empty() {
                paragraph.push(trimmed.trim());
            }
            continue;
        }
        if let Some(opened) = opening_fence(trimmed) {
            fence = Some(opened);
            paragraph.clear();
            continue;
        }
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        let rest = &trimmed[hashes..];
        if (1..=6).contains(&hashes) && (rest.is_empty() || rest.starts_with([' ', '\t'])) {
            headings.push(heading_text(rest));
            paragraph.clear();
            continue;
        }
        let underline = trimmed.trim_end();
        if !paragraph.is_empty()
            && !underline.is_empty()
            && (underline.bytes().all(|b| b == b'=') || underline.bytes().all(|b| b == b'-'))
        {
            headings.push(paragraph.join(" "));
            paragraph.clear();
            continue;
        }
        if trimmed.trim().is_empty() {
            paragraph.clear();
        } else {
            paragraph.push(trimmed.trim());
        }
    }
    headings
}

/// The fence of a line that opens a fenced code block: three or more backticks or tildes.
fn opening_fence(line: &str) -> Option<(char, usize)> {
    ['`', '~'].into_iter().find_map(|ch| {
        let run = line.chars().take_while(|c| *c == ch).count();
        // A backtick fence's info string may not contain backticks (CommonMark).
        (run >= 3 && !(ch == '`' && line[run..].contains('`'))).then_some((ch, run))
    })
}

/// A heading's text: trimmed, without the optional closing run of `#`s.
fn heading_text(rest: &str) -> String {
    let text = rest.trim();
    let without = text.trim_end_matches('#');
    if without.is_empty() {
        String::new()
    } else if without.ends_with([' ', '\t']) || without.len() == text.len() {
        without.trim_end().to_owned()
    } else {
        text.to_owned()
    }
}

/// The front matter of a Markdown text.
enum FrontMatter<'t> {
    /// No `---` line at the top.
    None,
    /// A `---` line at the top, but no closing one.
    Unclosed,
    /// The YAML between the fences, and the text after the closing fence.
    Block { yaml: &'t str, rest: &'t str },
}

fn front_matter(text: &str) -> FrontMatter<'_> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some((first, after_first)) = text.split_once('\n') else {
        return FrontMatter::None;
    };
    if first.trim_end() != "---" {
        return FrontMatter::None;
    }
    let mut offset = 0;
    for line in after_first.split_inclusive('\n') {
        let bare = line.trim_end();
        if bare == "---" || bare == "..." {
            return FrontMatter::Block {
                yaml: &after_first[..offset],
                rest: &after_first[offset + line.len()..],
            };
        }
        offset += line.len();
    }
    FrontMatter::Unclosed
}

/// A document's text, with a detail when it cannot be read.
fn read_document(workspace: &Path, path: &str) -> Result<String, String> {
    let full = workspace.join(clean(path));
    match read_text(&full, READ_CAP) {
        Ok(Some(text)) => Ok(text),
        Ok(None) => Err(format!("`{path}` is a binary file, not a text document")),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            Err(format!("`{path}` does not exist"))
        }
        Err(error) => Err(format!("`{path}` could not be read: {error}")),
    }
}

/// The front matter of a Markdown document, or the whole of a YAML document, parsed.
fn load_document(workspace: &Path, path: &str) -> Result<Yaml, String> {
    let text = read_document(workspace, path)?;
    let is_yaml = Path::new(path)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
    let (yaml, first_line) = if is_yaml {
        (text.as_str(), 1)
    } else {
        match front_matter(&text) {
            FrontMatter::Block { yaml, .. } => (yaml, 2),
            FrontMatter::None => {
                return Err(format!(
                    "`{path}` has no YAML front matter (a block between `---` lines at the top of \
                     the file)"
                ));
            }
            FrontMatter::Unclosed => {
                return Err(format!(
                    "the front matter of `{path}` is not closed: add a `---` line after it"
                ));
            }
        }
    };
    match YamlLoader::load_from_str(yaml) {
        Ok(documents) => Ok(documents.into_iter().next().unwrap_or(Yaml::Null)),
        Err(error) => {
            let marker = error.marker();
            Err(format!(
                "`{path}`:{}:{}: the front matter is not valid YAML: {}",
                marker.line() + first_line - 1,
                marker.col() + 1,
                error.info()
            ))
        }
    }
}

/// The paths listed under `key` in `doc`, cleaned; a detail when they cannot be had.
fn listed_paths(workspace: &Path, doc: &str, key: &str) -> Result<Vec<String>, String> {
    let document = load_document(workspace, doc)?;
    let value =
        lookup(&document, key).ok_or_else(|| format!("`{doc}` has no front-matter key `{key}`"))?;
    let entries: Vec<&Yaml> = match value {
        Yaml::Array(items) => items.iter().collect(),
        Yaml::String(_) => vec![value],
        _ => {
            return Err(format!("`{key}` in `{doc}` is not a list of paths"));
        }
    };
    let mut paths = Vec::with_capacity(entries.len());
    for (index, entry) in entries.into_iter().enumerate() {
        let Yaml::String(path) = entry else {
            return Err(format!(
                "entry {} of `{key}` in `{doc}` is not a path (a string)",
                index + 1
            ));
        };
        if let Some(problem) = escape_problem(path) {
            return Err(format!(
                "`{path}` (listed under `{key}` in `{doc}`) {problem}"
            ));
        }
        paths.push(clean(path));
    }
    Ok(paths)
}

/// The value at a dotted key (`files.create`) in nested maps. A key that itself contains dots
/// (`"files.create": …`) is found too.
fn lookup<'y>(node: &'y Yaml, key: &str) -> Option<&'y Yaml> {
    let Yaml::Hash(map) = node else {
        return None;
    };
    let get = |wanted: &str| {
        map.iter()
            .find(|(k, _)| scalar_text(k).as_deref() == Some(wanted))
            .map(|(_, v)| v)
    };
    if let Some(value) = get(key) {
        return Some(value);
    }
    key.match_indices('.')
        .find_map(|(dot, _)| get(&key[..dot]).and_then(|child| lookup(child, &key[dot + 1..])))
}

/// A scalar map key as text (YAML keys may be numbers or booleans).
fn scalar_text(key: &Yaml) -> Option<String> {
    match key {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// helpers

/// Every file on disk in the workspace, ignored or not (`.git` and the state folder aside): where
/// near misses of a missing output are looked for.
fn all_files(ctx: &GateContext<'_>) -> Vec<String> {
    glob_files(ctx.workspace, ctx.exclude, &["**".to_owned()]).unwrap_or_default()
}

/// The files on disk that match `patterns`, sorted. Unlike snapshots, this listing ignores
/// `.gitignore`: an expected output is expected wherever it is (build folders are often ignored).
/// Only the folders the globs can match under are walked; `.git` and `exclude` (the state folder)
/// never are.
fn glob_files(
    workspace: &Path,
    exclude: &[PathBuf],
    patterns: &[String],
) -> Result<Vec<String>, String> {
    let set = glob_set(patterns)?;
    let mut roots: Vec<String> = patterns.iter().map(|p| literal_folder(&clean(p))).collect();
    roots.sort();
    // A root inside another root is walked with it.
    roots.dedup_by(|inner, outer| {
        outer.is_empty() || *inner == *outer || inner.starts_with(&format!("{outer}/"))
    });
    let excluded: Vec<PathBuf> = exclude.iter().map(|e| workspace.join(e)).collect();
    let mut found = BTreeSet::new();
    for root in roots {
        let start = workspace.join(&root);
        if !start.is_dir() {
            continue;
        }
        let excluded = excluded.clone();
        let walker = ignore::WalkBuilder::new(&start)
            .standard_filters(false)
            .follow_links(false)
            .filter_entry(move |entry| {
                entry.file_name() != ".git" && !excluded.iter().any(|e| entry.path() == e)
            })
            .build();
        for entry in walker.flatten() {
            // A file, or a link to one (a dangling link or a link to a folder is not a file).
            if !entry
                .file_type()
                .is_some_and(|t| t.is_file() || (t.is_symlink() && entry.path().is_file()))
            {
                continue;
            }
            let Ok(relative) = entry.path().strip_prefix(workspace) else {
                continue;
            };
            let relative = relative.to_string_lossy().replace('\\', "/");
            if set.is_match(&relative) {
                found.insert(relative);
            }
        }
    }
    Ok(found.into_iter().collect())
}

/// The folders of a glob before its first wildcard: `src/**/*.py` → `src`, `*.md` → ``.
fn literal_folder(pattern: &str) -> String {
    let segments: Vec<&str> = pattern.split('/').collect();
    let literal = segments
        .iter()
        .take(segments.len().saturating_sub(1))
        .take_while(|s| !s.contains(['*', '?', '[', '{', '\\']))
        .copied()
        .collect::<Vec<_>>();
    literal.join("/")
}

/// Compiles globs the way the language does; a detail when one is invalid.
fn glob_set(patterns: &[String]) -> Result<GlobSet, String> {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        let glob = compile_glob(&clean(pattern))
            .map_err(|error| format!("invalid glob `{pattern}`: {error}"))?;
        builder.add(glob);
    }
    builder
        .build()
        .map_err(|error| format!("invalid globs: {error}"))
}

/// A relative path without `.` components or doubled separators, as snapshots write paths.
fn clean(path: &str) -> String {
    path.split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// A gate name made safe for a file name.
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// "`a`, `b` and 3 more".
fn name_list(names: &[&str], max: usize) -> String {
    let shown: Vec<String> = names.iter().take(max).map(|n| format!("`{n}`")).collect();
    let mut list = shown.join(", ");
    if names.len() > max {
        let _ = write!(list, " and {} more", names.len() - max);
    }
    list
}

/// "… and 5 more matching lines".
fn more(n: usize, noun: &str) -> String {
    format!("… and {n} more {noun}{}", if n == 1 { "" } else { "s" })
}

/// "1 file", "3 files".
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_skip_fences_and_front_matter() {
        let text = "---\n# comment: yes\ntitle: x\n---\n# Kontext\n```md\n# Not a heading\n```\n\
                    ## Entscheidung ##\n    # indented code\n~~~~\n# also code\n~~~\n# still code\n\
                    ~~~~\n###### Tiefe\n####### seven\n#no-space\n#\n";
        assert_eq!(headings(text), ["Kontext", "Entscheidung", "Tiefe", ""]);
    }

    #[test]
    fn heading_text_keeps_hashes_that_are_part_of_the_text() {
        assert_eq!(heading_text(" C# "), "C#");
        assert_eq!(heading_text(" Title ### "), "Title");
        assert_eq!(heading_text(" ###"), "");
    }

    #[test]
    fn dotted_keys_walk_nested_maps_and_literal_dots() {
        let yaml = &YamlLoader::load_from_str(
            "files:\n  create: [a, b]\n\"x.y\": 1\nn:\n  \"p.q\":\n    r: 2\n7: seven\n",
        )
        .unwrap()[0];
        assert!(matches!(lookup(yaml, "files.create"), Some(Yaml::Array(a)) if a.len() == 2));
        assert_eq!(lookup(yaml, "x.y"), Some(&Yaml::Integer(1)));
        assert_eq!(lookup(yaml, "n.p.q.r"), Some(&Yaml::Integer(2)));
        assert_eq!(lookup(yaml, "7"), Some(&Yaml::String("seven".into())));
        assert_eq!(lookup(yaml, "files.delete"), None);
        assert_eq!(lookup(yaml, "files.create.x"), None);
    }

    #[test]
    fn front_matter_needs_both_fences_at_the_top() {
        assert!(matches!(
            front_matter("---\na: 1\n---\nbody"),
            FrontMatter::Block {
                yaml: "a: 1\n",
                rest: "body"
            }
        ));
        assert!(matches!(
            front_matter("\u{feff}---\r\na: 1\r\n...\r\n"),
            FrontMatter::Block { .. }
        ));
        assert!(matches!(front_matter("---\na: 1\n"), FrontMatter::Unclosed));
        assert!(matches!(
            front_matter("text\n---\na: 1\n---\n"),
            FrontMatter::None
        ));
    }

    #[test]
    fn excerpt_windows_long_lines_on_char_boundaries() {
        let line = format!("{}TODO{}", "é".repeat(200), "x".repeat(200));
        let at = line.find("TODO").unwrap();
        let shown = excerpt(&line, at..at + 4);
        assert!(shown.starts_with('…') && shown.ends_with('…'), "{shown}");
        assert!(shown.contains("TODO"));
        assert_eq!(excerpt("  short TODO  ", 8..12), "short TODO");
    }

    #[test]
    fn paths_are_cleaned_like_snapshot_paths() {
        assert_eq!(clean("./src//a.py"), "src/a.py");
        assert_eq!(file_safe("unit tests/py"), "unit-tests-py");
        assert_eq!(name_list(&["a", "b", "c"], 2), "`a`, `b` and 1 more");
    }
}
