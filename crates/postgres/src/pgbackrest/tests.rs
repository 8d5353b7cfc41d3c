use super::*;

fn stanza(repository: Repository) -> Stanza {
    Stanza {
        name: "orders".into(),
        repository_path: repository.cluster_path("shop", "orders"),
        repository,
        pgdata: "/var/lib/postgresql/data/pgdata".into(),
        socket_dir: "/run/tusk".into(),
        port: 5432,
        superuser: "postgres".into(),
        spool_path: "/var/lib/postgresql/data/pgbackrest/spool".into(),
        log_path: "/var/lib/postgresql/data/pgbackrest/log".into(),
        lock_path: "/run/tusk/pgbackrest".into(),
    }
}

fn option<'a>(conf: &'a str, section: &str, key: &str) -> Option<&'a str> {
    let mut current = "";
    for line in conf.lines() {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name;
        } else if current == section
            && let Some((k, v)) = line.split_once('=')
            && k == key
        {
            return Some(v);
        }
    }
    None
}

#[test]
fn an_s3_compatible_endpoint_renders_path_style_with_its_port_and_ca() {
    let repository = Repository::s3(
        "s3://backups/prod/",
        Some("https://minio.example:9000"),
        None,
    )
    .expect("parses")
    .with_ca_file(Some("/etc/tusk/backup-ca/ca.crt".into()));
    let conf = render_conf(&stanza(repository)).expect("renders");
    let global = |key| option(&conf, "global", key);
    assert_eq!(global("repo1-type"), Some("s3"));
    assert_eq!(global("repo1-s3-bucket"), Some("backups"));
    assert_eq!(global("repo1-path"), Some("/prod/shop/orders"));
    assert_eq!(global("repo1-s3-endpoint"), Some("minio.example"));
    assert_eq!(global("repo1-storage-port"), Some("9000"));
    assert_eq!(global("repo1-s3-uri-style"), Some("path"));
    assert_eq!(global("repo1-s3-region"), Some(DEFAULT_REGION));
    assert_eq!(
        global("repo1-storage-ca-file"),
        Some("/etc/tusk/backup-ca/ca.crt")
    );
    assert_eq!(global("archive-async"), Some("y"));
    for command in ["archive-push", "stanza-create", "stanza-upgrade", "info"] {
        assert_eq!(
            option(&conf, &format!("global:{command}"), "io-timeout"),
            Some("5"),
            "{command} gives up, and says why, within a minute"
        );
    }
    assert_eq!(global("io-timeout"), None, "backups keep the default");
    for command in ["global:backup", "global:restore"] {
        assert_eq!(option(&conf, command, "process-max"), Some("4"));
    }
    assert_eq!(global("process-max"), None, "archiving keeps one");
    assert_eq!(
        global("spool-path"),
        Some("/var/lib/postgresql/data/pgbackrest/spool")
    );
    assert_eq!(
        option(&conf, "orders", "pg1-path"),
        Some("/var/lib/postgresql/data/pgdata")
    );
    assert_eq!(
        option(&conf, "orders", "pg1-socket-path"),
        Some("/run/tusk")
    );
}

#[test]
fn aws_needs_no_endpoint_and_addresses_the_bucket_by_host() {
    let repository = Repository::s3("s3://backups", None, Some("eu-west-3")).expect("parses");
    let conf = render_conf(&stanza(repository)).expect("renders");
    assert_eq!(
        option(&conf, "global", "repo1-s3-endpoint"),
        Some("s3.eu-west-3.amazonaws.com")
    );
    assert_eq!(option(&conf, "global", "repo1-path"), Some("/shop/orders"));
    assert_eq!(option(&conf, "global", "repo1-s3-uri-style"), None);
    assert_eq!(option(&conf, "global", "repo1-storage-port"), None);
}

