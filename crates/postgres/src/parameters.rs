//! PostgreSQL server parameters: which ones users may set, and with what.
//!
//! The instance manager renders the owned ones from the spec (listening on
//! the pod address, replication, archiving, TLS, file locations, logging to
//! its supervisor). A user value would break replication, failover, backups
//! or durability, or load code the image's owner did not choose, so the API
//! refuses it (see `tusk_api::v1alpha1::rules::no_operator_owned_parameters`),
//! the operator refuses it again, and the instance manager last.
//!
//! Every other name must be one PostgreSQL knows ([`KNOWN_PARAMETERS`]) or
//! a custom `prefix.name`, and every value must render to a line
//! PostgreSQL parses ([`value_problem`]): a bad name or value in
//! `postgresql.conf` stops the server at its next start, on every instance.
//! docs/api.md lists the groups and why each is owned.

use std::collections::BTreeMap;

mod known;
pub mod settings;

pub use known::KNOWN_PARAMETERS;

/// Parameters owned by the operator, lower case (PostgreSQL's own spelling).
/// `include`, `include_dir` and `include_if_exists` are directives rather
/// than parameters: they would read another file into `postgresql.conf`.
pub const OWNED_PARAMETERS: &[&str] = &[
    "allow_system_table_mods",
    "archive_cleanup_command",
    "archive_command",
    "archive_library",
    "archive_mode",
    "cluster_name",
    "config_file",
    "data_directory",
    "data_sync_retry",
    "dynamic_library_path",
    "extension_control_path",
    "external_pid_file",
    "fsync",
    "full_page_writes",
    "hba_file",
    "hot_standby",
    "ident_file",
    "ignore_checksum_failure",
    "ignore_invalid_pages",
    "include",
    "include_dir",
    "include_if_exists",
    "jit_provider",
    "listen_addresses",
    "log_destination",
    "log_directory",
    "log_filename",
    "log_line_prefix",
    "logging_collector",
    "max_wal_senders",
    "oauth_validator_libraries",
    "port",
    "primary_conninfo",
    "primary_slot_name",
    "promote_trigger_file",
    "recovery_end_command",
    "restore_command",
    "ssl",
    "synchronous_standby_names",
    "wal_level",
    "wal_log_hints",
    "zero_damaged_pages",
];

/// Prefixes of whole families the operator owns: TLS (`ssl_*`), recovery
/// targets (`recovery_target*`, used by point-in-time restores) and the
/// local socket (`unix_socket_*`, where the instance manager connects).
pub const OWNED_PARAMETER_PREFIXES: &[&str] = &["ssl_", "recovery_target", "unix_socket_"];

/// True when `name` (in any case) is owned by the operator.
pub fn is_operator_owned(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    OWNED_PARAMETERS.contains(&name.as_str())
        || OWNED_PARAMETER_PREFIXES
            .iter()
            .any(|prefix| name.starts_with(prefix))
}

/// A custom parameter (`prefix.name`, read by an extension) as
/// `postgresql.conf`'s lexer accepts it: two identifiers joined by a dot.
pub const CUSTOM_PARAMETER_PATTERN: &str = "^[A-Za-z_][A-Za-z0-9_]*[.][A-Za-z_][A-Za-z0-9_]*$";

/// True when `name` (in any case) is a parameter PostgreSQL knows, or a
/// custom `prefix.name` one.
pub fn is_known_parameter(name: &str) -> bool {
    KNOWN_PARAMETERS.contains(&name.to_ascii_lowercase().as_str()) || is_custom_parameter(name)
}

