//! Kubernetes manifests for `tusk validate`: read the way `tusk sandbox
//! up --apply` reads them, and named for messages.

use std::path::Path;

use serde_json::Value;
use tusk_sandbox::converge::{ConvergeError, read_manifests};

use crate::commands::CommandError;

/// One document of a manifest file.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub value: Value,
}

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
}

/// Reads every non-empty YAML document of `path`, as `tusk sandbox up
/// --apply` reads them (`tusk_sandbox::converge::read_manifests`).
pub fn read(path: &Path) -> Result<Vec<Manifest>, CommandError> {
    let documents = read_manifests(path).map_err(|error| match error {
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
        .map(|value| Manifest { value })
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
    fn broken_yaml_names_the_document() {
        let error = read_text("apiVersion: v1\nkind: A\n---\nkind: [unclosed\n")
            .expect_err("broken YAML")
            .to_string();
        assert!(error.contains("document 2: not valid YAML"), "{error}");
    }
}
