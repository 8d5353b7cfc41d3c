//! The write path shared by every verb and by the garbage collector:
//! create, update and delete of one object inside a storage transaction.
//!
//! Here live the rules that hold for every kind: names and generateName,
//! uid and creationTimestamp, resourceVersion preconditions, the split
//! between the main resource and the status subresource, generation,
//! finalizers and deletionTimestamp, namespaces that are missing or
//! terminating, and no-op writes that change nothing (and so neither bump
//! the resourceVersion nor wake watches).
//!
//! What differs by kind is in [`kinds`], one entry per kind, called at
//! fixed points of [`create()`], [`update()`] and [`delete()`].

pub(crate) mod create;
mod delete;
pub mod kinds;
mod meta;
mod options;
mod update;

pub use create::create;
pub use delete::{DeleteOptions, FOREGROUND, ORPHAN, delete, remove_finalizer};
pub use kinds::NAMESPACE_FINALIZER;
pub use meta::{now, str_at, string_list};
pub use options::{Manage, WriteOptions, Written, check_escalation, list_types, scope_of};
pub use update::update;
