//! The phase DAG: build, cycles, topological levels, and dot/mermaid/json output.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;

use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;
use serde::Serialize;

use crate::model::Pipeline;

/// Phases as nodes (weight: index into `Pipeline::phases`), dependencies as edges from the
/// dependency to the dependent (weight: index into the dependent's `depends_on`).
#[derive(Debug, Clone)]
pub(crate) struct PhaseGraph {
    graph: DiGraph<usize, usize>,
}

/// One edge of a dependency cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CycleEdge {
    /// The phase depended on.
    pub from: usize,
    /// The phase that depends on it.
    pub to: usize,
    /// Index of the dependency in `to`'s `depends_on`.
    pub dependency: usize,
}

impl PhaseGraph {
    /// Builds the graph; unknown dependency names are left out (lint reports them).
    pub(crate) fn new(pipeline: &Pipeline) -> Self {
        let mut graph = DiGraph::with_capacity(pipeline.phases.len(), pipeline.phases.len());
        let mut by_name: HashMap<&str, NodeIndex> = HashMap::with_capacity(pipeline.phases.len());
        for (index, phase) in pipeline.phases.iter().enumerate() {
            let node = graph.add_node(index);
            by_name.entry(phase.name.value.as_str()).or_insert(node);
        }
        for (index, phase) in pipeline.phases.iter().enumerate() {
            for (k, dependency) in phase.depends_on.iter().enumerate() {
                if let Some(&from) = by_name.get(dependency.value.as_str()) {
                    graph.add_edge(from, NodeIndex::new(index), k);
                }
            }
        }
        Self { graph }
    }

    /// One shortest cycle through each strongly connected component that has one.
    pub(crate) fn cycles(&self) -> Vec<Vec<CycleEdge>> {
        let mut cycles = Vec::new();
        for component in petgraph::algo::tarjan_scc(&self.graph) {
            let start = *component.iter().min().expect("components are not empty");
            let cyclic = component.len() > 1 || self.graph.find_edge(start, start).is_some();
            if cyclic {
                cycles.push(self.cycle_through(start, &component));
            }
        }
        cycles.sort_by_key(|c| c.first().map(|e| e.from));
        cycles
    }

    /// A shortest cycle from `start` back to itself within `component` (breadth first).
    fn cycle_through(&self, start: NodeIndex, component: &[NodeIndex]) -> Vec<CycleEdge> {
        let mut reached_by: HashMap<NodeIndex, EdgeIndex> = HashMap::new();
        let mut queue = VecDeque::from([start]);
        while let Some(node) = queue.pop_front() {
            for edge in self.graph.edges(node) {
                let next = edge.target();
                if !component.contains(&next) {
                    continue;
                }
                if next == start {
                    let mut path = vec![edge.id()];
                    let mut at = node;
                    while at != start {
                        let back = reached_by[&at];
                        path.push(back);
                        at = self.graph.edge_endpoints(back).expect("edge exists").0;
                    }
                    path.reverse();
                    return path.into_iter().map(|e| self.cycle_edge(e)).collect();
                }
                if next != start && !reached_by.contains_key(&next) {
                    reached_by.insert(next, edge.id());
                    queue.push_back(next);
                }
            }
        }
        Vec::new()
    }

    fn cycle_edge(&self, edge: EdgeIndex) -> CycleEdge {
        let (from, to) = self.graph.edge_endpoints(edge).expect("edge exists");
        CycleEdge {
            from: self.graph[from],
            to: self.graph[to],
            dependency: self.graph[edge],
        }
    }

    /// The phases `phase` depends on (indices into the pipeline's phases), as its `depends-on`
    /// names them.
    pub(crate) fn dependencies(&self, phase: usize) -> impl Iterator<Item = usize> + '_ {
        self.graph
            .edges_directed(NodeIndex::new(phase), petgraph::Direction::Incoming)
            .map(|edge| self.graph[edge.source()])
    }

    /// Phases grouped by level: level 0 has no dependencies, level n depends on level n-1 at most.
    /// `None` when the graph has a cycle.
    pub(crate) fn levels(&self) -> Option<Vec<Vec<usize>>> {
        let order = petgraph::algo::toposort(&self.graph, None).ok()?;
        let mut level = vec![0usize; self.graph.node_count()];
        for &node in &order {
            for edge in self.graph.edges(node) {
                let target = edge.target().index();
                level[target] = level[target].max(level[node.index()] + 1);
            }
        }
        let depth = level.iter().max().map_or(0, |m| m + 1);
        let mut levels = vec![Vec::new(); depth];
        for node in self.graph.node_indices() {
            levels[level[node.index()]].push(self.graph[node]);
        }
        Some(levels)
    }

    /// For each phase, the set of phases it transitively depends on, as bit sets over `subset`
    /// (indices into the phases); `None` when the graph has a cycle.
    pub(crate) fn ancestors_within(&self, subset: &[usize]) -> Option<Vec<Vec<u64>>> {
        let order = petgraph::algo::toposort(&self.graph, None).ok()?;
        let words = subset.len().div_ceil(64);
        let mut position = vec![usize::MAX; self.graph.node_count()];
        for (bit, &phase) in subset.iter().enumerate() {
            position[phase] = bit;
        }
        let mut ancestors = vec![vec![0u64; words]; self.graph.node_count()];
        for &node in &order {
            for edge in self
                .graph
                .edges_directed(node, petgraph::Direction::Incoming)
            {
                let source = edge.source().index();
                let (before, after) = if source < node.index() {
                    let (a, b) = ancestors.split_at_mut(node.index());
                    (&a[source], &mut b[0])
                } else {
                    let (a, b) = ancestors.split_at_mut(source);
                    (&b[0], &mut a[node.index()])
                };
                for (into, from) in after.iter_mut().zip(before) {
                    *into |= *from;
                }
                let bit = position[source];
                if bit != usize::MAX {
                    after[bit / 64] |= 1 << (bit % 64);
                }
            }
        }
        Some(ancestors)
    }
}

