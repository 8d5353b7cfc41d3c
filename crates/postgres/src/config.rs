//! Rendering PostgreSQL's configuration files from what the instance must
//! be: `postgresql.conf`, `pg_hba.conf`, `pg_ident.conf`, the password file
//! used for replication. Pure functions; the callers write the files.
//!
//! With the cluster's certificates ([`ServerTls`], [`ClientTls`]) every
//! network connection is encrypted: the server offers only TLS to remote
//! clients (`hostssl`), standbys verify the primary's certificate against
//! the cluster's authority and log in with the replication user's client
//! certificate (`cert`), and application users log in with SCRAM
//! passwords over TLS. Without them (an instance manager run on its own,
//! outside a pod) connections are plain and authenticated by password.
//!
//! Operator-owned settings come first and cannot be overridden: user
//! parameters naming one of them are refused (the API already rejects them;
//! this is the last line of defence). User parameters come after the
//! defaults they may override (`wal_keep_size`, `max_replication_slots`, ...);
//! PostgreSQL applies the last occurrence of a setting.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::Path;

use crate::parameters::{is_known_parameter, is_operator_owned, settings, value_problem};
use crate::synchronous::SynchronousStandbys;

/// Line prefix of PostgreSQL's log lines; `supervisor` parses it into
/// structured fields.
pub const LOG_LINE_PREFIX: &str = "%m [%p] ";

/// A configuration that cannot be rendered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("parameter `{0}` is owned by the operator and cannot be set")]
    OwnedParameter(String),
    #[error("`{0}` is not a PostgreSQL parameter (nor a custom prefix.name one)")]
    InvalidName(String),
    #[error("the value of parameter `{0}` {1}")]
    InvalidValue(String, String),
    #[error("user or password for {0} contains a line break")]
    InvalidCredential(&'static str),
}

/// Which side of replication the configuration is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplicationRole {
    /// Read-write primary.
    Primary,
    /// Hot standby streaming from `upstream`.
    Standby(Upstream),
    /// Hot standby streaming from no one: it keeps and serves what it
    /// has, and confirms no primary's commits (`primary_conninfo` empty,
    /// which stops a running WAL receiver at the next reload).
    Detached,
}

impl ReplicationRole {
    /// True for both kinds of standby (`standby.signal` present).
    pub fn is_standby(&self) -> bool {
        !matches!(self, ReplicationRole::Primary)
    }
}

/// Where a standby streams from, and as whom. The password is read from
/// `passfile`, so it never appears in `postgresql.conf`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    pub host: IpAddr,
    pub port: u16,
    pub user: String,
    pub passfile: String,
    /// The client certificate to log in with, and the authority the
    /// upstream's certificate must chain to.
    pub tls: Option<ClientTls>,
}

/// The server's certificate files, as PostgreSQL reads them (the key
/// readable by the PostgreSQL user alone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerTls {
    pub cert_file: String,
    pub key_file: String,
    /// The authority client certificates must chain to.
    pub ca_file: String,
}

/// A client certificate for libpq (`sslcert`, `sslkey`), the authority
/// the server's certificate must chain to (`sslrootcert`) and the name it
/// must carry (`server_name`: instances are reached by address, which is
/// `hostaddr`, and verified by the name, which is `host`, as
/// `sslmode=verify-full` checks it). Any certificate of the same issuer
/// without that name is refused, as is a server that asks for a password
/// where a certificate logs in, when libpq knows `require_auth`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientTls {
    pub cert_file: String,
    pub key_file: String,
    pub root_cert_file: String,
    /// The name the server's certificate must carry (`<cluster>-rw`).
    pub server_name: String,
    /// Whether the libpq the connecting programs load knows `require_auth`
    /// (PostgreSQL 16 or later); an older one refuses the option, so it
    /// is left out and the client's only guard is the verified name.
    pub require_auth: bool,
}

/// How a connection to another instance authenticates, for
/// `require_auth`: replication (the walreceiver, `pg_basebackup`) with
/// the client certificate, so the server must ask for nothing more
/// (`none`; a certificate is no authentication exchange to libpq);
/// `pg_rewind`'s ordinary connection with the replication user's SCRAM
/// password.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteLogin {
    Certificate,
    Scram,
}

