//! Globs of different phases that may name the same file, for phases that may run at the same
//! time: what `overlapping-scope` (HF603) and `protect-overlaps-parallel-work` (HF609) look for.
//!
//! Two globs can only name the same file when the folder of one (its text before the first
//! wildcard) holds the folder of the other; and a glob without wildcards, a plain path, names one
//! file, so it only meets globs whose folder holds that path. Globs are indexed by folder, and a
//! glob meets only those in its own folder and the wildcard globs of the folders above it: a
//! thousand phases each with its own `src/pN/**` and a `protect "Cargo.lock"` compare nothing.
//!
//! Whatever the pipeline, the work is bounded: at most [`MAX_PHASES`] phases are compared (the
//! dependencies between them are a bit set each) and at most [`MAX_PAIRS`] pairs of globs of phases
//! that may run at the same time (20 million pairs in all; a pair of long globs counts for more);
//! past either, the check says it stopped instead of taking seconds and gigabytes.

use std::cell::OnceCell;
use std::collections::{BTreeSet, HashMap};

use crate::glob::compile_glob;
use crate::graph::PhaseGraph;

/// The most phases whose globs are compared with each other's.
pub(super) const MAX_PHASES: usize = 2_048;
/// The most pairs of globs of phases that may run at the same time compared by one check; a pair
/// of long globs counts as one for each [`PAIR_BYTES`] of their text (comparing them matches
/// paths as long).
pub(super) const MAX_PAIRS: usize = 500_000;
/// The text of a pair of globs that counts as one pair.
const PAIR_BYTES: usize = 512;
/// The most pairs of globs one check looks at, those of phases that depend on each other (a bit
/// looked up, nothing compared) included.
const MAX_VISITS: usize = 20_000_000;

/// The longest path that names a file (Linux's `PATH_MAX`). A glob whose literal folders are
/// longer names no file, so it meets none: it is left out of the index (the folders above a
/// folder that long, each hashed whole, would take time quadratic in its length).
const PATH_MAX: usize = 4096;

/// One glob of a phase. It is compiled only when first compared: most globs never are.
pub(super) struct Glob<'p> {
    /// The phase (an index into the pipeline's phases).
    pub(super) phase: usize,
    /// Which of the phase's globs of its kind it is.
    pub(super) index: usize,
    pub(super) pattern: &'p str,
    /// Its folders before the first wildcard (a prefix of `pattern`).
    folder: &'p str,
    literal: bool,
    /// `None` inside when it does not compile (lint reports it): it then matches nothing.
    matcher: OnceCell<Option<globset::GlobMatcher>>,
    samples: OnceCell<Vec<String>>,
}

impl<'p> Glob<'p> {
    pub(super) fn new(phase: usize, index: usize, pattern: &'p str) -> Self {
        Glob {
            phase,
            index,
            pattern,
            folder: crate::glob::literal_folders(pattern),
            literal: crate::glob::is_literal(pattern),
            matcher: OnceCell::new(),
            samples: OnceCell::new(),
        }
    }

    /// Whether it may name a file at all (see [`PATH_MAX`]).
    fn names_files(&self) -> bool {
        self.folder.len() < PATH_MAX
    }

    fn matcher(&self) -> Option<&globset::GlobMatcher> {
        self.matcher
            .get_or_init(|| compile_glob(self.pattern).ok().map(|g| g.compile_matcher()))
            .as_ref()
    }

    fn is_match(&self, path: &str) -> bool {
        self.matcher().is_some_and(|m| m.is_match(path))
    }

    /// Whether a file one names, the other names too (judged on sample paths of each); never for
    /// a glob that does not compile.
    fn meets(&self, other: &Glob<'_>) -> bool {
        if self.matcher().is_none() || other.matcher().is_none() {
            return false;
        }
        let samples = |g: &Glob<'_>| g.samples.get_or_init(|| samples(g.pattern)).clone();
        samples(self).iter().any(|s| other.is_match(s))
            || samples(other).iter().any(|s| self.is_match(s))
    }
}

/// Why a check stopped before comparing every pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stopped {
    /// This many phases have globs that may meet: more than [`MAX_PHASES`].
    TooManyPhases(usize),
    /// [`MAX_PAIRS`] pairs were compared, and more were left.
    TooManyPairs,
}

