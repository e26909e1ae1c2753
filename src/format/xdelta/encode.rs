//! The XDelta encoder: tries parameter combinations and keeps the shortest
//! string that decodes back to exactly the input bits.
//!
//! Candidates, in order (the first of equally short ones wins, so defaults
//! are preferred):
//!
//! * **Integer domain**, when every value is `(z as f64)`, or `(z as f64) / 10^p`
//!   for the given precision `p`, with `z` an `i64`: the items are the `z`s
//!   (`d0`), their deltas (`d1`), or deltas of deltas (`d2`), all checked, the
//!   deltas only where the decoder integrates them exactly (within 2^53); and
//!   for `d0`, `z - O` with an offset `O` near the median (rounded to one or two
//!   significant digits, so it prints short). Each candidate is verified with
//!   the decoder's own arithmetic (integer integration, then `/ 10^p`, then
//!   `+ o`), so it decodes to the same bits.
//! * **Double domain** (`d0`, values printed as shortest round-trip decimals),
//!   when the values are not all integers: exact by construction. Deltas of
//!   doubles are not tried; they would not round-trip in general, which is
//!   why the spec recommends a precision.
//!
//! For each candidate the value list is a sequence of runs of equal items, and
//! each blank mode (`br`, `bn`, `b<the majority item>`) is costed: a run is
//! written as explicit items, `XnY`, `nnY`, blanks, or `nY`, whichever is
//! shortest. Costing and writing share one routine (`emit`), so the chosen
//! length is the written length.

use std::fmt::Write as _;

use super::decimal::{int_len, Decimal};
use super::decode::integrates_exactly;
use super::header::Delta;
use super::XdeltaError;

/// The largest precision [`Encoder::precision`] accepts (`10^22` is the
/// largest power of ten a double holds exactly).
pub const MAX_PRECISION: u32 = 22;

/// Encodes with the default [`Encoder`] (no precision).
pub fn encode(values: &[Option<f64>]) -> Result<String, XdeltaError> {
    Encoder::new().encode(values)
}

/// A configured XDelta encoder.
#[derive(Clone, Copy, Debug, Default)]
pub struct Encoder {
    precision: Option<u32>,
}

/// One item of the value list after the delta step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    Null,
    Int(i64),
    /// A double, by its bits (so that `-0.0` and `0.0` differ).
    Float(u64),
}

impl Tok {
    /// Length of the item written out explicitly.
    fn text_len(self) -> usize {
        match self {
            Tok::Null => 1,
            Tok::Int(v) => int_text_len(v),
            Tok::Float(bits) => Decimal::from_f64(f64::from_bits(bits)).len(),
        }
    }
}

/// `Decimal::from_i64(v).len()`, fast for the common case without trailing
/// zeros.
fn int_text_len(v: i64) -> usize {
    if v % 10 != 0 || v == 0 {
        int_len(v)
    } else {
        Decimal::from_i64(v).len()
    }
}

/// `count` equal items.
#[derive(Clone, Copy, Debug)]
struct Run {
    tok: Tok,
    count: usize,
    /// [`Tok::text_len`] of `tok`.
    len: usize,
}

/// What blanks stand for in a candidate.
#[derive(Clone, Copy, Debug, PartialEq)]
enum BlankChoice {
    Repeat,
    Null,
    Value(Tok),
}

/// The header of a candidate.
#[derive(Clone, Copy, Debug)]
struct Plan {
    delta: Delta,
    blank: BlankChoice,
    /// Precision `p` of a `/10^p` scalar.
    precision: Option<u32>,
    offset: Option<f64>,
}

/// Where `emit` writes: a length counter or a string.
trait Out {
    fn text(&mut self, s: &str);
    /// An item written out; `len` is its [`Tok::text_len`].
    fn item(&mut self, tok: Tok, len: usize);
    /// A repeat count (plain digits).
    fn count(&mut self, n: usize);
}

