//! The language server's messages on standard input and output: `Content-Length` framing read
//! here, in front of `lsp-server`'s types, so that what an editor (or anything else) claims costs
//! nothing until it is sent.
//!
//! `lsp-server`'s own reader allocates the length a header claims before reading a byte of the
//! body, and reads header lines of any length; a header of `Content-Length: 1000000000000` aborts
//! the process. Here a header line is at most [`MAX_HEADER_LINE`] bytes, a message at most
//! [`MAX_MESSAGE`] bytes, and a body's buffer grows only with what actually arrives. A framing
//! problem is answered with a JSON-RPC parse error (id `null`, as the JSON-RPC specification has
//! it) and ends the session: after a bad header the stream cannot be trusted to be in step. A body
//! that is not a message, in a frame that is sound, is answered the same way and reading goes on.

use std::io::{self, BufRead, Read, Write};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, select};
use lsp_server::{Connection, Message};
use serde_json::json;

/// Largest message body read (the largest pipeline file an editor sends is far smaller).
pub(crate) const MAX_MESSAGE: u64 = 64 * 1024 * 1024;
/// Longest header line read, its line ending included.
pub(crate) const MAX_HEADER_LINE: u64 = 8 * 1024;
/// Most header lines in one message.
const MAX_HEADER_LINES: usize = 32;
/// JSON-RPC's code for a message that cannot be parsed.
const PARSE_ERROR: i32 = -32700;

/// One thing read off the input.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A message.
    Message(Message),
    /// A body in a sound frame that is not a message: answered, and reading goes on.
    NotAMessage(String),
}

/// Why the input cannot be read any further.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FramingError {
    #[error("cannot read the input: {0}")]
    Io(#[from] io::Error),
    #[error("a header line is longer than {MAX_HEADER_LINE} bytes")]
    LongHeader,
    #[error("more than {MAX_HEADER_LINES} header lines")]
    ManyHeaders,
    #[error("malformed header {0:?}")]
    Malformed(String),
    #[error("Content-Length {0:?} is not a number of bytes")]
    BadLength(String),
    #[error("a message of {0} bytes is larger than the largest accepted ({MAX_MESSAGE} bytes)")]
    TooLarge(u64),
    #[error("no Content-Length header")]
    NoLength,
    #[error("the input ended inside a message ({got} of {expected} bytes)")]
    Truncated { got: usize, expected: u64 },
}

/// Reads the next message; `Ok(None)` at the end of the input between messages.
pub(crate) fn read(input: &mut impl BufRead) -> Result<Option<Incoming>, FramingError> {
    let mut length = None;
    let mut lines = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = input
            .by_ref()
            .take(MAX_HEADER_LINE)
            .read_until(b'\n', &mut line)?;
        if read == 0 {
            if lines == 0 {
                return Ok(None);
            }
            return Err(FramingError::Truncated {
                got: 0,
                expected: length.unwrap_or(0),
            });
        }
        if line.last() != Some(&b'\n') {
            if read as u64 == MAX_HEADER_LINE {
                return Err(FramingError::LongHeader);
            }
            return Err(FramingError::Truncated {
                got: 0,
                expected: length.unwrap_or(0),
            });
        }
        lines += 1;
        if lines > MAX_HEADER_LINES {
            return Err(FramingError::ManyHeaders);
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            break;
        }
        let (name, value) = text
            .split_once(':')
            .ok_or_else(|| FramingError::Malformed(text.to_owned()))?;
        if name.trim().eq_ignore_ascii_case("Content-Length") {
            let value = value.trim();
            let bytes: u64 = value
                .parse()
                .map_err(|_| FramingError::BadLength(value.to_owned()))?;
            if bytes > MAX_MESSAGE {
                return Err(FramingError::TooLarge(bytes));
            }
            length = Some(bytes);
        }
    }
    let expected = length.ok_or(FramingError::NoLength)?;
    // The buffer grows with what arrives, not with what the header claims.
    let mut body = Vec::with_capacity(expected.min(64 * 1024) as usize);
    input.by_ref().take(expected).read_to_end(&mut body)?;
    if (body.len() as u64) < expected {
        return Err(FramingError::Truncated {
            got: body.len(),
            expected,
        });
    }
    Ok(Some(match serde_json::from_slice::<Message>(&body) {
        Ok(message) => Incoming::Message(message),
        Err(error) => Incoming::NotAMessage(format!("the message is not JSON-RPC: {error}")),
    }))
}

/// A JSON-RPC parse error, framed, for a message that has no id to answer.
fn parse_error(message: &str) -> Vec<u8> {
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": PARSE_ERROR, "message": message },
    })
    .to_string();
    let mut framed = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    framed.extend_from_slice(body.as_bytes());
    framed
}

/// The threads that read standard input and write standard output.
pub(crate) struct IoThreads {
    reader: JoinHandle<Result<(), FramingError>>,
    writer: JoinHandle<io::Result<()>>,
}

impl IoThreads {
    /// Waits for both threads; the reader's framing problem, if it met one, after the writer has
    /// written its answer.
    pub(crate) fn join(self) -> io::Result<()> {
        let read = self.reader.join().unwrap_or(Ok(()));
        let written = self.writer.join().unwrap_or(Ok(()));
        written?;
        read.map_err(|error| match error {
            FramingError::Io(error) => error,
            other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
        })
    }
}