#[test]
fn a_volume_repository_is_a_posix_path_under_the_volumes_mount() {
    let mut repository = Repository::parse(
        "file:///backups/prod/",
        None,
        None,
        Some("/var/lib/tusk/repositories/pg-backups/"),
    )
    .expect("parses");
    repository.retention_days = Some(7);
    let conf = render_conf(&stanza(repository.clone())).expect("renders");
    let global = |key| option(&conf, "global", key);
    assert_eq!(global("repo1-type"), Some("posix"));
    assert_eq!(
        global("repo1-path"),
        Some("/var/lib/tusk/repositories/pg-backups/backups/prod/shop/orders")
    );
    assert_eq!(global("repo1-retention-full"), Some("7"));
    assert_eq!(global("archive-async"), Some("y"));
    assert!(!conf.contains("repo1-s3"), "{conf}");
    assert!(!conf.contains("repo1-storage"), "{conf}");
    // A volume has no service certificate to trust.
    assert_eq!(
        repository.clone().with_ca_file(Some("/ca".into())),
        repository
    );
    assert_eq!(
        repository.describe(),
        "the volume at /var/lib/tusk/repositories/pg-backups"
    );
    // As the destination names it: inside the volume, not the mount.
    assert_eq!(
        repository.url_of("shop", "orders", "backup/orders/F"),
        "file:///backups/prod/shop/orders/backup/orders/F"
    );
}

#[test]
fn a_volume_repository_needs_its_volume_and_nothing_of_s3() {
    let parse = |url, endpoint, region, root| Repository::parse(url, endpoint, region, root);
    assert!(matches!(
        parse("file:///backups", None, None, None),
        Err(RepositoryError::NoVolume(_))
    ));
    assert!(matches!(
        parse("s3://b/p", None, None, Some("/v")),
        Err(RepositoryError::VolumeForObjectStore(_))
    ));
    assert!(matches!(
        parse("file:///b", Some("https://minio:9000"), None, Some("/v")),
        Err(RepositoryError::EndpointForVolume(_))
    ));
    assert!(matches!(
        parse("file:///b", None, Some("eu-west-3"), Some("/v")),
        Err(RepositoryError::EndpointForVolume(_))
    ));
    assert!(matches!(
        parse("file:///b/../../etc", None, None, Some("/v")),
        Err(RepositoryError::OutsideVolume(_))
    ));
    assert!(matches!(
        parse("gs://b/p", None, None, Some("/v")),
        Err(RepositoryError::VolumeForObjectStore(_))
    ));
    assert!(matches!(
        parse("az://c/p", None, None, Some("/v")),
        Err(RepositoryError::VolumeForObjectStore(_))
    ));
    assert!(matches!(
        parse("ftp://c/p", None, None, None),
        Err(RepositoryError::Scheme(_))
    ));
    // The volume's root is the repository's when the path is `/`.
    let root = parse("file:///", None, None, Some("/v")).expect("parses");
    assert_eq!(root.cluster_path("shop", "orders"), "/v/shop/orders");
    let s3 = parse("s3://b/p", None, None, None).expect("parses");
    assert_eq!(s3.cluster_path("shop", "orders"), "/p/shop/orders");
    assert_eq!(s3.url_of("shop", "orders", "x"), "s3://b/p/shop/orders/x");
}

#[test]
fn keys_never_reach_the_file_and_wal_is_never_dropped() {
    let repository = Repository::s3("s3://b", None, None).expect("parses");
    let conf = render_conf(&stanza(repository)).expect("renders");
    assert!(!conf.contains("repo1-s3-key"), "{conf}");
    // A full queue would make pgBackRest drop WAL and report success.
    assert!(!conf.contains("archive-push-queue-max"), "{conf}");
}

#[test]
fn other_destinations_and_plain_http_are_refused() {
    for url in ["gs://b/p", "az://c", "file:///backups", "s3://", "s3:///p"] {
        assert!(
            matches!(
                Repository::s3(url, None, None),
                Err(RepositoryError::Scheme(_))
            ),
            "{url}"
        );
    }
    assert!(matches!(
        Repository::s3("s3://b", Some("http://minio:9000"), None),
        Err(RepositoryError::PlainHttp(_))
    ));
    assert!(matches!(
        Repository::s3("s3://b", Some("https://minio:port"), None),
        Err(RepositoryError::Endpoint(_))
    ));
    let repository = Repository::s3("s3://b", None, None)
        .expect("parses")
        .with_ca_file(Some("/ca\n[global]".into()));
    assert!(matches!(
        render_conf(&stanza(repository)),
        Err(RepositoryError::LineBreak(_))
    ));
}