fn is_custom_parameter(name: &str) -> bool {
    let identifier = |part: &str| {
        part.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    name.split_once('.')
        .is_some_and(|(prefix, rest)| identifier(prefix) && identifier(rest))
}

/// Why a name is refused, as admission and the operator word it.
pub const UNKNOWN_PARAMETER_RULE: &str = "is not a PostgreSQL parameter \
     (nor a custom prefix.name one): PostgreSQL would refuse to start with it";

/// Control characters a value may not hold, as a regular expression
/// character class (RE2 and Rust `regex` syntax): line breaks end the
/// line in `postgresql.conf`, NUL ends the string, the others are invisible.
pub const CONTROL_CHARACTER_CLASS: &str = "[\\x00-\\x1f\\x7f]";

/// The longest value a parameter may have, in characters. Generous for
/// any setting PostgreSQL has (the longest in practice are preload lists
/// and `search_path`), and small enough that the CRD's rules over the
/// values stay inside kube-apiserver's cost budget.
pub const MAX_VALUE_LENGTH: usize = 1024;

/// Why a longer value is refused.
pub const VALUE_LENGTH_RULE: &str = "must be at most 1024 characters";

/// Why a value with a control character is refused.
pub const CONTROL_CHARACTER_RULE: &str =
    "must not contain a line break, NUL or other control character";

/// Why a value ending in a backslash is refused.
pub const TRAILING_BACKSLASH_RULE: &str = "must not end with a backslash \
     (an older instance manager renders it as an escaped closing quote, \
     leaving postgresql.conf unparseable at the next restart)";

/// Parameters that load server libraries by name: only
/// [`PRELOADABLE_LIBRARIES`] may be listed in them.
pub const PRELOAD_PARAMETERS: &[&str] = &[
    "local_preload_libraries",
    "session_preload_libraries",
    "shared_preload_libraries",
];

/// Libraries shipped with PostgreSQL itself (contrib, in every official
/// image) that are safe to preload. A library missing from the image
/// stops the server at its next start, and a path loads any file.
pub const PRELOADABLE_LIBRARIES: &[&str] = &[
    "auth_delay",
    "auto_explain",
    "passwordcheck",
    "pg_prewarm",
    "pg_stat_statements",
];

/// Why a preload list is refused.
pub fn preload_rule() -> String {
    format!(
        "must be a comma-separated list of libraries from: {} \
         (a library missing from the image stops the server at its next start)",
        PRELOADABLE_LIBRARIES.join(", ")
    )
}

/// The rule `value` of parameter `name` breaks, if any (the name itself
/// is checked by [`is_operator_owned`] and [`is_known_parameter`]).
pub fn value_problem(name: &str, value: &str) -> Option<String> {
    if value.chars().count() > MAX_VALUE_LENGTH {
        return Some(VALUE_LENGTH_RULE.to_owned());
    }
    if value.chars().any(|c| c.is_ascii_control()) {
        return Some(CONTROL_CHARACTER_RULE.to_owned());
    }
    if value.ends_with('\\') {
        return Some(TRAILING_BACKSLASH_RULE.to_owned());
    }
    let preload = PRELOAD_PARAMETERS.contains(&name.to_ascii_lowercase().as_str());
    if preload && !is_preloadable_list(value) {
        return Some(preload_rule());
    }
    None
}

/// The regular expression a preload list must match (RE2 and Rust
/// `regex`): allowed names separated by commas, spaces around them.
pub fn preload_list_pattern() -> String {
    let name = format!("({})", PRELOADABLE_LIBRARIES.join("|"));
    format!("^\\s*({name}(\\s*,\\s*{name})*)?\\s*$")
}

fn is_preloadable_list(value: &str) -> bool {
    value.trim().is_empty()
        || value
            .split(',')
            .all(|library| PRELOADABLE_LIBRARIES.contains(&library.trim()))
}

/// The rule parameter `name` set to `value` breaks, if any: owned, unknown,
/// or a value PostgreSQL cannot read back.
pub fn parameter_problem(name: &str, value: &str) -> Option<String> {
    if is_operator_owned(name) {
        return Some("is managed by the operator and cannot be set".to_owned());
    }
    if !is_known_parameter(name) {
        return Some(UNKNOWN_PARAMETER_RULE.to_owned());
    }
    value_problem(name, value)
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
    fn a_value_longer_than_the_bound_is_refused_and_one_at_the_bound_is_not() {
        let at_bound = "a".repeat(MAX_VALUE_LENGTH);
        assert_eq!(value_problem("search_path", &at_bound), None);
        let over = "é".repeat(MAX_VALUE_LENGTH + 1);
        assert_eq!(
            value_problem("search_path", &over).as_deref(),
            Some(VALUE_LENGTH_RULE)
        );
        // Characters are counted, as the API server counts maxLength.
        assert_eq!(
            value_problem("search_path", &"é".repeat(MAX_VALUE_LENGTH)),
            None
        );
    }

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
    fn names_are_known_parameters_or_custom_ones() {
        assert!(is_known_parameter("work_mem"));
        assert!(is_known_parameter("Work_Mem"));
        assert!(is_known_parameter("transaction_timeout"), "PostgreSQL 17");
        assert!(is_known_parameter("pg_stat_statements.track"));
        assert!(is_known_parameter("tusk.x_1"));
        for name in [
            "work_memory",
            "",
            ".x",
            "a.",
            "a.b.c",
            "a-b.c",
            "1a.b",
            "a.b c",
        ] {
            assert!(!is_known_parameter(name), "{name:?}");
        }
        let owned = |name: &str| parameter_problem(name, "1");
        assert!(owned("fsync").is_some_and(|r| r.contains("managed by the operator")));
        assert!(owned("include_dir").is_some_and(|r| r.contains("managed by the operator")));
        assert!(owned("unix_socket_group").is_some());
        assert_eq!(
            owned("no_such_parameter").as_deref(),
            Some(UNKNOWN_PARAMETER_RULE)
        );
        assert_eq!(owned("work_mem"), None);
    }

    #[test]
    fn values_must_render_to_a_line_postgresql_parses() {
        let problem = |value: &str| value_problem("search_path", value);
        for fine in ["", "a b", "it's", "\"$user\"", "C:\\dir\\x", "é"] {
            assert_eq!(problem(fine), None, "{fine:?}");
        }
        for control in ["a\nb", "a\rb", "a\0b", "a\tb", "\u{7f}"] {
            assert_eq!(problem(control).as_deref(), Some(CONTROL_CHARACTER_RULE));
        }
        assert_eq!(problem("x\\").as_deref(), Some(TRAILING_BACKSLASH_RULE));
    }

    #[test]
    fn preload_lists_name_only_libraries_of_the_image() {
        let problem = |value: &str| value_problem("Shared_Preload_Libraries", value);
        for fine in [
            "",
            "pg_stat_statements",
            " pg_stat_statements , auto_explain ",
        ] {
            assert_eq!(problem(fine), None, "{fine:?}");
        }
        for refused in [
            "timescaledb",
            "/tmp/evil.so",
            "pg_stat_statements,",
            "$libdir/auto_explain",
        ] {
            assert_eq!(problem(refused), Some(preload_rule()), "{refused:?}");
        }
        assert!(value_problem("session_preload_libraries", "x").is_some());
        let pattern = regex::Regex::new(&preload_list_pattern()).expect("a valid pattern");
        for value in [
            "",
            "pg_stat_statements",
            " pg_stat_statements , auto_explain ",
            "x",
            "a,",
            "pg_stat_statementsx",
        ] {
            assert_eq!(
                pattern.is_match(value),
                problem(value).is_none(),
                "{value:?}"
            );
        }
        let control = regex::Regex::new(CONTROL_CHARACTER_CLASS).expect("a valid class");
        for value in ["a\nb", "a\0", "\u{7f}", "ok", "é"] {
            assert_eq!(
                control.is_match(value),
                value.chars().any(|c| c.is_ascii_control())
            );
        }
    }

    #[test]
    fn known_parameter_list_is_lower_case_and_sorted() {
        let mut sorted = KNOWN_PARAMETERS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, KNOWN_PARAMETERS);
        assert!(
            KNOWN_PARAMETERS
                .iter()
                .all(|p| p.to_ascii_lowercase() == *p)
        );
        let directives = ["include", "include_dir", "include_if_exists"];
        for owned in OWNED_PARAMETERS.iter().filter(|p| !directives.contains(p)) {
            assert!(KNOWN_PARAMETERS.contains(owned), "{owned} is a parameter");
        }
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
