//! The grammar's `number`, parsed strictly (the encoder prints numbers with
//! the `decimal` module).
//!
//! `number = ['-'] ('0' | onenine digit*) ['.' digit+] [('e'|'E') ['+'|'-'] digit+]`

use super::{error_at, XdeltaError};

/// A parsed literal: exactly, when it is an integer in `i64` range (which
/// lets the decoder integrate exactly), else as its nearest double.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Literal {
    /// An integer that fits `i64`; never a negative zero, which only the
    /// double keeps.
    Int(i64),
    /// Anything else, as the nearest double (round to nearest, ties to even).
    Float(f64),
}

impl Literal {
    /// The nearest double (for an integer, `as` rounds to nearest even,
    /// which is what a correct parser gives for its decimal text).
    pub(super) fn float(self) -> f64 {
        match self {
            Literal::Int(i) => i as f64,
            Literal::Float(x) => x,
        }
    }

    /// The exact value, if it is an integer that fits `i64`.
    pub(super) fn int(self) -> Option<i64> {
        match self {
            Literal::Int(i) => Some(i),
            Literal::Float(_) => None,
        }
    }
}

fn bad(bytes: &[u8], offset: usize, expected: &'static str) -> XdeltaError {
    error_at(bytes, offset, |found| XdeltaError::BadNumber {
        offset,
        expected,
        found,
    })
}

fn digit_at(bytes: &[u8], i: usize) -> Option<u8> {
    match bytes.get(i) {
        Some(&b @ b'0'..=b'9') => Some(b - b'0'),
        _ => None,
    }
}

/// Parses the number starting at `start`; returns it and the offset just
/// past it. What follows (`,`, `:`, `n`) is the caller's business.
///
/// Inlined into the value loop: the common literal, an integer of at most 7
/// digits, takes one 8-byte load and a few multiplications ([`digits8`]), no
/// per-digit loop or branch. Everything else goes to [`parse_general`].
#[inline(always)]
pub(super) fn parse(bytes: &[u8], start: usize) -> Result<(Literal, usize), XdeltaError> {
    let neg = bytes.get(start) == Some(&b'-');
    let i = start + usize::from(neg);
    let (n, mag) = digits8(bytes, i);
    let end = i + n;
    // Non-short-circuit `&`: the sign and the length are random in real data,
    // and a branch on them would be mispredicted half the time.
    let short = (n.wrapping_sub(1) < 7) & !((n > 1) & (bytes.get(i) == Some(&b'0')));
    let plain = !matches!(bytes.get(end), Some(b'.' | b'e' | b'E'));
    if short & plain & !(neg & (mag == 0)) {
        // `mag < 10^7`: exact in both types, no overflow, no negative zero.
        let sign = -i64::from(neg);
        return Ok((Literal::Int((mag as i64 ^ sign) - sign), end));
    }
    parse_general(bytes, start)
}

/// The leading ASCII digits at `i`, at most 8 of them: their count and value.
///
/// SWAR: eight bytes are loaded as one little-endian word (zero-padded past
/// the end of the input, and zero is not a digit), a byte is a digit iff its
/// high nibble is 3 and its low nibble at most 9, and the digits, moved to the
/// top of the word, are combined pairwise (`a * 10 + b`, then `ab * 100 + cd`,
/// then `abcd * 10^4 + efgh`) by three multiplications.
#[inline(always)]
fn digits8(bytes: &[u8], i: usize) -> (usize, u64) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let rest = bytes.get(i..).unwrap_or_default();
    let word = match rest.first_chunk::<8>() {
        Some(chunk) => u64::from_le_bytes(*chunk),
        None => {
            let mut padded = [0u8; 8];
            padded[..rest.len()].copy_from_slice(rest);
            u64::from_le_bytes(padded)
        }
    };
    let low = word & (0x0F * ONES);
    let not_digit =
        ((word & (0xF0 * ONES)) ^ (0x30 * ONES)) | ((low + 0x06 * ONES) & (0xF0 * ONES));
    // The high bit of each byte that is not a digit.
    let flags = (((not_digit & (0x7F * ONES)) + 0x7F * ONES) | not_digit) & (0x80 * ONES);
    let n = (flags.trailing_zeros() / 8) as usize;
    if n == 0 {
        return (0, 0);
    }
    let d = low << (8 * (8 - n));
    let d = (d.wrapping_mul(10 * 0x100 + 1) >> 8) & 0x00FF_00FF_00FF_00FF;
    let d = (d.wrapping_mul(100 * 0x1_0000 + 1) >> 16) & 0x0000_FFFF_0000_FFFF;
    let d = d.wrapping_mul(10_000 * 0x1_0000_0000 + 1) >> 32;
    (n, d)
}

