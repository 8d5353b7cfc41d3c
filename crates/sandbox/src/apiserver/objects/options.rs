//! How a write is made (field manager, dry run, field validation) and
//! what it returns.

use std::sync::Arc;

use serde_json::Value;

use crate::apiserver::admission::FieldValidation;
use crate::apiserver::apply::{BuiltinLists, ListTypes, SchemaLists, Scope};
use crate::apiserver::resources::Resource;

/// How field ownership is recorded for a write.
pub enum Manage<'a> {
    /// An ordinary write by this manager.
    Update(&'a str),
    /// Server-side apply already computed managedFields.
    AlreadyRecorded,
}

pub struct WriteOptions<'a> {
    pub manage: Manage<'a>,
    pub dry_run: bool,
    pub validation: FieldValidation,
}

pub struct Written {
    pub object: Arc<Value>,
    pub warnings: Vec<String>,
    pub created: bool,
}

pub fn list_types<'r>(resource: &'r Resource, version: &str) -> Box<dyn ListTypes + 'r> {
    match resource.version(version).and_then(|v| v.schema.as_ref()) {
        Some(schema) if resource.custom => Box::new(SchemaLists(schema)),
        _ => Box::new(BuiltinLists),
    }
}

pub fn scope_of(resource: &Resource, version: &str, status: bool) -> Scope {
    if status {
        Scope::Status
    } else if resource.has_status(version) {
        Scope::Main
    } else {
        Scope::Whole
    }
}
