//! Numbers printed minimally: the shortest text that parses back to the
//! same bits, as the encoder writes them.

use std::fmt::{self, Write as _};

/// A number as `±digits × 10^exp`, with no trailing zero in `digits` (unless
/// the number is zero): what the encoder prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Decimal {
    neg: bool,
    digits: [u8; 20],
    len: u8,
    exp: i32,
}

/// The two ways to print a [`Decimal`].
enum Layout {
    /// `123`, `1200`, `1.5`, `0.005`.
    Plain,
    /// `12e5`, `15e-8`: integer mantissa, then the exponent.
    Exponent,
}

impl Decimal {
    /// The exact decimal of an integer.
    pub(super) fn from_i64(v: i64) -> Decimal {
        let mut mag = v.unsigned_abs();
        let mut exp = 0;
        while mag != 0 && mag.is_multiple_of(10) {
            mag /= 10;
            exp += 1;
        }
        let mut rev = [0u8; 20];
        let mut len = 0;
        loop {
            rev[len] = b'0' + (mag % 10) as u8;
            len += 1;
            mag /= 10;
            if mag == 0 {
                break;
            }
        }
        let mut digits = [0u8; 20];
        for (d, r) in digits.iter_mut().zip(rev[..len].iter().rev()) {
            *d = *r;
        }
        Decimal {
            neg: v < 0,
            digits,
            len: len as u8,
            exp,
        }
    }

    /// The shortest decimal of `z / 10^p` (the double nearest to it), when
    /// that is the decimal `z × 10^-p` itself: when `|z| < 10^15`. Two distinct
    /// decimals of at most 15 significant digits never round to the same
    /// double, so no shorter (or other equally short) decimal maps to it.
    pub(super) fn from_scaled(z: i64, p: u32) -> Option<Decimal> {
        if z.unsigned_abs() >= 1_000_000_000_000_000 {
            return None;
        }
        let mut d = Decimal::from_i64(z);
        if z != 0 {
            d.exp -= p as i32;
        }
        Some(d)
    }

    /// The shortest decimal that parses back to `x` (finite), from std's
    /// shortest round-trip formatting in scientific notation.
    pub(super) fn from_f64(x: f64) -> Decimal {
        let mut text = Buf::default();
        // Cannot fail: `Buf` accepts everything up to its size, and the text
        // (sign, 17 digits, point, exponent) is at most 25 bytes.
        let _ = write!(text, "{x:e}");
        let s = text.as_bytes();
        let neg = s.first() == Some(&b'-');
        let mut digits = [0u8; 20];
        let mut len = 0;
        let mut i = usize::from(neg);
        while let Some(&b) = s.get(i) {
            match b {
                b'0'..=b'9' => {
                    digits[len] = b;
                    len += 1;
                }
                b'.' => {}
                _ => break,
            }
            i += 1;
        }
        // `e`, then the exponent of the first digit.
        let e_text = s.get(i + 1..).unwrap_or_default();
        let (e_neg, e_digits) = match e_text.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, e_text),
        };
        let e = e_digits
            .iter()
            .fold(0i32, |acc, &d| acc * 10 + i32::from(d - b'0'));
        let e = if e_neg { -e } else { e };
        Decimal {
            neg,
            digits,
            len: len as u8,
            exp: e - (len as i32 - 1),
        }
    }

    fn digits(&self) -> &[u8] {
        &self.digits[..usize::from(self.len)]
    }

    /// Length of the plain form, without the sign.
    fn plain_len(&self) -> usize {
        let n = i64::from(self.len);
        let e = i64::from(self.exp);
        let len = if e >= 0 {
            n + e
        } else if n + e > 0 {
            n + 1
        } else {
            2 - (n + e) + n
        };
        len as usize
    }

    /// Which form is shorter (the plain one on a tie).
    fn layout(&self) -> Layout {
        if self.exp != 0
            && usize::from(self.len) + 1 + int_len(i64::from(self.exp)) < self.plain_len()
        {
            Layout::Exponent
        } else {
            Layout::Plain
        }
    }

    /// Length of [`Decimal::write`]'s output.
    pub(super) fn len(&self) -> usize {
        let body = match self.layout() {
            Layout::Plain => self.plain_len(),
            Layout::Exponent => usize::from(self.len) + 1 + int_len(i64::from(self.exp)),
        };
        body + usize::from(self.neg)
    }

    /// Appends the minimal text: `1e3` not `1000`, `0.5` not `5e-1`, `0` not
    /// `0.0`; on a tie the plain form (`100`, not `1e2`).
    pub(super) fn write(&self, out: &mut String) {
        if self.neg {
            out.push('-');
        }
        let digits = self.digits();
        match self.layout() {
            Layout::Exponent => {
                push_ascii(out, digits);
                let _ = write!(out, "e{}", self.exp);
            }
            Layout::Plain => {
                let n = digits.len() as i64;
                let e = i64::from(self.exp);
                if e >= 0 {
                    push_ascii(out, digits);
                    out.extend(std::iter::repeat_n('0', e as usize));
                } else if n + e > 0 {
                    let (whole, frac) = digits.split_at((n + e) as usize);
                    push_ascii(out, whole);
                    out.push('.');
                    push_ascii(out, frac);
                } else {
                    out.push_str("0.");
                    out.extend(std::iter::repeat_n('0', (-(n + e)) as usize));
                    push_ascii(out, digits);
                }
            }
        }
    }
}

