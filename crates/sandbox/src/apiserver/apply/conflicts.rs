//! Apply conflicts: fields another manager owns with a different value
//! than the configuration sets, reported as Kubernetes reports them.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::apiserver::apply::fields::get;
use crate::apiserver::apply::managed::Entry;
use crate::apiserver::apply::path::{FieldSet, render_path};
use crate::apiserver::apply::values::same_option;
use crate::apiserver::error::{ApiError, Cause};

/// The conflicting fields of an apply by `manager`, by the manager that
/// owns them.
pub fn find(
    entries: &[Entry],
    current: &Value,
    config: &Value,
    applied: &FieldSet,
    manager: &str,
) -> BTreeMap<String, Vec<String>> {
    let mut conflicts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in entries {
        if entry.manager == manager && entry.operation == "Apply" {
            continue;
        }
        for path in entry.fields.intersection(applied) {
            if !same_option(get(current, path), get(config, path)) {
                conflicts
                    .entry(entry.manager.clone())
                    .or_default()
                    .push(render_path(path));
            }
        }
    }
    conflicts
}

/// The 409 an unforced apply with conflicts gets.
pub fn error(conflicts: &BTreeMap<String, Vec<String>>, kind: &str, name: &str) -> ApiError {
    let causes: Vec<Cause> = conflicts
        .iter()
        .flat_map(|(manager, paths)| {
            paths.iter().map(move |p| Cause {
                field: p.clone(),
                message: format!("conflict with \"{manager}\""),
                reason: "FieldManagerConflict",
            })
        })
        .collect();
    let count = causes.len();
    let listing: Vec<String> = causes
        .iter()
        .map(|c| format!("- {}: {}", c.message, c.field))
        .collect();
    ApiError::Conflict {
        kind: kind.to_owned(),
        name: name.to_owned(),
        message: format!(
            "Apply failed with {count} conflict{}: {}",
            if count == 1 { "" } else { "s" },
            listing.join("\n")
        ),
    }
}