impl RemoteLogin {
    fn require_auth(self) -> &'static str {
        match self {
            RemoteLogin::Certificate => "none",
            RemoteLogin::Scram => "scram-sha-256",
        }
    }
}

impl ClientTls {
    /// libpq's settings for a connection to the instance at `address`
    /// logging in by `login`: the server's certificate is verified
    /// against the authority and for [`Self::server_name`].
    pub fn libpq_settings(
        &self,
        address: IpAddr,
        login: RemoteLogin,
    ) -> Vec<(&'static str, String)> {
        let mut settings = vec![
            ("host", self.server_name.clone()),
            ("hostaddr", address.to_string()),
            ("sslmode", "verify-full".to_owned()),
            ("sslrootcert", self.root_cert_file.clone()),
            ("sslcert", self.cert_file.clone()),
            ("sslkey", self.key_file.clone()),
        ];
        if self.require_auth {
            settings.push(("require_auth", login.require_auth().to_owned()));
        }
        settings
    }

    /// The same settings as libpq's environment variables, for
    /// PostgreSQL's programs (`pg_basebackup`, `pg_rewind`), whose host
    /// is given by [`Self::libpq_settings`] or `PGHOST`/`PGHOSTADDR`.
    pub fn environment(&self) -> Vec<(&'static str, &str)> {
        let mut env = vec![
            ("PGSSLMODE", "verify-full"),
            ("PGSSLROOTCERT", self.root_cert_file.as_str()),
            ("PGSSLCERT", self.cert_file.as_str()),
            ("PGSSLKEY", self.key_file.as_str()),
        ];
        if self.require_auth {
            env.push(("PGREQUIREAUTH", RemoteLogin::Certificate.require_auth()));
        }
        env
    }
}

/// Everything `postgresql.conf` is rendered from.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    pub instance_name: String,
    pub listen_address: IpAddr,
    pub port: u16,
    pub socket_dir: String,
    pub role: ReplicationRole,
    pub synchronous: Option<SynchronousStandbys>,
    pub parameters: BTreeMap<String, String>,
    /// The major version the server runs, when known: parameter values
    /// are then held to that major's rules
    /// ([`crate::parameters::settings`]).
    pub major: Option<u32>,
    /// The `archive_command` when WAL is archived (see
    /// [`crate::pgbackrest::archive_command`]); archiving is off otherwise.
    pub archive_command: Option<String>,
    /// The server's certificate: TLS is on with it, off without.
    pub tls: Option<ServerTls>,
}

/// Operator defaults that users may override.
const OVERRIDABLE_DEFAULTS: &[(&str, &str)] = &[
    ("max_replication_slots", "10"),
    ("wal_keep_size", "512MB"),
    // A standby notices a silent primary (frozen, cut off) within seconds
    // instead of the default minute, so a promotion waiting for its WAL
    // receiver to stop is not held up (and a primary drops a silent
    // standby from the synchronous set as fast).
    ("wal_receiver_timeout", "5s"),
    ("wal_sender_timeout", "5s"),
    // A standby whose WAL receiver stopped (a lapsed primary lease, a
    // failed connection) looks in pg_wal and tries streaming again at this
    // interval: every second rather than every 5 s.
    ("wal_retrieve_retry_interval", "1s"),
];

