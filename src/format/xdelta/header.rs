//! The XDelta header: version and parameters, up to the `:` where the
//! values start.

use super::number::{self, Literal};
use super::{error_at, syntax, Parameter, XdeltaError};
use crate::kernels::integrate::{Affine, Scale};

/// The format version of a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// No version prefix: the original grammar (`d`/`dd`, `nY` repeats).
    V0,
    /// `v1`.
    V1,
}

/// Delta order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delta {
    /// `d0`: values as they are (the v0 default).
    D0,
    /// `d1` (v0: `d`): each value a delta from the previous (the v1 default).
    D1,
    /// `d2` (v0: `dd`): deltas of deltas.
    D2,
}

/// What a blank value stands for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Blank {
    /// `br` (the default): the previous item, a null included.
    Repeat,
    /// `bn`: a null.
    Null,
    /// `b<number>`: this number.
    Value(f64),
}

/// The parameters of a string.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Header {
    /// Format version.
    pub version: Version,
    /// Delta order.
    pub delta: Delta,
    /// Blank rule.
    pub blank: Blank,
    /// Scalar, then offset.
    pub affine: Affine,
}

/// The blank rule with its literal, for exact integer decoding.
#[derive(Clone, Copy, Debug)]
pub(super) enum BlankRule {
    Repeat,
    Null,
    Value(Literal),
}

/// A parsed header and where the values start.
pub(super) struct Params {
    pub(super) header: Header,
    pub(super) blank: BlankRule,
    pub(super) values_start: usize,
}

fn parse_count_prefix(
    bytes: &[u8],
    start: usize,
    what: &'static str,
) -> Result<(u64, usize), XdeltaError> {
    let mut i = start;
    let mut value: u64 = 0;
    while let Some(&b @ b'0'..=b'9') = bytes.get(i) {
        value = value.saturating_mul(10).saturating_add(u64::from(b - b'0'));
        i += 1;
    }
    if i == start {
        return Err(syntax(bytes, start, what));
    }
    Ok((value, i))
}

/// Parses a repeat count: digits, no leading zero, at least 1. Counts beyond
/// `u64` saturate (and then exceed any expansion limit).
#[inline]
pub(super) fn parse_count(bytes: &[u8], start: usize) -> Result<(u64, usize), XdeltaError> {
    match bytes.get(start) {
        Some(b'1'..=b'9') => {}
        _ => {
            let expected = if bytes.get(start) == Some(&b'0') {
                "a count of at least 1, without leading zeros"
            } else {
                "a count (digits)"
            };
            return Err(error_at(bytes, start, |found| XdeltaError::BadCount {
                offset: start,
                expected,
                found,
            }));
        }
    }
    parse_count_prefix(bytes, start, "a count (digits)")
}

/// Parses the header; `values_start` is just past the `:`.
pub(super) fn parse_header(bytes: &[u8]) -> Result<Params, XdeltaError> {
    let mut header = Header {
        version: Version::V1,
        delta: Delta::D1,
        blank: Blank::Repeat,
        affine: Affine::IDENTITY,
    };
    let mut blank = BlankRule::Repeat;
    let mut pos = 0;
    if bytes.first() == Some(&b'v') {
        if bytes.get(1) == Some(&b'0') && matches!(bytes.get(2), Some(b'0'..=b'9')) {
            return Err(syntax(bytes, 2, "a version without leading zeros"));
        }
        let (version, end) = parse_count_prefix(bytes, 1, "a version number")?;
        if version != 1 {
            return Err(XdeltaError::UnknownVersion { offset: 0, version });
        }
        pos = end;
        match bytes.get(pos) {
            Some(b':') => {
                return Ok(Params {
                    header,
                    blank,
                    values_start: pos + 1,
                });
            }
            Some(b',') => pos += 1,
            _ => return Err(syntax(bytes, pos, "',' or ':' after the version")),
        }
    } else {
        header.version = Version::V0;
        header.delta = Delta::D0;
    }
    let v0 = header.version == Version::V0;
    let mut seen = [false; 4];
    loop {
        let start = pos;
        let (parameter, end) = match bytes.get(pos) {
            Some(b'd') => {
                let (delta, end) = if v0 {
                    match bytes.get(pos + 1) {
                        Some(b'd') => (Delta::D2, pos + 2),
                        _ => (Delta::D1, pos + 1),
                    }
                } else {
                    match bytes.get(pos + 1) {
                        Some(b'0') => (Delta::D0, pos + 2),
                        Some(b'1') => (Delta::D1, pos + 2),
                        Some(b'2') => (Delta::D2, pos + 2),
                        _ => return Err(syntax(bytes, pos + 1, "0, 1 or 2 after 'd'")),
                    }
                };
                header.delta = delta;
                (Parameter::Delta, end)
            }
            Some(b'b') => {
                let end = match bytes.get(pos + 1) {
                    Some(b'r') => {
                        header.blank = Blank::Repeat;
                        blank = BlankRule::Repeat;
                        pos + 2
                    }
                    Some(b'n') if !v0 => {
                        header.blank = Blank::Null;
                        blank = BlankRule::Null;
                        pos + 2
                    }
                    _ => {
                        let (lit, end) = number::parse(bytes, pos + 1)?;
                        header.blank = Blank::Value(lit.float());
                        blank = BlankRule::Value(lit);
                        end
                    }
                };
                (Parameter::Blank, end)
            }
            Some(&op @ (b'*' | b'/')) => {
                let (lit, end) = number::parse(bytes, pos + 1)?;
                header.affine.scale = if op == b'*' {
                    Scale::Mul(lit.float())
                } else if lit.float() == 0.0 {
                    return Err(XdeltaError::ZeroDivisor { offset: pos });
                } else {
                    Scale::Div(lit.float())
                };
                (Parameter::Scalar, end)
            }
            Some(&op @ (b'+' | b'-')) => {
                let (lit, end) = number::parse(bytes, pos + 1)?;
                header.affine.offset = Some(if op == b'+' {
                    lit.float()
                } else {
                    -lit.float()
                });
                (Parameter::Offset, end)
            }
            _ => {
                let expected = if v0 && pos == 0 {
                    "'v' or a parameter (d, b, *, /, + or -)"
                } else {
                    "a parameter (d, b, *, /, + or -)"
                };
                return Err(syntax(bytes, pos, expected));
            }
        };
        let slot = &mut seen[parameter as usize];
        if *slot {
            return Err(XdeltaError::RepeatedParameter {
                offset: start,
                parameter,
            });
        }
        *slot = true;
        pos = end;
        match bytes.get(pos) {
            Some(b',') => pos += 1,
            Some(b':') => {
                return Ok(Params {
                    header,
                    blank,
                    values_start: pos + 1,
                })
            }
            _ => return Err(syntax(bytes, pos, "',' or ':' after a parameter")),
        }
    }
}
