//! Cell values as kubectl prints them.

use serde_json::{Value, json};

/// A string cell; `<none>` when the field is not set.
pub fn text(value: Option<&Value>) -> Value {
    match value {
        Some(Value::String(s)) => json!(s),
        Some(Value::Null) | None => json!("<none>"),
        Some(other) => json!(other.to_string()),
    }
}

/// The AGE of an object created at `timestamp`.
pub fn age(timestamp: Option<&str>) -> Value {
    match timestamp.and_then(|t| t.parse::<jiff::Timestamp>().ok()) {
        Some(created) => json!(since(created, jiff::Timestamp::now().as_second())),
        None => json!("<unknown>"),
    }
}

/// The time from `at` to `now` (seconds) as Kubernetes' human duration
/// prints it: `45s`, `5m30s`, `42m`, `3h20m`, `20h`, `3d4h`, `30d`, `2y10d`.
pub fn since(at: jiff::Timestamp, now: i64) -> String {
    human_duration(now - at.as_second())
}

pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    let seconds = seconds.max(0);
    let (minutes, hours) = (seconds / 60, seconds / 3600);
    let (days, years) = (hours / 24, hours / (24 * 365));
    let pair = |big: i64, big_unit: &str, small: i64, small_unit: &str| {
        if small == 0 {
            format!("{big}{big_unit}")
        } else {
            format!("{big}{big_unit}{small}{small_unit}")
        }
    };
    match seconds {
        s if s < 120 => format!("{s}s"),
        _ if minutes < 10 => pair(minutes, "m", seconds % 60, "s"),
        _ if minutes < 180 => format!("{minutes}m"),
        _ if hours < 8 => pair(hours, "h", minutes % 60, "m"),
        _ if hours < 48 => format!("{hours}h"),
        _ if hours < 24 * 8 => pair(days, "d", hours % 24, "h"),
        _ if hours < 24 * 365 * 2 => format!("{days}d"),
        _ if hours < 24 * 365 * 8 => pair(years, "y", days % 365, "d"),
        _ => format!("{years}y"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_kubernetes_prints_durations() {
        let cases = [
            (-5, "<invalid>"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (330, "5m30s"),
            (42 * 60, "42m"),
            (3 * 3600 + 20 * 60, "3h20m"),
            (20 * 3600, "20h"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (30 * 86400, "30d"),
            ((2 * 365 + 10) * 86400, "2y10d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(human_duration(seconds), expected, "{seconds}");
        }
    }
}
