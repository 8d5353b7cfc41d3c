//! The Kubernetes types whose JSON form is not the plain field-by-field
//! form of their protobuf message: times, quantities, int-or-strings, raw
//! extensions and managed fields, and the embedded structs Go inlines into
//! their parent's JSON object.

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};

pub const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";
pub const MICRO_TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
pub const DURATION: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Duration";
pub const FIELDS_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1";
pub const QUANTITY: &str = "k8s.io.apimachinery.pkg.api.resource.Quantity";
pub const INT_OR_STRING: &str = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
pub const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";

/// Go's zero `time.Time` as seconds since the epoch: what a protobuf
/// encoder writes for an unset, non-pointer timestamp.
pub const ZERO_TIME_SECONDS: i64 = -62_135_596_800;

/// Embedded structs marked `json:",inline"` in k8s.io/api: the field name
/// the protobuf message gives them and the type they hold.
const INLINED: &[(&str, &str)] = &[
    ("volumeSource", "VolumeSource"),
    ("persistentVolumeSource", "PersistentVolumeSource"),
    ("localObjectReference", "LocalObjectReference"),
    ("handler", "ProbeHandler"),
    ("ephemeralContainerCommon", "EphemeralContainerCommon"),
];

/// The message a field holds whose fields appear in the parent's JSON
/// object rather than under the field's own name.
pub fn inlined(field: &FieldDescriptor) -> Option<MessageDescriptor> {
    let Kind::Message(message) = field.kind() else {
        return None;
    };
    INLINED
        .iter()
        .any(|(name, kind)| field.name() == *name && message.name() == *kind)
        .then_some(message)
}

/// RFC 3339 in UTC, to the second (`Time`) or microsecond (`MicroTime`).
pub fn format_time(seconds: i64, nanos: i32, micro: bool) -> Option<String> {
    let at = jiff::Timestamp::new(seconds, 0).ok()?;
    let whole = at.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    if micro {
        Some(format!("{whole}.{:06}Z", nanos.max(0) / 1000))
    } else {
        Some(format!("{whole}Z"))
    }
}

/// Seconds and nanoseconds of an RFC 3339 time.
pub fn parse_time(text: &str) -> Option<(i64, i32)> {
    let at: jiff::Timestamp = text.parse().ok()?;
    Some((at.as_second(), at.subsec_nanosecond()))
}

/// A Go duration string (`1h2m3.5s`) from nanoseconds, as
/// `metav1.Duration` writes itself in JSON.
pub fn format_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_owned();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let total = nanos.unsigned_abs();
    let hours = total / 3_600_000_000_000;
    let minutes = total / 60_000_000_000 % 60;
    let seconds = total % 60_000_000_000;
    let mut out = sign.to_owned();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    let whole = seconds / 1_000_000_000;
    let fraction = seconds % 1_000_000_000;
    if fraction == 0 {
        out.push_str(&format!("{whole}s"));
    } else {
        let digits = format!("{fraction:09}");
        out.push_str(&format!("{whole}.{}s", digits.trim_end_matches('0')));
    }
    out
}

/// Nanoseconds of a Go duration string made of h, m, s, ms, us and ns parts.
pub fn parse_duration(text: &str) -> Option<i64> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if rest == "0" {
        return Some(0);
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let number: f64 = rest[..number_end].parse().ok()?;
        let unit_end = rest[number_end..]
            .find(|c: char| c.is_ascii_digit())
            .map_or(rest.len(), |i| number_end + i);
        let scale = match &rest[number_end..unit_end] {
            "h" => 3.6e12,
            "m" => 6e10,
            "s" => 1e9,
            "ms" => 1e6,
            "us" | "µs" => 1e3,
            "ns" => 1.0,
            _ => return None,
        };
        total += number * scale;
        rest = &rest[unit_end..];
    }
    let nanos = total.round() as i64;
    Some(if negative { -nanos } else { nanos })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_kubernetes_writes_them() {
        assert_eq!(
            format_time(1_700_000_000, 0, false).as_deref(),
            Some("2023-11-14T22:13:20Z")
        );
        assert_eq!(
            format_time(1_700_000_000, 123_456_789, true).as_deref(),
            Some("2023-11-14T22:13:20.123456Z")
        );
        assert_eq!(
            parse_time("2023-11-14T22:13:20.5Z"),
            Some((1_700_000_000, 500_000_000))
        );
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn durations_round_trip_in_go_notation() {
        for (text, nanos) in [
            ("0s", 0),
            ("1h2m3s", 3_723_000_000_000),
            ("1.5s", 1_500_000_000),
            ("-2m0s", -120_000_000_000),
        ] {
            assert_eq!(format_duration(nanos), text);
            assert_eq!(parse_duration(text), Some(nanos), "{text}");
        }
        assert_eq!(parse_duration("5ms"), Some(5_000_000));
        assert_eq!(parse_duration("5 parsecs"), None);
    }
}