#[test]
fn the_archive_command_pushes_the_segment_with_the_rendered_config() {
    assert_eq!(
        archive_command(
            "/var/lib/postgresql/data/pgbackrest/pgbackrest.conf",
            "orders"
        ),
        "pgbackrest --config=/var/lib/postgresql/data/pgbackrest/pgbackrest.conf \
             --stanza=orders archive-push \"%p\""
    );
    assert_eq!(
        archive_command("/tmp/my dir/p.conf", "db"),
        "pgbackrest '--config=/tmp/my dir/p.conf' --stanza=db archive-push \"%p\""
    );
}

#[test]
fn a_refusal_is_summarised_by_its_error_line_and_the_services_code() {
    let output = "2026-12-04 03:52:11.054 P00  ERROR: [039]: HTTP request failed with 403 (FORBIDDEN):\n\
            \x20      *** Path/Query ***:\n\
            \x20      GET /wal/?list-type=2\n\
            \x20      *** Request Headers ***:\n\
            \x20      authorization: <redacted>\n\
            \x20      <?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code>\
            <Message>The request signature we calculated does not match</Message></Error>\n";
    assert_eq!(
        error_summary(output).as_deref(),
        Some(
            "ERROR: [039]: HTTP request failed with 403 (FORBIDDEN) (GET /wal/?list-type=2): \
                 SignatureDoesNotMatch: The request signature we calculated does not match"
        )
    );
    assert_eq!(
        error_summary("WARN: x\nP00  ERROR: [055]: unable to load info file\n").as_deref(),
        Some("ERROR: [055]: unable to load info file")
    );
    assert_eq!(error_summary("all good"), None);
}

#[test]
fn a_pgbackrest_error_on_standard_error_is_told_from_postgresql_errors() {
    assert_eq!(
            stderr_error("ERROR: [082]: unable to push WAL file '000000010000000000000002' to the archive asynchronously after 60 second(s)"),
            Some("[082]: unable to push WAL file '000000010000000000000002' to the archive asynchronously after 60 second(s)".to_owned())
        );
    assert_eq!(
        stderr_error("P00  ERROR: [039]: HTTP request failed"),
        Some("[039]: HTTP request failed".to_owned())
    );
    for other in [
        "2026-12-05 00:17:56.259 UTC [42] ERROR:  relation \"t\" does not exist",
        "2026-12-05 00:17:56.259 UTC [42] LOG:  archive command failed with exit code 82",
        "ERROR: [x]: not a code",
        "",
    ] {
        assert_eq!(stderr_error(other), None, "{other}");
    }
}

#[test]
fn a_push_error_file_reads_as_its_message_and_code() {
    assert_eq!(
        status_file_message("104\nHTTP request failed with 403 (Forbidden)\n").as_deref(),
        Some("HTTP request failed with 403 (Forbidden) (pgBackRest error 104)")
    );
    assert_eq!(status_file_message(""), None);
}

/// `global.error` as pgBackRest 2.45 wrote it with the object store's
/// port closed.
#[test]
fn a_push_error_file_keeps_the_cause_without_hints_or_repeats() {
    let file = "103\nunable to find a valid repository:\n\
            repo1: [HostConnectError] unable to load info file '/r/archive/s/archive.info' or '/r/archive/s/archive.info.copy':\n\
            HostConnectError: unable to connect to '127.0.0.1:39999': [111] Connection refused\n\
            HostConnectError: unable to connect to '127.0.0.1:39999': [111] Connection refused\n\
            HINT: archive.info cannot be opened but is required to push/get WAL segments.\n\
            HINT: is archive_command configured correctly in postgresql.conf?\n";
    assert_eq!(
        status_file_message(file).as_deref(),
        Some(
            "unable to find a valid repository: repo1: [HostConnectError] unable to load info \
                 file '/r/archive/s/archive.info' or '/r/archive/s/archive.info.copy': \
                 HostConnectError: unable to connect to '127.0.0.1:39999': [111] Connection refused \
                 (pgBackRest error 103)"
        )
    );
}

