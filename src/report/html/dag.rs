//! The DAG as an SVG drawing: phases as boxes in columns by depth (longest path from a phase
//! without dependencies), ordered in each column to keep edges short, each box a link to the
//! phase's details, coloured and labelled by its status. The items of a fan-out (`migrate[a]`,
//! `migrate[b]`) are one box with their count.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::escape::esc;
use super::model::{PhaseView, RunView};
use super::status::{Status, phase_status};

const WIDTH: usize = 184;
const HEIGHT: usize = 46;
const GAP_X: usize = 56;
const GAP_Y: usize = 14;
const MARGIN: usize = 8;
/// Characters of a name that fit in a box.
const NAME_CHARS: usize = 24;

/// A box of the drawing: one phase, or every item of one fan-out.
struct Node {
    /// The phases it stands for (one, or a fan-out's items).
    phases: Vec<usize>,
    /// The fan-out's name, for a fan-out.
    fan_out: Option<String>,
    level: usize,
    /// Its place in its column.
    row: f64,
}

/// The drawing of a run's DAG.
pub(crate) fn svg(view: &RunView) -> String {
    let (nodes, edges) = nodes_and_edges(view);
    let levels = nodes.iter().map(|n| n.level + 1).max().unwrap_or(0);
    let mut columns: Vec<Vec<usize>> = vec![Vec::new(); levels];
    for (i, node) in nodes.iter().enumerate() {
        columns[node.level].push(i);
    }
    let rows = columns.iter().map(Vec::len).max().unwrap_or(0);
    let width = MARGIN * 2 + levels * WIDTH + levels.saturating_sub(1) * GAP_X;
    let height = MARGIN * 2 + rows * HEIGHT + rows.saturating_sub(1) * GAP_Y;
    let mut place: HashMap<usize, (usize, usize)> = HashMap::new();
    for (level, column) in columns.iter().enumerate() {
        let mut column = column.clone();
        column.sort_by(|&a, &b| nodes[a].row.total_cmp(&nodes[b].row));
        for (row, &node) in column.iter().enumerate() {
            place.insert(
                node,
                (
                    MARGIN + level * (WIDTH + GAP_X),
                    MARGIN + row * (HEIGHT + GAP_Y),
                ),
            );
        }
    }
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg class=\"dag\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"group\" aria-label=\"The phases and the phases they depend on\"><defs><marker id=\"arrow\" viewBox=\"0 0 8 8\" refX=\"8\" refY=\"4\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0L8,4L0,8z\"/></marker></defs><g class=\"edges\" aria-hidden=\"true\">"
    );
    for &(from, to) in &edges {
        let (x1, y1) = place[&from];
        let (x2, y2) = place[&to];
        let (x1, y1, x2, y2) = (x1 + WIDTH, y1 + HEIGHT / 2, x2, y2 + HEIGHT / 2);
        let bend = (x2.saturating_sub(x1)) / 2;
        let _ = write!(
            out,
            "<path d=\"M{x1},{y1}C{},{y1} {},{y2} {x2},{y2}\" marker-end=\"url(#arrow)\"/>",
            x1 + bend,
            x2 - bend
        );
    }
    out.push_str("</g>");
    for (i, node) in nodes.iter().enumerate() {
        let (x, y) = place[&i];
        node_svg(&mut out, view, node, x, y);
    }
    out.push_str("</svg>");
    out
}

