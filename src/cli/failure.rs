//! Why a command could not do its work: one type for every subcommand, printed once, by
//! [`super::main`]. A subcommand returns [`Outcome`]: `Ok` with its own exit code (a run that
//! failed a phase is a result, exit 1, not a failure of the command), or `Err` with what to tell
//! the user and the exit code for it.

use std::io::IsTerminal;

use crate::diagnostics::{self, Diagnostic, Format, Sources};

/// A subcommand's result: its exit code, or why it could not do its work.
pub(crate) type Outcome = Result<i32, Failure>;

/// What a command tells the user when it cannot do its work, and the exit code.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A sentence (without the `error: ` prefix) and the exit code.
    Message { code: i32, message: String },
    /// The pipeline file has errors: its diagnostics, shown as `lint` shows them (exit 2).
    Diagnostics {
        diagnostics: Vec<Diagnostic>,
        sources: Sources,
    },
}

impl Failure {
    /// Bad usage, or input that cannot be read or used (exit 2).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self::Message {
            code: crate::exit::INVALID,
            message: message.into(),
        }
    }

    /// helixflow itself failed: a file it must write, the runtime, its own state (exit 3).
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::Message {
            code: crate::exit::INTERNAL,
            message: message.into(),
        }
    }

    /// What the command checks does not hold, and the user must be told why (exit 1).
    pub(crate) fn failed(message: impl Into<String>) -> Self {
        Self::Message {
            code: crate::exit::FAILURE,
            message: message.into(),
        }
    }

    /// Another run of the same state folder is live (exit 4).
    pub(crate) fn busy(message: impl Into<String>) -> Self {
        Self::Message {
            code: crate::exit::BUSY,
            message: message.into(),
        }
    }

    /// The exit code for this failure.
    pub(crate) fn code(&self) -> i32 {
        match self {
            Self::Message { code, .. } => *code,
            Self::Diagnostics { .. } => crate::exit::INVALID,
        }
    }

    /// Tells the user (on standard error) and returns the exit code.
    pub(crate) fn report(self) -> i32 {
        let code = self.code();
        match self {
            Self::Message { message, .. } => say!("error: {message}"),
            Self::Diagnostics {
                diagnostics,
                sources,
            } => report(&diagnostics, &sources),
        }
        code
    }
}

/// Whether human output may use colour and Unicode graphics.
pub(crate) fn color(stream: &impl IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Prints diagnostics for people on standard error (used by commands other than `lint`).
pub(crate) fn report(diagnostics: &[Diagnostic], sources: &Sources) {
    let stderr = std::io::stderr();
    let color = color(&stderr);
    let _ = diagnostics::render(
        Format::Human,
        diagnostics,
        sources,
        color,
        &mut stderr.lock(),
    );
}

/// The messages of `Result<_, String>` helpers are about the user's input (exit 2).
impl From<String> for Failure {
    fn from(message: String) -> Self {
        Self::usage(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_failure_has_its_documented_exit_code() {
        assert_eq!(Failure::usage("x").code(), 2);
        assert_eq!(Failure::from("x".to_owned()).code(), 2);
        assert_eq!(Failure::failed("x").code(), 1);
        assert_eq!(Failure::internal("x").code(), 3);
        assert_eq!(Failure::busy("x").code(), 4);
        let invalid = Failure::Diagnostics {
            diagnostics: Vec::new(),
            sources: Sources::default(),
        };
        assert_eq!(invalid.code(), 2);
    }
}
