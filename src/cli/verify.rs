//! `helixflow verify`: check a phase's gates against the workspace now. Inside a run (started by
//! an agent in `self` mode) the run checks the attempt and keeps the receipt; outside a run the
//! gates run here.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;

use super::failure::{Failure, Outcome};
use super::input;
use crate::engine::control::{ControlRequest, SOCKET_ENV, VerifyRequest, VerifyResponse};
use crate::event::{CheckKind, GateReport, GateStatus};
use crate::model::{Output, Phase, Pipeline};
use crate::process::Cancel;
use crate::verify::gates::info as gate_info;
use crate::verify::judge::{Inspection, Scene};
use crate::workspace::{Snapshot, SnapshotOptions};

/// Arguments of `helixflow verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The phase to check (inside a run: the current phase, `HELIXFLOW_PHASE`).
    #[arg(long)]
    phase: Option<String>,
    /// The pipeline file, outside a run (default: helixflow.kdl or pipeline.kdl here or in a parent).
    #[arg(long)]
    file: Option<PathBuf>,
    /// Print `{"success", "missing", "syntax_errors", "gates"}` as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &Args) -> Outcome {
    let result = match std::env::var_os(SOCKET_ENV) {
        Some(socket) => in_run(args, PathBuf::from(socket)),
        None => outside_run(args),
    };
    let (phase, response) = result?;
    let output = if args.json {
        json(&phase, &response)
    } else {
        human(&phase, &response)
    };
    let code = super::emit(&output)?;
    if code != crate::exit::SUCCESS {
        return Ok(code);
    }
    Ok(if response.success {
        crate::exit::SUCCESS
    } else {
        crate::exit::FAILURE
    })
}

/// Asks the run this agent belongs to.
fn in_run(args: &Args, socket: PathBuf) -> Result<(Phase, VerifyResponse), Failure> {
    let phase = args
        .phase
        .clone()
        .or_else(|| std::env::var("HELIXFLOW_PHASE").ok())
        .ok_or_else(|| Failure::usage("--phase is needed: HELIXFLOW_PHASE is not set"))?;
    let attempt: u32 = std::env::var("HELIXFLOW_ATTEMPT")
        .ok()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let run_dir = std::env::var_os("HELIXFLOW_RUN_DIR").map(PathBuf::from);
    let pipeline = run_dir
        .as_ref()
        .and_then(|dir| std::fs::read_to_string(dir.join("pipeline.json")).ok())
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
    let request = serde_json::to_string(&ControlRequest::Verify(VerifyRequest {
        phase: phase.clone(),
        attempt,
    }))
    .map_err(|e| Failure::usage(e.to_string()))?;
    let exchange = || -> std::io::Result<VerifyResponse> {
        let mut stream = std::os::unix::net::UnixStream::connect(&socket)?;
        stream.write_all(request.as_bytes())?;
        stream.write_all(b"\n")?;
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line)?;
        serde_json::from_str(&line).map_err(std::io::Error::other)
    };
    let response = exchange().map_err(|e| {
        Failure::usage(format!(
            "cannot reach the run through {} ({e}); is the run still going?",
            socket.display()
        ))
    })?;
    if let Some(error) = &response.error {
        return Err(Failure::usage(error.clone()));
    }
    let phase = phase_from_run(pipeline.as_ref(), &phase);
    Ok((phase, response))
}

/// The phase as the run compiled it, for the `missing` list; a minimal one when unavailable.
fn phase_from_run(pipeline: Option<&serde_json::Value>, name: &str) -> Phase {
    let outputs = pipeline
        .and_then(|p| p["phases"].as_array())
        .and_then(|phases| phases.iter().find(|p| p["name"] == name))
        .and_then(|p| serde_json::from_value::<Vec<OutputRecord>>(p["outputs"].clone()).ok())
        .unwrap_or_default();
    let text = format!(
        "pipeline \"p\"\nphase \"{}\" {{\n    run \"true\"\n}}\n",
        name.replace('\\', "\\\\").replace('"', "\\\"")
    );
    let compiled = crate::language::compile(
        std::path::Path::new("run.kdl"),
        &text,
        &crate::language::FsLoader,
        crate::language::Options::default(),
    );
    let mut phase = compiled
        .pipeline
        .and_then(|p| std::sync::Arc::unwrap_or_clone(p.phases).into_iter().next())
        .expect("a one-phase pipeline compiles");
    phase.outputs = outputs.into_iter().map(OutputRecord::into_output).collect();
    phase
}

#[derive(serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
enum OutputRecord {
    File { path: String },
    Glob { pattern: String, min: u32 },
    From { doc: String, key: String },
}

impl OutputRecord {
    fn into_output(self) -> Output {
        match self {
            OutputRecord::File { path } => Output::File { path },
            OutputRecord::Glob { pattern, min } => Output::Glob { pattern, min },
            OutputRecord::From { doc, key } => Output::From { doc, key },
        }
    }
}

