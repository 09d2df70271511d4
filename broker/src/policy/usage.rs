//! The `usage` read's arithmetic: known readings summed exactly, unknown
//! turns counted, per group. Plain data in, plain data out.
//!
//! A reading is one usage record that counts: a `known` or `unknown`
//! outcome, or a baseline with no outcome yet (a pending turn, which counts
//! as unknown until its end arrives). Sums are `u128`, so no realistic
//! number of `i64` readings can overflow them (SQL's `sum` would stop at
//! 2^63); a total past JavaScript's safe integer range (2^53 − 1) goes on the
//! wire as a decimal string, never rounded.

use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The largest integer a JSON reader using doubles holds exactly.
pub const MAX_SAFE_INTEGER: u128 = (1 << 53) - 1;

/// One turn's token counts from one source (defined where a transcript
/// is read, `crate::transcripts`).
pub use crate::transcripts::Tokens;

/// What a reading says about its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Counted tokens.
    Known(Tokens),
    /// An `unknown` outcome, or a baseline still waiting for its end.
    Unknown,
}

/// One counting row, with every key it is grouped by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    pub run: String,
    /// The role instance the run held.
    pub instance: String,
    /// The delivered message the turn answered.
    pub turn: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub account: Option<String>,
    pub outcome: Outcome,
}

/// One group's totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    pub input: u128,
    pub output: u128,
    pub cache_write: u128,
    pub cache_read: u128,
    /// Distinct `(run, turn)` pairs (interned) with an unknown reading here.
    unknown: BTreeSet<usize>,
}

impl Totals {
    /// How many distinct turns of this group are unknown.
    pub fn unknown_turns(&self) -> u128 {
        self.unknown.len() as u128
    }

    fn add(&mut self, outcome: Outcome, turn: usize) {
        match outcome {
            Outcome::Known(t) => {
                self.input = self.input.saturating_add(u128::from(t.input));
                self.output = self.output.saturating_add(u128::from(t.output));
                self.cache_write = self.cache_write.saturating_add(u128::from(t.cache_write));
                self.cache_read = self.cache_read.saturating_add(u128::from(t.cache_read));
            }
            Outcome::Unknown => {
                self.unknown.insert(turn);
            }
        }
    }

    /// `{input, output, cacheWrite, cacheRead, unknownTurns}`, each exact.
    pub fn to_json(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("input".into(), exact(self.input));
        m.insert("output".into(), exact(self.output));
        m.insert("cacheWrite".into(), exact(self.cache_write));
        m.insert("cacheRead".into(), exact(self.cache_read));
        m.insert("unknownTurns".into(), exact(self.unknown_turns()));
        m
    }
}

/// Every group of a business's readings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub total: Totals,
    pub by_run: BTreeMap<String, Totals>,
    pub by_instance: BTreeMap<String, Totals>,
    pub by_provider: BTreeMap<Option<String>, Totals>,
    pub by_model: BTreeMap<Option<String>, Totals>,
    pub by_account: BTreeMap<Option<String>, Totals>,
}

/// Sums readings one at a time, so a read holds only its groups and its
/// unknown turns in memory, never every row.
#[derive(Debug, Default)]
pub struct Aggregate {
    summary: Summary,
    /// Each unknown `(run, turn)` seen so far, numbered.
    turns: HashMap<(String, String), usize>,
    /// Which runs `byRun` keeps (a page of them), if not all.
    runs: Option<RunWindow>,
}

/// A page of `byRun` (issue 34): the runs after `after` in key order, at
/// most `limit` of them. The other groups and the total always count every
/// reading.
#[derive(Debug, Clone, Default)]
pub struct RunWindow {
    pub after: Option<String>,
    pub limit: usize,
    /// A run past the page was seen.
    pub more: bool,
}

impl Aggregate {
    /// Sums every reading, but keeps `byRun` to the page `runs` names: it
    /// holds at most `runs.limit` runs at a time, whatever the history.
    pub fn paged(runs: RunWindow) -> Aggregate {
        Aggregate {
            runs: Some(runs),
            ..Aggregate::default()
        }
    }

    /// Whether a run past the page was seen (always false unpaged).
    pub fn more_runs(&self) -> bool {
        self.runs.as_ref().is_some_and(|w| w.more)
    }

    /// Whether `run` belongs in `byRun`; makes room for it when it does.
    fn keep_run(&mut self, run: &str) -> bool {
        let Some(w) = self.runs.as_mut() else {
            return true;
        };
        if w.after.as_deref().is_some_and(|a| run <= a) {
            return false;
        }
        let by_run = &mut self.summary.by_run;
        if by_run.contains_key(run) || by_run.len() < w.limit {
            return true;
        }
        // Full: the page is the smallest keys. A run past the largest kept
        // one is left out, and once left out it stays out, since the
        // largest kept key only comes down.
        w.more = true;
        match by_run.last_key_value() {
            Some((largest, _)) if run < largest.as_str() => {
                by_run.pop_last();
                true
            }
            _ => false,
        }
    }

