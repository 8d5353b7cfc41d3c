//! Label and field selectors, parsed the way the API server parses them.
//!
//! Field selectors only support the fields Kubernetes supports for each kind
//! (`metadata.name`, `metadata.namespace`, and per-kind fields such as a
//! Pod's `spec.nodeName`); anything else is refused with the same 400 the
//! real server gives, so a selector that would fail in production fails here.

use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum SelectorError {
    #[error("unable to parse requirement: {0}")]
    Label(String),
    #[error("invalid selector: {0}")]
    Field(String),
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

#[derive(Clone, Debug, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; every requirement must hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector(Vec<Requirement>);

/// Splits on commas that are not inside parentheses.
fn split_top_level(input: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in input.chars() {
        match c {
            '(' => {
                depth += 1;
                current.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' if depth == 0 => parts.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    parts.push(current);
    parts
        .into_iter()
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

fn valid_label_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn value_set(text: &str) -> Result<Vec<String>, SelectorError> {
    let inner = text
        .trim()
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| SelectorError::Label(format!("expected a set in parentheses: {text}")))?;
    Ok(inner.split(',').map(|v| v.trim().to_owned()).collect())
}

impl LabelSelector {
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for part in split_top_level(input) {
            let requirement = if let Some(key) = part.strip_prefix('!') {
                Requirement::NotExists(key.trim().to_owned())
            } else if let Some((key, rest)) = part.split_once(" notin ") {
                Requirement::NotIn(key.trim().to_owned(), value_set(rest)?)
            } else if let Some((key, rest)) = part.split_once(" in ") {
                Requirement::In(key.trim().to_owned(), value_set(rest)?)
            } else if let Some((key, value)) = part.split_once("!=") {
                Requirement::NotEquals(key.trim().to_owned(), value.trim().to_owned())
            } else if let Some((key, value)) = part.split_once("==") {
                Requirement::Equals(key.trim().to_owned(), value.trim().to_owned())
            } else if let Some((key, value)) = part.split_once('=') {
                Requirement::Equals(key.trim().to_owned(), value.trim().to_owned())
            } else {
                Requirement::Exists(part.clone())
            };
            let key = match &requirement {
                Requirement::Equals(k, _)
                | Requirement::NotEquals(k, _)
                | Requirement::In(k, _)
                | Requirement::NotIn(k, _)
                | Requirement::Exists(k)
                | Requirement::NotExists(k) => k,
            };
            if !valid_label_key(key) {
                return Err(SelectorError::Label(format!("invalid label key \"{key}\"")));
            }
            requirements.push(requirement);
        }
        Ok(Self(requirements))
    }

    /// The selector an object states as `matchLabels` and
    /// `matchExpressions` (a Deployment's `spec.selector`); `None` for an
    /// operator Kubernetes does not know, which selects nothing.
    pub fn from_object(selector: &Value) -> Option<Self> {
        let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
        let mut requirements: Vec<Requirement> = selector
            .get("matchLabels")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(key, value)| Requirement::Equals(key.clone(), text(value)))
            .collect();
        for expression in selector
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = expression.get("key").map(text).unwrap_or_default();
            let values: Vec<String> = expression
                .get("values")
                .and_then(Value::as_array)
                .map(|v| v.iter().filter(|v| v.is_string()).map(text).collect())
                .unwrap_or_default();
            requirements.push(match expression.get("operator").and_then(Value::as_str) {
                Some("In") => Requirement::In(key, values),
                Some("NotIn") => Requirement::NotIn(key, values),
                Some("Exists") => Requirement::Exists(key),
                Some("DoesNotExist") => Requirement::NotExists(key),
                _ => return None,
            });
        }
        Some(Self(requirements))
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.0.iter().all(|requirement| match requirement {
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => label(k).is_none_or(|l| vs.iter().all(|v| v != l)),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::NotExists(k) => label(k).is_none(),
        })
    }
}

/// The string form (`app=web,tier in (db,cache),!gone`), requirements in
/// sorted order, as a Scale's `status.selector` carries it.
impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = self
            .0
            .iter()
            .map(|requirement| match requirement {
                Requirement::Equals(k, v) => format!("{k}={v}"),
                Requirement::NotEquals(k, v) => format!("{k}!={v}"),
                Requirement::In(k, vs) => format!("{k} in ({})", vs.join(",")),
                Requirement::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
                Requirement::Exists(k) => k.clone(),
                Requirement::NotExists(k) => format!("!{k}"),
            })
            .collect();
        parts.sort();
        f.write_str(&parts.join(","))
    }
}