/// Globs indexed by folder: plain paths and wildcard globs apart, each in runs of one phase
/// (the globs come phase by phase), so that a phase's own globs are passed over at once.
#[derive(Default)]
struct Index {
    by_folder: HashMap<Key, Bucket>,
    /// Two of the phases with globs in each folder or below it.
    at_or_below: HashMap<Key, Two>,
}

/// A folder's key in the index: its length and a hash of its text (FNV-1a), taken for a folder
/// and all the folders above it in one pass over its text ([`ancestors`]); hashing each of them
/// whole would take time quadratic in its depth. Two folders with one key share a bucket: their
/// globs are compared (and told apart by their text), so a pair that may meet is never missed.
type Key = (usize, u64);

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// The globs in one folder, as runs of one phase: (phase, indices).
#[derive(Default)]
struct Bucket {
    plain: Vec<(usize, Vec<usize>)>,
    wild: Vec<(usize, Vec<usize>)>,
}

/// Up to two distinct phases: enough to know whether one other than a given phase is there.
#[derive(Default, Clone, Copy)]
struct Two([Option<usize>; 2]);

impl Two {
    fn add(&mut self, phase: usize) {
        match self.0 {
            [None, _] => self.0[0] = Some(phase),
            [Some(first), None] if first != phase => self.0[1] = Some(phase),
            _ => {}
        }
    }

    fn other_than(self, phase: usize) -> bool {
        self.0.iter().flatten().any(|&p| p != phase)
    }
}

impl Index {
    fn new(globs: &[Glob<'_>]) -> Index {
        let mut index = Index::default();
        for (i, glob) in globs.iter().enumerate().filter(|(_, g)| g.names_files()) {
            let folders = ancestors(glob.folder);
            let bucket = index.by_folder.entry(folders[0]).or_default();
            let runs = if glob.literal {
                &mut bucket.plain
            } else {
                &mut bucket.wild
            };
            match runs.last_mut() {
                Some((phase, members)) if *phase == glob.phase => members.push(i),
                _ => runs.push((glob.phase, vec![i])),
            }
            for folder in folders {
                index.at_or_below.entry(folder).or_default().add(glob.phase);
            }
        }
        index
    }

    /// The runs of globs of other phases that `glob` may meet: all in its folder, the wildcard
    /// ones in folders above it.
    fn candidates<'i>(
        &'i self,
        glob: &'i Glob<'_>,
    ) -> impl Iterator<Item = &'i (usize, Vec<usize>)> + 'i {
        let folders = if glob.names_files() {
            ancestors(glob.folder)
        } else {
            Vec::new()
        };
        folders
            .into_iter()
            .enumerate()
            .filter_map(|(up, folder)| Some((up, self.by_folder.get(&folder)?)))
            .flat_map(|(up, bucket)| {
                let plain = if up == 0 { &bucket.plain[..] } else { &[] };
                plain.iter().chain(&bucket.wild)
            })
            .filter(|(phase, _)| *phase != glob.phase)
    }

    /// Whether `glob` may meet a glob of another phase in this index.
    fn may_meet(&self, glob: &Glob<'_>) -> bool {
        if !glob.names_files() {
            return false;
        }
        // At most two runs of a bucket are looked at: one may be the glob's own phase.
        let others =
            |runs: &[(usize, Vec<usize>)]| runs.iter().take(2).any(|(p, _)| *p != glob.phase);
        let folders = ancestors(glob.folder);
        folders.iter().enumerate().any(|(up, folder)| {
            self.by_folder
                .get(folder)
                .is_some_and(|b| (up == 0 && others(&b.plain)) || others(&b.wild))
        }) || (!glob.literal
            && self
                .at_or_below
                .get(&folders[0])
                .is_some_and(|two| two.other_than(glob.phase)))
    }
}

