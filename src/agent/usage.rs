//! What an agent used, read from its output per its `usage` declaration: Claude Code's `result`
//! event, Codex's `turn.completed` events, Gemini CLI's `stats`, Aider's `Tokens: … Cost: …`
//! lines, or fields and patterns the pipeline names. A cost the output does not give is computed
//! from the tokens with the pipeline's `price` table, else it stays unknown.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::response::{JSON_LIMIT, for_each_json_object};
use crate::event::usage::{Dollars, Usage};
use crate::model::{Price, UsageFormat, UsageSpec};

/// How much of the end of a log the text formats (`aider`, `regex`) read: CLIs report what a run
/// used as it ends, and the tail is all that is read of a log of any size.
const TEXT_TAIL: u64 = 1024 * 1024;

/// Tokens one model used.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct ModelTokens {
    /// The model, when the output names it.
    model: Option<String>,
    /// Input tokens, cached ones included.
    input: u64,
    /// Input tokens read from a cache.
    cached: u64,
    /// Output tokens.
    output: u64,
}

/// What an output says, before pricing.
#[derive(Debug, Default, PartialEq)]
struct Reading {
    /// Dollars, when the output gives them.
    cost: Option<f64>,
    /// Tokens per model (one entry without a model when the output does not split them).
    models: Vec<ModelTokens>,
    /// Turns taken, when counted.
    turns: Option<u32>,
}

/// The usage of one run of an agent, from its logs. Without a `usage` declaration, or when the
/// output reports nothing, the cost is unknown (never zero), unless the agent declares what each
/// of its runs costs (`declared_cost`), which wins over what the output says.
pub(crate) fn read(
    spec: Option<&UsageSpec>,
    declared_cost: Option<f64>,
    prices: &BTreeMap<String, Price>,
    stdout_log: &Path,
    stderr_log: &Path,
) -> Usage {
    let mut usage = spec.map_or_else(Usage::default, |spec| {
        reported(spec, prices, stdout_log, stderr_log)
    });
    if let Some(cost) = declared_cost.and_then(Dollars::new) {
        usage.cost_usd = Some(cost);
        usage.priced = false;
    }
    usage
}

/// The usage the output reports, read as `spec` says, its tokens priced when it gives no dollars.
fn reported(
    spec: &UsageSpec,
    prices: &BTreeMap<String, Price>,
    stdout_log: &Path,
    stderr_log: &Path,
) -> Usage {
    let reading = match spec.format {
        UsageFormat::Claude => claude(stdout_log),
        UsageFormat::Codex => codex(stdout_log),
        UsageFormat::Gemini => gemini(stdout_log),
        UsageFormat::Aider => tail_text(stdout_log).map(|text| aider(&text)),
        UsageFormat::Json => json(spec, stdout_log),
        UsageFormat::Regex => {
            let mut text = tail_text(stdout_log).unwrap_or_default();
            text.push('\n');
            text.push_str(&tail_text(stderr_log).unwrap_or_default());
            Ok(regex_reading(spec, &text))
        }
    }
    .unwrap_or_default();
    priced(&reading, spec, prices)
}

/// The reading as a [`Usage`]: its dollars, else its tokens priced, else an unknown cost.
fn priced(reading: &Reading, spec: &UsageSpec, prices: &BTreeMap<String, Price>) -> Usage {
    let sum = |f: fn(&ModelTokens) -> u64| {
        (!reading.models.is_empty()).then(|| reading.models.iter().map(f).sum::<u64>())
    };
    let mut usage = Usage {
        cost_usd: reading.cost.and_then(Dollars::new),
        priced: false,
        input_tokens: sum(|m| m.input),
        cached_input_tokens: sum(|m| m.cached),
        output_tokens: sum(|m| m.output),
        turns: reading.turns,
        models: reading
            .models
            .iter()
            .filter_map(|m| m.model.clone().or_else(|| spec.model.clone()))
            .collect(),
    };
    if usage.cost_usd.is_none() && !reading.models.is_empty() {
        let each = reading.models.iter().map(|m| {
            let model = m.model.as_ref().or(spec.model.as_ref())?;
            let price = prices.get(model)?;
            let cached = m.cached.min(m.input);
            #[allow(clippy::cast_precision_loss, reason = "token counts far below 2^52")]
            let dollars = ((m.input - cached) as f64 * price.input
                + cached as f64 * price.cached_input.unwrap_or(price.input)
                + m.output as f64 * price.output)
                / 1e6;
            Some(dollars)
        });
        if let Some(total) = each.sum::<Option<f64>>() {
            usage.cost_usd = Dollars::new(total);
            usage.priced = usage.cost_usd.is_some();
        }
    }
    usage
}