/// Appends ASCII digits.
fn push_ascii(out: &mut String, digits: &[u8]) {
    out.extend(digits.iter().map(|&b| char::from(b)));
}

/// Characters of `v` in plain decimal (sign included).
pub(super) fn int_len(v: i64) -> usize {
    let digits = v
        .unsigned_abs()
        .checked_ilog10()
        .map_or(1, |l| l as usize + 1);
    digits + usize::from(v < 0)
}

/// A fixed stack buffer for formatting one number.
struct Buf {
    bytes: [u8; 40],
    len: usize,
}

impl Default for Buf {
    fn default() -> Self {
        Buf {
            bytes: [0; 40],
            len: 0,
        }
    }
}

impl Buf {
    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl fmt::Write for Buf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let dst = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::xdelta::number::{parse, Literal};

    fn lit(s: &str) -> Literal {
        parse(s.as_bytes(), 0).unwrap().0
    }

    #[test]
    fn prints_minimally() {
        let cases: [(f64, &str); 14] = [
            (0.0, "0"),
            (-0.0, "-0"),
            (1000.0, "1e3"),
            (100.0, "100"),
            (1200.0, "1200"),
            (12000.0, "12e3"),
            (0.5, "0.5"),
            (0.05, "0.05"),
            (0.005, "5e-3"),
            (1.5e-7, "15e-8"),
            (-50.25, "-50.25"),
            (123456.7, "123456.7"),
            (1e300, "1e300"),
            (5e-324, "5e-324"),
        ];
        for (x, want) in cases {
            let d = Decimal::from_f64(x);
            let mut s = String::new();
            d.write(&mut s);
            assert_eq!(s, want, "{x:e}");
            assert_eq!(d.len(), s.len());
            assert_eq!(s.parse::<f64>().unwrap().to_bits(), x.to_bits());
        }
        for (v, want) in [
            (0i64, "0"),
            (-7, "-7"),
            (1000, "1e3"),
            (-20, "-20"),
            (i64::MIN, "-9223372036854775808"),
        ] {
            let d = Decimal::from_i64(v);
            let mut s = String::new();
            d.write(&mut s);
            assert_eq!((s.as_str(), d.len()), (want, want.len()));
            assert_eq!(lit(&s).int(), Some(v));
        }
        assert_eq!((int_len(0), int_len(-10), int_len(i64::MIN)), (1, 3, 20));
    }

    #[test]
    fn scaled_integers_print_like_their_doubles() {
        let mut z: i64 = 1;
        for step in 0..2000i64 {
            z = z
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = (z >> (step % 60)) % 1_000_000_000_000_000;
            for p in [0u32, 1, 2, 3, 7, 15, 22] {
                let y = v as f64 / 10f64.powi(p as i32);
                assert_eq!(
                    Decimal::from_scaled(v, p),
                    Some(Decimal::from_f64(y)),
                    "{v} / 10^{p}"
                );
            }
        }
        assert_eq!(Decimal::from_scaled(0, 3), Some(Decimal::from_f64(0.0)));
        assert_eq!(Decimal::from_scaled(10i64.pow(15), 2), None);
    }
}
