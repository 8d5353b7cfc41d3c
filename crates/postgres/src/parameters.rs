//! PostgreSQL server parameters that the operator owns.
//!
//! The instance manager renders these from the spec (listening on the pod
//! address, replication, archiving, TLS, file locations, logging to its
//! supervisor). A user value would break replication, failover or backups,
//! so the API rejects it (see `tusk_api::v1alpha1::rules::no_operator_owned_parameters`).

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

#[cfg(test)]
mod tests {
    use super::*;

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