#[test]
fn a_pgbackrest_older_than_the_major_is_named_as_the_cause() {
    let line = "2026-12-06 09:30:00 UTC [77] LOG:  archive command failed; \
        P00  ERROR: [029]: unexpected control version = 1300 and catalog version = 202307071";
    let reported = stderr_error(line).expect("an error");
    assert!(
        reported.starts_with("[029]: unexpected control version"),
        "{reported}"
    );
    assert!(reported.contains("newer pgBackRest"), "{reported}");
    let from_file =
        status_file_message("29\nunexpected control version = 1300\n").expect("a message");
    assert!(from_file.contains("newer pgBackRest"), "{from_file}");
    let summary =
        error_summary("P00  ERROR: [029]: unexpected control version = 1300\n").expect("a summary");
    assert!(summary.contains("newer pgBackRest"), "{summary}");
    // Other errors are left as pgBackRest said them.
    let other = "[082]: unable to push WAL file";
    assert_eq!(explained(other.to_owned()), other);
}

#[test]
fn a_gcs_bucket_signs_in_with_its_key_file_or_the_environment() {
    let ambient = Repository::parse("gs://b/p", None, None, None).expect("parses");
    assert_eq!(ambient.describe(), "gs://b");
    assert_eq!(ambient.cluster_path("shop", "orders"), "/p/shop/orders");
    assert_eq!(
        ambient.url_of("shop", "orders", "x"),
        "gs://b/p/shop/orders/x"
    );
    let conf = options(&ambient);
    for line in [
        "repo1-type=gcs",
        "repo1-gcs-bucket=b",
        "repo1-gcs-key-type=auto",
    ] {
        assert!(conf.iter().any(|l| l == line), "{line} in {conf:?}");
    }
    assert!(
        !conf.iter().any(|l| l.starts_with("repo1-gcs-endpoint")),
        "{conf:?}"
    );

    let keyed = Repository::parse("gs://b", Some("https://gcs.example:4443"), None, None)
        .expect("parses")
        .with_ca_file(Some("/ca.crt".into()))
        .with_gcs_key_file(Some("/keys/SERVICE_ACCOUNT_KEY".into()));
    let conf = options(&keyed);
    for line in [
        "repo1-gcs-endpoint=gcs.example:4443",
        "repo1-gcs-key-type=service",
        "repo1-gcs-key=/keys/SERVICE_ACCOUNT_KEY",
        "repo1-storage-ca-file=/ca.crt",
    ] {
        assert!(conf.iter().any(|l| l == line), "{line} in {conf:?}");
    }
    assert!(
        !conf.iter().any(|l| l.starts_with("repo1-storage-port")),
        "{conf:?}"
    );
    // A key file means nothing to S3 (its keys are in the environment).
    let s3 = Repository::s3("s3://b", None, None)
        .expect("parses")
        .with_gcs_key_file(Some("/k".into()));
    assert!(!options(&s3).iter().any(|l| l.contains("/k")));
}

#[test]
fn a_gcs_bucket_refuses_a_region_and_plain_http() {
    assert!(matches!(
        Repository::parse("gs://b", None, Some("eu-west-3"), None),
        Err(RepositoryError::RegionForGcs(_))
    ));
    assert!(matches!(
        Repository::parse("gs://b", Some("http://gcs:4443"), None, None),
        Err(RepositoryError::PlainHttp(_))
    ));
    assert!(matches!(
        Repository::parse("gs://", None, None, None),
        Err(RepositoryError::Scheme(_))
    ));
    assert!(matches!(
        Repository::parse("gs://b\n[global]", None, None, None),
        Err(RepositoryError::LineBreak(_))
    ));
}

