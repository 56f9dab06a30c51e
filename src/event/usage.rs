//! What an attempt cost, and how a failed attempt failed: the usage an agent reported (tokens,
//! turns, US dollars), sums of it that keep an unknown cost unknown, and the failure classes.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An amount in US dollars: finite and never negative.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct Dollars(f64);

// A `Dollars` is made only by `Dollars::new`, which refuses NaN: equality is total.
impl Eq for Dollars {}

impl Dollars {
    /// The amount, when it is a finite number no smaller than zero.
    #[must_use]
    pub fn new(amount: f64) -> Option<Dollars> {
        (amount.is_finite() && amount >= 0.0).then_some(Dollars(amount))
    }

    /// The amount in dollars.
    #[must_use]
    pub fn amount(self) -> f64 {
        self.0
    }

    /// The sum of two amounts.
    #[must_use]
    pub(crate) fn plus(self, other: Dollars) -> Dollars {
        Dollars(self.0 + other.0)
    }
}

impl fmt::Display for Dollars {
    /// `$0.0123` below a dime (four decimals), `$1.23` above.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 > 0.0 && self.0 < 0.1 {
            write!(f, "${:.4}", self.0)
        } else {
            write!(f, "${:.2}", self.0)
        }
    }
}

/// What one attempt's agent used, as its output reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Usage {
    /// The cost in US dollars: reported by the agent, or computed from its tokens with the
    /// pipeline's `price` table. `None` when helixflow cannot know it: never taken as zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<Dollars>,
    /// Whether the cost was computed from the `price` table rather than reported.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub priced: bool,
    /// Input tokens, cached ones included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Input tokens read from a cache (part of `input-tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Output tokens (reasoning included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Turns the agent took, when its output counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u32>,
    /// The models the output named.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
}

impl Usage {
    /// The attempt's cost and tokens in a few words: `$0.0421, 1.6k tokens`, `cost unknown`.
    #[must_use]
    pub(crate) fn short(&self) -> String {
        let cost = self
            .cost_usd
            .map_or_else(|| "cost unknown".to_owned(), |c| c.to_string());
        match self.tokens() {
            Some(tokens) if tokens > 0 => format!("{cost}, {} tokens", short_tokens(tokens)),
            _ => cost,
        }
    }

    /// Adds what a reviewer (a sub-agent verifier) used: its cost, unknown when either is, and
    /// its tokens. The turns stay the worker's.
    pub(crate) fn add_review(&mut self, review: &Usage) {
        self.cost_usd = match (self.cost_usd, review.cost_usd) {
            (Some(a), Some(b)) => Some(a.plus(b)),
            _ => None,
        };
        self.priced |= review.priced;
        let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
        self.input_tokens = sum(self.input_tokens, review.input_tokens);
        self.cached_input_tokens = sum(self.cached_input_tokens, review.cached_input_tokens);
        self.output_tokens = sum(self.output_tokens, review.output_tokens);
        for model in &review.models {
            if !self.models.contains(model) {
                self.models.push(model.clone());
            }
        }
    }

    /// Input and output tokens together, when either is known.
    #[must_use]
    pub(crate) fn tokens(&self) -> Option<u64> {
        match (self.input_tokens, self.output_tokens) {
            (None, None) => None,
            (input, output) => Some(input.unwrap_or(0).saturating_add(output.unwrap_or(0))),
        }
    }
}

/// A sum of costs that keeps what is unknown: the known dollars, and how many attempts had a
/// cost helixflow cannot know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct Spend {
    /// The sum of the known costs.
    pub known_usd: Dollars,
    /// Attempts whose cost is unknown.
    #[serde(default, rename = "unknown-attempts", skip_serializing_if = "is_zero")]
    pub unknown: u32,
    /// Input and output tokens reported, summed.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub tokens: u64,
    /// Attempts whose usage is counted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: u32,
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

impl Spend {
    /// Adds one attempt's usage: its cost to the known sum, or one more unknown.
    pub(crate) fn add(&mut self, usage: &Usage) {
        self.attempts += 1;
        match usage.cost_usd {
            Some(cost) => self.known_usd = self.known_usd.plus(cost),
            None => self.unknown += 1,
        }
        self.tokens = self.tokens.saturating_add(usage.tokens().unwrap_or(0));
    }

