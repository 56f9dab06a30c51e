//! helixflow: verifiable multi-phase pipelines for AI coding agents.
//!
//! Data flows one way: text → checked model ([`language`]) → DAG ([`graph`]) → engine → events →
//! reporters. `ARCHITECTURE.md` at the root of the repository maps the layers and says where a
//! new gate kind, response format, subcommand or reporter goes.

/// `eprintln!` that never panics: with standard error closed (`helixflow run 2>&1 | head -1`) the
/// message is lost, but the command still ends with its own exit code instead of a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub(crate) mod agent;
pub(crate) mod cli;
pub(crate) mod diagnostics;
pub(crate) mod engine;
pub(crate) mod event;
pub mod exit;
pub(crate) mod glob;
pub(crate) mod graph;
pub(crate) mod language;
pub(crate) mod lsp;
pub mod model;
pub(crate) mod process;
pub(crate) mod redact;
pub(crate) mod regular;
pub(crate) mod remote;
pub(crate) mod report;
pub(crate) mod store;
pub(crate) mod text;
pub(crate) mod verify;
pub(crate) mod workspace;

// The public facade. Everything else is `pub(crate)`, so the compiler reports what nothing uses.
// The binary calls `main`; the benchmarks and the integration tests (`tests/engine/`) drive the
// library through the names below, which are the layers' entry points.

pub use agent::response::ResponseError;
pub use cli::main;
pub use diagnostics::{
    ALL_RULES, Diagnostic, FileId, Fix, Note, Rule, Severity, SourceFile, Sources, Span,
};
pub use event::sink::{EventSink, Sinks};
pub use event::{
    AttemptOutcome, CheckKind, ChildExit, Event, GateReport, GateStatus, PhaseStatus, RUN_STEP,
    ReportKind, RunStatus, Stamped, Step, Tier, TimeoutKind,
};
pub use language::{Compilation, FsLoader, Loader, Options, compile};
pub use model::{Agent, Language, Phase, Pipeline, ResponseFormat};
pub use process::{Cancel, ChildSpec};
pub use redact::Redactor;
pub use report::{Junit, Ndjson, Plain, Progress, Summary};
pub use store::run::RunDir;
pub use verify::feedback::AgentFailure;
pub use verify::judge::{Changed, Inspection, Scene};
pub use workspace::{Changes, FileState, IgnoreRules, ProtectedPaths, Snapshot, SnapshotOptions};

/// Running one child process under helixflow's supervision.
pub mod child {
    pub use crate::process::{run, tail};
}

/// Reading an agent's response in its declared format.
pub mod response {
    pub use crate::agent::response::*;
}

/// The syntax gate on one file or one text.
pub mod syntax {
    pub use crate::verify::syntax::{SyntaxError, check, check_file};
}

/// Gates run against a workspace.
pub mod gates {
    pub use crate::verify::gates::resolve_outputs;
}

/// The feedback a failed attempt gives the next one.
pub mod feedback {
    pub use crate::verify::feedback::{AGENT_FEEDBACK_LIMIT, for_agent, render};
}

/// The sub-agent verifier: its prompt, its verdict, the diff it reviews.
pub mod subagent {
    pub use crate::verify::subagent::{
        DIFF_LIMIT, FILE_DIFF_LIMIT, SubAgentCheck, SubAgentOutcome, Verdict, VerdictError, check,
        diff_of_changes, parse_verdict, verification_prompt,
    };
}

/// The node table of the language, which the schema, the LSP and the editors share.
pub mod schema {
    pub use crate::language::schema::{
        Arg, Choice, Context, NODES, NodeSchema, Prop, ValueType, nodes_in,
    };
}

/// Imports from git repositories, as a [`Loader`] resolves them.
pub mod imports {
    pub use crate::remote::{Fetched, Problem, Source};
}

/// The fast KDL reader the compiler uses.
pub mod kdl {
    pub use crate::language::kdl::parse;
}
