//! PostgreSQL's own rules for parameter values, per major: the type, unit,
//! range and enum values `pg_settings` gives for each parameter
//! (`settings/<major>.tsv`, written by `scripts/parameter-tables` from the
//! servers themselves). A value PostgreSQL would refuse stops the server at
//! its next start, on every instance; checked here, it is refused when
//! declared, naming the parameter and the rule.
//!
//! The checks follow PostgreSQL's parsers (`guc.c`): booleans as
//! `parse_bool` reads them (`on`, `of`, `t`, `yes`, `1`, ...), integers and
//! reals with an optional unit converted to the parameter's own unit and
//! rounded, then held to its range; enum values case-insensitively, hidden
//! spellings (`synchronous_commit = true`) included. Enum values that
//! depend on how a server was built (`wal_compression = lz4`) are accepted
//! when any major's table lists them.

use std::collections::BTreeMap;
use std::sync::OnceLock;

const TABLES: [(u32, &str); 4] = [
    (15, include_str!("settings/15.tsv")),
    (16, include_str!("settings/16.tsv")),
    (17, include_str!("settings/17.tsv")),
    (18, include_str!("settings/18.tsv")),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Bool,
    Integer,
    Real,
    Enum,
    String,
}

/// One parameter as `pg_settings` describes it.
#[derive(Clone, Debug)]
struct Setting {
    kind: Kind,
    /// Its unit (`8kB`, `ms`, ...); empty when it has none.
    unit: String,
    min: f64,
    max: f64,
    /// Enum values, visible and hidden, lower case.
    values: Vec<String>,
}

type Table = BTreeMap<String, Setting>;

fn parse_table(text: &str) -> Table {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            let [name, kind, unit, min, max, values] = fields.as_slice() else {
                return None;
            };
            let kind = match *kind {
                "bool" => Kind::Bool,
                "integer" => Kind::Integer,
                "real" => Kind::Real,
                "enum" => Kind::Enum,
                _ => Kind::String,
            };
            let values = values
                .split([',', '|'])
                .filter(|v| !v.is_empty())
                .map(str::to_ascii_lowercase)
                .collect();
            Some((
                (*name).to_owned(),
                Setting {
                    kind,
                    unit: (*unit).to_owned(),
                    min: min.parse().unwrap_or(f64::MIN),
                    max: max.parse().unwrap_or(f64::MAX),
                    values,
                },
            ))
        })
        .collect()
}

fn tables() -> &'static BTreeMap<u32, Table> {
    static TABLES_READ: OnceLock<BTreeMap<u32, Table>> = OnceLock::new();
    TABLES_READ.get_or_init(|| {
        TABLES
            .iter()
            .map(|(major, text)| (*major, parse_table(text)))
            .collect()
    })
}

/// The rule `value` breaks for parameter `name` on PostgreSQL `major`, if
/// any. Names the tables do not hold (custom `prefix.name` parameters, a
/// major without a table) are left to the other checks.
pub fn value_rule(major: u32, name: &str, value: &str) -> Option<String> {
    let tables = tables();
    let setting = tables.get(&major)?.get(&name.to_ascii_lowercase())?;
    match setting.kind {
        Kind::Bool => (!is_bool(value)).then(|| BOOL_RULE.to_owned()),
        Kind::Integer | Kind::Real => number_rule(setting, value),
        Kind::Enum => {
            let lower = value.to_ascii_lowercase();
            let listed = |table: &Table| {
                table
                    .get(&name.to_ascii_lowercase())
                    .is_some_and(|s| s.values.contains(&lower))
            };
            (!tables.values().any(listed)).then(|| {
                let visible: Vec<&str> = setting
                    .values
                    .iter()
                    .map(String::as_str)
                    .filter(|v| !HIDDEN_SPELLINGS.contains(v))
                    .collect();
                format!("must be one of: {}", visible.join(", "))
            })
        }
        Kind::String => None,
    }
}

/// The majors whose `pg_settings` hold parameter `name` (any case), in
/// order; empty for names no table holds (custom `prefix.name` ones). A
/// name some majors have and `major` lacks stops `major`'s server at its
/// next start (`transaction_timeout` exists from 17 on).
pub fn majors_with(name: &str) -> Vec<u32> {
    let name = name.to_ascii_lowercase();
    tables()
        .iter()
        .filter(|(_, table)| table.contains_key(&name))
        .map(|(major, _)| *major)
        .collect()
}

