//! `helixflow lsp`: a language server for pipeline files, over the language layer only (it never
//! touches the engine).
//!
//! It publishes the same diagnostics as `helixflow lint`, and offers hover documentation and
//! completion from the schema table, go-to-definition and find-references for phases, agents and
//! templates across imports, a document outline, formatting as `helixflow fmt` does it, and the
//! fixes that diagnostics carry as code actions. Positions are UTF-16, the protocol's default.
//!
//! Built on `lsp-server` and `lsp-types` (as rust-analyzer and ruff are): a synchronous loop over
//! crossbeam channels, in which the server decides itself what runs on which thread. Checks run on
//! threads of their own with a time budget, so the loop answers requests while a pathological file
//! is being checked.

// `lsp_types::Uri` hashes and compares by its text; the cell inside it only caches a parse of the
// authority, so URIs are sound keys (rust-analyzer allows this lint for the same type).
#![allow(clippy::mutable_key_type)]

mod check;
mod completion;
mod docs;
mod documents;
mod edits;
mod hover;
mod locate;
mod position;
mod server;
mod symbols;
mod uri;
mod wire;
mod workspace;

pub(crate) use server::Ending;

/// A failure of the connection itself (not of a request, which is answered with an error).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// Reading or writing the messages failed, e.g. a malformed header.
    #[error("language server connection: {0}")]
    Io(#[from] std::io::Error),
}

/// Serves one session over standard input and output.
///
/// # Errors
/// Fails when the messages on standard input are not the protocol's framing (answered first with
/// a JSON-RPC parse error; see `wire`).
pub(crate) fn serve_stdio() -> Result<Ending, Error> {
    let (connection, io_threads) = wire::stdio();
    // The server, and with it the connection, is dropped before the threads are joined: the
    // writer stops when the last sender is gone, after writing what was sent.
    let result = server::Server::new(connection).run();
    match result {
        Ok(ending) => {
            // The reader has stopped at `exit` or at the end of the input.
            io_threads.join()?;
            Ok(ending)
        }
        // Writing failed, so the editor is gone; the reader may wait for input forever.
        Err(server::Closed) => Ok(Ending::Abrupt),
    }
}
