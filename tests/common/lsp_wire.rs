//! Reading the language server's messages off its standard output, for the LSP tests and the LSP
//! benchmark.

use std::io::BufRead;

use serde_json::Value;

/// The next JSON-RPC message (`Content-Length` framing), or `None` at the end of the stream or on
/// a message that cannot be read.
pub(crate) fn read_message(reader: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("Content-Length: ") {
            length = value.parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}
