//! How one plain (unquoted) scalar reads under YAML 1.1, as go-yaml v2
//! resolves it: null, a boolean, an integer by Go's `ParseInt` rules, a
//! float, or a string; and how a float reaches the API server in the JSON
//! kubectl writes. The module above builds documents from these.

use serde_json::Value;

/// What a plain scalar reads as under YAML 1.1, as go-yaml v2 resolves it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Plain {
    Null,
    Bool(bool),
    Int(i64),
    /// An integer above `i64::MAX`.
    Uint(u64),
    Float(f64),
    Str,
}

/// Reads one plain scalar by YAML 1.1's rules (see the module's docs).
pub fn resolve_plain(text: &str) -> Plain {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Plain::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Plain::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Plain::Bool(false);
        }
        ".nan" | ".NaN" | ".NAN" => return Plain::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Plain::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Plain::Float(f64::NEG_INFINITY),
        _ => {}
    }
    match text.as_bytes().first() {
        Some(b'.') => float(text).map_or(Plain::Str, Plain::Float),
        Some(b'+' | b'-' | b'0'..=b'9') => number(text),
        _ => Plain::Str,
    }
}

/// An integer or float written with a leading sign or digit: every `_`
/// dropped, then Go's `ParseInt(s, 0, 64)`, `ParseUint(s, 0, 64)`, then a
/// decimal float.
fn number(text: &str) -> Plain {
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    if let Some(int) = go_parse_int(&plain) {
        return Plain::Int(int);
    }
    if let Some(uint) = go_parse_uint(&plain) {
        return Plain::Uint(uint);
    }
    float(&plain).map_or(Plain::Str, Plain::Float)
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`, parsed, when
/// the result is finite and not a nonzero number rounded to zero.
fn float(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    let mut i = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    let mut mantissa = digits(&mut i);
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        mantissa += digits(&mut i);
    }
    if mantissa == 0 {
        return None;
    }
    let mantissa_end = i;
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return None;
        }
    }
    if i != bytes.len() {
        return None;
    }
    let value: f64 = text.parse().ok()?;
    let nonzero = bytes[..mantissa_end]
        .iter()
        .any(|b| (b'1'..=b'9').contains(b));
    (value.is_finite() && (value != 0.0 || !nonzero)).then_some(value)
}

/// Go's `strconv.ParseInt(s, 0, 64)`.
fn go_parse_int(s: &str) -> Option<i64> {
    let (negative, unsigned) = match s.as_bytes().first()? {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    let magnitude = i128::from(go_parse_uint(unsigned)?);
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// Go's `strconv.ParseUint(s, 0, 64)`: `0b`, `0o`, `0x` or a leading `0`
/// (octal) chooses the base; no sign.
fn go_parse_uint(s: &str) -> Option<u64> {
    let bytes = s.as_bytes();
    let (radix, digits) = match bytes {
        [] => return None,
        [b'0', prefix, _, ..] if matches!(prefix.to_ascii_lowercase(), b'b' | b'o' | b'x') => {
            let radix = match prefix.to_ascii_lowercase() {
                b'b' => 2,
                b'o' => 8,
                _ => 16,
            };
            (radix, &s[2..])
        }
        [b'0', ..] => (8, &s[1..]),
        _ => (10, s),
    };
    if digits.is_empty() {
        return Some(0);
    }
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// A float as the API server reads the JSON kubectl writes of it: a whole
/// number in `i64`'s range as an integer; `None` for infinities and NaN.
pub(super) fn float_value(value: f64) -> Option<Value> {
    const TWO_TO_63: f64 = 9_223_372_036_854_775_808.0;
    if value.fract() == 0.0 && (-TWO_TO_63..TWO_TO_63).contains(&value) {
        return Some(Value::from(value as i64));
    }
    serde_json::Number::from_f64(value).map(Value::Number)
}
