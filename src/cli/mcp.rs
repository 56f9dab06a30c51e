//! `helixflow mcp`: a Model Context Protocol server over standard input and output, so an agent
//! can ask helixflow from inside its session. Four tools, all read-only: `verify` (a phase's
//! gates now, and the feedback), `status` (which phases are up to date, and why the others would
//! run), `explain` (a diagnostic code), `lint` (a pipeline file's diagnostics). It never starts an
//! agent, a `run` step or a gate's `fix`; `verify` runs the phase's gate commands, as `helixflow
//! verify` does.
//!
//! The protocol is the `rmcp` crate's: every version from 2024-11-05 to 2026-07-28, with the
//! `server/discover` probe Claude Code sends first.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use super::failure::{Failure, Outcome};
use super::input;
use crate::event::GateStatus;
use crate::model::{Phase, Pipeline};
use crate::process::Cancel;

/// Arguments of `helixflow mcp`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The pipeline file the tools read when a call names none (default: helixflow.kdl or
    /// pipeline.kdl in the current folder or a parent, looked for at each call).
    file: Option<PathBuf>,
}

pub(crate) fn run(args: &Args) -> Outcome {
    let server = Server {
        file: args.file.clone(),
    };
    let runtime = super::runtime()?;
    let served = runtime.block_on(async {
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| e.to_string())?;
        running.waiting().await.map_err(|e| e.to_string())?;
        Ok::<(), String>(())
    });
    served
        .map(|()| crate::exit::SUCCESS)
        .map_err(|e| Failure::internal(format!("the MCP session ended: {e}")))
}

/// The server: tools over the pipeline file.
struct Server {
    file: Option<PathBuf>,
}

/// A tool's input schema: an object of optional string properties, some required.
fn schema(properties: &[(&str, &str)], required: &[&str]) -> Arc<serde_json::Map<String, Value>> {
    let properties: serde_json::Map<String, Value> = properties
        .iter()
        .map(|(name, what)| {
            (
                (*name).to_owned(),
                json!({ "type": "string", "description": what }),
            )
        })
        .collect();
    let schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    match schema {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("a JSON object"),
    }
}

const FILE: (&str, &str) = (
    "file",
    "The pipeline file (default: the server's, else helixflow.kdl or pipeline.kdl in the \
     folder the server runs in or a parent)",
);

/// The tools, as `tools/list` gives them.
fn tools() -> Vec<Tool> {
    let read_only = || ToolAnnotations::new().read_only(true);
    vec![
        Tool::new(
            "verify",
            "Check a phase's gates against the workspace now, as `helixflow verify` does: each \
             gate's result and, when one fails, the feedback that says precisely what to fix. \
             Runs the phase's gate commands (tests); never a `fix`, an agent or a `run` step.",
            schema(
                &[
                    (
                        "phase",
                        "The phase (default: the one `helixflow hook use` chose, or the only one)",
                    ),
                    FILE,
                ],
                &[],
            ),
        )
        .annotate(read_only()),
        Tool::new(
            "status",
            "Which phases are up to date, and every reason each other one would run (as \
             `helixflow status --json`).",
            schema(&[FILE], &[]),
        )
        .annotate(read_only()),
        Tool::new(
            "explain",
            "What a helixflow diagnostic code (HF101, or a rule name) catches, why, and an example.",
            schema(&[("code", "The code, such as HF305")], &["code"]),
        )
        .annotate(read_only()),
        Tool::new(
            "lint",
            "Check a pipeline file: every diagnostic with its code, severity, place and help (as \
             `helixflow lint --format json`).",
            schema(&[FILE], &[]),
        )
        .annotate(read_only()),
    ]
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("helixflow", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "helixflow knows what \"done\" means for each phase of this project's pipeline. \
                 Call `verify` with the phase before you say you are done: it runs the phase's \
                 gates and says precisely what still fails.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let text = |key: &str| {
            arguments
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let file = text("file")
            .map(PathBuf::from)
            .or_else(|| self.file.clone());
        let answer = match request.name.as_ref() {
            "verify" => verify(file, text("phase")).await,
            "status" => status(file),
            "explain" => explain(text("code").as_deref().unwrap_or_default()),
            "lint" => lint(file),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool `{other}`: the tools are verify, status, explain, lint"),
                    None,
                ));
            }
        };
        Ok(match answer {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
        }
        .into())
    }
}