const BOOL_RULE: &str = "must be a boolean: on, off, true, false, yes, no, 1 or 0";

/// Spellings PostgreSQL accepts for some enums without listing them.
const HIDDEN_SPELLINGS: [&str; 6] = ["true", "false", "yes", "no", "1", "0"];

/// `parse_bool`: a case-insensitive prefix of `true`, `false`, `yes`,
/// `no`; `on`; `off` or `of`; exactly `1` or `0`.
fn is_bool(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    let prefix_of =
        |word: &str, shortest: usize| lower.len() >= shortest && word.starts_with(&lower);
    prefix_of("true", 1)
        || prefix_of("false", 1)
        || prefix_of("yes", 1)
        || prefix_of("no", 1)
        || lower == "on"
        || prefix_of("off", 2)
        || lower == "1"
        || lower == "0"
}

/// Memory units in bytes and time units in microseconds, as PostgreSQL
/// accepts them (case-sensitive).
const MEMORY_UNITS: [(&str, f64); 5] = [
    ("B", 1.0),
    ("kB", 1024.0),
    ("MB", 1024.0 * 1024.0),
    ("GB", 1024.0 * 1024.0 * 1024.0),
    ("TB", 1024.0 * 1024.0 * 1024.0 * 1024.0),
];
const TIME_UNITS: [(&str, f64); 6] = [
    ("us", 1.0),
    ("ms", 1_000.0),
    ("s", 1_000_000.0),
    ("min", 60_000_000.0),
    ("h", 3_600_000_000.0),
    ("d", 86_400_000_000.0),
];

/// A parameter's own unit: whether it is memory or time, and its size in
/// bytes or microseconds (`8kB` is 8192 bytes).
fn base_unit(unit: &str) -> Option<(&'static [(&'static str, f64)], f64)> {
    let digits: String = unit.chars().take_while(char::is_ascii_digit).collect();
    let factor: f64 = if digits.is_empty() {
        1.0
    } else {
        digits.parse().ok()?
    };
    let name = &unit[digits.len()..];
    for table in [&MEMORY_UNITS[..], &TIME_UNITS[..]] {
        if let Some((_, size)) = table.iter().find(|(n, _)| *n == name) {
            return Some((table, factor * size));
        }
    }
    None
}

/// `parse_int` and `parse_real`: a number (an integer may be written in
/// hexadecimal or octal, and with a fraction), then optionally a unit of
/// the parameter's kind; converted to the parameter's unit, rounded for an
/// integer, and held to its range.
fn number_rule(setting: &Setting, value: &str) -> Option<String> {
    let base = base_unit(&setting.unit);
    let units_hint = match base {
        Some((table, _)) => {
            let names: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
            format!(
                " (in units of {}, or with one of the units {})",
                setting.unit,
                names.join(", ")
            )
        }
        None => String::new(),
    };
    let what = if setting.kind == Kind::Integer {
        "an integer"
    } else {
        "a number"
    };
    let range = format!("{}..{}", display(setting.min), display(setting.max));
    match to_own_unit(setting, value) {
        Some(n) if n.is_finite() && n >= setting.min && n <= setting.max => None,
        _ => Some(format!("must be {what}{units_hint} within {range}")),
    }
}

/// `value` in the parameter's own unit; `None` when it is not a number,
/// or carries a unit the parameter does not take.
fn to_own_unit(setting: &Setting, value: &str) -> Option<f64> {
    let trimmed = value.trim();
    let split = trimmed
        .find(|c: char| c.is_ascii_alphabetic() && !is_number_letter(trimmed, c))
        .unwrap_or(trimmed.len());
    let (number, unit) = (trimmed[..split].trim_end(), &trimmed[split..]);
    let integer = setting.kind == Kind::Integer;
    let mut n = parse_number(number, integer)?;
    if !unit.is_empty() {
        let (table, size) = base_unit(&setting.unit)?;
        let (_, unit_size) = table.iter().find(|(name, _)| *name == unit)?;
        n = n * unit_size / size;
    }
    Some(if integer { n.round() } else { n })
}

/// Letters that belong to a number: `x` and hex digits after `0x`, and an
/// exponent's `e`.
fn is_number_letter(text: &str, c: char) -> bool {
    let hex = text.starts_with("0x") || text.starts_with("0X");
    (hex && (c.is_ascii_hexdigit() || c == 'x' || c == 'X'))
        || ((c == 'e' || c == 'E') && text.contains(|d: char| d.is_ascii_digit()) && !hex)
}