    /// Adds another sum.
    pub(crate) fn merge(&mut self, other: &Spend) {
        self.known_usd = self.known_usd.plus(other.known_usd);
        self.unknown += other.unknown;
        self.tokens = self.tokens.saturating_add(other.tokens);
        self.attempts += other.attempts;
    }

    /// Whether no attempt's usage was counted.
    #[must_use]
    pub(crate) fn is_empty(&self) -> bool {
        self.attempts == 0
    }

    /// The cost in a few characters: `$0.42`, `$0.42+?` when some attempts' cost is unknown,
    /// `?` when none is known, `-` when nothing was counted.
    #[must_use]
    pub(crate) fn short(&self) -> String {
        match (self.attempts, self.unknown) {
            (0, _) => "-".to_owned(),
            (n, u) if n == u => "?".to_owned(),
            (_, 0) => self.known_usd.to_string(),
            _ => format!("{}+?", self.known_usd),
        }
    }

    /// The cost in words: `$0.42`, `$0.42 and the unknown cost of 1 attempt`, `unknown`.
    #[must_use]
    pub(crate) fn words(&self) -> String {
        let attempts = if self.unknown == 1 {
            "1 attempt".to_owned()
        } else {
            format!("{} attempts", self.unknown)
        };
        match (self.attempts, self.unknown) {
            (0, _) => "$0.00".to_owned(),
            (n, u) if n == u => format!("unknown ({attempts})"),
            (_, 0) => self.known_usd.to_string(),
            _ => format!("{} and the unknown cost of {attempts}", self.known_usd),
        }
    }
}

/// Tokens in a few characters: `950`, `12.3k`, `4.5M`; `-` for none.
#[must_use]
pub(crate) fn short_tokens(tokens: u64) -> String {
    #[allow(clippy::cast_precision_loss, reason = "a count shown with one decimal")]
    let n = tokens as f64;
    match tokens {
        0 => "-".to_owned(),
        1..1_000 => tokens.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n / 1e3),
        _ => format!("{:.1}M", n / 1e6),
    }
}

/// How a failed attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureClass {
    /// A rate limit, an overloaded service, a network error: tried again after a wait, without
    /// spending the phase's `retries` or the run's `retry-budget`.
    Transient,
    /// Authentication, a missing CLI, an invalid configuration: the phase fails at once.
    Fatal,
    /// The work was not done: the gates or the verifier said no. The normal retry with feedback.
    Work,
}

impl FailureClass {
    /// The class's name as written in pipelines and reports.
    #[must_use]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FailureClass::Transient => "transient",
            FailureClass::Fatal => "fatal",
            FailureClass::Work => "work",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(cost: Option<f64>, tokens: u64) -> Usage {
        Usage {
            cost_usd: cost.and_then(Dollars::new),
            input_tokens: Some(tokens),
            ..Usage::default()
        }
    }

    #[test]
    fn an_unknown_cost_is_never_summed_as_zero() {
        let mut spend = Spend::default();
        spend.add(&usage(Some(0.25), 10));
        spend.add(&usage(None, 5));
        assert_eq!(spend.known_usd, Dollars::new(0.25).unwrap());
        assert_eq!(spend.unknown, 1);
        assert_eq!(spend.short(), "$0.25+?");
        assert_eq!(spend.words(), "$0.25 and the unknown cost of 1 attempt");
        let mut only_unknown = Spend::default();
        only_unknown.add(&usage(None, 0));
        assert_eq!(only_unknown.short(), "?");
        assert_eq!(Spend::default().short(), "-");
    }

    #[test]
    fn dollars_refuse_what_is_not_an_amount() {
        assert!(Dollars::new(f64::NAN).is_none());
        assert!(Dollars::new(-1.0).is_none());
        assert_eq!(Dollars::new(0.0123).unwrap().to_string(), "$0.0123");
        assert_eq!(Dollars::new(1.5).unwrap().to_string(), "$1.50");
        assert_eq!(short_tokens(12_345), "12.3k");
    }
}
