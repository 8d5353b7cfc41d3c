//! What Tusk knows about PostgreSQL itself, in one place and with no
//! Kubernetes in it: the operator, the API and the instance manager all
//! read it from here, so a fact about PostgreSQL is written once.
//!
//! - [`version`]: supported major versions, where their programs live,
//!   which binaries run which data directory;
//! - [`parameters`]: server parameters the operator owns;
//! - [`synchronous`]: synchronous replication modes, `synchronous_standby_names`
//!   and the quorum rule that proves a standby holds every acknowledged
//!   commit;
//! - [`roles`]: the database roles Tusk creates;
//! - [`lsn`]: WAL positions;
//! - [`config`]: rendering `postgresql.conf`, `pg_hba.conf`, `pg_ident.conf`
//!   and the password file;
//! - [`pgbackrest`]: pgBackRest's configuration for a stanza, the
//!   `archive_command` and the reading of its status files;
//! - [`recovery_log`]: how an archive recovery ended, from the log.
//!
//! A crate rather than a module of `tusk-api` so that the dependency list
//! keeps it free of Kubernetes types: `tusk-api` turns the custom resource
//! into these types, and the operator and the instance manager use them.
//! This crate does no I/O.

pub mod config;
pub mod lsn;
pub mod parameters;
pub mod pgbackrest;
pub mod recovery_log;
pub mod roles;
pub mod synchronous;
pub mod upgrade;
pub mod version;