struct Counter(usize);

impl Out for Counter {
    fn text(&mut self, s: &str) {
        self.0 += s.len();
    }
    fn item(&mut self, _: Tok, len: usize) {
        self.0 += len;
    }
    fn count(&mut self, n: usize) {
        self.0 += int_len(n as i64);
    }
}

impl Out for String {
    fn text(&mut self, s: &str) {
        self.push_str(s);
    }
    fn item(&mut self, tok: Tok, _: usize) {
        match tok {
            Tok::Null => self.push('n'),
            Tok::Int(v) => Decimal::from_i64(v).write(self),
            Tok::Float(bits) => Decimal::from_f64(f64::from_bits(bits)).write(self),
        }
    }
    fn count(&mut self, n: usize) {
        let _ = write!(self, "{n}");
    }
}

/// `10^p` as a double (exact for `p <= 22`).
fn pow10(p: u32) -> f64 {
    (0..p).fold(1.0, |d, _| d * 10.0)
}

/// Writes the header of `plan`, `v1` through `:`.
fn emit_header<O: Out>(plan: &Plan, out: &mut O) {
    out.text("v1");
    match plan.delta {
        Delta::D0 => out.text(",d0"),
        Delta::D1 => {}
        Delta::D2 => out.text(",d2"),
    }
    match plan.blank {
        BlankChoice::Repeat => {}
        BlankChoice::Null => out.text(",bn"),
        BlankChoice::Value(tok) => {
            out.text(",b");
            out.item(tok, tok.text_len());
        }
    }
    if let Some(p) = plan.precision {
        out.text(",/");
        // 10^19..10^22 exceed i64 but print the same as doubles.
        let d = if p <= 18 {
            Tok::Int(10i64.pow(p))
        } else {
            Tok::Float(pow10(p).to_bits())
        };
        out.item(d, d.text_len());
    }
    if let Some(o) = plan.offset {
        out.text(if o < 0.0 { ",-" } else { ",+" });
        let mag = Tok::Float(o.abs().to_bits());
        out.item(mag, mag.text_len());
    }
    out.text(":");
}

/// Writes `k` blanks after an item: `,` each, or `,nK` when shorter.
fn emit_blanks<O: Out>(k: usize, out: &mut O) {
    if 2 + int_len(k as i64) < k {
        out.text(",n");
        out.count(k);
    } else {
        for _ in 0..k {
            out.text(",");
        }
    }
}

/// Cost of [`emit_blanks`].
fn blanks_cost(k: usize) -> usize {
    k.min(2 + int_len(k as i64))
}

/// Writes the value list, choosing per run the shortest way to write it.
fn emit_values<O: Out>(runs: &[Run], blank: BlankChoice, out: &mut O) {
    #[derive(Clone, Copy)]
    enum Way {
        Explicit,
        Counted,
        FirstThenBlanks,
        AllBlank,
    }
    let mut first = true;
    for run in runs {
        let (r, l) = (run.count, run.len);
        let hits = match blank {
            BlankChoice::Repeat => true,
            BlankChoice::Null => run.tok == Tok::Null,
            BlankChoice::Value(b) => run.tok == b,
        };
        // A single item: a blank where it stands for the item, else the item.
        if r == 1 {
            if hits && !first && blank != BlankChoice::Repeat {
                out.text(",");
            } else {
                if !first {
                    out.text(",");
                }
                out.item(run.tok, l);
            }
            first = false;
            continue;
        }
        let comma = usize::from(!first);
        let mut best = (comma + l + (r - 1) * (l + 1), Way::Explicit);
        let mut consider = |cost: usize, way: Way| {
            if cost < best.0 {
                best = (cost, way);
            }
        };
        if r >= 2 {
            if hits {
                consider(comma + l + blanks_cost(r - 1), Way::FirstThenBlanks);
            }
            consider(comma + l + 1 + int_len(r as i64), Way::Counted);
        }
        // Under `br` the run's first item differs from the previous item, so a
        // blank cannot start it; a blank never starts the list.
        if hits && !first && blank != BlankChoice::Repeat {
            consider(blanks_cost(r), Way::AllBlank);
        }
        let sep = |out: &mut O| {
            if !first {
                out.text(",");
            }
        };
        match best.1 {
            Way::Explicit => {
                for i in 0..r {
                    if i > 0 || !first {
                        out.text(",");
                    }
                    out.item(run.tok, l);
                }
            }
            Way::Counted => {
                sep(out);
                out.item(run.tok, l);
                out.text("n");
                out.count(r);
            }
            Way::FirstThenBlanks => {
                sep(out);
                out.item(run.tok, l);
                emit_blanks(r - 1, out);
            }
            Way::AllBlank => {
                // `emit_blanks` writes the separating comma itself.
                emit_blanks(r, out);
            }
        }
        first = false;
    }
}

