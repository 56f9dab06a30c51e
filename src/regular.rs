//! Reading files others made (an agent's document, a pipeline, a prompt): regular files only.
//!
//! Opening a FIFO for reading blocks until a writer comes, and reading a character device may
//! never end; either would stall helixflow, its signals and its timeouts with it. So a file is
//! opened without blocking (`O_NONBLOCK`), its type is read from the open descriptor (no race with
//! a rename between a check and the open), and anything but a regular file is refused with a
//! message that names what it is.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// A path that leads to something other than a regular file.
#[derive(Debug)]
pub(crate) struct NotRegular {
    /// What it is, in words: "a FIFO", "a folder", "a character device".
    pub what: &'static str,
}

impl fmt::Display for NotRegular {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, not a regular file", self.what)
    }
}

impl std::error::Error for NotRegular {}

/// What a file type is, in words.
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_socket() {
            return "a socket";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
    }
    if file_type.is_dir() {
        "a folder"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading when it is a regular file (or a link to one), without ever waiting
/// for a writer; an error whose inner error is [`NotRegular`] otherwise.
pub(crate) fn open(path: &Path) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    #[cfg(not(unix))]
    {
        // Without `O_NONBLOCK` the type is checked before the open instead.
        let kind = std::fs::metadata(path)?.file_type();
        if !kind.is_file() {
            return Err(io::Error::other(NotRegular {
                what: kind_of(kind),
            }));
        }
    }
    let file = options.open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(io::Error::other(NotRegular {
            what: kind_of(kind),
        }));
    }
    Ok(file)
}

/// At most `cap` bytes of the regular file at `path`.
pub(crate) fn read_capped(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let file = open(path)?;
    let mut bytes = buffer_for(&file, cap);
    file.take(cap).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// A buffer for reading at most `cap` bytes of `file` whole: sized for the file as it is now (one
/// byte more, for the read that finds its end), so that a large file is not read in doubling
/// pieces, each copied into a buffer twice the size.
pub(crate) fn buffer_for(file: &File, cap: u64) -> Vec<u8> {
    let len = file.metadata().map_or(0, |meta| meta.len());
    // Never more than the cap allows, nor a size a file that shrank since could make huge.
    Vec::with_capacity(usize::try_from(len.min(cap).min(1 << 30)).unwrap_or(0) + 1)
}

/// The whole of the regular file at `path`, refused (an `InvalidData` error, nothing read) when
/// it is larger than `cap` bytes: a file planted where helixflow keeps its own is never read whole.
pub(crate) fn read_within(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let file = open(path)?;
    let len = file.metadata()?.len();
    if len > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {cap} bytes"),
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0) + 1);
    file.take(cap).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The whole of the regular file at `path`.
pub(crate) fn read(path: &Path) -> io::Result<Vec<u8>> {
    read_capped(path, u64::MAX)
}

/// What a path is when an error says it is not a regular file.
pub(crate) fn not_regular(error: &io::Error) -> Option<&NotRegular> {
    error.get_ref()?.downcast_ref::<NotRegular>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("x.md");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid, NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let error = read(&fifo).unwrap_err();
        assert_eq!(not_regular(&error).unwrap().what, "a FIFO");
        assert_eq!(error.to_string(), "a FIFO, not a regular file");
    }

    #[test]
    fn a_folder_is_refused_and_a_file_read() {
        let dir = tempfile::tempdir().unwrap();
        let error = read(dir.path()).unwrap_err();
        assert!(not_regular(&error).is_some() || error.kind() == io::ErrorKind::IsADirectory);
        std::fs::write(dir.path().join("a.md"), "hello").unwrap();
        assert_eq!(read_capped(&dir.path().join("a.md"), 3).unwrap(), b"hel");
    }
}
