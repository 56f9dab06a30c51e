//! `file:` URIs ↔ paths.
//!
//! The protocol names documents by URI; the language layer reads paths. Only `file:` URIs name
//! files on this machine; any other scheme (an editor's unsaved `untitled:` buffer) has no path.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use lsp_types::Uri;

/// The local path a `file:` URI names, percent-decoded; `None` for other schemes and for files on
/// other hosts.
pub(crate) fn to_path(uri: &Uri) -> Option<PathBuf> {
    let text = uri.as_str();
    let scheme_end = text.find(':')?;
    if !text[..scheme_end].eq_ignore_ascii_case("file") {
        return None;
    }
    let rest = text[scheme_end + 1..].strip_prefix("//")?;
    let path_start = rest.find('/')?;
    let host = &rest[..path_start];
    if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
        return None;
    }
    let path = &rest[path_start..];
    let path = &path[..path.find(['?', '#']).unwrap_or(path.len())];
    let bytes = percent_decode(path)?;
    Some(PathBuf::from(OsString::from_vec(bytes)))
}

/// The `file:` URI of an absolute path; `None` for a relative one.
pub(crate) fn from_path(path: &Path) -> Option<Uri> {
    if !path.is_absolute() {
        return None;
    }
    let mut text = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'.' | b'_' | b'~') {
            text.push(char::from(b));
        } else {
            text.push_str(&format!("%{b:02X}"));
        }
    }
    Uri::from_str(&text).ok()
}

fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(text: &str) -> Uri {
        Uri::from_str(text).unwrap()
    }

    #[test]
    fn decodes_file_uris() {
        assert_eq!(
            to_path(&uri("file:///home/a%20b/pipe%C3%BCline.kdl")),
            Some(PathBuf::from("/home/a b/pipeüline.kdl"))
        );
        assert_eq!(
            to_path(&uri("file://localhost/tmp/x.kdl")),
            Some(PathBuf::from("/tmp/x.kdl"))
        );
        assert_eq!(
            to_path(&uri("FILE:///tmp/x.kdl#frag")),
            Some(PathBuf::from("/tmp/x.kdl"))
        );
    }

    #[test]
    fn other_schemes_and_hosts_have_no_path() {
        assert_eq!(to_path(&uri("untitled:Untitled-1")), None);
        assert_eq!(to_path(&uri("file://server/share/x.kdl")), None);
        assert_eq!(to_path(&uri("https://example.com/x.kdl")), None);
    }

    #[test]
    fn encodes_and_round_trips_paths() {
        let path = Path::new("/tmp/a b/ü#%?/x.kdl");
        let encoded = from_path(path).unwrap();
        assert_eq!(encoded.as_str(), "file:///tmp/a%20b/%C3%BC%23%25%3F/x.kdl");
        assert_eq!(to_path(&encoded).as_deref(), Some(path));
        assert_eq!(from_path(Path::new("relative.kdl")), None);
    }
}