/// [`parse`] for every literal: any length, fraction, exponent, and errors.
#[cold]
#[inline(never)]
fn parse_general(bytes: &[u8], start: usize) -> Result<(Literal, usize), XdeltaError> {
    let mut i = start;
    let neg = bytes.get(i) == Some(&b'-');
    if neg {
        i += 1;
    }
    let Some(first) = digit_at(bytes, i) else {
        return Err(bad(
            bytes,
            i,
            if neg { "a digit after '-'" } else { "a number" },
        ));
    };
    i += 1;
    // The integer part, exactly while it fits a u64 (19+ digits).
    let mut mag = u64::from(first);
    let mut fits = true;
    if first == 0 {
        if digit_at(bytes, i).is_some() {
            return Err(bad(bytes, i, "no digit after a leading 0"));
        }
    } else {
        while let Some(d) = digit_at(bytes, i) {
            match mag
                .checked_mul(10)
                .and_then(|m| m.checked_add(u64::from(d)))
            {
                Some(m) => mag = m,
                None => fits = false,
            }
            i += 1;
        }
    }
    let int_end = i;
    if !matches!(bytes.get(i), Some(b'.' | b'e' | b'E')) && fits {
        // The common case: a plain integer, converted without a float parser
        // (`u64 as f64` rounds to nearest even, like a correct parser).
        let float = if neg { -(mag as f64) } else { mag as f64 };
        let int = if neg {
            if mag == 0 {
                None
            } else {
                0i64.checked_sub_unsigned(mag)
            }
        } else {
            i64::try_from(mag).ok()
        };
        return Ok((int.map_or(Literal::Float(float), Literal::Int), i));
    }
    let mut frac = int_end..int_end;
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        let frac_start = i;
        while digit_at(bytes, i).is_some() {
            i += 1;
        }
        if i == frac_start {
            return Err(bad(bytes, i, "a digit after '.'"));
        }
        frac = frac_start..i;
    }
    let mut exp: i64 = 0;
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        let exp_neg = bytes.get(i) == Some(&b'-');
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_start = i;
        while let Some(d) = digit_at(bytes, i) {
            exp = exp.saturating_mul(10).saturating_add(i64::from(d));
            i += 1;
        }
        if i == exp_start {
            return Err(bad(bytes, i, "a digit in the exponent"));
        }
        if exp_neg {
            exp = -exp;
        }
    }
    let text = &bytes[start..i];
    // The grammar is checked, and it is a subset of what std parses (ASCII).
    let float = std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or_else(|| bad(bytes, start, "a number"))?;
    let int = exact_integer(
        neg,
        &bytes[start + usize::from(neg)..int_end],
        &bytes[frac],
        exp,
    );
    Ok((int.map_or(Literal::Float(float), Literal::Int), i))
}

