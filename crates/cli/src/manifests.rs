//! Reading Kubernetes manifests: YAML files with one or more documents.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

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

/// Reads every non-empty YAML document of `path`.
pub fn read(path: &Path) -> Result<Vec<Manifest>, CommandError> {
    let text = std::fs::read_to_string(path).map_err(|source| CommandError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse(&text).map_err(|message| CommandError::Parse {
        path: path.display().to_string(),
        message,
    })
}

/// Parses every non-empty YAML document of `text`.
pub fn parse(text: &str) -> Result<Vec<Manifest>, String> {
    let mut manifests = Vec::new();
    for (index, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document)
            .map_err(|error| format!("document {}: not valid YAML: {error}", index + 1))?;
        match value {
            Value::Null => continue,
            Value::Object(_) => manifests.push(Manifest { value }),
            _ => {
                return Err(format!(
                    "document {}: a manifest must be a mapping with apiVersion, kind and metadata",
                    index + 1
                ));
            }
        }
    }
    Ok(manifests)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_documents_are_skipped() {
        let manifests =
            parse("---\nkind: A\nmetadata: {name: a}\n---\n---\nkind: B\nmetadata: {name: b}\n")
                .expect("valid YAML");
        let names: Vec<String> = manifests.iter().map(Manifest::describe).collect();
        assert_eq!(names, ["A/a", "B/b"]);
    }

    #[test]
    fn a_scalar_document_is_refused() {
        let error = parse("just a string\n").expect_err("not a manifest");
        assert!(error.contains("must be a mapping"), "{error}");
    }

    #[test]
    fn broken_yaml_names_the_document() {
        let error = parse("kind: A\n---\nkind: [unclosed\n").expect_err("broken YAML");
        assert!(error.starts_with("document 2"), "{error}");
    }
}