/// The `repo1-*` lines of the configuration rendered for `repository`.
fn options(repository: &Repository) -> Vec<String> {
    render_conf(&stanza(repository.clone()))
        .expect("renders")
        .lines()
        .filter(|l| l.starts_with("repo1-"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn an_azure_container_is_reached_at_the_account_or_path_style_at_an_endpoint() {
    let azure = Repository::parse("az://backups/p", None, None, None).expect("parses");
    assert_eq!(azure.describe(), "az://backups");
    assert_eq!(azure.cluster_path("shop", "orders"), "/p/shop/orders");
    assert_eq!(
        azure.url_of("shop", "orders", "x"),
        "az://backups/p/shop/orders/x"
    );
    let conf = options(&azure);
    for line in ["repo1-type=azure", "repo1-azure-container=backups"] {
        assert!(conf.iter().any(|l| l == line), "{line} in {conf:?}");
    }
    // Azure's own endpoint, host-style (`<account>.blob.core.windows.net`,
    // pgBackRest's default); the account and key are never in the file.
    assert!(
        !conf.iter().any(|l| l.starts_with("repo1-azure-endpoint")
            || l.starts_with("repo1-azure-uri-style")
            || l.starts_with("repo1-azure-account")
            || l.starts_with("repo1-azure-key")),
        "{conf:?}"
    );

    let emulated = Repository::parse(
        "az://backups",
        Some("https://blobs.example:10000"),
        None,
        None,
    )
    .expect("parses")
    .with_ca_file(Some("/ca.crt".into()));
    let conf = options(&emulated);
    for line in [
        "repo1-azure-endpoint=blobs.example",
        "repo1-azure-uri-style=path",
        "repo1-storage-port=10000",
        "repo1-storage-ca-file=/ca.crt",
    ] {
        assert!(conf.iter().any(|l| l == line), "{line} in {conf:?}");
    }
}

#[test]
fn an_azure_container_refuses_a_region_and_plain_http() {
    assert!(matches!(
        Repository::parse("az://c", None, Some("westeurope"), None),
        Err(RepositoryError::RegionForAzure(_))
    ));
    assert!(matches!(
        Repository::parse("az://c", Some("http://azurite:10000"), None, None),
        Err(RepositoryError::PlainHttp(_))
    ));
    assert!(matches!(
        Repository::parse("az://", None, None, None),
        Err(RepositoryError::Scheme(_))
    ));
}

fn tls_files(side: &str) -> TlsFiles {
    TlsFiles {
        cert_file: format!("/run/tls/{side}.crt"),
        key_file: format!("/run/tls/{side}.key"),
        ca_file: "/run/tls/ca.crt".into(),
    }
}

#[test]
fn the_backup_server_admits_the_backup_client_for_its_stanza_alone() {
    let address: std::net::IpAddr = "10.1.2.3".parse().expect("an address");
    let args = server_args(address, 8432, &tls_files("server"), "orders");
    assert_eq!(args[0], "server");
    for arg in [
        "--tls-server-address=10.1.2.3",
        "--tls-server-port=8432",
        "--tls-server-cert-file=/run/tls/server.crt",
        "--tls-server-key-file=/run/tls/server.key",
        "--tls-server-ca-file=/run/tls/ca.crt",
        "--tls-server-auth=tusk-backup-client=orders",
    ] {
        assert!(args.iter().any(|a| a == arg), "{arg} in {args:?}");
    }
}

#[test]
fn a_standby_backs_up_with_its_primary_as_the_second_host_over_tls() {
    let primary = PrimaryHost {
        address: "10.1.2.4".parse().expect("an address"),
        server_port: 8432,
        pgdata: "/var/lib/postgresql/data/pgdata".into(),
        socket_dir: "/run/tusk".into(),
        port: 5432,
        superuser: "postgres".into(),
    };
    let args = standby_backup_args(&primary, &tls_files("backup-client"));
    for arg in [
        "--backup-standby=y",
        "--pg2-host=10.1.2.4",
        "--pg2-host-type=tls",
        "--pg2-host-port=8432",
        "--pg2-host-cert-file=/run/tls/backup-client.crt",
        "--pg2-host-key-file=/run/tls/backup-client.key",
        "--pg2-host-ca-file=/run/tls/ca.crt",
        "--pg2-path=/var/lib/postgresql/data/pgdata",
        "--pg2-socket-path=/run/tusk",
        "--pg2-port=5432",
        "--pg2-user=postgres",
    ] {
        assert!(args.iter().any(|a| a == arg), "{arg} in {args:?}");
    }
    // The standby itself stays pg1, as the configuration file says.
    assert!(!args.iter().any(|a| a.starts_with("--pg1")), "{args:?}");
}
