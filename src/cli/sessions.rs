//! Agent sessions judged by helixflow's Stop hooks, as `helixflow runs` lists them and
//! `helixflow show SESSION` shows one: every stop, its verdict, its gates and its feedback.

use std::fmt::Write as _;
use std::path::Path;

use crate::event::GateStatus;
use crate::store::hooks::{self, SessionDir, SessionRecord};
use crate::text::one_line;

/// The table of hook sessions, for `helixflow runs`; empty when there are none.
pub(super) fn table(state_dir: &Path) -> String {
    let Ok(sessions) = hooks::list_sessions(state_dir) else {
        return String::new();
    };
    if sessions.is_empty() {
        return String::new();
    }
    let id_width = sessions
        .iter()
        .map(|(_, r)| one_line(&r.session_id).chars().count())
        .max()
        .unwrap_or(0)
        .max(7);
    let mut out = String::from("\nagent sessions judged by `helixflow hook`:\n");
    let _ = writeln!(
        out,
        "{:<id_width$} {:<6} {:<12} {:<5} {:<18} updated",
        "session", "agent", "phase", "stops", "last"
    );
    for (_, record) in &sessions {
        let _ = writeln!(
            out,
            "{:<id_width$} {:<6} {:<12} {:<5} {:<18} {}",
            one_line(&record.session_id),
            one_line(&record.agent),
            one_line(record.phase.as_deref().unwrap_or("-")),
            record.judgements,
            record.last.map_or("-", hooks::Verdict::words),
            one_line(&record.updated)
        );
    }
    out
}

/// The session `id` names (its whole id, or the start of only one), shown; None when no
/// session has that id.
pub(super) fn show(state_dir: &Path, id: &str) -> Option<Result<String, String>> {
    let sessions = hooks::list_sessions(state_dir).ok()?;
    let exact = sessions.iter().find(|(_, r)| r.session_id == id);
    let found = if let Some(found) = exact {
        found
    } else {
        let mut starting: Vec<&(SessionDir, SessionRecord)> = sessions
            .iter()
            .filter(|(_, r)| id.len() >= 4 && r.session_id.starts_with(id))
            .collect();
        match starting.len() {
            0 => return None,
            1 => starting.remove(0),
            n => {
                return Some(Err(format!(
                    "{n} agent sessions start with \"{id}\": give more of the id"
                )));
            }
        }
    };
    Some(Ok(describe(&found.0, &found.1)))
}

fn describe(dir: &SessionDir, record: &SessionRecord) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "agent session {} ({}), started {}{}",
        one_line(&record.session_id),
        one_line(&record.agent),
        one_line(&record.started),
        record
            .cwd
            .as_deref()
            .map(|cwd| format!(" in {}", one_line(cwd)))
            .unwrap_or_default()
    );
    let judgements = dir.judgements().unwrap_or_default();
    for judgement in &judgements {
        let mut verdict = judgement.verdict.words().to_owned();
        if judgement.refused_in_a_row > 0 {
            let _ = write!(verdict, " ({} in a row)", judgement.refused_in_a_row);
        }
        let _ = writeln!(
            out,
            "── stop {} ({}, {}{}): {verdict} in {}ms",
            judgement.number,
            one_line(&judgement.at),
            one_line(&judgement.event),
            judgement
                .phase
                .as_deref()
                .map(|p| format!(", phase \"{}\"", one_line(p)))
                .unwrap_or_default(),
            judgement.duration_ms
        );
        if let Some(error) = &judgement.error {
            let _ = writeln!(out, "   error: {}", one_line(error));
        }
        for gate in &judgement.gates {
            let status = match gate.status {
                GateStatus::Passed => "passed",
                GateStatus::Failed => "failed",
                GateStatus::Skipped => "skipped",
            };
            let _ = writeln!(
                out,
                "   {status:<8} {} ({})",
                one_line(&gate.name),
                gate.kind
            );
        }
        let feedback = dir.feedback_file(judgement.number);
        if let Ok(text) = std::fs::read_to_string(&feedback) {
            let _ = writeln!(out, "   feedback ({}):", feedback.display());
            for line in text.lines() {
                let _ = writeln!(out, "   | {}", one_line(line));
            }
        }
    }
    let _ = writeln!(
        out,
        "\njournal: {}",
        dir.path.join("judgements.jsonl").display()
    );
    out
}