/// Output formats of `helixflow graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum GraphFormat {
    /// Graphviz dot.
    Dot,
    /// A Mermaid flowchart.
    Mermaid,
    /// JSON: phases, edges and topological levels.
    Json,
}

#[derive(Serialize)]
struct JsonGraph<'p> {
    pipeline: &'p str,
    phases: Vec<JsonPhase<'p>>,
    edges: Vec<JsonEdge<'p>>,
    levels: Vec<Vec<&'p str>>,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct JsonPhase<'p> {
    name: &'p str,
    level: usize,
    depends_on: Vec<&'p str>,
    /// A `for-each` phase: its items, once they can be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    items: Option<usize>,
    /// A phase a planner wrote: the planner.
    #[serde(skip_serializing_if = "Option::is_none")]
    generated_by: Option<&'p str>,
}

/// How a phase is labelled: its name, and a `for-each` phase's item count once known.
fn label(phase: &crate::model::Phase, items: &BTreeMap<String, usize>) -> String {
    match (&phase.for_each, items.get(&phase.name.value)) {
        (Some(_), Some(1)) => format!("{} (1 item)", phase.name.value),
        (Some(_), Some(n)) => format!("{} ({n} items)", phase.name.value),
        (Some(_), None) => format!("{} (items)", phase.name.value),
        (None, _) => phase.name.value.clone(),
    }
}

#[derive(Serialize)]
struct JsonEdge<'p> {
    from: &'p str,
    to: &'p str,
}

/// Renders the DAG of an acyclic pipeline; a `for-each` phase is one node, with the count of its
/// items where `items` knows it.
pub(crate) fn render(
    pipeline: &Pipeline,
    graph: &PhaseGraph,
    format: GraphFormat,
    items: &BTreeMap<String, usize>,
) -> String {
    let name = |i: usize| pipeline.phases[i].name.value.as_str();
    let edges: Vec<(usize, usize)> = graph
        .graph
        .edge_references()
        .map(|e| (graph.graph[e.source()], graph.graph[e.target()]))
        .collect();
    match format {
        GraphFormat::Dot => {
            let mut out = format!("digraph {} {{\n    rankdir=LR;\n", dot_id(&pipeline.name));
            for phase in pipeline.phases.iter() {
                let _ = writeln!(out, "    {};", dot_node(phase, items));
            }
            for (from, to) in &edges {
                let _ = writeln!(out, "    {} -> {};", dot_id(name(*from)), dot_id(name(*to)));
            }
            out.push_str("}\n");
            out
        }
        GraphFormat::Mermaid => {
            let mut out = String::from("flowchart LR\n");
            for (i, phase) in pipeline.phases.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "    p{i}[\"{}\"]",
                    label(phase, items).replace('"', "#quot;")
                );
            }
            for (from, to) in &edges {
                let _ = writeln!(out, "    p{from} --> p{to}");
            }
            out
        }
        GraphFormat::Json => {
            let levels = graph.levels().unwrap_or_default();
            let mut level_of = vec![0; pipeline.phases.len()];
            for (level, phases) in levels.iter().enumerate() {
                for &p in phases {
                    level_of[p] = level;
                }
            }
            let json = JsonGraph {
                pipeline: &pipeline.name,
                phases: pipeline
                    .phases
                    .iter()
                    .enumerate()
                    .map(|(i, p)| JsonPhase {
                        name: &p.name.value,
                        level: level_of[i],
                        depends_on: p.depends_on.iter().map(|d| d.value.as_str()).collect(),
                        items: p.for_each.as_ref().and(items.get(&p.name.value).copied()),
                        generated_by: match &p.made_by {
                            Some(crate::model::MadeBy::Generated { by }) => Some(by.as_str()),
                            _ => None,
                        },
                    })
                    .collect(),
                edges: edges
                    .iter()
                    .map(|&(from, to)| JsonEdge {
                        from: name(from),
                        to: name(to),
                    })
                    .collect(),
                levels: levels
                    .iter()
                    .map(|l| l.iter().map(|&p| name(p)).collect())
                    .collect(),
            };
            let mut out = serde_json::to_string_pretty(&json).expect("graph serializes");
            out.push('\n');
            out
        }
    }
}

/// A phase as a dot node: its name, with a label for a `for-each` phase.
fn dot_node(phase: &crate::model::Phase, items: &BTreeMap<String, usize>) -> String {
    if phase.for_each.is_some() {
        format!(
            "{} [label={}]",
            dot_id(&phase.name.value),
            dot_id(&label(phase, items))
        )
    } else {
        dot_id(&phase.name.value)
    }
}

fn dot_id(name: &str) -> String {
    format!("\"{}\"", name.replace('\\', "\\\\").replace('"', "\\\""))
}
