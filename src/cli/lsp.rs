//! `helixflow lsp`: the language server, over standard input and output.

use super::failure::{Failure, Outcome};
use crate::lsp::{self, Ending};

/// Arguments of `helixflow lsp`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Talk over standard input and output (the only transport; accepted because editors'
    /// language clients pass it).
    #[arg(long)]
    stdio: bool,
}

pub(crate) fn run(args: &Args) -> Outcome {
    // Standard input and output are the transport whether or not `--stdio` was given.
    let _ = args.stdio;
    match lsp::serve_stdio() {
        Ok(Ending::Clean) => Ok(crate::exit::SUCCESS),
        // The protocol asks for exit code 1 when `exit` comes without `shutdown`.
        Ok(Ending::Abrupt) => Ok(crate::exit::FAILURE),
        Err(e) => Err(Failure::internal(e.to_string())),
    }
}