/// The runs of the full list: `items` for the non-null values, in order;
/// `lens`, when given, holds each item's [`Tok::text_len`].
fn runs_of(values: &[Option<f64>], items: &[Tok], lens: Option<&[u8]>) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    let mut k = 0;
    for v in values {
        let (tok, len) = match (v, items.get(k)) {
            (Some(_), Some(&tok)) => {
                k += 1;
                (
                    tok,
                    lens.and_then(|l| l.get(k - 1)).map(|&l| usize::from(l)),
                )
            }
            _ => (Tok::Null, Some(1)),
        };
        match runs.last_mut() {
            Some(last) if last.tok == tok => last.count += 1,
            _ => runs.push(Run {
                tok,
                count: 1,
                len: len.unwrap_or_else(|| tok.text_len()),
            }),
        }
    }
    runs
}

/// The item most runs' values agree on, if any value is non-null (weighted
/// Boyer-Moore majority vote: the majority if there is one).
fn majority(runs: &[Run]) -> Option<Tok> {
    let mut candidate = None;
    let mut votes = 0usize;
    for run in runs.iter().filter(|r| r.tok != Tok::Null) {
        if candidate == Some(run.tok) {
            votes += run.count;
        } else if votes >= run.count {
            votes -= run.count;
        } else {
            candidate = Some(run.tok);
            votes = run.count - votes;
        }
    }
    candidate
}

/// `z` such that `(z as f64) / divisor` (or `z as f64`) is exactly `y`.
fn to_int(y: f64, divisor: Option<f64>) -> Option<i64> {
    let guess = match divisor {
        None => y,
        Some(d) => (y * d).round(),
    };
    [guess, guess - 1.0, guess + 1.0].into_iter().find_map(|z| {
        // The range where `as` is exact; `z` is integral here.
        if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&z)
            || z.fract() != 0.0
        {
            return None;
        }
        let zi = z as i64;
        let back = match divisor {
            None => zi as f64,
            Some(d) => zi as f64 / d,
        };
        (back.to_bits() == y.to_bits()).then_some(zi)
    })
}

/// The integer items of each delta order, if no difference overflows and
/// the decoder integrates them exactly (see
/// [`super::decode::integrates_exactly`]): past 2^53 it integrates in doubles,
/// which would round the sums these items were made for.
fn delta_items(zs: &[i64], delta: Delta) -> Option<Vec<Tok>> {
    let mut items = Vec::with_capacity(zs.len());
    let mut magnitude = 0u64;
    let (mut prev, mut prev_d) = (0i64, 0i64);
    for (k, &z) in zs.iter().enumerate() {
        let item = match (delta, k) {
            (Delta::D0, _) | (_, 0) => z,
            (Delta::D1, _) => z.checked_sub(prev)?,
            (Delta::D2, _) => {
                let d = z.checked_sub(prev)?;
                let dd = if k == 1 { d } else { d.checked_sub(prev_d)? };
                prev_d = d;
                dd
            }
        };
        magnitude = magnitude.saturating_add(item.unsigned_abs());
        items.push(Tok::Int(item));
        prev = z;
    }
    integrates_exactly(delta, magnitude, zs.len()).then_some(items)
}