/// A connection over standard input and output, with this module's reader.
pub(crate) fn stdio() -> (Connection, IoThreads) {
    let (to_server, from_input) = crossbeam_channel::bounded::<Message>(0);
    let (to_output, from_server) = crossbeam_channel::bounded::<Message>(0);
    let (to_output_raw, raw) = crossbeam_channel::unbounded::<Vec<u8>>();
    let reader = std::thread::Builder::new()
        .name("lsp-reader".to_owned())
        .spawn(move || read_loop(&mut io::stdin().lock(), &to_server, &to_output_raw))
        .expect("a thread can be started");
    let writer = std::thread::Builder::new()
        .name("lsp-writer".to_owned())
        .spawn(move || write_loop(&mut io::stdout().lock(), &from_server, &raw))
        .expect("a thread can be started");
    let connection = Connection {
        sender: to_output,
        receiver: from_input,
    };
    (connection, IoThreads { reader, writer })
}

/// Reads messages and hands them to the server until `exit`, the end of the input or a framing
/// problem (answered, then the server sees the input end).
fn read_loop(
    input: &mut impl BufRead,
    to_server: &Sender<Message>,
    answer: &Sender<Vec<u8>>,
) -> Result<(), FramingError> {
    loop {
        match read(input) {
            Ok(None) => return Ok(()),
            Ok(Some(Incoming::Message(message))) => {
                let exit = matches!(&message, Message::Notification(n) if n.method == "exit");
                if to_server.send(message).is_err() || exit {
                    return Ok(());
                }
            }
            Ok(Some(Incoming::NotAMessage(why))) => {
                let _ = answer.send(parse_error(&why));
            }
            Err(FramingError::Io(error)) => return Err(FramingError::Io(error)),
            Err(error) => {
                let _ = answer.send(parse_error(&error.to_string()));
                return Err(error);
            }
        }
    }
}

/// Writes the server's messages and the reader's answers until both are done.
fn write_loop(
    output: &mut impl Write,
    from_server: &Receiver<Message>,
    raw: &Receiver<Vec<u8>>,
) -> io::Result<()> {
    let (mut server_open, mut raw_open) = (true, true);
    while server_open || raw_open {
        let never_message = crossbeam_channel::never();
        let never_raw = crossbeam_channel::never();
        let messages = if server_open {
            from_server
        } else {
            &never_message
        };
        let answers = if raw_open { raw } else { &never_raw };
        select! {
            recv(messages) -> message => match message {
                Ok(message) => message.write(output)?,
                Err(_) => server_open = false,
            },
            recv(answers) -> bytes => match bytes {
                Ok(bytes) => {
                    output.write_all(&bytes)?;
                    output.flush()?;
                }
                Err(_) => raw_open = false,
            },
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(header: &str, body: &str) -> Vec<u8> {
        format!("{header}\r\n\r\n{body}").into_bytes()
    }

    #[test]
    fn a_sound_message_is_read() {
        let body = r#"{"jsonrpc":"2.0","method":"exit"}"#;
        let input = framed(&format!("Content-Length: {}", body.len()), body);
        let read = read(&mut input.as_slice()).unwrap();
        assert!(
            matches!(read, Some(Incoming::Message(Message::Notification(n))) if n.method == "exit")
        );
    }

    #[test]
    fn claimed_lengths_are_capped_before_anything_is_allocated() {
        for (claim, expected) in [
            ("1e12", "is not a number"),
            ("18446744073709551615", "larger than the largest"),
            ("18446744073709551616", "is not a number"),
            ("4294967296", "larger than the largest"),
            ("-1", "is not a number"),
        ] {
            let input = framed(&format!("Content-Length: {claim}"), "{}");
            let error = read(&mut input.as_slice()).unwrap_err().to_string();
            assert!(error.contains(expected), "{claim}: {error}");
        }
    }

    #[test]
    fn a_short_body_is_truncated_not_awaited() {
        let input = framed("Content-Length: 1000", "{}");
        let error = read(&mut input.as_slice()).unwrap_err();
        assert!(matches!(
            error,
            FramingError::Truncated {
                got: 2,
                expected: 1000
            }
        ));
    }

    #[test]
    fn an_endless_header_line_is_cut_off() {
        let input = vec![b'A'; 100_000];
        let error = read(&mut input.as_slice()).unwrap_err();
        assert!(matches!(error, FramingError::LongHeader));
    }

    #[test]
    fn a_body_that_is_not_a_message_is_answered_and_reading_goes_on() {
        let mut input = framed("Content-Length: 5", "hello");
        input.extend(framed("Content-Length: 2", "{}"));
        let mut input = input.as_slice();
        assert!(matches!(
            read(&mut input),
            Ok(Some(Incoming::NotAMessage(_)))
        ));
        assert!(matches!(
            read(&mut input),
            Ok(Some(Incoming::NotAMessage(_)))
        ));
        assert!(matches!(read(&mut input), Ok(None)));
    }
}
