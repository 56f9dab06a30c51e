//! Reading pipeline files for the subcommands, and reporting what cannot be read.

use std::path::{Path, PathBuf};

pub(crate) use super::failure::{Failure, color, report};

use super::imports::ImportArgs;
use crate::language::loader::read_pipeline_file;
use crate::language::{self, Compilation, FsLoader, Options};
use crate::store::pipeline_cache::PipelineCache;

/// A file's path as shown in reports, and its text.
pub(crate) struct Input {
    pub path: PathBuf,
    pub text: String,
    /// Whether it was read from standard input (no lock is written beside its name).
    pub from_stdin: bool,
}

/// Reads `path`, or standard input for `-` (shown as `stdin_name`), up to one byte past the front
/// end's size limit (a longer file is refused all the same, HF005).
pub(crate) fn read(path: &Path, stdin_name: Option<&Path>) -> Result<Input, String> {
    if path == Path::new("-") {
        let text = read_pipeline_file(std::io::stdin().lock())
            .map_err(|e| format!("cannot read standard input: {e}"))?
            .ok_or_else(|| "standard input is not valid UTF-8".to_owned())?;
        let path = stdin_name.map_or_else(|| PathBuf::from("<stdin>"), Path::to_owned);
        return Ok(Input {
            path,
            text,
            from_stdin: true,
        });
    }
    let text = crate::regular::open(path)
        .and_then(crate::language::loader::read_pipeline_file_from)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .ok_or_else(|| format!("{} is not valid UTF-8", path.display()))?;
    Ok(Input {
        path: path.to_owned(),
        text,
        from_stdin: false,
    })
}

/// Compiles a read file against the real file system, as a pipeline, its remote imports
/// resolved (and locked) as `imports` says.
pub(crate) fn compile(input: &Input, imports: &ImportArgs) -> Compilation {
    super::imports::compile(
        &input.path,
        &input.text,
        input.from_stdin,
        Options::default(),
        imports,
    )
}

/// Compiles a read file as lint checks it: a library for `import` is a file in its own right.
pub(crate) fn compile_for_lint(input: &Input, imports: &ImportArgs) -> Compilation {
    let options = Options {
        accept_library: true,
        ..Options::default()
    };
    super::imports::compile(&input.path, &input.text, input.from_stdin, options, imports)
}

/// The compilations of the files of phases the planners of a pipeline wrote (`generates`), where
/// they exist now: each holds the findings in its file only.
pub(crate) fn generated_for_lint(input: &Input, compilation: &Compilation) -> Vec<Compilation> {
    let Some(pipeline) = &compilation.pipeline else {
        return Vec::new();
    };
    pipeline
        .phases
        .iter()
        .filter_map(|phase| {
            let path = pipeline.workspace.join(phase.generates.as_ref()?);
            let text = String::from_utf8(crate::regular::read(&path).ok()?).ok()?;
            Some(language::compile_generated(
                &input.path,
                &input.text,
                &FsLoader,
                language::GeneratedFile {
                    path: &path,
                    text: &text,
                    planner: &phase.name.value,
                },
            ))
        })
        .collect()
}

/// Compiles the pipeline a command works on; its diagnostics are the failure when it cannot be
/// used. A pipeline compiled before without an error, whose file and everything its compilation
/// read are unchanged, comes from the state folder's cache instead, with its warnings
/// (`store::pipeline_cache`).
pub(crate) fn checked_pipeline(
    file: Option<PathBuf>,
    imports: &ImportArgs,
) -> Result<(Compilation, crate::model::Pipeline), Failure> {
    let path = super::pipeline_path(file)?;
    let input = read(&path, None)?;
    let cache = PipelineCache::of(&input.path, &input.text);
    if let Some(hit) = cache
        .as_ref()
        .and_then(|cache| cache.load(&input.path, &input.text))
    {
        let warnings = Compilation {
            sources: hit.sources,
            diagnostics: hit.diagnostics,
            pipeline: None,
            remote: crate::model::RemoteDefinitions::default(),
        };
        return Ok((warnings, hit.pipeline));
    }
    let (mut compilation, answers) = super::imports::compile_recorded(
        &input.path,
        &input.text,
        input.from_stdin,
        Options::default(),
        imports,
    );
    match compilation.pipeline.take() {
        Some(mut pipeline) if !compilation.has_errors() => {
            if let Some(cache) = cache
                && let Some(answers) = answers
            {
                let findings = (&compilation.diagnostics[..], &compilation.sources);
                pipeline.compiled_from =
                    cache.save(&input.path, &input.text, answers, findings, &pipeline);
            }
            Ok((compilation, pipeline))
        }
        _ => Err(Failure::Diagnostics {
            diagnostics: compilation.diagnostics,
            sources: compilation.sources,
        }),
    }
}

