//! Kubernetes manifests for `tusk validate`: read the way `tusk sandbox
//! up --apply` reads them, which is the way kubectl reads them (YAML 1.1:
//! an unquoted `off` is `false`), and named for messages.
//!
//! A field YAML 1.1 read as a boolean or a number keeps what was written,
//! so a refusal can say to quote it; ObjectMeta's strings (name, labels,
//! annotations) are checked here, as the API server checks them for every
//! kind.

use std::path::Path;

use serde_json::Value;
use tusk_api::admission::Violation;
use tusk_sandbox::converge::{ConvergeError, read_manifest_documents};
use tusk_sandbox::yaml11::{Resolved, Segment, field_path};

use crate::commands::CommandError;

/// One document of a manifest file.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub value: Value,
    /// The plain scalars YAML 1.1 read as booleans or numbers, and the keys
    /// it rewrote.
    pub resolved: Vec<Resolved>,
}

/// ObjectMeta's fields that hold a string, and its maps and lists of
/// strings.
const META_STRINGS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
];
const META_STRING_COLLECTIONS: &[&str] = &["labels", "annotations", "finalizers"];

impl Manifest {
    /// `Kind/name` (or `Kind/namespace/name`), for messages.
    pub fn describe(&self) -> String {
        let kind = self.str_at("/kind").unwrap_or("<no kind>");
        let name = self
            .str_at("/metadata/name")
            .or_else(|| self.str_at("/metadata/generateName"))
            .unwrap_or("<no name>");
        match self.str_at("/metadata/namespace") {
            Some(namespace) => format!("{kind}/{namespace}/{name}"),
            None => format!("{kind}/{name}"),
        }
    }

    /// Whether `other` is the same object (kind, namespace and name).
    pub fn same_object(&self, other: &Manifest) -> bool {
        ["/kind", "/metadata/namespace", "/metadata/name"]
            .iter()
            .all(|pointer| self.str_at(pointer) == other.str_at(pointer))
    }

    fn str_at(&self, pointer: &str) -> Option<&str> {
        self.value.pointer(pointer).and_then(Value::as_str)
    }

    /// The value at `field` (Kubernetes notation), when YAML 1.1 read it
    /// as a boolean or a number.
    pub fn resolved_value_at(&self, field: &str) -> Option<&Resolved> {
        self.resolved
            .iter()
            .find(|r| !r.key && names_field(&r.path, field))
    }

    /// A key YAML 1.1 rewrote (`yes:` as `"true"`) on the way to `field`.
    pub fn resolved_key_on(&self, field: &str) -> Option<&Resolved> {
        self.resolved.iter().find(|r| {
            r.key
                && (names_field(&r.path, field)
                    || [".", "["]
                        .iter()
                        .any(|next| field.starts_with(&format!("{}{next}", field_path(&r.path)))))
        })
    }

    /// This object with the scalar `resolved` names as it was written, a
    /// string: what it would be had it been quoted.
    pub fn quoted(&self, resolved: &Resolved) -> Value {
        let mut value = self.value.clone();
        let mut at = Some(&mut value);
        for segment in &resolved.path {
            at = match (at, segment) {
                (Some(Value::Object(map)), Segment::Key(key)) => map.get_mut(key),
                (Some(Value::Array(items)), Segment::Index(index)) => items.get_mut(*index),
                _ => None,
            };
        }
        if let Some(at) = at {
            *at = Value::String(resolved.written.clone());
        }
        value
    }

    /// ObjectMeta's strings that YAML 1.1 read as booleans or numbers: the
    /// API server refuses them whatever the kind.
    pub fn metadata_violations(&self) -> Vec<Violation> {
        self.resolved
            .iter()
            .filter(|r| !r.key && is_metadata_string(&r.path))
            .map(|r| Violation {
                field: field_path(&r.path),
                message: must_be_a_string(r),
            })
            .collect()
    }
}

/// `must be a string (YAML 1.1 reads an unquoted off as a boolean: quote
/// it, "off")`.
pub fn must_be_a_string(resolved: &Resolved) -> String {
    format!("must be a string ({})", quote_it(resolved))
}

/// `YAML 1.1 reads an unquoted off as a boolean: quote it, "off"`.
pub fn quote_it(resolved: &Resolved) -> String {
    format!("{}: quote it, \"{}\"", resolved.reading(), resolved.written)
}

/// Whether `field` names `path`: keys joined with dots (as admission names
/// fields), or the last key in brackets (a map entry).
fn names_field(path: &[Segment], field: &str) -> bool {
    if field_path(path) == field {
        return true;
    }
    match path.split_last() {
        Some((Segment::Key(key), parent)) => field == format!("{}[{key}]", field_path(parent)),
        _ => false,
    }
}