/// An integer as `strtol` with base 0 reads it (decimal, `0x` hex, `0`
/// octal), else a decimal fraction (`strtod`).
fn parse_number(text: &str, integer: bool) -> Option<f64> {
    if text.is_empty() {
        return None;
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let sign = if negative { -1.0 } else { 1.0 };
    if integer {
        if let Some(hex) = digits
            .strip_prefix("0x")
            .or_else(|| digits.strip_prefix("0X"))
        {
            return i64::from_str_radix(hex, 16).ok().map(|n| sign * n as f64);
        }
        if digits.len() > 1 && digits.starts_with('0') && digits.chars().all(|c| c.is_ascii_digit())
        {
            return i64::from_str_radix(&digits[1..], 8)
                .ok()
                .map(|n| sign * n as f64);
        }
    }
    let is_plain = digits
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    if !is_plain || !digits.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    digits.parse::<f64>().ok().map(|n| sign * n)
}

fn display(bound: f64) -> String {
    if bound.fract() == 0.0 && bound.abs() < 1e15 {
        format!("{bound:.0}")
    } else {
        bound.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_known_per_major() {
        assert_eq!(majors_with("transaction_timeout"), [17, 18]);
        assert_eq!(majors_with("Shared_Buffers"), [15, 16, 17, 18]);
        assert!(majors_with("pg_stat_statements.max").is_empty());
    }

    /// (parameter, value, accepted by PostgreSQL 15); the refusals the
    /// API once let through among them.
    const CASES: &[(&str, &str, bool)] = &[
        ("shared_buffers", "128MB", true),
        ("shared_buffers", "1.5GB", true),
        ("shared_buffers", "16384", true),
        ("shared_buffers", "Retain", false),
        ("shared_buffers", "64kB", false),
        ("shared_buffers", "128mb", false),
        ("shared_buffers", "128 MB", true),
        ("shared_buffers", "10ms", false),
        ("max_connections", "", false),
        ("max_connections", "-1Gi", false),
        ("max_connections", "0x40", true),
        ("max_connections", "010", true),
        ("max_connections", "100MB", false),
        ("max_connections", "262144", false),
        ("work_mem", "64kB", true),
        ("work_mem", "63kB", false),
        ("log_min_duration_statement", "-1", true),
        ("log_min_duration_statement", "250ms", true),
        ("log_min_duration_statement", "1h", true),
        ("log_min_duration_statement", "1e3", true),
        ("checkpoint_completion_target", "0.9", true),
        ("checkpoint_completion_target", "1.5", false),
        ("vacuum_cost_delay", "2ms", true),
        ("vacuum_cost_delay", "2MB", false),
        ("synchronous_commit", "remote_apply", true),
        ("synchronous_commit", "TRUE", true),
        ("synchronous_commit", "sometimes", false),
        ("wal_compression", "lz4", true),
        ("password_encryption", "true", false),
        ("jit", "of", true),
        ("jit", "o", false),
        ("jit", "t", true),
        ("jit", "maybe", false),
        ("search_path", "anything, at all", true),
        ("tusk_test.custom", "anything", true),
    ];

    #[test]
    fn values_are_held_to_postgresqls_own_rules() {
        for (name, value, accepted) in CASES {
            let rule = value_rule(15, name, value);
            assert_eq!(rule.is_none(), *accepted, "{name} = {value:?}: {rule:?}");
        }
    }

    #[test]
    fn a_refusal_names_the_rule() {
        assert_eq!(
            value_rule(15, "shared_buffers", "Retain").as_deref(),
            Some(
                "must be an integer (in units of 8kB, or with one of the units B, kB, MB, GB, TB) \
                 within 16..1073741823"
            )
        );
        assert_eq!(
            value_rule(15, "synchronous_commit", "sometimes").as_deref(),
            Some("must be one of: local, remote_write, remote_apply, on, off")
        );
        assert_eq!(value_rule(15, "jit", "maybe").as_deref(), Some(BOOL_RULE));
    }

    #[test]
    fn every_major_has_a_table() {
        for major in crate::version::SUPPORTED_MAJORS {
            let table = tables().get(&major).expect("a table");
            assert!(table.len() > 300, "{major}: {} parameters", table.len());
            assert_eq!(table["shared_buffers"].unit, "8kB");
        }
    }
}