/// A parsed field selector (`=`, `==`, `!=` on supported fields).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// The JSON pointer a selectable field reads, per kind, as Kubernetes
/// registers them.
fn field_pointer(kind: &str, field: &str) -> Option<&'static str> {
    let common = match field {
        "metadata.name" => Some("/metadata/name"),
        "metadata.namespace" => Some("/metadata/namespace"),
        _ => None,
    };
    if common.is_some() {
        return common;
    }
    match (kind, field) {
        ("Pod", "spec.nodeName") => Some("/spec/nodeName"),
        ("Pod", "spec.restartPolicy") => Some("/spec/restartPolicy"),
        ("Pod", "spec.schedulerName") => Some("/spec/schedulerName"),
        ("Pod", "spec.serviceAccountName") => Some("/spec/serviceAccountName"),
        ("Pod", "status.phase") => Some("/status/phase"),
        ("Pod", "status.podIP") => Some("/status/podIP"),
        ("Pod", "status.nominatedNodeName") => Some("/status/nominatedNodeName"),
        ("Secret", "type") => Some("/type"),
        ("Namespace", "status.phase") => Some("/status/phase"),
        ("Node", "spec.unschedulable") => Some("/spec/unschedulable"),
        ("PersistentVolume", "name") => Some("/metadata/name"),
        ("Event", "involvedObject.kind") => Some("/involvedObject/kind"),
        ("Event", "involvedObject.namespace") => Some("/involvedObject/namespace"),
        ("Event", "involvedObject.name") => Some("/involvedObject/name"),
        ("Event", "involvedObject.uid") => Some("/involvedObject/uid"),
        ("Event", "involvedObject.apiVersion") => Some("/involvedObject/apiVersion"),
        ("Event", "involvedObject.resourceVersion") => Some("/involvedObject/resourceVersion"),
        ("Event", "involvedObject.fieldPath") => Some("/involvedObject/fieldPath"),
        ("Event", "reason") => Some("/reason"),
        ("Event", "reportingComponent") => Some("/reportingComponent"),
        ("Event", "source") => Some("/source/component"),
        ("Event", "type") => Some("/type"),
        _ => None,
    }
}

impl FieldSelector {
    pub fn parse(input: &str, kind: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for part in split_top_level(input) {
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(SelectorError::Field(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if field_pointer(kind, field).is_none() {
                return Err(SelectorError::UnsupportedField(field.to_owned()));
            }
            requirements.push((field.to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self(requirements))
    }

    pub fn matches(&self, kind: &str, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, expected)| {
            let actual = field_pointer(kind, field)
                .and_then(|pointer| object.pointer(pointer))
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                })
                .unwrap_or_default();
            (actual == *expected) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_operators_match_like_kubernetes() {
        let object = json!({"metadata": {"labels": {"app": "db", "role": "primary"}}});
        let matches = |s: &str| LabelSelector::parse(s).expect("parses").matches(&object);
        assert!(matches("app=db"));
        assert!(matches("app==db,role"));
        assert!(!matches("app!=db"));
        assert!(matches("role in (primary, replica)"));
        assert!(!matches("role notin (primary)"));
        assert!(matches("!tier"));
        assert!(!matches("!app"));
        assert!(matches(""));
    }

    #[test]
    fn unsupported_field_selector_is_refused() {
        assert!(matches!(
            FieldSelector::parse("spec.foo=bar", "ConfigMap"),
            Err(SelectorError::UnsupportedField(_))
        ));
        let pod = json!({"metadata": {"name": "a"}, "status": {"phase": "Running"}});
        let selector =
            FieldSelector::parse("status.phase!=Pending,metadata.name=a", "Pod").expect("parses");
        assert!(selector.matches("Pod", &pod));
    }
}