    /// Adds one reading to the total and to each of its groups.
    pub fn add(&mut self, r: &Reading) {
        let turn = match r.outcome {
            Outcome::Known(_) => 0,
            Outcome::Unknown => {
                let next = self.turns.len();
                *self
                    .turns
                    .entry((r.run.clone(), r.turn.clone()))
                    .or_insert(next)
            }
        };
        if self.keep_run(&r.run) {
            self.summary
                .by_run
                .entry(r.run.clone())
                .or_default()
                .add(r.outcome, turn);
        }
        let s = &mut self.summary;
        s.total.add(r.outcome, turn);
        s.by_instance
            .entry(r.instance.clone())
            .or_default()
            .add(r.outcome, turn);
        s.by_provider
            .entry(r.provider.clone())
            .or_default()
            .add(r.outcome, turn);
        s.by_model
            .entry(r.model.clone())
            .or_default()
            .add(r.outcome, turn);
        s.by_account
            .entry(r.account.clone())
            .or_default()
            .add(r.outcome, turn);
    }

    pub fn finish(self) -> Summary {
        self.summary
    }
}

/// Sums `readings` into the total and each grouping.
pub fn aggregate(readings: &[Reading]) -> Summary {
    let mut a = Aggregate::default();
    for r in readings {
        a.add(r);
    }
    a.finish()
}

impl Summary {
    /// The read's reply: `{total, byRun, byInstance, byProvider, byModel,
    /// byAccount}`, each array ordered by its key (null first).
    pub fn to_json(&self) -> Value {
        fn group<K: Clone + Into<Value>>(key: &str, m: &BTreeMap<K, Totals>) -> Value {
            Value::Array(
                m.iter()
                    .map(|(k, t)| {
                        let mut o = Map::new();
                        o.insert(key.to_string(), k.clone().into());
                        o.extend(t.to_json());
                        Value::Object(o)
                    })
                    .collect(),
            )
        }
        json!({
            "total": Value::Object(self.total.to_json()),
            "byRun": group("run", &self.by_run),
            "byInstance": group("instance", &self.by_instance),
            "byProvider": group("provider", &self.by_provider),
            "byModel": group("model", &self.by_model),
            "byAccount": group("account", &self.by_account),
        })
    }
}