/// Runs the gates here, against the workspace as it is. Without an attempt's starting point,
/// `scope`, `protect` and `changes` cannot be judged and are reported as skipped.
fn outside_run(args: &Args) -> Result<(Phase, VerifyResponse), Failure> {
    let (_, mut pipeline) =
        input::checked_pipeline(args.file.clone(), &super::imports::ImportArgs::default())?;
    pipeline.workspace = std::fs::canonicalize(&pipeline.workspace).map_err(|e| {
        Failure::usage(format!(
            "the workspace {} cannot be used: {e}",
            pipeline.workspace.display()
        ))
    })?;
    // An item of a `for-each` phase, or a phase a planner wrote, is checked as the run makes it.
    let pipeline = crate::engine::plan::made_now(pipeline);
    let phase = pick_phase(&pipeline, args.phase.as_deref())?.clone();
    input::warn_if_a_run_is_live(&pipeline);
    let grace = super::run::kill_grace()?;
    let runtime = super::runtime()?;
    let options = SnapshotOptions {
        exclude: vec![pipeline.state_dir.clone()],
        ..SnapshotOptions::default()
    };
    let now = Snapshot::take(&pipeline.workspace, &options, None)
        .map_err(|e| Failure::usage(format!("cannot read the workspace: {e}")))?;
    // Gate command logs go to the state folder, as in a run (never into the workspace proper).
    let state_dir = pipeline.workspace.join(&pipeline.state_dir);
    let logs = state_dir.join("verify");
    crate::store::state_dir::create(&state_dir)
        .and_then(|()| std::fs::create_dir_all(&logs))
        .map_err(|e| Failure::usage(format!("cannot create {}: {e}", logs.display())))?;
    let env: Vec<(OsString, OsString)> = crate::engine::gate_env(&pipeline, &phase);
    let cancel = Cancel::default();
    let scene = Scene {
        workspace: &pipeline.workspace,
        exclude: std::slice::from_ref(&pipeline.state_dir),
        env: &env,
        logs: &logs,
        cancel: &cancel,
        grace,
        redactor: std::sync::Arc::new(pipeline.redactor()),
        phases: &pipeline.phases,
    };
    let gates = runtime.block_on(Inspection::outside_run(&scene, &phase, &now).judge(&mut |_| {}));
    let success = gates.iter().all(|g| g.status != GateStatus::Failed);
    Ok((
        phase,
        VerifyResponse {
            success,
            gates,
            error: None,
        },
    ))
}

fn pick_phase<'p>(pipeline: &'p Pipeline, wanted: Option<&str>) -> Result<&'p Phase, Failure> {
    match wanted {
        Some(name) => pipeline.phase(name).ok_or_else(|| {
            let names: Vec<&str> = pipeline
                .phases
                .iter()
                .map(|p| p.name.value.as_str())
                .collect();
            Failure::usage(format!(
                "no phase \"{name}\"; the phases are: {}",
                names.join(", ")
            ))
        }),
        None if pipeline.phases.len() == 1 => Ok(&pipeline.phases[0]),
        None => {
            let names: Vec<&str> = pipeline
                .phases
                .iter()
                .map(|p| p.name.value.as_str())
                .collect();
            Err(Failure::usage(format!(
                "which phase? use --phase with one of: {}",
                names.join(", ")
            )))
        }
    }
}

/// What to do about a failed gate of its kind.
fn how_to_fix(report: &GateReport) -> &'static str {
    report
        .check_kind()
        .map_or("fix what the details say", |kind| {
            gate_info(kind).how_to_fix
        })
}

fn human(phase: &Phase, response: &VerifyResponse) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "helixflow verify: phase \"{}\"", phase.name.value);
    for gate in &response.gates {
        let mark = match gate.status {
            GateStatus::Passed => "✓",
            GateStatus::Failed => "✗",
            GateStatus::Skipped => "-",
        };
        let _ = writeln!(out, "{mark} {} ({})", gate.name, gate.kind);
        for detail in &gate.details {
            for line in detail.lines() {
                let _ = writeln!(out, "    {line}");
            }
        }
        if gate.status == GateStatus::Failed {
            let _ = writeln!(out, "  how to fix: {}", how_to_fix(gate));
        }
    }
    let failed = response
        .gates
        .iter()
        .filter(|g| g.status == GateStatus::Failed)
        .count();
    if response.success {
        let _ = writeln!(
            out,
            "passed: every gate passed ({} checked)",
            response.gates.len()
        );
    } else {
        let _ = writeln!(
            out,
            "failed: {failed} of {} gates failed",
            response.gates.len()
        );
    }
    out
}

fn json(phase: &Phase, response: &VerifyResponse) -> String {
    let missing = missing_outputs(phase, &response.gates);
    let syntax_errors: Vec<&String> = response
        .gates
        .iter()
        .filter(|g| g.is(CheckKind::Syntax) && g.status == GateStatus::Failed)
        .flat_map(|g| &g.details)
        .collect();
    let value = serde_json::json!({
        "success": response.success,
        "missing": missing,
        "syntax_errors": syntax_errors,
        "gates": response.gates,
    });
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    text
}

/// The expected outputs that the `outputs` gate found missing: files by path, globs by pattern.
fn missing_outputs(phase: &Phase, gates: &[GateReport]) -> Vec<String> {
    let Some(outputs) = gates
        .iter()
        .find(|g| g.is(CheckKind::Outputs) && g.status == GateStatus::Failed)
    else {
        return Vec::new();
    };
    phase
        .outputs
        .iter()
        .filter_map(|o| match o {
            Output::File { path } => Some(path.clone()),
            Output::Glob { pattern, .. } => Some(pattern.clone()),
            Output::From { .. } => None,
        })
        .filter(|wanted| {
            outputs
                .details
                .iter()
                .any(|d| d.contains(&format!("`{wanted}`")))
        })
        .collect()
}