/// The pipeline to work on, checked, its workspace absolute.
fn pipeline(file: Option<PathBuf>) -> Result<(PathBuf, Pipeline), String> {
    let path = super::pipeline_path(file)?;
    let pipeline = input::quiet_pipeline(&path, &super::imports::ImportArgs::READ_ONLY).map_err(
        |unusable| match unusable {
            input::Unusable::Errors => {
                format!("{} has errors: the `lint` tool lists them", path.display())
            }
            input::Unusable::Other(message) => message,
        },
    )?;
    Ok((path, pipeline))
}

/// The phase asked for, else the one chosen with `helixflow hook use`, else the only one.
fn pick_phase(pipeline: &Pipeline, wanted: Option<String>) -> Result<Phase, String> {
    let state_dir = pipeline.workspace.join(&pipeline.state_dir);
    let chosen = || {
        crate::store::hooks::chosen(&state_dir)
            .ok()
            .flatten()
            .map(|c| c.phase)
    };
    let names = || {
        let names: Vec<&str> = pipeline
            .phases
            .iter()
            .map(|p| p.name.value.as_str())
            .collect();
        names.join(", ")
    };
    match wanted.or_else(chosen) {
        Some(name) => pipeline
            .phase(&name)
            .cloned()
            .ok_or_else(|| format!("no phase \"{name}\"; the phases are: {}", names())),
        None if pipeline.phases.len() == 1 => Ok(pipeline.phases[0].clone()),
        None => Err(format!("which phase? give `phase`, one of: {}", names())),
    }
}

async fn verify(file: Option<PathBuf>, phase: Option<String>) -> Result<String, String> {
    let (_, pipeline) = pipeline(file)?;
    let phase = pick_phase(&pipeline, phase)?.without_fixes();
    let state_dir = pipeline.workspace.join(&pipeline.state_dir);
    let start = crate::store::hooks::start(&state_dir, &phase.name.value);
    let logs = state_dir.join("verify");
    crate::store::state_dir::create(&state_dir)
        .and_then(|()| std::fs::create_dir_all(&logs))
        .map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
    let cancel = Cancel::default();
    let check = crate::engine::session::SessionCheck {
        pipeline: &pipeline,
        phase: &phase,
        start: start.as_ref(),
        response: None,
        logs: &logs,
        cancel: &cancel,
        grace: super::run::kill_grace()?,
    };
    let gates = crate::engine::session::judge(&check)
        .await
        .map_err(|e| format!("cannot read the workspace: {e}"))?;
    let success = gates.iter().all(|g| g.status != GateStatus::Failed);
    let feedback =
        (!success).then(|| crate::verify::feedback::render_for_session(&phase, None, &gates));
    let value = json!({
        "phase": phase.name.value,
        "success": success,
        "gates": gates,
        "feedback": feedback,
    });
    Ok(pipeline.redactor().redact(&pretty(&value)))
}

fn status(file: Option<PathBuf>) -> Result<String, String> {
    let (_, pipeline) = pipeline(file)?;
    let value = super::status::as_json(&pipeline);
    Ok(pipeline.redactor().redact(&pretty(&value)))
}

fn explain(code: &str) -> Result<String, String> {
    crate::diagnostics::find_rule(code)
        .map(super::explain::explanation)
        .ok_or_else(|| format!("unknown code `{code}`; codes look like HF101"))
}

fn lint(file: Option<PathBuf>) -> Result<String, String> {
    let path = super::pipeline_path(file)?;
    super::lint::as_json(&path)
}

fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}
