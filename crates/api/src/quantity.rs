//! Kubernetes quantities (`500Gi`, `1.5G`, `1e3`, `250m`) as exact
//! numbers: the one parser Tusk compares sizes with, so that `1Gi` and
//! `1024Mi` are equal and no size is rounded on the way.
//!
//! Small and exact on purpose: the value is kept as a fraction of two
//! integers (no floating point), the grammar is the API server's. A
//! quantity beyond about 10^38 is refused rather than rounded.

use std::cmp::Ordering;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A parsed quantity: `numerator / denominator`, negated when `negative`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exact {
    negative: bool,
    numerator: u128,
    denominator: u128,
}

/// Parses quantity text; `None` when it is not a quantity (or too large).
pub fn parse(text: &str) -> Option<Exact> {
    let text = text.trim();
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let split = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(split);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return None;
    }
    let mut numerator: u128 = 0;
    for digit in whole.bytes().chain(fraction.bytes()) {
        numerator = numerator
            .checked_mul(10)?
            .checked_add(u128::from(digit - b'0'))?;
    }
    let mut denominator = 10u128.checked_pow(u32::try_from(fraction.len()).ok()?)?;
    let (multiply, divide) = scale(suffix)?;
    numerator = numerator.checked_mul(multiply)?;
    denominator = denominator.checked_mul(divide)?;
    Some(Exact {
        negative: negative && numerator != 0,
        numerator,
        denominator,
    })
}

/// What a suffix multiplies and divides by.
fn scale(suffix: &str) -> Option<(u128, u128)> {
    let binary = |power: u32| Some((1024u128.pow(power), 1));
    let decimal = |exponent: i32| {
        let factor = 10u128.checked_pow(exponent.unsigned_abs())?;
        Some(if exponent >= 0 {
            (factor, 1)
        } else {
            (1, factor)
        })
    };
    match suffix {
        "" => Some((1, 1)),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        other => {
            let exponent = other.strip_prefix(['e', 'E'])?;
            let digits = exponent.trim_start_matches(['+', '-']);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            decimal(exponent.parse().ok()?)
        }
    }
}

impl Exact {
    /// The value as a whole, non-negative number of base units.
    pub fn whole(self) -> Option<u128> {
        (!self.negative && self.numerator.is_multiple_of(self.denominator))
            .then(|| self.numerator / self.denominator)
    }

    /// Exact order; `None` only when the cross products overflow.
    pub fn compare(self, other: Exact) -> Option<Ordering> {
        let magnitude = || -> Option<Ordering> {
            let left = self.numerator.checked_mul(other.denominator)?;
            let right = other.numerator.checked_mul(self.denominator)?;
            Some(left.cmp(&right))
        };
        Some(match (self.negative, other.negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => magnitude()?,
            (true, true) => magnitude()?.reverse(),
        })
    }
}

/// Base units (bytes for storage) of `quantity`, if it parses and is a
/// whole, non-negative number.
pub fn bytes(quantity: &Quantity) -> Option<u128> {
    bytes_of(&quantity.0)
}

/// Base units of quantity text, see [`bytes`].
pub fn bytes_of(text: &str) -> Option<u128> {
    parse(text)?.whole()
}

/// Exact order of two quantities; `None` when either does not parse.
pub fn compare(a: &str, b: &str) -> Option<Ordering> {
    parse(a)?.compare(parse(b)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_exact_across_suffixes() {
        assert_eq!(bytes_of("1Gi"), Some(1 << 30));
        assert_eq!(bytes_of("1Gi"), bytes_of("1024Mi"));
        assert_eq!(bytes_of("1.5Gi"), Some(3 << 29));
        assert_eq!(bytes_of("1G"), Some(1_000_000_000));
        assert_eq!(bytes_of("1e3"), Some(1000));
        assert_eq!(bytes_of("1E"), Some(10u128.pow(18)));
        assert_eq!(bytes_of("2000m"), Some(2));
        assert_eq!(bytes_of("1500m"), None, "not whole");
        assert_eq!(bytes_of("-1Gi"), None, "negative");
        assert_eq!(compare("500Mi", "1Gi"), Some(Ordering::Less));
        assert_eq!(compare("1Gi", "1024Mi"), Some(Ordering::Equal));
        assert_eq!(compare("1k", "1Ki"), Some(Ordering::Less));
        assert_eq!(compare("-1", "0"), Some(Ordering::Less));
        assert_eq!(compare("250m", "0.25"), Some(Ordering::Equal));
        // Beyond f64's 53-bit mantissa: one byte apart is still apart.
        assert_eq!(
            compare("9007199254740993", "9007199254740992"),
            Some(Ordering::Greater)
        );
    }

    #[test]
    fn text_that_is_not_a_quantity_is_refused() {
        for text in [
            "", "garbage", "1.2.3", ".", "1Gb", "1e", "1e+", "Gi", "1 Gi", "1e1.5",
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
    }
}