/// `postgresql.conf` for `config`.
pub fn render_postgresql_conf(config: &ServerConfig) -> Result<String, ConfigError> {
    let mut owned: Vec<(&str, String)> = vec![
        ("listen_addresses", config.listen_address.to_string()),
        ("port", config.port.to_string()),
        ("unix_socket_directories", config.socket_dir.clone()),
        ("unix_socket_permissions", "0700".into()),
        ("cluster_name", config.instance_name.clone()),
        ("wal_level", "replica".into()),
        ("max_wal_senders", "10".into()),
        ("hot_standby", "on".into()),
        ("wal_log_hints", "on".into()),
        ("full_page_writes", "on".into()),
        ("logging_collector", "off".into()),
        ("log_destination", "stderr".into()),
        ("log_line_prefix", LOG_LINE_PREFIX.into()),
        (
            "synchronous_standby_names",
            config
                .synchronous
                .as_ref()
                .map(SynchronousStandbys::setting)
                .unwrap_or_default(),
        ),
    ];
    match &config.tls {
        Some(tls) => {
            owned.push(("ssl", "on".into()));
            owned.push(("ssl_cert_file", tls.cert_file.clone()));
            owned.push(("ssl_key_file", tls.key_file.clone()));
            owned.push(("ssl_ca_file", tls.ca_file.clone()));
            owned.push(("ssl_min_protocol_version", "TLSv1.2".into()));
        }
        None => owned.push(("ssl", "off".into())),
    }
    match &config.archive_command {
        // `on`, not `always`: the primary archives; a standby starts
        // archiving the moment it is promoted.
        Some(command) => {
            owned.push(("archive_mode", "on".into()));
            owned.push(("archive_command", command.clone()));
        }
        None => owned.push(("archive_mode", "off".into())),
    }
    match &config.role {
        ReplicationRole::Standby(upstream) => owned.push((
            "primary_conninfo",
            primary_conninfo(upstream, &config.instance_name),
        )),
        ReplicationRole::Detached => owned.push(("primary_conninfo", String::new())),
        ReplicationRole::Primary => {}
    }
    for (name, value) in &config.parameters {
        check_parameter(config.major, name, value)?;
    }

    let mut out = String::from(
        "# Rendered by the Tusk instance manager from the PostgresCluster spec.\n\
         # Changes made here are overwritten; set spec.postgres.parameters instead.\n\n\
         # Owned by the operator\n",
    );
    for (name, value) in &owned {
        line(&mut out, name, value);
    }
    out.push_str("\n# Operator defaults\n");
    for (name, value) in OVERRIDABLE_DEFAULTS {
        line(&mut out, name, value);
    }
    if !config.parameters.is_empty() {
        out.push_str("\n# From spec.postgres.parameters\n");
        for (name, value) in &config.parameters {
            line(&mut out, name, value);
        }
    }
    Ok(out)
}

fn check_parameter(major: Option<u32>, name: &str, value: &str) -> Result<(), ConfigError> {
    if is_operator_owned(name) {
        return Err(ConfigError::OwnedParameter(name.to_owned()));
    }
    if !is_known_parameter(name) {
        return Err(ConfigError::InvalidName(name.to_owned()));
    }
    let typed = || major.and_then(|major| settings::value_rule(major, name, value));
    if let Some(rule) = value_problem(name, value).or_else(typed) {
        return Err(ConfigError::InvalidValue(name.to_owned(), rule));
    }
    Ok(())
}

/// One `name = 'value'` line. Inside quotes PostgreSQL's configuration
/// lexer reads `''` as a quote and a backslash as the start of an escape
/// (`\n`, `\t`, octal, or the next character itself), so both are doubled:
/// the server reads back exactly the declared value.
fn line(out: &mut String, name: &str, value: &str) {
    let quoted = value.replace('\\', "\\\\").replace('\'', "''");
    let _ = writeln!(out, "{name} = '{quoted}'");
}

/// libpq connection string a standby uses to stream from `upstream`; its
/// `application_name` is the instance name, which `pg_stat_replication`
/// and `synchronous_standby_names` refer to.
pub fn primary_conninfo(upstream: &Upstream, application_name: &str) -> String {
    let mut settings = match &upstream.tls {
        Some(tls) => tls.libpq_settings(upstream.host, RemoteLogin::Certificate),
        None => vec![
            ("host", upstream.host.to_string()),
            ("sslmode", "prefer".to_owned()),
        ],
    };
    settings.extend([
        ("port", upstream.port.to_string()),
        ("user", upstream.user.clone()),
        ("passfile", upstream.passfile.clone()),
        ("application_name", application_name.to_owned()),
    ]);
    settings.push(("connect_timeout", "5".to_owned()));
    conninfo(&settings)
}