/// A count as JSON: a number up to 2^53 − 1, else its decimal string.
pub fn exact(n: u128) -> Value {
    match u64::try_from(n) {
        Ok(v) if n <= MAX_SAFE_INTEGER => Value::from(v),
        _ => Value::String(n.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(run: &str, turn: &str, model: Option<&str>, outcome: Outcome) -> Reading {
        Reading {
            run: run.into(),
            instance: format!("inst-{run}"),
            turn: turn.into(),
            provider: model.map(|_| "anthropic".to_string()),
            model: model.map(str::to_string),
            account: None,
            outcome,
        }
    }

    fn known(input: u64, output: u64, cache_write: u64, cache_read: u64) -> Outcome {
        Outcome::Known(Tokens {
            input,
            output,
            cache_write,
            cache_read,
        })
    }

    #[test]
    fn exact_is_a_number_up_to_2_53_minus_1_and_a_string_past_it() {
        assert_eq!(exact(0), json!(0));
        assert_eq!(exact((1 << 53) - 1), json!(9_007_199_254_740_991u64));
        assert_eq!(exact(1 << 53), json!("9007199254740992"));
        assert_eq!(
            exact(u128::from(u64::MAX) + 1),
            json!("18446744073709551616")
        );
    }

    #[test]
    fn known_readings_sum_and_unknown_turns_count_distinct_run_and_turn() {
        let rs = vec![
            reading("r1", "m1", Some("opus"), known(10, 20, 30, 40)),
            reading("r1", "m2", Some("opus"), known(1, 2, 3, 4)),
            // The same turn unknown from two sources is one unknown turn.
            reading("r1", "m3", None, Outcome::Unknown),
            reading("r1", "m3", None, Outcome::Unknown),
            // The same message id in another run is another turn.
            reading("r2", "m3", None, Outcome::Unknown),
            reading("r2", "m4", Some("sonnet"), known(5, 0, 0, 0)),
        ];
        let s = aggregate(&rs);
        assert_eq!(
            s.to_json(),
            json!({
                "total": {"input": 16, "output": 22, "cacheWrite": 33, "cacheRead": 44,
                          "unknownTurns": 2},
                "byRun": [
                    {"run": "r1", "input": 11, "output": 22, "cacheWrite": 33, "cacheRead": 44,
                     "unknownTurns": 1},
                    {"run": "r2", "input": 5, "output": 0, "cacheWrite": 0, "cacheRead": 0,
                     "unknownTurns": 1},
                ],
                "byInstance": [
                    {"instance": "inst-r1", "input": 11, "output": 22, "cacheWrite": 33,
                     "cacheRead": 44, "unknownTurns": 1},
                    {"instance": "inst-r2", "input": 5, "output": 0, "cacheWrite": 0,
                     "cacheRead": 0, "unknownTurns": 1},
                ],
                "byProvider": [
                    {"provider": null, "input": 0, "output": 0, "cacheWrite": 0, "cacheRead": 0,
                     "unknownTurns": 2},
                    {"provider": "anthropic", "input": 16, "output": 22, "cacheWrite": 33,
                     "cacheRead": 44, "unknownTurns": 0},
                ],
                "byModel": [
                    {"model": null, "input": 0, "output": 0, "cacheWrite": 0, "cacheRead": 0,
                     "unknownTurns": 2},
                    {"model": "opus", "input": 11, "output": 22, "cacheWrite": 33,
                     "cacheRead": 44, "unknownTurns": 0},
                    {"model": "sonnet", "input": 5, "output": 0, "cacheWrite": 0,
                     "cacheRead": 0, "unknownTurns": 0},
                ],
                "byAccount": [
                    {"account": null, "input": 16, "output": 22, "cacheWrite": 33,
                     "cacheRead": 44, "unknownTurns": 2},
                ],
            })
        );
    }

    #[test]
    fn sums_past_2_53_and_past_2_63_stay_exact_as_strings() {
        let big = i64::MAX as u64; // 2^63 - 1, the most one stored reading holds
        let rs = vec![
            reading("r1", "m1", Some("opus"), known(1 << 52, big, 0, 1)),
            reading("r1", "m2", Some("opus"), known(1 << 52, big, 0, 2)),
            reading("r2", "m1", Some("opus"), known(1, big, 0, 3)),
        ];
        let s = aggregate(&rs);
        let total = s.total.to_json();
        // 2^53 + 1 is past the safe range by one.
        assert_eq!(total["input"], json!("9007199254740993"));
        // 3 * (2^63 - 1) is past u64 too.
        assert_eq!(total["output"], json!("27670116110564327421"));
        assert_eq!(total["cacheWrite"], json!(0));
        assert_eq!(total["cacheRead"], json!(6));
        let r1 = &s.to_json()["byRun"][0];
        assert_eq!(r1["run"], json!("r1"));
        // Exactly 2^53: the first value that is a string.
        assert_eq!(r1["input"], json!("9007199254740992"));
        assert_eq!(r1["output"], json!("18446744073709551614"));
        let r2 = &s.to_json()["byRun"][1];
        assert_eq!(r2["input"], json!(1));
        assert_eq!(r2["output"], json!("9223372036854775807"));
    }

    #[test]
    fn no_readings_is_zero_totals_and_empty_groups() {
        assert_eq!(
            aggregate(&[]).to_json(),
            json!({
                "total": {"input": 0, "output": 0, "cacheWrite": 0, "cacheRead": 0,
                          "unknownTurns": 0},
                "byRun": [], "byInstance": [], "byProvider": [], "byModel": [], "byAccount": [],
            })
        );
    }

    /// A page of `byRun` (`Aggregate::paged`) is the unpaged `byRun` cut to
    /// the runs after `after`, the first `limit` of them in key order,
    /// whatever order the readings come in (a run's readings spread out,
    /// smaller runs arriving once the page is full); `more_runs` says
    /// whether a run past the page was seen; the total and every other
    /// group count every reading. (`cargo mutants`: docs/testing.md.)
    #[test]
    fn a_page_of_runs_is_the_unpaged_by_run_cut_in_key_order() {
        let orders = [
            ["r1", "r2", "r3", "r4", "r5", "r1", "r3", "r5"],
            ["r5", "r4", "r3", "r2", "r1", "r5", "r2", "r4"],
            ["r3", "r5", "r1", "r4", "r2", "r3", "r1", "r4"],
        ];
        for order in &orders {
            let readings: Vec<Reading> = order
                .iter()
                .enumerate()
                .map(|(i, run)| {
                    let outcome = if i % 3 == 2 {
                        Outcome::Unknown
                    } else {
                        known(i as u64 + 1, 1, 0, 0)
                    };
                    reading(run, &format!("m{i}"), Some("opus"), outcome)
                })
                .collect();
            let all = aggregate(&readings);
            let mut unpaged = Aggregate::default();
            readings.iter().for_each(|r| unpaged.add(r));
            assert!(!unpaged.more_runs(), "unpaged, never more");
            for after in [None, Some("r0"), Some("r2"), Some("r5")] {
                let past: Vec<&String> = all
                    .by_run
                    .keys()
                    .filter(|k| after.is_none_or(|a| k.as_str() > a))
                    .collect();
                for limit in 0..=6 {
                    let mut a = Aggregate::paged(RunWindow {
                        after: after.map(str::to_string),
                        limit,
                        more: false,
                    });
                    readings.iter().for_each(|r| a.add(r));
                    let more = a.more_runs();
                    let page = a.finish();
                    let want: BTreeMap<String, Totals> = past
                        .iter()
                        .take(limit)
                        .map(|k| ((*k).clone(), all.by_run[*k].clone()))
                        .collect();
                    let case = format!("{order:?} after {after:?} limit {limit}");
                    assert_eq!(page.by_run, want, "{case}");
                    assert_eq!(more, past.len() > limit, "{case}");
                    assert_eq!(page.total, all.total, "{case}");
                    assert_eq!(page.by_instance, all.by_instance, "{case}");
                    assert_eq!(page.by_model, all.by_model, "{case}");
                }
            }
        }
    }
}