/// Why a pipeline read without printing its findings cannot be used.
pub(crate) enum Unusable {
    /// It has errors (`lint` lists them).
    Errors,
    /// It cannot be read, or its workspace cannot be used.
    Other(String),
}

/// The pipeline at `path`, compiled without printing anything (for the Stop hooks and the MCP
/// server, whose channels are the agent's), its workspace made absolute.
pub(crate) fn quiet_pipeline(
    path: &Path,
    imports: &ImportArgs,
) -> Result<crate::model::Pipeline, Unusable> {
    let input = read(path, None).map_err(Unusable::Other)?;
    let compilation = compile(&input, imports);
    if compilation.has_errors() {
        return Err(Unusable::Errors);
    }
    let mut pipeline = compilation
        .pipeline
        .ok_or_else(|| Unusable::Other("the pipeline could not be compiled".to_owned()))?;
    pipeline.workspace = std::fs::canonicalize(&pipeline.workspace).map_err(|e| {
        Unusable::Other(format!(
            "the workspace {} cannot be used: {e}",
            pipeline.workspace.display()
        ))
    })?;
    Ok(pipeline)
}

/// A checked pipeline to run or check: its workspace made absolute (children run in it and get
/// paths into the state folder), and its warnings reported.
pub(crate) fn runnable_pipeline(
    file: Option<PathBuf>,
    imports: &ImportArgs,
) -> Result<crate::model::Pipeline, Failure> {
    let (compilation, mut pipeline) = checked_pipeline(file, imports)?;
    match std::fs::canonicalize(&pipeline.workspace) {
        Ok(workspace) if workspace.is_dir() => pipeline.workspace = workspace,
        Ok(workspace) => {
            return Err(Failure::usage(format!(
                "the workspace {} is not a folder",
                workspace.display()
            )));
        }
        Err(e) => {
            return Err(Failure::usage(format!(
                "the workspace {} cannot be used: {e}",
                pipeline.workspace.display()
            )));
        }
    }
    if !compilation.diagnostics.is_empty() {
        report(&compilation.diagnostics, &compilation.sources);
    }
    Ok(pipeline)
}

/// The folder of a pipeline's runs (`<workspace>/<state-dir>/runs`). Past runs must stay
/// inspectable while the file is being edited, so a file with errors does not stop this: the
/// settings are taken from what can be read of it, else the defaults (the file's folder and
/// `.helixflow`), with a warning.
pub(crate) fn runs_dir(file: Option<PathBuf>) -> Result<PathBuf, Failure> {
    let path = super::pipeline_path(file)?;
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    let input = read(&path, None);
    // Compiled before without an error, and unchanged since: as `run` and `status` find it.
    let cached = input.as_ref().ok().and_then(|input| {
        PipelineCache::of(&input.path, &input.text)?.load(&input.path, &input.text)
    });
    let (state, problem) = match (cached, input) {
        (Some(hit), _) => ((hit.pipeline.workspace, hit.pipeline.state_dir), None),
        (None, Err(e)) => ((folder, PathBuf::from(".helixflow")), Some(e)),
        (None, Ok(input)) => {
            let compilation = compile(&input, &ImportArgs::default());
            let problem = compilation.has_errors().then(|| {
                format!(
                    "{} has errors (`helixflow lint {}` lists them)",
                    path.display(),
                    path.display()
                )
            });
            if let Some(pipeline) = compilation.pipeline {
                ((pipeline.workspace, pipeline.state_dir), problem)
            } else {
                let settings = language::state_location(&input.text);
                let workspace = settings.workspace.map_or_else(
                    || folder.clone(),
                    |w| language::loader::normalize(&folder, Path::new(&w)),
                );
                let state_dir = settings.state_dir.unwrap_or_else(|| ".helixflow".into());
                ((workspace, PathBuf::from(state_dir)), problem)
            }
        }
    };
    let runs = state.0.join(state.1).join("runs");
    if let Some(problem) = problem {
        say!(
            "warning: {problem}; looking for its runs in {}",
            runs.display()
        );
    }
    Ok(runs)
}

/// `check` and `verify` do not take the run lock (they start no agent and change nothing), but
/// they say so when a run is live in the workspace: its agents may be changing the files being
/// checked. Not said to the children of that run (a `run` step or gate that calls them).
pub(crate) fn warn_if_a_run_is_live(pipeline: &crate::model::Pipeline) {
    if std::env::var_os("HELIXFLOW_RUN_DIR").is_some() {
        return;
    }
    let state_dir = pipeline.workspace.join(&pipeline.state_dir);
    if let Some(live) = crate::store::lock::live_run(&state_dir)
        && !live.killed
    {
        say!(
            "warning: {} is running in this workspace: its agents may change files while they are checked",
            live.describe()
        );
    }
}