/// Offsets worth trying for `d0`: the median rounded to one and two
/// significant digits (short to print, and it shortens most items).
fn offset_candidates(zs: &[i64]) -> Vec<i64> {
    if zs.is_empty() {
        return Vec::new();
    }
    let mut sorted = zs.to_vec();
    let mid = sorted.len() / 2;
    let median = *sorted.select_nth_unstable(mid).1;
    let mut out = Vec::new();
    for keep in [1u32, 2] {
        let digits = (int_len(median) - usize::from(median < 0)) as u32;
        let o = if digits > keep {
            let unit = 10i64.pow(digits - keep);
            (median / unit).checked_mul(unit).and_then(|q| {
                let rest = median % unit;
                if rest.abs() * 2 >= unit {
                    q.checked_add(unit * rest.signum())
                } else {
                    Some(q)
                }
            })
        } else {
            Some(median)
        };
        if let Some(o) = o.filter(|&o| o != 0 && !out.contains(&o)) {
            out.push(o);
        }
    }
    out
}

impl Encoder {
    /// An encoder without a precision.
    pub fn new() -> Encoder {
        Encoder::default()
    }

    /// Values are decimals with at most `digits` fractional digits: try a
    /// `/10^digits` scalar with integer items (exact integration; the spec's
    /// advice for fractional values with deltas). Values that are not on that
    /// grid are still encoded exactly, without it.
    pub fn precision(mut self, digits: u32) -> Encoder {
        self.precision = Some(digits);
        self
    }

    /// The shortest string found for `values` (`None` is a null).
    pub fn encode(&self, values: &[Option<f64>]) -> Result<String, XdeltaError> {
        let mut out = String::new();
        self.encode_into(values, &mut out)?;
        Ok(out)
    }