/// One box: a link to the phase's details.
fn node_svg(out: &mut String, view: &RunView, node: &Node, x: usize, y: usize) {
    let phases: Vec<&PhaseView> = node.phases.iter().map(|&p| &view.phases[p]).collect();
    let (name, status, line) = match &node.fan_out {
        None => {
            let phase = phases[0];
            let status = phase_status(phase, view.live);
            let attempts = match (phase.attempts.len(), phase.max_attempts) {
                (0, _) => String::new(),
                (n, Some(max)) => format!(" · {n}/{max}"),
                (n, None) => format!(" · {n}"),
            };
            let line = format!("{} {}{attempts}", status.symbol(), status.word());
            (phase.name.clone(), status, line)
        }
        Some(base) => {
            let statuses: Vec<Status> = phases.iter().map(|p| phase_status(p, view.live)).collect();
            let worst = statuses
                .iter()
                .copied()
                .max_by_key(|s| s.severity())
                .unwrap_or(Status::NotStarted);
            let mut counts: Vec<(Status, usize)> = Vec::new();
            for status in statuses {
                match counts.iter_mut().find(|(s, _)| *s == status) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((status, 1)),
                }
            }
            let summary: Vec<String> = counts
                .iter()
                .map(|(s, n)| format!("{n} {}", s.word()))
                .collect();
            let items = phases.len();
            let line = format!("{} {items} items: {}", worst.symbol(), summary.join(", "));
            (format!("{base}[…]"), worst, line)
        }
    };
    let shown = shorten(&name, NAME_CHARS);
    let target = node.phases[0];
    let _ = write!(
        out,
        "<a href=\"#p{target}\" class=\"node {}\" aria-label=\"{}: {}\"><title>{}: {}</title><rect x=\"{x}\" y=\"{y}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" rx=\"6\"/><text x=\"{}\" y=\"{}\" class=\"name\">{}</text><text x=\"{}\" y=\"{}\" class=\"state\">{}</text></a>",
        status.class(),
        esc(&name),
        esc(&line),
        esc(&name),
        esc(&line),
        x + 10,
        y + 19,
        esc(&shown),
        x + 10,
        y + 36,
        esc(&shorten(&line, NAME_CHARS + 4)),
    );
}

/// `text` in at most `chars` characters, with `…` where it was cut.
fn shorten(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(chars.saturating_sub(1)).collect();
    kept.push('…');
    kept
}

/// The boxes (a phase, or a fan-out's items together) with their levels and places in their
/// columns, and the edges between them.
fn nodes_and_edges(view: &RunView) -> (Vec<Node>, Vec<(usize, usize)>) {
    let mut nodes: Vec<Node> = Vec::new();
    let mut of_phase = vec![0; view.phases.len()];
    let mut groups: HashMap<&str, usize> = HashMap::new();
    for (p, phase) in view.phases.iter().enumerate() {
        let mut new_node = |fan_out: Option<String>| {
            nodes.push(Node {
                phases: Vec::new(),
                fan_out,
                level: 0,
                row: 0.0,
            });
            nodes.len() - 1
        };
        let node = if let Some((base, _)) = &phase.fan_out {
            *groups
                .entry(base.as_str())
                .or_insert_with(|| new_node(Some(base.clone())))
        } else {
            new_node(None)
        };
        nodes[node].phases.push(p);
        of_phase[p] = node;
    }
    let mut edges: Vec<(usize, usize)> = view
        .edges
        .iter()
        .map(|&(a, b)| (of_phase[a], of_phase[b]))
        .filter(|(a, b)| a != b)
        .collect();
    edges.sort_unstable();
    edges.dedup();
    levels(&mut nodes, &edges);
    order(&mut nodes, &edges);
    (nodes, edges)
}

/// Each node's level: the longest path to it from a node without dependencies. Edges that would
/// close a cycle (none in a checked pipeline) are not followed.
fn levels(nodes: &mut [Node], edges: &[(usize, usize)]) {
    let mut incoming = vec![0usize; nodes.len()];
    let mut outgoing: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for &(a, b) in edges {
        incoming[b] += 1;
        outgoing[a].push(b);
    }
    let mut ready: Vec<usize> = (0..nodes.len()).filter(|&n| incoming[n] == 0).collect();
    while let Some(n) = ready.pop() {
        for &next in &outgoing[n] {
            nodes[next].level = nodes[next].level.max(nodes[n].level + 1);
            incoming[next] -= 1;
            if incoming[next] == 0 {
                ready.push(next);
            }
        }
    }
}

