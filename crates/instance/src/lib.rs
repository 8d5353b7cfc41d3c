//! The instance manager: the program inside every PostgreSQL pod. The
//! operator decides (`status.targetPrimary`, fencing, parameters); the
//! instance manager acts: it bootstraps, configures, supervises, promotes
//! and rejoins PostgreSQL, and reports the truth over HTTP.
//!
//! - [`postgres`]: PostgreSQL knowledge with no Kubernetes in it
//!   (configuration rendering, LSNs, version rules).
//! - [`desired`]: the desired state and the trait it arrives through;
//!   [`cluster_watch`] reads it from the PostgresCluster.
//! - [`plan`]: the next action, decided purely from the desired state and
//!   the data directory; [`convergence`] carries it out and supervises.
//! - [`primacy`]: the primary lease, without which PostgreSQL never runs
//!   as primary; [`fence`]: the end of every PostgreSQL process when the
//!   lease lapses, by the manager or, when it hangs, by its watchdog.
//! - [`bootstrap`], [`rewind`], [`supervisor`]: the mechanics.
//! - [`archiving`]: continuous WAL archiving with pgBackRest (the stanza,
//!   the archiver's health); [`backup`]: base backups the operator assigns.
//! - [`major_upgrade`]: `pg_upgrade --link` of a volume in the operator's
//!   upgrade pod, and the statistics the next primary gathers after it.
//! - [`http`], [`report`], [`metrics`]: what the instance tells the world.

pub mod api_tls;
pub mod archiving;
pub mod backup;
pub mod backup_server;
pub mod bootstrap;
pub mod cluster_watch;
pub mod context;
pub mod convergence;
pub mod datadir;
pub mod declared_roles;
pub mod desired;
pub mod diverged;
pub mod fence;
pub mod http;
pub mod major_upgrade;
pub mod metrics;
pub mod observe;
pub mod passwords;
pub mod plan;
pub mod postgres;
pub mod primacy;
pub mod process_user;
pub mod reaper;
pub mod recent;
pub mod rehearsal;
pub mod report;
pub mod rewind;
pub mod run;
pub mod sentinel;
pub mod settings;
pub mod sql;
pub mod standby_floor;
pub mod state;
pub mod supervisor;
pub mod task;
pub mod tls;
pub mod tools;