/// A number from a JSON value: a number, or a string holding one.
fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => parse_amount(s),
        _ => None,
    }
}

/// A count from a JSON value.
fn count(value: Option<&Value>) -> u64 {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a token count, checked to be a finite number no smaller than zero"
    )]
    value
        .and_then(number)
        .filter(|n| n.is_finite() && *n >= 0.0)
        .map_or(0, |n| n as u64)
}

/// Claude Code: the last `result` event (`--output-format stream-json`, or the one document of
/// `--output-format json`).
fn claude(stdout_log: &Path) -> io::Result<Reading> {
    let mut result = None;
    for_each_json_object(stdout_log, |event| {
        if event.get("type").and_then(Value::as_str) == Some("result") {
            result = Some(event);
        }
        true
    })?;
    let Some(result) = result else {
        return Ok(Reading::default());
    };
    let per_model: Vec<ModelTokens> = result
        .get("modelUsage")
        .and_then(Value::as_object)
        .map(|models| {
            models
                .iter()
                .map(|(name, u)| {
                    let cached = count(u.get("cacheReadInputTokens"));
                    ModelTokens {
                        model: Some(name.clone()),
                        input: count(u.get("inputTokens"))
                            + count(u.get("cacheCreationInputTokens"))
                            + cached,
                        cached,
                        output: count(u.get("outputTokens")),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let models = if per_model.is_empty() {
        result
            .get("usage")
            .map(|u| {
                let cached = count(u.get("cache_read_input_tokens"));
                vec![ModelTokens {
                    model: None,
                    input: count(u.get("input_tokens"))
                        + count(u.get("cache_creation_input_tokens"))
                        + cached,
                    cached,
                    output: count(u.get("output_tokens")),
                }]
            })
            .unwrap_or_default()
    } else {
        per_model
    };
    Ok(Reading {
        cost: result.get("total_cost_usd").and_then(number),
        models,
        turns: result
            .get("num_turns")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok()),
    })
}

/// Codex `exec --json`: the usage of every `turn.completed` event, summed.
fn codex(stdout_log: &Path) -> io::Result<Reading> {
    let mut tokens = ModelTokens::default();
    let mut turns = 0_u32;
    for_each_json_object(stdout_log, |event| {
        if event.get("type").and_then(Value::as_str) == Some("turn.completed")
            && let Some(u) = event.get("usage")
        {
            turns += 1;
            tokens.input += count(u.get("input_tokens"));
            tokens.cached += count(u.get("cached_input_tokens"));
            tokens.output += count(u.get("output_tokens"));
        }
        true
    })?;
    Ok(Reading {
        cost: None,
        models: if turns == 0 { Vec::new() } else { vec![tokens] },
        turns: (turns > 0).then_some(turns),
    })
}

/// The JSON document on standard output: all of it, else from the last line that opens an
/// object (a CLI may print warnings first).
fn document(stdout_log: &Path) -> io::Result<Option<Value>> {
    let mut bytes = Vec::new();
    File::open(stdout_log)?
        .take(JSON_LIMIT)
        .read_to_end(&mut bytes)?;
    if let Ok(value) = serde_json::from_slice::<Value>(&bytes) {
        return Ok(Some(value));
    }
    Ok(super::response::objects_at_line_starts(&bytes).next_back())
}

/// Gemini CLI `--output-format json`: the tokens of every model in `stats.models`.
fn gemini(stdout_log: &Path) -> io::Result<Reading> {
    let Some(document) = document(stdout_log)? else {
        return Ok(Reading::default());
    };
    let models = document
        .pointer("/stats/models")
        .and_then(Value::as_object)
        .map(|models| {
            models
                .iter()
                .map(|(name, stats)| {
                    let t = stats.get("tokens");
                    let field = |key: &str| count(t.and_then(|t| t.get(key)));
                    ModelTokens {
                        model: Some(name.clone()),
                        input: field("prompt"),
                        cached: field("cached"),
                        output: field("candidates") + field("thoughts"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Reading {
        cost: None,
        models,
        turns: None,
    })
}

/// Aider's lines, e.g. `Tokens: 2.3k sent, 1.2k cache hit, 512 received. Cost: $0.01 message,
/// $0.03 session.`: tokens summed over the lines, the cost of the session from the last one.
fn aider(text: &str) -> Reading {
    static LINE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"Tokens: ([\d.,]+[kKmM]?) sent(?:, ([\d.,]+[kKmM]?) cache write)?(?:, ([\d.,]+[kKmM]?) cache hit)?, ([\d.,]+[kKmM]?) received\.(?: Cost: \$([\d.,]+) message, \$([\d.,]+) session\.)?",
        )
        .expect("a valid pattern")
    });
    let mut tokens = ModelTokens::default();
    let mut cost = None;
    let mut turns = 0_u32;
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "token counts, parsed as numbers no smaller than zero"
    )]
    let group = |c: &regex::Captures<'_>, i: usize| {
        c.get(i)
            .and_then(|m| parse_amount(m.as_str()))
            .map_or(0, |n| n.round() as u64)
    };
    for c in LINE.captures_iter(text) {
        turns += 1;
        tokens.input += group(&c, 1) + group(&c, 2) + group(&c, 3);
        tokens.cached += group(&c, 3);
        tokens.output += group(&c, 4);
        cost = c.get(6).and_then(|m| parse_amount(m.as_str()));
    }
    Reading {
        cost,
        models: if turns == 0 { Vec::new() } else { vec![tokens] },
        turns: (turns > 0).then_some(turns),
    }
}

/// A value at a dotted key (`usage.input_tokens`) of a JSON value.
fn at_key<'v>(value: &'v Value, key: &str) -> Option<&'v Value> {
    key.split('.').try_fold(value, |v, part| match v {
        Value::Array(items) => part.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => v.get(part),
    })
}

/// `usage "json"`: the declared keys of the last JSON object (a line, or the one document) that
/// has any of them.
fn json(spec: &UsageSpec, stdout_log: &Path) -> io::Result<Reading> {
    let keys: Vec<&String> = [
        &spec.cost,
        &spec.input_tokens,
        &spec.cached_input_tokens,
        &spec.output_tokens,
        &spec.turns,
    ]
    .into_iter()
    .flatten()
    .collect();
    let has_any = |v: &Value| keys.iter().any(|k| at_key(v, k).is_some());
    let mut found = None;
    for_each_json_object(stdout_log, |object| {
        let value = Value::Object(object);
        if has_any(&value) {
            found = Some(value);
        }
        true
    })?;
    if found.is_none() {
        found = document(stdout_log)?.filter(has_any);
    }
    let Some(found) = found else {
        return Ok(Reading::default());
    };
    let get = |key: &Option<String>| key.as_ref().and_then(|k| at_key(&found, k));
    Ok(declared(
        get(&spec.cost).and_then(number),
        [
            get(&spec.input_tokens).and_then(number),
            get(&spec.cached_input_tokens).and_then(number),
            get(&spec.output_tokens).and_then(number),
        ],
        get(&spec.turns).and_then(number),
    ))
}

/// `usage "regex"`: the first group (or whole match) of each declared pattern's last match.
fn regex_reading(spec: &UsageSpec, text: &str) -> Reading {
    let last = |pattern: &Option<String>| {
        let regex = Regex::new(pattern.as_deref()?).ok()?;
        let captures = regex.captures_iter(text).last()?;
        let m = captures.get(1).or_else(|| captures.get(0))?;
        parse_amount(m.as_str())
    };
    declared(
        last(&spec.cost),
        [
            last(&spec.input_tokens),
            last(&spec.cached_input_tokens),
            last(&spec.output_tokens),
        ],
        last(&spec.turns),
    )
}

/// A reading from declared values: tokens (input, cached, output) count when any is found.
fn declared(cost: Option<f64>, tokens: [Option<f64>; 3], turns: Option<f64>) -> Reading {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "counts, checked to be finite numbers no smaller than zero"
    )]
    let whole = |n: Option<f64>| {
        n.filter(|n| n.is_finite() && *n >= 0.0)
            .map(|n| n.round() as u64)
    };
    let [input, cached, output] = tokens.map(whole);
    let models = if input.is_some() || output.is_some() || cached.is_some() {
        vec![ModelTokens {
            model: None,
            input: input.unwrap_or(0),
            cached: cached.unwrap_or(0),
            output: output.unwrap_or(0),
        }]
    } else {
        Vec::new()
    };
    Reading {
        cost,
        models,
        turns: whole(turns).and_then(|n| u32::try_from(n).ok()),
    }
}