fn is_metadata_string(path: &[Segment]) -> bool {
    match path {
        [Segment::Key(metadata), Segment::Key(field)] if metadata == "metadata" => {
            META_STRINGS.contains(&field.as_str())
        }
        [Segment::Key(metadata), Segment::Key(field), _] if metadata == "metadata" => {
            META_STRING_COLLECTIONS.contains(&field.as_str())
        }
        _ => false,
    }
}

/// Reads every non-empty YAML document of `path`, as `tusk sandbox up
/// --apply` reads them (`tusk_sandbox::converge::read_manifests`).
pub fn read(path: &Path) -> Result<Vec<Manifest>, CommandError> {
    let documents = read_manifest_documents(path).map_err(|error| match error {
        ConvergeError::Read { path, source } => CommandError::Read {
            path: path.display().to_string(),
            source,
        },
        ConvergeError::Parse {
            path,
            index,
            message,
        } => CommandError::Parse {
            path: path.display().to_string(),
            message: format!(
                "document {}: not valid YAML for a Kubernetes object: {message}",
                index + 1
            ),
        },
        other => CommandError::Parse {
            path: path.display().to_string(),
            message: other.to_string(),
        },
    })?;
    Ok(documents
        .into_iter()
        .map(|document| Manifest {
            value: document.value,
            resolved: document.resolved,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> Result<Vec<Manifest>, CommandError> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("m.yaml");
        std::fs::write(&path, text).expect("written");
        read(&path)
    }

    #[test]
    fn empty_documents_are_skipped() {
        let manifests = read_text(
            "---\napiVersion: v1\nkind: A\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: B\nmetadata: {name: b}\n",
        )
        .expect("valid YAML");
        let names: Vec<String> = manifests.iter().map(Manifest::describe).collect();
        assert_eq!(names, ["A/a", "B/b"]);
    }

    #[test]
    fn unquoted_yaml_1_1_booleans_are_booleans_and_quoted_ones_strings() {
        let manifests = read_text(
            "apiVersion: v1\nkind: A\nmetadata: {name: a}\nspec: {jit: off, quoted: 'off', port: 0x1F}\n",
        )
        .expect("valid YAML");
        let spec = &manifests[0].value["spec"];
        assert_eq!(spec["jit"], Value::Bool(false));
        assert_eq!(spec["quoted"], Value::from("off"));
        assert_eq!(spec["port"], Value::from(31));
        let jit = manifests[0]
            .resolved_value_at("spec.jit")
            .expect("jit was read as a boolean");
        assert_eq!(
            must_be_a_string(jit),
            "must be a string (YAML 1.1 reads an unquoted off as a boolean: quote it, \"off\")"
        );
        assert_eq!(manifests[0].quoted(jit)["spec"]["jit"], Value::from("off"));
        assert!(manifests[0].resolved_value_at("spec.quoted").is_none());
    }

    #[test]
    fn metadata_strings_read_as_booleans_or_numbers_are_refused() {
        let manifests = read_text(concat!(
            "apiVersion: v1\nkind: A\n",
            "metadata:\n  name: a\n",
            "  labels: {enabled: yes, tier: '1', yes: b}\n",
            "  annotations: {example.com/backup: on, example.com/count: 3}\n",
        ))
        .expect("valid YAML");
        let violations: Vec<String> = manifests[0]
            .metadata_violations()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            violations,
            [
                "metadata.annotations.example.com/backup: must be a string (YAML 1.1 reads an unquoted on as a boolean: quote it, \"on\")",
                "metadata.annotations.example.com/count: must be a string (YAML 1.1 reads an unquoted 3 as a number: quote it, \"3\")",
                "metadata.labels.enabled: must be a string (YAML 1.1 reads an unquoted yes as a boolean: quote it, \"yes\")",
            ]
        );
    }

    #[test]
    fn a_rewritten_key_is_found_on_the_fields_below_it() {
        let manifests =
            read_text("apiVersion: v1\nkind: A\nmetadata: {name: a}\nspec: {on: {a: 1}}\n")
                .expect("valid YAML");
        let manifest = &manifests[0];
        assert_eq!(manifest.value["spec"]["true"]["a"], Value::from(1));
        for field in ["spec.true", "spec[true]", "spec.true.a"] {
            let key = manifest.resolved_key_on(field).expect(field);
            assert_eq!(key.written, "on");
        }
        assert!(manifest.resolved_key_on("spec.truer").is_none());
    }

    #[test]
    fn broken_yaml_names_the_document() {
        let error = read_text("apiVersion: v1\nkind: A\n---\nkind: [unclosed\n")
            .expect_err("broken YAML")
            .to_string();
        assert!(error.contains("document 2: not valid YAML"), "{error}");
    }
}
