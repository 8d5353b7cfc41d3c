//! Reading the fencing annotation ([`crate::labels::FENCED_INSTANCES`]):
//! a JSON list of instance names (`["db-2"]`), a comma-separated list
//! (`db-2, db-3`), or `*` for every instance.
//!
//! An annotation that cannot be read is an error, never "nobody is
//! fenced": whoever reads it must keep the instances fenced (the safe side:
//! PostgreSQL stays stopped) and say why.

use std::collections::BTreeSet;

/// The instances an annotation fences.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fencing {
    names: BTreeSet<String>,
}

/// A fencing annotation that cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FencingError {
    #[error(
        "annotation {key} is not a JSON list of instance names: {reason}",
        key = crate::labels::FENCED_INSTANCES
    )]
    NotAList { reason: String },
    #[error(
        "annotation {key} names `{name}`, which is not an instance name or `*`",
        key = crate::labels::FENCED_INSTANCES
    )]
    NotAName { name: String },
}

impl Fencing {
    /// Parses the annotation's value; no annotation or an empty one fences
    /// nobody.
    pub fn parse(annotation: Option<&str>) -> Result<Self, FencingError> {
        let Some(value) = annotation.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(Fencing::default());
        };
        let names: Vec<String> = if value.starts_with('[') {
            serde_json::from_str(value).map_err(|error| FencingError::NotAList {
                reason: error.to_string(),
            })?
        } else {
            value.split(',').map(|n| n.trim().to_owned()).collect()
        };
        let names = names
            .into_iter()
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect::<BTreeSet<String>>();
        if let Some(name) = names.iter().find(|n| !is_name(n)) {
            return Err(FencingError::NotAName { name: name.clone() });
        }
        Ok(Fencing { names })
    }

    /// True when `instance` (or every instance, `*`) is fenced.
    pub fn covers(&self, instance: &str) -> bool {
        self.names.contains(instance) || self.names.contains("*")
    }
}

/// `*` or a DNS label, as instance (pod) names are.
fn is_name(name: &str) -> bool {
    name == "*"
        || name.len() <= 63
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fencing_annotation_forms() {
        let cases = [
            (None, "db-1", false),
            (Some(""), "db-1", false),
            (Some("[]"), "db-1", false),
            (Some("[\"db-1\"]"), "db-1", true),
            (Some("[\"db-2\"]"), "db-1", false),
            (Some("db-2, db-1"), "db-1", true),
            (Some("*"), "db-1", true),
            (Some("[\"*\"]"), "db-7", true),
            (Some("db-10"), "db-1", false),
            (Some("db-2,,db-1,"), "db-1", true),
        ];
        for (annotation, instance, fenced) in cases {
            let fencing = Fencing::parse(annotation).expect("readable");
            assert_eq!(
                fencing.covers(instance),
                fenced,
                "{annotation:?} {instance}"
            );
        }
    }

    #[test]
    fn an_unreadable_annotation_is_an_error() {
        for annotation in [
            "[\"db-1\"",
            "[1, 2]",
            "{\"db-1\": true}",
            "[\"db-1\"] x",
            "db-1; db-2",
            "DB-1",
        ] {
            assert!(
                Fencing::parse(Some(annotation)).is_err(),
                "{annotation:?} must be refused"
            );
        }
    }
}
