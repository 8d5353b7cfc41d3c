//! PostgreSQL server parameters that the operator owns.
//!
//! The instance manager renders these from the spec (listening on the pod
//! address, replication, archiving, TLS, file locations, logging to its
//! supervisor). A user value would break replication, failover or backups,
//! so the API rejects it (see `tusk_api::v1alpha1::rules::no_operator_owned_parameters`).

use std::collections::BTreeMap;

/// Parameters owned by the operator, lower case (PostgreSQL's own spelling).
pub const OWNED_PARAMETERS: &[&str] = &[
    "archive_command",
    "archive_library",
    "archive_mode",
    "cluster_name",
    "config_file",
    "data_directory",
    "external_pid_file",
    "full_page_writes",
    "hba_file",
    "hot_standby",
    "ident_file",
    "listen_addresses",
    "log_destination",
    "log_directory",
    "log_filename",
    "logging_collector",
    "port",
    "primary_conninfo",
    "primary_slot_name",
    "promote_trigger_file",
    "restore_command",
    "ssl",
    "synchronous_standby_names",
    "unix_socket_directories",
    "unix_socket_group",
    "unix_socket_permissions",
    "wal_level",
    "wal_log_hints",
];

/// Prefixes of whole families the operator owns: TLS (`ssl_*`) and recovery
/// targets (`recovery_target*`, used by point-in-time restores).
pub const OWNED_PARAMETER_PREFIXES: &[&str] = &["ssl_", "recovery_target"];

/// True when `name` (in any case) is owned by the operator.
pub fn is_operator_owned(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    OWNED_PARAMETERS.contains(&name.as_str())
        || OWNED_PARAMETER_PREFIXES
            .iter()
            .any(|prefix| name.starts_with(prefix))
}

/// `synchronous_commit`: owned by the operator while the cluster's
/// durability is required (see [`with_commit_durability`]).
pub const SYNCHRONOUS_COMMIT: &str = "synchronous_commit";

/// `synchronous_commit` values (lower case) that make a commit wait for
/// the synchronous standbys to flush it: `on` and its boolean spellings,
/// and `remote_apply`.
pub const DURABLE_SYNCHRONOUS_COMMITS: &[&str] = &["on", "true", "yes", "1", "remote_apply"];

/// Why a lossy `synchronous_commit` is refused under required durability.
pub const LOSSY_COMMIT_RULE: &str = "must be on or remote_apply \
     while failover.dataDurability is required: local, off or remote_write acknowledge commits \
     that a failover could lose (set dataDurability: preferred to accept that)";

/// True when `value` (in any case) is one of [`DURABLE_SYNCHRONOUS_COMMITS`].
pub fn is_durable_commit(value: &str) -> bool {
    DURABLE_SYNCHRONOUS_COMMITS.contains(&value.trim().to_ascii_lowercase().as_str())
}

/// The `synchronous_commit` a cluster whose failovers must not lose an
/// acknowledged commit runs with: `remote_apply` when the user asked for
/// it (it waits for more than `on`), otherwise `on`, whatever else was
/// asked. `local`, `off` and `remote_write` acknowledge a commit before a
/// synchronous standby flushed it, which a failover could then lose; the
/// API rejects them, and this is the last line of defence.
pub fn durable_synchronous_commit(asked: Option<&str>) -> &'static str {
    match asked.map(|v| v.trim().to_ascii_lowercase()) {
        Some(value) if value == "remote_apply" => "remote_apply",
        _ => "on",
    }
}

/// `parameters` as PostgreSQL must run them: with `required` durability,
/// `synchronous_commit` (in whatever case the user spelled it) is
/// replaced by [`durable_synchronous_commit`]; otherwise unchanged.
pub fn with_commit_durability(
    parameters: &BTreeMap<String, String>,
    required: bool,
) -> BTreeMap<String, String> {
    if !required {
        return parameters.clone();
    }
    let is_commit = |name: &str| name.eq_ignore_ascii_case(SYNCHRONOUS_COMMIT);
    let asked = parameters
        .iter()
        .find(|(name, _)| is_commit(name))
        .map(|(_, value)| value.as_str());
    let mut owned: BTreeMap<String, String> = parameters
        .iter()
        .filter(|(name, _)| !is_commit(name))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    owned.insert(
        SYNCHRONOUS_COMMIT.to_owned(),
        durable_synchronous_commit(asked).to_owned(),
    );
    owned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_durability_owns_synchronous_commit() {
        let params = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        /// Parameters asked, durability required, `synchronous_commit` rendered.
        type Case<'a> = (&'a [(&'a str, &'a str)], bool, Option<&'a str>);
        let cases: [Case<'_>; 8] = [
            (&[], true, Some("on")),
            (&[("synchronous_commit", "off")], true, Some("on")),
            (&[("Synchronous_Commit", "local")], true, Some("on")),
            (&[("synchronous_commit", "remote_write")], true, Some("on")),
            (
                &[("synchronous_commit", "REMOTE_APPLY")],
                true,
                Some("remote_apply"),
            ),
            (&[("synchronous_commit", "on")], true, Some("on")),
            (&[("synchronous_commit", "off")], false, Some("off")),
            (&[], false, None),
        ];
        for (asked, required, rendered) in cases {
            let out = with_commit_durability(&params(asked), required);
            assert_eq!(
                out.get(SYNCHRONOUS_COMMIT).map(String::as_str),
                rendered,
                "{asked:?} required {required}"
            );
            if required {
                let spellings = out
                    .keys()
                    .filter(|k| k.eq_ignore_ascii_case(SYNCHRONOUS_COMMIT));
                assert_eq!(
                    spellings.count(),
                    1,
                    "one setting, in PostgreSQL's spelling"
                );
            }
        }
        let kept = with_commit_durability(&params(&[("work_mem", "8MB")]), true);
        assert_eq!(kept.get("work_mem").map(String::as_str), Some("8MB"));
    }

    #[test]
    fn owned_parameters_are_recognised_in_any_case() {
        assert!(is_operator_owned("wal_level"));
        assert!(is_operator_owned("WAL_LEVEL"));
        assert!(is_operator_owned("ssl_cert_file"));
        assert!(is_operator_owned("recovery_target_time"));
        assert!(!is_operator_owned("shared_buffers"));
        assert!(!is_operator_owned(
            "sslmode_is_not_a_parameter_but_starts_with_ssl"
        ));
    }

    #[test]
    fn owned_parameter_list_is_lower_case_and_sorted() {
        let mut sorted = OWNED_PARAMETERS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, OWNED_PARAMETERS);
        assert!(
            OWNED_PARAMETERS
                .iter()
                .all(|p| p.to_ascii_lowercase() == *p)
        );
    }
}
