//! `helixflow fmt`: canonical formatting.

use std::path::PathBuf;

use super::failure::{Failure, Outcome};
use super::input;
use crate::diagnostics::{Diagnostics, FileId, Sources, rules};
use crate::language::format::format_source;
use crate::language::kdl::parse;

/// Arguments of `helixflow fmt`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Files to format in place (default: the nearest pipeline file); `-` formats standard input
    /// to standard output.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Write nothing; print a diff and exit 1 when a file is not formatted.
    #[arg(long)]
    check: bool,
}

pub(crate) fn run(args: &Args) -> Outcome {
    let files = if args.files.is_empty() {
        vec![super::pipeline_path(None)?]
    } else {
        args.files.clone()
    };
    // Every file is formatted, or said why not, whatever happened to the ones before it.
    Ok(files
        .iter()
        .map(|file| format_one(file, args.check).unwrap_or_else(Failure::report))
        .max()
        .unwrap_or(crate::exit::SUCCESS))
}

fn format_one(file: &PathBuf, check: bool) -> Outcome {
    let read = input::read(file, None)?;
    if let Err(found) = parse::parse(&read.text, FileId(0), parse::PARSE_BUDGET) {
        let mut sources = Sources::new();
        sources.add(&read.path, read.text.as_str());
        // As `lint` shows them: at most a hundred, then a count of the rest (a file broken in
        // every line has hundreds of thousands).
        let mut diagnostics = Diagnostics::default();
        diagnostics.extend(found);
        let diagnostics = diagnostics.into_sorted();
        input::report(&diagnostics, &sources);
        let why = if diagnostics.iter().any(|d| d.rule == &rules::INPUT_LIMIT) {
            "is over the limits of a pipeline file"
        } else {
            "is not valid KDL"
        };
        return Err(Failure::usage(format!(
            "{} {why}; not formatted",
            read.path.display()
        )));
    }
    let formatted = format_source(&read.text);
    let stdin = file.as_os_str() == "-";
    if check {
        if formatted == read.text {
            return Ok(crate::exit::SUCCESS);
        }
        let name = read.path.display().to_string();
        let diff = similar::TextDiff::from_lines(&read.text, &formatted);
        let diff = diff
            .unified_diff()
            .context_radius(3)
            .header(&name, &format!("{name} (formatted)"))
            .to_string();
        return super::emit(&diff).map(|code| code.max(crate::exit::FAILURE));
    }
    if stdin {
        return super::emit(&formatted);
    } else if formatted != read.text
        && let Err(e) = std::fs::write(file, &formatted)
    {
        return Err(Failure::usage(format!(
            "cannot write {}: {e}",
            file.display()
        )));
    }
    Ok(crate::exit::SUCCESS)
}