/// The value of `±int_digits.frac_digits × 10^exp` if it is an integer in
/// `i64` range (and not a negative zero).
fn exact_integer(neg: bool, int_digits: &[u8], frac_digits: &[u8], exp: i64) -> Option<i64> {
    // Significant digits without trailing zeros, and the zeros held back.
    let mut sig: u64 = 0;
    let mut zeros: i64 = 0;
    for &d in int_digits.iter().chain(frac_digits) {
        if d == b'0' {
            zeros += 1;
            continue;
        }
        for _ in 0..=zeros {
            sig = sig.checked_mul(10)?;
        }
        sig = sig.checked_add(u64::from(d - b'0'))?;
        zeros = 0;
    }
    if sig == 0 {
        return if neg { None } else { Some(0) };
    }
    let scale = exp
        .saturating_sub(frac_digits.len() as i64)
        .saturating_add(zeros);
    // `sig` has no trailing zero, so a negative scale leaves a fraction.
    if !(0..=18).contains(&scale) {
        return None;
    }
    let mag = sig.checked_mul(10u64.pow(scale as u32))?;
    if neg {
        0i64.checked_sub_unsigned(mag)
    } else {
        i64::try_from(mag).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Result<(Literal, usize), XdeltaError> {
        parse(s.as_bytes(), 0)
    }

    #[test]
    fn parses_the_grammar() {
        assert_eq!(lit("0").unwrap(), (Literal::Int(0), 1));
        assert_eq!(lit("-12,").unwrap(), (Literal::Int(-12), 3));
        assert_eq!(lit("1e3").unwrap().0, Literal::Int(1000));
        assert_eq!(lit("1.5E+1").unwrap().0, Literal::Int(15));
        assert_eq!(lit("2.000").unwrap().0, Literal::Int(2));
        assert_eq!(lit("120e-1").unwrap().0, Literal::Int(12));
        assert_eq!(
            lit("-9223372036854775808").unwrap().0,
            Literal::Int(i64::MIN)
        );
        let big = lit("9223372036854775808").unwrap().0;
        assert_eq!((big.float(), big.int()), (9223372036854775808.0, None));
        let frac = lit("0.1").unwrap().0;
        assert_eq!((frac.float(), frac.int()), (0.1, None));
        let neg_zero = lit("-0").unwrap().0;
        assert_eq!(
            (neg_zero.float().to_bits(), neg_zero.int()),
            ((-0.0f64).to_bits(), None)
        );
        assert_eq!(lit("-0.0e7").unwrap().0.int(), None);
        assert_eq!(lit("0e99999999999999999999").unwrap().0, Literal::Int(0));
        assert_eq!(lit("1e400").unwrap().0.float(), f64::INFINITY);
        assert_eq!(lit("1e-400").unwrap().0.float(), 0.0);
        assert_eq!(
            lit("10000000000000000000000e-4").unwrap().0,
            Literal::Int(10i64.pow(18))
        );
        assert_eq!(lit("1.2n3").unwrap().1, 3);
    }

    #[test]
    fn swar_digits_match_a_loop() {
        let texts = [
            "",
            "0",
            "7",
            "12",
            "123,",
            "1234567",
            "12345678",
            "123456789",
            "98765432",
            "1a",
            "9:",
            "09",
            "-1",
            "5/",
            "4e3",
            "00000000",
        ];
        for text in texts {
            for pad in ["", ",", "xxxxxxxxxx"] {
                let s = format!("{text}{pad}");
                let n = s.bytes().take(8).take_while(u8::is_ascii_digit).count();
                let value = s[..n].parse::<u64>().unwrap_or(0);
                assert_eq!(digits8(s.as_bytes(), 0), (n, value), "{s:?}");
            }
        }
        let mut x: u64 = 0x1234_5678_9ABC_DEF0;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let bytes: Vec<u8> = x
                .to_le_bytes()
                .iter()
                .map(|b| if b % 4 == 0 { *b } else { b'0' + b % 10 })
                .collect();
            let n = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
            let value = std::str::from_utf8(&bytes[..n])
                .unwrap()
                .parse::<u64>()
                .unwrap_or(0);
            assert_eq!(digits8(&bytes, 0), (n, value), "{bytes:?}");
        }
    }

    #[test]
    fn rejects_malformed_numbers() {
        for (text, offset) in [
            ("01", 1),
            (".5", 0),
            ("1.", 2),
            ("1e", 2),
            ("1e+", 3),
            ("-", 1),
            ("-.5", 1),
            ("+1", 0),
            ("", 0),
        ] {
            match lit(text) {
                Err(XdeltaError::BadNumber { offset: o, .. }) => assert_eq!(o, offset, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        assert_eq!(lit(" 1"), Err(XdeltaError::Whitespace { offset: 0 }));
    }
}