/// A libpq connection string of `settings`, each value quoted.
pub fn conninfo(settings: &[(&str, String)]) -> String {
    settings
        .iter()
        .map(|(key, value)| format!("{key}={}", conninfo_value(value)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn conninfo_value(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// Who may connect how. The local superuser connection of the instance
/// manager uses peer authentication through the `tusk` ident map. With
/// `tls`, remote clients must use TLS (`hostssl`; a plain connection
/// matches no line and is refused), streaming replication logs in with the
/// replication user's certificate, and every other remote login with a
/// SCRAM password; without it every network connection authenticates with
/// a SCRAM password.
pub fn render_pg_hba(
    superuser: &str,
    replication_user: &str,
    tls: bool,
    remote_superuser: bool,
) -> String {
    let (host, replication_method) = match tls {
        true => ("hostssl", "cert"),
        false => ("host   ", "scram-sha-256"),
    };
    // Without remote access, the superuser is refused over the network
    // before the rule that admits every user by password; `host` matches
    // encrypted and plain connections alike.
    let refused = if remote_superuser {
        String::new()
    } else {
        format!("host    all          {superuser}  all  reject\n")
    };
    format!(
        "# Rendered by the Tusk instance manager; changes are overwritten.\n\
         # TYPE  DATABASE     USER  ADDRESS  METHOD\n\
         local   all          {superuser}  peer map=tusk\n\
         local   all          all   scram-sha-256\n\
         {host} replication  {replication_user}  all  {replication_method}\n\
         {refused}\
         {host} all          all   all      scram-sha-256\n"
    )
}

/// Maps the operating-system users that run the instance manager and
/// PostgreSQL to the database superuser, for peer authentication.
pub fn render_pg_ident(os_users: &[&str], superuser: &str) -> String {
    let mut out =
        String::from("# Rendered by the Tusk instance manager; changes are overwritten.\n");
    let mut seen: Vec<&str> = Vec::new();
    for user in os_users {
        if !seen.contains(user) {
            seen.push(user);
            let _ = writeln!(out, "tusk {user} {superuser}");
        }
    }
    out
}

/// A libpq password file admitting `user` on any host.
pub fn render_pgpass(user: &str, password: &str) -> Result<String, ConfigError> {
    if user.contains(['\n', '\r']) || password.contains(['\n', '\r']) {
        return Err(ConfigError::InvalidCredential("replication"));
    }
    let escape = |text: &str| text.replace('\\', "\\\\").replace(':', "\\:");
    Ok(format!("*:*:*:{}:{}\n", escape(user), escape(password)))
}

/// The socket directory as PostgreSQL expects it in the configuration.
pub fn socket_dir_setting(path: &Path) -> String {
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::synchronous::{Synchronous, SynchronousMode};

    fn base() -> ServerConfig {
        ServerConfig {
            instance_name: "db-1".into(),
            listen_address: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 5)),
            port: 5432,
            socket_dir: "/tmp/tusk".into(),
            role: ReplicationRole::Primary,
            synchronous: None,
            parameters: BTreeMap::new(),
            major: Some(15),
            archive_command: None,
            tls: None,
        }
    }

    /// A value the running major refuses never reaches the file, so the
    /// server keeps the configuration it has.
    #[test]
    fn a_value_the_major_refuses_is_not_rendered() {
        let parameters = BTreeMap::from([("shared_buffers".to_owned(), "Retain".to_owned())]);
        let refused = render_postgresql_conf(&ServerConfig {
            parameters: parameters.clone(),
            ..base()
        });
        assert!(
            matches!(refused, Err(ConfigError::InvalidValue(ref name, ref rule))
                if name == "shared_buffers" && rule.contains("integer")),
            "{refused:?}"
        );
        let fine = BTreeMap::from([("shared_buffers".to_owned(), "256MB".to_owned())]);
        assert!(
            render_postgresql_conf(&ServerConfig {
                parameters: fine,
                ..base()
            })
            .is_ok()
        );
    }

    #[test]
    fn archiving_is_on_only_with_an_archive_command() {
        let conf = render_postgresql_conf(&base()).expect("renders");
        assert_eq!(setting(&conf, "archive_mode").as_deref(), Some("off"));
        assert_eq!(setting(&conf, "archive_command"), None);
        let command = crate::pgbackrest::archive_command("/data/pgbackrest.conf", "db");
        let archiving = ServerConfig {
            archive_command: Some(command.clone()),
            ..standby()
        };
        let conf = render_postgresql_conf(&archiving).expect("renders");
        assert_eq!(setting(&conf, "archive_mode").as_deref(), Some("on"));
        assert_eq!(setting(&conf, "archive_command"), Some(command));
    }

    fn standby() -> ServerConfig {
        ServerConfig {
            role: ReplicationRole::Standby(Upstream {
                host: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)),
                port: 5432,
                user: "streaming_replica".into(),
                passfile: "/tmp/tusk/pgpass".into(),
                tls: None,
            }),
            ..base()
        }
    }

    fn client_tls() -> ClientTls {
        ClientTls {
            cert_file: "/run/tusk/tls/replication.crt".into(),
            key_file: "/run/tusk/tls/replication.key".into(),
            root_cert_file: "/run/tusk/tls/ca.crt".into(),
            server_name: "db-rw".into(),
            require_auth: true,
        }
    }

    #[test]
    fn with_certificates_the_server_offers_tls_and_a_standby_verifies_and_presents_one() {
        let plain = render_postgresql_conf(&base()).expect("renders");
        assert_eq!(setting(&plain, "ssl").as_deref(), Some("off"));
        let server = ServerTls {
            cert_file: "/run/tusk/tls/server.crt".into(),
            key_file: "/run/tusk/tls/server.key".into(),
            ca_file: "/run/tusk/tls/ca.crt".into(),
        };
        let mut config = standby();
        config.tls = Some(server);
        if let ReplicationRole::Standby(upstream) = &mut config.role {
            upstream.tls = Some(client_tls());
        }
        let conf = render_postgresql_conf(&config).expect("renders");
        assert_eq!(setting(&conf, "ssl").as_deref(), Some("on"));
        assert_eq!(
            setting(&conf, "ssl_key_file").as_deref(),
            Some("/run/tusk/tls/server.key")
        );
        assert_eq!(
            setting(&conf, "ssl_min_protocol_version").as_deref(),
            Some("TLSv1.2")
        );
        let conninfo = setting(&conf, "primary_conninfo").expect("conninfo");
        for expected in [
            "host='db-rw'",
            "sslmode='verify-full'",
            "require_auth='none'",
            "sslrootcert='/run/tusk/tls/ca.crt'",
            "sslcert='/run/tusk/tls/replication.crt'",
            "sslkey='/run/tusk/tls/replication.key'",
        ] {
            assert!(conninfo.contains(expected), "{conninfo}");
        }
        assert!(!conninfo.contains("prefer"), "{conninfo}");
        // The upstream's address is where it connects, not what it checks.
        assert!(
            conninfo.contains("hostaddr=") && !conninfo.contains("host='10."),
            "{conninfo}"
        );
        // A libpq older than 16 refuses require_auth: left out for it.
        if let ReplicationRole::Standby(upstream) = &mut config.role {
            upstream.tls = Some(ClientTls {
                require_auth: false,
                ..client_tls()
            });
        }
        let conf = render_postgresql_conf(&config).expect("renders");
        let conninfo = setting(&conf, "primary_conninfo").expect("conninfo");
        assert!(!conninfo.contains("require_auth"), "{conninfo}");
        assert!(conninfo.contains("sslmode='verify-full'"), "{conninfo}");
        // The user cannot turn it off.
        let parameters = BTreeMap::from([("ssl".to_owned(), "off".to_owned())]);
        assert_eq!(
            render_postgresql_conf(&ServerConfig {
                parameters,
                ..config
            }),
            Err(ConfigError::OwnedParameter("ssl".into()))
        );
    }

    #[test]
    fn with_certificates_remote_clients_must_use_tls_and_replication_a_certificate() {
        let hba = render_pg_hba("postgres", "streaming_replica", true, true);
        let rules: Vec<Vec<&str>> = hba
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().collect())
            .collect();
        let remote: Vec<&Vec<&str>> = rules.iter().filter(|r| r[0] != "local").collect();
        assert_eq!(remote.len(), 2, "{hba}");
        for rule in &remote {
            assert_eq!(rule[0], "hostssl", "{hba}");
        }
        assert_eq!(
            remote[0].as_slice(),
            ["hostssl", "replication", "streaming_replica", "all", "cert"]
        );
        assert_eq!(remote[1].last(), Some(&"scram-sha-256"));
    }

    /// The last value a setting gets in a rendered file, as PostgreSQL reads it.
    fn setting(conf: &str, name: &str) -> Option<String> {
        conf.lines()
            .filter_map(|l| l.split_once(" = "))
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| {
                let inner = v.strip_prefix('\'').and_then(|v| v.strip_suffix('\''));
                inner.unwrap_or(v).replace("''", "'")
            })
            .next_back()
    }

    #[test]
    fn operator_owned_settings_are_rendered() {
        let conf = render_postgresql_conf(&base()).expect("renders");
        let cases = [
            ("listen_addresses", "10.0.0.5"),
            ("port", "5432"),
            ("unix_socket_directories", "/tmp/tusk"),
            ("wal_level", "replica"),
            ("hot_standby", "on"),
            ("wal_log_hints", "on"),
            ("wal_keep_size", "512MB"),
            ("max_wal_senders", "10"),
            ("max_replication_slots", "10"),
            ("cluster_name", "db-1"),
            ("wal_retrieve_retry_interval", "1s"),
            ("logging_collector", "off"),
            ("synchronous_standby_names", ""),
        ];
        for (name, value) in cases {
            assert_eq!(setting(&conf, name).as_deref(), Some(value), "{name}");
        }
        assert_eq!(setting(&conf, "primary_conninfo"), None);
    }

    #[test]
    fn a_standby_streams_from_the_primary_address_without_a_password() {
        let conf = render_postgresql_conf(&standby()).expect("renders");
        let conninfo = setting(&conf, "primary_conninfo").expect("standby has primary_conninfo");
        assert_eq!(
            conninfo,
            "host='10.0.0.7' sslmode='prefer' port='5432' user='streaming_replica' \
             passfile='/tmp/tusk/pgpass' application_name='db-1' connect_timeout='5'"
        );
        assert!(!conf.contains("password"));
        // The default `recovery_target_timeline = 'latest'` lets a standby
        // follow a promotion; setting it would make promotion need a restart.
        assert_eq!(setting(&conf, "recovery_target_timeline"), None);
    }

    #[test]
    fn a_detached_standby_streams_from_no_one() {
        let detached = ServerConfig {
            role: ReplicationRole::Detached,
            ..standby()
        };
        let conf = render_postgresql_conf(&detached).expect("renders");
        // Explicitly empty: a reload stops the running WAL receiver.
        assert_eq!(setting(&conf, "primary_conninfo").as_deref(), Some(""));
        assert!(conf.contains("primary_conninfo = ''"), "{conf}");
        assert!(detached.role.is_standby() && standby().role.is_standby());
        assert!(!base().role.is_standby());
    }

    #[test]
    fn user_parameters_follow_and_may_override_defaults() {
        let mut config = base();
        config
            .parameters
            .insert("shared_buffers".into(), "16MB".into());
        config
            .parameters
            .insert("wal_keep_size".into(), "1GB".into());
        config
            .parameters
            .insert("search_path".into(), "\"$user\", it's".into());
        let conf = render_postgresql_conf(&config).expect("renders");
        assert_eq!(setting(&conf, "shared_buffers").as_deref(), Some("16MB"));
        assert_eq!(setting(&conf, "wal_keep_size").as_deref(), Some("1GB"));
        assert!(conf.contains("search_path = '\"$user\", it''s'"));
        config
            .parameters
            .insert("tusk.path".into(), "C:\\dir\\n".into());
        let conf = render_postgresql_conf(&config).expect("renders");
        assert!(conf.contains("tusk.path = 'C:\\\\dir\\\\n'"), "{conf}");
    }

    #[test]
    fn bad_user_parameters_are_refused() {
        let cases: [(&str, &str, ConfigError); 6] = [
            ("fsync", "off", ConfigError::OwnedParameter("fsync".into())),
            (
                "no_such_parameter",
                "1",
                ConfigError::InvalidName("no_such_parameter".into()),
            ),
            (
                "wal_level",
                "minimal",
                ConfigError::OwnedParameter("wal_level".into()),
            ),
            (
                "SSL_cert_file",
                "x",
                ConfigError::OwnedParameter("SSL_cert_file".into()),
            ),
            (
                "work mem",
                "4MB",
                ConfigError::InvalidName("work mem".into()),
            ),
            (
                "work_mem",
                "4MB\nwal_level = minimal",
                ConfigError::InvalidValue(
                    "work_mem".into(),
                    crate::parameters::CONTROL_CHARACTER_RULE.into(),
                ),
            ),
        ];
        for (name, value, expected) in cases {
            let mut config = base();
            config.parameters.insert(name.into(), value.into());
            assert_eq!(render_postgresql_conf(&config), Err(expected), "{name}");
        }
    }

    #[test]
    fn synchronous_standby_names_follow_the_replication_spec() {
        let cases = [
            (true, 1, vec![], "ANY 1 (*)"),
            (true, 2, vec!["db-2", "db-3"], "ANY 2 (\"db-2\", \"db-3\")"),
            (false, 1, vec!["db-2"], "FIRST 1 (\"db-2\")"),
        ];
        for (quorum, number, names, expected) in cases {
            let mode = if quorum {
                SynchronousMode::Any
            } else {
                SynchronousMode::First
            };
            let sync = SynchronousStandbys {
                rule: Synchronous { mode, number },
                candidates: names.into_iter().map(String::from).collect(),
            };
            assert_eq!(sync.setting(), expected);
            let conf = render_postgresql_conf(&ServerConfig {
                synchronous: Some(sync),
                ..base()
            })
            .expect("renders");
            assert_eq!(
                setting(&conf, "synchronous_standby_names").as_deref(),
                Some(expected)
            );
        }
    }

    /// Without remote access the superuser is refused over the network,
    /// before the rule admitting every user, whether or not the connection
    /// is encrypted; inside the pod (the socket) it still logs in.
    #[test]
    fn the_superuser_is_refused_over_the_network_unless_allowed() {
        for tls in [true, false] {
            let hba = render_pg_hba("root_db", "streaming_replica", tls, false);
            let rules: Vec<Vec<&str>> = hba
                .lines()
                .filter(|l| !l.starts_with('#'))
                .map(|l| l.split_whitespace().collect())
                .collect();
            let refusal = rules
                .iter()
                .position(|r| r == &["host", "all", "root_db", "all", "reject"])
                .unwrap_or_else(|| panic!("no refusal: {hba}"));
            let everyone = rules
                .iter()
                .position(|r| r[0].starts_with("host") && r[1..3] == ["all", "all"])
                .unwrap_or_else(|| panic!("no rule for clients: {hba}"));
            assert!(refusal < everyone, "{hba}");
            assert!(
                rules.iter().any(|r| r[..3] == ["local", "all", "root_db"]),
                "{hba}"
            );
            let allowed = render_pg_hba("root_db", "streaming_replica", tls, true);
            assert!(!allowed.contains("reject"), "{allowed}");
        }
    }

    #[test]
    fn hba_admits_network_clients_only_with_passwords() {
        let hba = render_pg_hba("postgres", "streaming_replica", false, true);
        let rules: Vec<Vec<&str>> = hba
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().collect())
            .collect();
        for rule in rules.iter().filter(|r| r[0].starts_with("host")) {
            assert_eq!(rule.last(), Some(&"scram-sha-256"), "{rule:?}");
        }
        assert!(
            rules
                .iter()
                .any(|r| r[..3] == ["host", "replication", "streaming_replica"])
        );
        assert!(!hba.contains("trust"));
        assert!(hba.contains("local   all          postgres  peer map=tusk"));
    }

    #[test]
    fn ident_map_lists_each_os_user_once() {
        let ident = render_pg_ident(&["root", "postgres", "postgres"], "postgres");
        let entries: Vec<&str> = ident.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(entries, ["tusk root postgres", "tusk postgres postgres"]);
    }

    #[test]
    fn pgpass_escapes_separators() {
        assert_eq!(
            render_pgpass("repl", "a:b\\c").expect("renders"),
            "*:*:*:repl:a\\:b\\\\c\n"
        );
        assert!(render_pgpass("repl", "x\ny").is_err());
    }
}
