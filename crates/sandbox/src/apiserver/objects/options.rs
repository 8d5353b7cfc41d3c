//! How a write is made (field manager, dry run, field validation) and
//! what it returns.

use std::sync::Arc;

use serde_json::Value;
use tusk_api::admission::AdmissionSchema;

use crate::apiserver::admission::FieldValidation;
use crate::apiserver::apply::{BuiltinLists, ListTypes, SchemaLists, Scope};
use crate::apiserver::auth::UserInfo;
use crate::apiserver::auth::escalation::{self, RbacWrite};
use crate::apiserver::error::ApiError;
use crate::apiserver::resources::Resource;
use crate::apiserver::storage::Transaction;

/// How field ownership is recorded for a write.
pub enum Manage<'a> {
    /// An ordinary write by this manager.
    Update(&'a str),
    /// Server-side apply already computed managedFields.
    AlreadyRecorded,
}

pub struct WriteOptions<'a> {
    pub manage: Manage<'a>,
    /// Who writes, for the RBAC escalation check; `None` for the server's
    /// own writes.
    pub user: Option<Arc<UserInfo>>,
    pub dry_run: bool,
    pub validation: FieldValidation,
}

pub struct Written {
    pub object: Arc<Value>,
    pub warnings: Vec<String>,
    pub created: bool,
}

pub fn list_types<'r>(resource: &'r Resource, version: &str) -> Box<dyn ListTypes + 'r> {
    match resource
        .version(version)
        .and_then(|v| v.schema.as_deref().map(AdmissionSchema::schema))
    {
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

/// The RBAC escalation check of a write by a user (nothing for other
/// kinds or the server's own writes). `old` is the stored object on
/// update.
pub fn check_escalation(
    tx: &Transaction<'_>,
    resource: &Resource,
    namespace: &str,
    name: &str,
    (object, old): (&Value, Option<&Value>),
    options: &WriteOptions<'_>,
) -> Result<(), ApiError> {
    let write = RbacWrite {
        plural: &resource.plural,
        namespace,
        name,
        object,
        old,
    };
    escalation::check(tx, options.user.as_deref(), &resource.group, &write)
}