/// Orders each column by the mean place of the nodes each depends on (then of those depending on
/// it), a few sweeps: edges cross less.
fn order(nodes: &mut [Node], edges: &[(usize, usize)]) {
    // The nodes of each level, in their first order: a sweep sorts each column in place (a
    // pipeline a thousand phases deep has a thousand columns).
    let levels = nodes.iter().map(|n| n.level + 1).max().unwrap_or(0);
    let mut columns: Vec<Vec<usize>> = vec![Vec::new(); levels];
    for (n, node) in nodes.iter_mut().enumerate() {
        let column = &mut columns[node.level];
        node.row = column.len() as f64;
        column.push(n);
    }
    for sweep in 0..4 {
        let mut sums: Vec<(f64, usize)> = vec![(0.0, 0); nodes.len()];
        for &(a, b) in edges {
            let (from, to) = if sweep % 2 == 0 { (a, b) } else { (b, a) };
            sums[to].0 += nodes[from].row;
            sums[to].1 += 1;
        }
        for (node, (sum, count)) in nodes.iter_mut().zip(sums) {
            if count > 0 {
                // Between the mean and where it was, so that ties keep their order.
                node.row = sum / count as f64 + node.row * 1e-3;
            }
        }
        for column in &mut columns {
            // Ties in the order of the nodes, as a column taken afresh would have them.
            column.sort_by(|&a, &b| nodes[a].row.total_cmp(&nodes[b].row).then(a.cmp(&b)));
            for (row, &n) in column.iter().enumerate() {
                nodes[n].row = row as f64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::event::{Event, PhaseStatus, Stamped};
    use crate::store::run::RunDir;

    fn stamped(event: Event) -> Stamped {
        Stamped {
            time: "2026-01-01T00:00:00.000Z".to_owned(),
            elapsed_ms: 0,
            event,
        }
    }

    #[test]
    fn the_items_of_a_fan_out_are_one_box_with_their_count() {
        let run = RunDir {
            path: std::path::PathBuf::from("/nonexistent/run"),
            run_id: "1".to_owned(),
        };
        let names = ["plan", "migrate[a]", "migrate[b]", "migrate[c]", "report"];
        let mut events = vec![stamped(Event::RunStarted {
            run_id: "1".to_owned(),
            pipeline: "p".to_owned(),
            phases: names.iter().map(|n| (*n).to_owned()).collect(),
            max_parallel: 2,
            resumes: None,
        })];
        for (name, status) in [
            ("plan", PhaseStatus::Passed),
            ("migrate[a]", PhaseStatus::Passed),
            ("migrate[b]", PhaseStatus::Failed),
            ("migrate[c]", PhaseStatus::Passed),
            ("report", PhaseStatus::Skipped),
        ] {
            events.push(stamped(Event::PhaseFinished {
                phase: name.to_owned(),
                status,
                attempts: 1,
                duration_ms: 1,
                reason: None,
            }));
        }
        let mut view = super::super::model::Builder::new(&run)
            .events(&events)
            .finish(
                Some(false),
                &mut super::super::model::FolderCache::default(),
            );
        view.edges = vec![(0, 1), (0, 2), (0, 3), (1, 4), (2, 4), (3, 4)];
        let (nodes, edges) = nodes_and_edges(&view);
        assert_eq!(nodes.len(), 3);
        assert_eq!(edges, [(0, 1), (1, 2)]);
        assert_eq!(nodes.iter().map(|n| n.level).collect::<Vec<_>>(), [0, 1, 2]);
        let drawing = svg(&view);
        assert!(drawing.contains("migrate[…]"), "{drawing}");
        assert!(
            drawing.contains("✗ 3 items: 2 passed, 1 failed"),
            "{drawing}"
        );
        assert!(drawing.contains("class=\"node s-failed\""), "{drawing}");
    }

    #[test]
    fn names_are_cut_with_an_ellipsis() {
        assert_eq!(shorten("abc", 3), "abc");
        assert_eq!(shorten("abcd", 3), "ab…");
    }
}