    /// Appends the shortest string found for `values` to `out`.
    pub fn encode_into(&self, values: &[Option<f64>], out: &mut String) -> Result<(), XdeltaError> {
        if let Some(precision) = self.precision.filter(|&p| p > MAX_PRECISION) {
            return Err(XdeltaError::Precision { precision });
        }
        if let Some((index, value)) = values
            .iter()
            .enumerate()
            .find_map(|(i, v)| v.filter(|x| !x.is_finite()).map(|x| (i, x)))
        {
            return Err(XdeltaError::NotFinite { index, value });
        }
        let dense: Vec<f64> = values.iter().flatten().copied().collect();
        let mut best: Option<(usize, Plan, Vec<Run>)> = None;
        let mut consider = |delta: Delta,
                            precision: Option<u32>,
                            offset: Option<f64>,
                            items: &[Tok],
                            lens: Option<&[u8]>| {
            let runs = runs_of(values, items, lens);
            let mut blanks = vec![BlankChoice::Repeat];
            if values.iter().any(Option::is_none) {
                blanks.push(BlankChoice::Null);
            }
            blanks.extend(majority(&runs).map(BlankChoice::Value));
            let mut kept: Option<(usize, Plan)> = None;
            for blank in blanks {
                let plan = Plan {
                    delta,
                    blank,
                    precision,
                    offset,
                };
                let mut cost = Counter(0);
                emit_header(&plan, &mut cost);
                emit_values(&runs, blank, &mut cost);
                if kept.is_none_or(|(c, _)| cost.0 < c) {
                    kept = Some((cost.0, plan));
                }
            }
            if let Some((cost, plan)) = kept.filter(|&(c, _)| best.as_ref().is_none_or(|b| c < b.0))
            {
                best = Some((cost, plan, runs));
            }
        };

        let precisions = std::iter::once(None).chain(self.precision.filter(|&p| p > 0).map(Some));
        let mut exact_ints = false;
        let mut grid = None;
        for precision in precisions {
            let divisor = precision.map(pow10);
            let Some(zs) = dense
                .iter()
                .map(|&y| to_int(y, divisor))
                .collect::<Option<Vec<i64>>>()
            else {
                continue;
            };
            exact_ints |= precision.is_none();
            for delta in [Delta::D1, Delta::D0, Delta::D2] {
                if let Some(items) = delta_items(&zs, delta) {
                    consider(delta, precision, None, &items, None);
                }
            }
            for o in offset_candidates(&zs) {
                let offset = match divisor {
                    None => o as f64,
                    Some(d) => o as f64 / d,
                };
                let items: Option<Vec<Tok>> = zs
                    .iter()
                    .zip(&dense)
                    .map(|(&z, &y)| {
                        let item = z.checked_sub(o)?;
                        let scaled = match divisor {
                            None => item as f64,
                            Some(d) => item as f64 / d,
                        };
                        ((scaled + offset).to_bits() == y.to_bits()).then_some(Tok::Int(item))
                    })
                    .collect();
                if let Some(items) = items {
                    consider(Delta::D0, precision, Some(offset), &items, None);
                }
            }
            if let Some(p) = precision {
                grid = Some((p, zs));
            }
        }
        if !exact_ints {
            // Printing every double is the slow part of costing this domain;
            // values on the precision grid get their length from their integer.
            let lens: Vec<u8> = dense
                .iter()
                .enumerate()
                .map(|(k, &y)| {
                    let decimal = match &grid {
                        Some((p, zs)) => Decimal::from_scaled(zs[k], *p),
                        None => None,
                    };
                    decimal.unwrap_or_else(|| Decimal::from_f64(y)).len() as u8
                })
                .collect();
            let items: Vec<Tok> = dense.iter().map(|y| Tok::Float(y.to_bits())).collect();
            consider(Delta::D0, None, None, &items, Some(&lens));
        }
        // The double-domain `d0` candidate always exists when the integer one
        // does not, so there is a best.
        if let Some((_, plan, runs)) = best {
            emit_header(&plan, out);
            emit_values(&runs, plan.blank, out);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_lengths_agree_with_printing() {
        for v in [
            0,
            1,
            -1,
            9,
            10,
            100,
            1000,
            -1000,
            12000,
            10i64.pow(18),
            i64::MAX,
            i64::MIN,
            -120,
            7_000_000,
        ] {
            let mut s = String::new();
            Decimal::from_i64(v).write(&mut s);
            assert_eq!(int_text_len(v), s.len(), "{v}");
        }
    }

    #[test]
    fn majority_vote() {
        let run = |v: i64, count| Run {
            tok: Tok::Int(v),
            count,
            len: 1,
        };
        assert_eq!(
            majority(&[run(1, 2), run(2, 1), run(1, 5), run(3, 2)]),
            Some(Tok::Int(1))
        );
        assert_eq!(majority(&[]), None);
    }

    #[test]
    fn offsets_round_the_median() {
        assert_eq!(
            offset_candidates(&[1_234_567, 1_234_000, 1_250_000]),
            vec![1_000_000, 1_200_000]
        );
        assert_eq!(offset_candidates(&[-46, -44, -45]), vec![-50, -45]);
        assert_eq!(offset_candidates(&[0, 0]), Vec::<i64>::new());
    }

    #[test]
    fn to_int_inverts_the_decoder() {
        assert_eq!(to_int(50.23, Some(100.0)), Some(5023));
        assert_eq!(to_int(0.1, None), None);
        assert_eq!(to_int(-0.0, None), None);
        assert_eq!(to_int(1e300, None), None);
        assert_eq!(to_int(-9_223_372_036_854_775_808.0, None), Some(i64::MIN));
    }
}
