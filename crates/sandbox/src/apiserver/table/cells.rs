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

/// `5m`, `3h`, `2d`: the age format kubectl shows.
pub fn age(timestamp: Option<&str>) -> Value {
    let Some(created) = timestamp.and_then(|t| t.parse::<jiff::Timestamp>().ok()) else {
        return json!("<unknown>");
    };
    let seconds = (jiff::Timestamp::now().as_second() - created.as_second()).max(0);
    let text = match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 * 3 => format!("{}m", s / 60),
        s if s < 86400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    };
    json!(text)
}