/// A number as CLIs print them: `1,234`, `0.0123`, `2.3k`, `1.2M`, `$0.42`.
fn parse_amount(text: &str) -> Option<f64> {
    let text = text.trim().trim_start_matches('$').replace(',', "");
    let (digits, scale) = match text.chars().last()? {
        'k' | 'K' => (&text[..text.len() - 1], 1e3),
        'm' | 'M' => (&text[..text.len() - 1], 1e6),
        _ => (text.as_str(), 1.0),
    };
    digits
        .parse::<f64>()
        .ok()
        .map(|n| n * scale)
        .filter(|n| n.is_finite())
}

/// The last [`TEXT_TAIL`] bytes of a log, as lossy UTF-8.
fn tail_text(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(TEXT_TAIL)))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(format: UsageFormat) -> UsageSpec {
        UsageSpec {
            format,
            cost: None,
            input_tokens: None,
            cached_input_tokens: None,
            output_tokens: None,
            turns: None,
            model: None,
        }
    }

    fn read_from(spec: &UsageSpec, prices: &BTreeMap<String, Price>, stdout: &str) -> Usage {
        let dir = tempfile::tempdir().unwrap();
        let (out, err) = (dir.path().join("stdout.log"), dir.path().join("stderr.log"));
        std::fs::write(&out, stdout).unwrap();
        std::fs::write(&err, "").unwrap();
        read(Some(spec), None, prices, &out, &err)
    }

    #[test]
    fn a_declared_cost_wins_over_the_output_and_needs_no_usage() {
        let dir = tempfile::tempdir().unwrap();
        let (out, err) = (dir.path().join("stdout.log"), dir.path().join("stderr.log"));
        std::fs::write(
            &out,
            r#"{"type":"result","is_error":false,"num_turns":2,"result":"done","total_cost_usd":0.5,"usage":{"input_tokens":10,"output_tokens":5}}"#,
        )
        .unwrap();
        std::fs::write(&err, "").unwrap();
        let usage = read(
            Some(&spec(UsageFormat::Claude)),
            Some(0.0),
            &BTreeMap::new(),
            &out,
            &err,
        );
        assert_eq!(usage.cost_usd, Dollars::new(0.0));
        assert_eq!((usage.input_tokens, usage.turns), (Some(10), Some(2)));
        let usage = read(None, Some(0.25), &BTreeMap::new(), &out, &err);
        assert_eq!(usage.cost_usd, Dollars::new(0.25));
        assert_eq!(usage.input_tokens, None);
        assert_eq!(
            read(None, None, &BTreeMap::new(), &out, &err).cost_usd,
            None
        );
    }

    #[test]
    fn claude_s_result_event_gives_dollars_tokens_and_turns() {
        let stdout = concat!(
            r#"{"type":"system","subtype":"init","session_id":"s"}"#,
            "\n",
            r#"{"type":"result","subtype":"success","is_error":false,"num_turns":3,"result":"done","total_cost_usd":0.0421,"usage":{"input_tokens":12,"cache_creation_input_tokens":300,"cache_read_input_tokens":1000,"output_tokens":250},"modelUsage":{"claude-sonnet-4-5":{"inputTokens":12,"outputTokens":250,"cacheReadInputTokens":1000,"cacheCreationInputTokens":300,"costUSD":0.0421}}}"#,
            "\n"
        );
        let usage = read_from(&spec(UsageFormat::Claude), &BTreeMap::new(), stdout);
        assert_eq!(usage.cost_usd, Dollars::new(0.0421));
        assert_eq!(usage.input_tokens, Some(1312));
        assert_eq!(usage.cached_input_tokens, Some(1000));
        assert_eq!(usage.output_tokens, Some(250));
        assert_eq!(usage.turns, Some(3));
        assert_eq!(usage.models, ["claude-sonnet-4-5"]);
        assert!(!usage.priced);
    }

    #[test]
    fn codex_tokens_are_priced_with_the_table_else_unknown() {
        let stdout = concat!(
            r#"{"type":"thread.started","thread_id":"t"}"#,
            "\n",
            r#"{"type":"turn.completed","usage":{"input_tokens":1000000,"cached_input_tokens":500000,"output_tokens":100000}}"#,
            "\n"
        );
        let mut codex = spec(UsageFormat::Codex);
        let unknown = read_from(&codex, &BTreeMap::new(), stdout);
        assert_eq!(unknown.cost_usd, None);
        assert_eq!(unknown.input_tokens, Some(1_000_000));
        codex.model = Some("gpt-5".into());
        let prices = BTreeMap::from([(
            "gpt-5".to_owned(),
            Price {
                input: 1.25,
                cached_input: Some(0.125),
                output: 10.0,
            },
        )]);
        let usage = read_from(&codex, &prices, stdout);
        // 0.5M × 1.25 + 0.5M × 0.125 + 0.1M × 10
        let cost = usage.cost_usd.unwrap().amount();
        assert!((cost - 1.6875).abs() < 1e-9, "{cost}");
        assert!(usage.priced);
    }

    #[test]
    fn gemini_stats_are_priced_per_model() {
        let stdout = r#"{
  "response": "done",
  "stats": {
    "models": {
      "gemini-2.5-pro": {"api": {"totalRequests": 2}, "tokens": {"prompt": 2000000, "candidates": 100000, "total": 2100000, "cached": 0, "thoughts": 100000, "tool": 0}},
      "gemini-2.5-flash": {"api": {"totalRequests": 1}, "tokens": {"prompt": 1000000, "candidates": 0, "total": 1000000, "cached": 0, "thoughts": 0, "tool": 0}}
    }
  }
}"#;
        let only_pro = BTreeMap::from([(
            "gemini-2.5-pro".to_owned(),
            Price {
                input: 1.25,
                cached_input: None,
                output: 10.0,
            },
        )]);
        let usage = read_from(&spec(UsageFormat::Gemini), &only_pro, stdout);
        assert_eq!(usage.cost_usd, None, "a model without a price: unknown");
        assert_eq!(usage.input_tokens, Some(3_000_000));
        assert_eq!(usage.output_tokens, Some(200_000));
        let mut both = only_pro.clone();
        both.insert(
            "gemini-2.5-flash".to_owned(),
            Price {
                input: 0.3,
                cached_input: None,
                output: 2.5,
            },
        );
        let usage = read_from(&spec(UsageFormat::Gemini), &both, stdout);
        let cost = usage.cost_usd.unwrap().amount();
        assert!((cost - (2.5 + 2.0 + 0.3)).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn aider_lines_sum_tokens_and_keep_the_session_cost() {
        let stdout = "Applied edit to a.py\n\
            Tokens: 2.3k sent, 512 received. Cost: $0.01 message, $0.01 session.\n\
            Tokens: 1,200 sent, 1.0k cache hit, 88 received. Cost: $0.02 message, $0.03 session.\n";
        let usage = read_from(&spec(UsageFormat::Aider), &BTreeMap::new(), stdout);
        assert_eq!(usage.cost_usd, Dollars::new(0.03));
        assert_eq!(usage.input_tokens, Some(2300 + 1200 + 1000));
        assert_eq!(usage.cached_input_tokens, Some(1000));
        assert_eq!(usage.output_tokens, Some(600));
        assert_eq!(usage.turns, Some(2));
        let no_cost = read_from(
            &spec(UsageFormat::Aider),
            &BTreeMap::new(),
            "Tokens: 10 sent, 5 received.\n",
        );
        assert_eq!(no_cost.cost_usd, None);
        assert_eq!(no_cost.tokens(), Some(15));
    }

    #[test]
    fn declared_json_keys_and_patterns() {
        let mut json_spec = spec(UsageFormat::Json);
        json_spec.cost = Some("usage.dollars".into());
        json_spec.output_tokens = Some("usage.out".into());
        let usage = read_from(
            &json_spec,
            &BTreeMap::new(),
            "{\"step\":1}\n{\"usage\":{\"dollars\":\"0.5\",\"out\":42}}\n",
        );
        assert_eq!(usage.cost_usd, Dollars::new(0.5));
        assert_eq!(usage.output_tokens, Some(42));
        let mut regex_spec = spec(UsageFormat::Regex);
        regex_spec.cost = Some(r"spent \$([\d.]+)".into());
        let usage = read_from(&regex_spec, &BTreeMap::new(), "spent $1.00\nspent $2.25\n");
        assert_eq!(usage.cost_usd, Dollars::new(2.25));
        let usage = read_from(&regex_spec, &BTreeMap::new(), "nothing said\n");
        assert_eq!(usage.cost_usd, None);
    }
}