/// The keys of a folder and of the folders above it, the folder first: for `a/b`, those of `a/b`,
/// `a` and the top (the empty path); for `a//b`, of `a//b`, `a/`, `a` and the top.
fn ancestors(folder: &str) -> Vec<Key> {
    let mut keys = vec![(0, FNV_OFFSET)];
    let mut hash = FNV_OFFSET;
    for (at, byte) in folder.bytes().enumerate() {
        // A folder starting with `/` has the top above it once.
        if byte == b'/' && at > 0 {
            keys.push((at, hash));
        }
        hash = (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME);
    }
    if !folder.is_empty() {
        keys.push((folder.len(), hash));
    }
    keys.reverse();
    keys
}

/// Calls `found` with every pair of a glob of `left` and a glob of `right` that may name the same
/// file, of two phases that may run at the same time (neither depends on the other). With
/// `same`, `left` and `right` are one list and each pair comes once. Nothing is compared when the
/// graph has a cycle (reported on its own).
pub(super) fn meeting_pairs(
    graph: &PhaseGraph,
    left: &[Glob<'_>],
    right: &[Glob<'_>],
    same: bool,
    found: &mut dyn FnMut(&Glob<'_>, &Glob<'_>),
) -> Result<(), Stopped> {
    let (left_index, right_index) = (Index::new(left), Index::new(right));
    let involved: BTreeSet<usize> = left
        .iter()
        .filter(|g| right_index.may_meet(g))
        .chain(right.iter().filter(|g| left_index.may_meet(g)))
        .map(|g| g.phase)
        .collect();
    if involved.len() < 2 {
        return Ok(());
    }
    if involved.len() > MAX_PHASES {
        return Err(Stopped::TooManyPhases(involved.len()));
    }
    let involved: Vec<usize> = involved.into_iter().collect();
    let Some(depends) = depends_within(graph, &involved) else {
        return Ok(());
    };
    let (mut pairs, mut visits) = (MAX_PAIRS, MAX_VISITS);
    let mut compare = |a: &Glob<'_>, b: &Glob<'_>| -> Result<(), Stopped> {
        visits = visits.checked_sub(1).ok_or(Stopped::TooManyPairs)?;
        if depends(a.phase, b.phase) || depends(b.phase, a.phase) {
            return Ok(());
        }
        pairs = pairs
            .checked_sub(pair_cost(a, b))
            .ok_or(Stopped::TooManyPairs)?;
        if a.meets(b) {
            found(a, b);
        }
        Ok(())
    };
    for (i, a) in left.iter().enumerate() {
        for (_, run) in right_index.candidates(a) {
            for &j in run {
                // One list: a pair in one folder is seen from both of its globs.
                if same && j <= i && right[j].folder == a.folder {
                    continue;
                }
                compare(a, &right[j])?;
            }
        }
    }
    if !same {
        for b in right {
            // The wildcard globs of `left` in folders above `b`'s (its own folder was seen above).
            for (_, run) in left_index.candidates(b) {
                for &i in run.iter().filter(|&&i| left[i].folder != b.folder) {
                    compare(&left[i], b)?;
                }
            }
        }
    }
    Ok(())
}

/// What comparing `a` and `b` counts against [`MAX_PAIRS`]: one, and one more for each
/// [`PAIR_BYTES`] of their text.
fn pair_cost(a: &Glob<'_>, b: &Glob<'_>) -> usize {
    1 + (a.pattern.len() + b.pattern.len()) / PAIR_BYTES
}

/// Whether phase `a` depends on phase `b`, directly or not, for phases in `subset` (indices into
/// the pipeline's phases); `None` when the graph has a cycle.
fn depends_within(graph: &PhaseGraph, subset: &[usize]) -> Option<impl Fn(usize, usize) -> bool> {
    let ancestors = graph.ancestors_within(subset)?;
    let bit_of: HashMap<usize, usize> = subset
        .iter()
        .enumerate()
        .map(|(bit, &p)| (p, bit))
        .collect();
    Some(move |a: usize, b: usize| {
        let bit = bit_of[&b];
        ancestors[a][bit / 64] & (1 << (bit % 64)) != 0
    })
}

/// Example paths a glob matches: each wildcard replaced by a plain name, each `{a,b}` expanded.
pub(super) fn samples(pattern: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => {
                if chars.peek() == Some(&'*') {
                    chars.next();
                }
                for s in &mut out {
                    s.push('x');
                }
            }
            '?' => {
                for s in &mut out {
                    s.push('x');
                }
            }
            '[' => {
                let class: String = chars.by_ref().take_while(|&c| c != ']').collect();
                let pick = class
                    .trim_start_matches(['!', '^'])
                    .chars()
                    .next()
                    .unwrap_or('x');
                for s in &mut out {
                    s.push(pick);
                }
            }
            '{' => {
                let group: String = chars.by_ref().take_while(|&c| c != '}').collect();
                out = out
                    .iter()
                    .flat_map(|s| group.split(',').map(move |alt| format!("{s}{alt}")))
                    .take(64)
                    .collect();
            }
            '\\' => {
                if let Some(next) = chars.next() {
                    for s in &mut out {
                        s.push(next);
                    }
                }
            }
            other => {
                for s in &mut out {
                    s.push(other);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_and_prefixes() {
        assert_eq!(crate::glob::literal_folders("src/lib/**/*.rs"), "src/lib");
        assert_eq!(crate::glob::literal_folders("*.md"), "");
        assert_eq!(crate::glob::literal_folders("docs/a.md"), "docs");
        assert_eq!(crate::glob::literal_folders("a\\*b/c/d.md"), "");
        assert_eq!(samples("src/{a,b}/*.py"), vec!["src/a/x.py", "src/b/x.py"]);
        // The keys of a folder and the folders above it are each that folder's own.
        let key = |folder: &str| ancestors(folder)[0];
        assert_eq!(ancestors("a/b"), [key("a/b"), key("a"), key("")]);
        assert_eq!(
            ancestors("a//b"),
            [key("a//b"), key("a/"), key("a"), key("")]
        );
        assert_eq!(ancestors("/abs"), [key("/abs"), key("")]);
        assert_eq!(ancestors(""), [key("")]);
        assert_ne!(key("a/b"), key("a/c"));
    }

    #[test]
    fn a_glob_too_long_to_name_a_file_meets_none() {
        let deep = format!("{}tests/**", "/".repeat(PATH_MAX));
        let deeper = format!("{}/x.md", "a/".repeat(PATH_MAX));
        let globs: Vec<Glob<'_>> = [(0, "tests/**"), (1, &deep[..]), (2, &deeper[..]), (3, "**")]
            .into_iter()
            .map(|(phase, pattern)| Glob::new(phase, 0, pattern))
            .collect();
        let index = Index::new(&globs);
        for long in [1, 2] {
            assert!(!globs[long].names_files());
            assert!(!index.may_meet(&globs[long]), "{long}");
            assert_eq!(index.candidates(&globs[long]).count(), 0, "{long}");
        }
        // Nor is it a candidate of another: below the top, `**` meets `tests/**` alone.
        let candidates: Vec<usize> = index
            .candidates(&Glob::new(5, 0, "tests/a/**"))
            .flat_map(|(_, run)| run.clone())
            .collect();
        assert_eq!(candidates, [0, 3]);
        let alone = Index::new(&globs[1..3]);
        assert!(!alone.may_meet(&Glob::new(5, 0, "**")));
        // A deep folder that a path can still be is indexed.
        let near = format!("{}x.md", "a/".repeat(PATH_MAX / 2 - 1));
        assert!(Glob::new(4, 0, &near).names_files());
    }

    #[test]
    fn a_plain_path_meets_only_globs_whose_folder_holds_it() {
        let globs: Vec<Glob<'_>> = [
            (0, "Cargo.lock"),
            (1, "src/p1/**"),
            (2, "src/**"),
            (3, "**/*.lock"),
        ]
        .into_iter()
        .map(|(phase, pattern)| Glob::new(phase, 0, pattern))
        .collect();
        let index = Index::new(&globs);
        let candidates = |i: usize| {
            index
                .candidates(&globs[i])
                .flat_map(|(_, run)| run.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(candidates(0), [3], "Cargo.lock meets only globs at the top");
        assert_eq!(
            candidates(1),
            [2, 3],
            "src/p1/** meets src/** and **/*.lock"
        );
        assert!(index.may_meet(&globs[2]));
        assert!(!index.may_meet(&Glob::new(3, 1, "x/y.md")));
    }
}
