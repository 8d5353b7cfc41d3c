//! A standby, `pg_basebackup` and `pg_rewind` reach their primary by
//! address and verify it by name: the settings the instance manager gives
//! libpq ([`ClientTls::libpq_settings`], `sslmode=verify-full` with
//! `host=<cluster>-rw hostaddr=<address>`) are tried with real `psql`
//! against a real PostgreSQL 15 on loopback.
//!
//! An impostor serving a certificate of the same issuer for another name,
//! and asking for a cleartext password (which libpq would answer from the
//! replication password file), is refused before any password is sent;
//! the same server is accepted by the former settings (`verify-ca`, the
//! address as host), which shows the impostor is otherwise a working
//! server. Once it serves the cluster's name, the certificate login
//! succeeds.

#[path = "../../postgres/tests/common/authority.rs"]
mod authority;
mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::process::Command;

use authority::{authority, issue, set_private};
use tusk_instance::postgres::config::{ClientTls, RemoteLogin, conninfo};
use tusk_instance::process_user::ProcessUser;

/// Runs a PostgreSQL program as the PostgreSQL user; its output.
async fn as_postgres(user: &ProcessUser, program: &Path, args: &[&str]) -> String {
    let output = user
        .command(program)
        .args(args)
        .output()
        .await
        .expect("the program runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{program:?} {args:?}: {text}");
    text
}

/// `psql` with `conninfo` running `SELECT 1`, as this process's user (the
/// client's key and password file are its own): its output, and whether it
/// succeeded.
fn psql(bin: &Path, conninfo: &str, passfile: &Path) -> (bool, String) {
    let output = Command::new(bin.join("psql"))
        .args(["-X", "-w", "-At", "-d", conninfo, "-c", "SELECT 1"])
        .env("PGPASSFILE", passfile)
        .env("PGCONNECT_TIMEOUT", "5")
        .output()
        .expect("psql runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success() && text.trim() == "1", text)
}

/// Stops the server however the test ends.
struct Server {
    pg_ctl: std::path::PathBuf,
    pgdata: std::path::PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(&self.pg_ctl)
            .arg("-D")
            .arg(&self.pgdata)
            .args(["-m", "immediate", "-w", "-t", "20", "stop"])
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_of_the_same_issuer_for_another_name_is_not_taken_for_the_primary() {
    let bin = common::installed_bin_dir(15);
    let user = common::postgres_user();
    let temp = tempfile::tempdir().expect("temp dir");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
    }
    let certs = temp.path().join("certs");
    std::fs::create_dir_all(&certs).expect("dir");
    authority(&certs, "orders authority");
    // Same issuer: one for another cluster's name, one for this cluster's.
    issue(&certs, "impostor", "other-rw", "DNS:other-rw,IP:127.0.0.1");
    issue(&certs, "genuine", "orders-rw", "DNS:orders-rw");
    issue(
        &certs,
        "replication",
        "streaming_replica",
        "DNS:streaming_replica",
    );
    let passfile = certs.join("pgpass");
    std::fs::write(&passfile, "*:*:*:streaming_replica:replication-secret\n").expect("passfile");
    set_private(&passfile);

    // The server, owned by the PostgreSQL user, serving the impostor's
    // certificate and asking every remote client for a plain password.
    let pg = temp.path().join("pg");
    user.private_dir(&pg).expect("server dir");
    let pgdata = pg.join("data");
    let pgdata_text = pgdata.display().to_string();
    as_postgres(
        &user,
        &bin.join("initdb"),
        &["-D", &pgdata_text, "-U", "postgres", "--auth=trust"],
    )
    .await;
    let read = |name: &str| std::fs::read_to_string(certs.join(name)).expect("a file");
    let files = [
        ("impostor.crt", read("impostor.crt")),
        ("impostor.key", read("impostor.key")),
        ("genuine.crt", read("genuine.crt")),
        ("genuine.key", read("genuine.key")),
        ("ca.crt", read("ca.crt")),
    ];
    user.private_files(
        files
            .iter()
            .map(|(name, text)| (pg.join(name), text.as_str())),
    )
    .expect("server files");
    let port = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let serve = |cert: &str| {
        format!(
            "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{dir}'\n\
             ssl = on\nssl_cert_file = '{dir}/{cert}.crt'\nssl_key_file = '{dir}/{cert}.key'\n\
             ssl_ca_file = '{dir}/ca.crt'\npassword_encryption = 'scram-sha-256'\n",
            dir = pg.display()
        )
    };
    let hba =
        |remote: &str| format!("local all all trust\nhostssl all all 127.0.0.1/32 {remote}\n");
    user.private_files([
        (
            pgdata.join("postgresql.auto.conf"),
            serve("impostor").as_str(),
        ),
        (pgdata.join("pg_hba.conf"), hba("password").as_str()),
    ])
    .expect("configuration");
    let pg_ctl = bin.join("pg_ctl");
    let log = pg.join("log").display().to_string();
    as_postgres(
        &user,
        &pg_ctl,
        &["-D", &pgdata_text, "-l", &log, "-w", "-t", "30", "start"],
    )
    .await;
    let _server = Server {
        pg_ctl: pg_ctl.clone(),
        pgdata: pgdata.clone(),
    };
    let socket = pg.display().to_string();
    let port_text = port.to_string();
    as_postgres(
        &user,
        &bin.join("psql"),
        &[
            "-X",
            "-h",
            &socket,
            "-p",
            &port_text,
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-c",
            "CREATE ROLE streaming_replica LOGIN REPLICATION PASSWORD 'replication-secret'",
        ],
    )
    .await;

    let address = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let file = |name: &str| certs.join(name).display().to_string();
    let tls = ClientTls {
        cert_file: file("replication.crt"),
        key_file: file("replication.key"),
        root_cert_file: file("ca.crt"),
        server_name: "orders-rw".to_owned(),
        require_auth: tusk_instance::tls::libpq_has_require_auth(&bin),
    };
    let login = |login: RemoteLogin| {
        let mut settings = tls.libpq_settings(address, login);
        settings.extend([
            ("port", port_text.clone()),
            ("user", "streaming_replica".to_owned()),
            ("dbname", "postgres".to_owned()),
        ]);
        conninfo(&settings)
    };

    // The former settings take the impostor for the primary and hand it
    // the password: the impostor works, only the name tells it apart.
    let former = format!(
        "host=127.0.0.1 port={port} user=streaming_replica dbname=postgres sslmode=verify-ca \
         sslrootcert={} sslcert={} sslkey={}",
        tls.root_cert_file, tls.cert_file, tls.key_file
    );
    let (admitted, output) = psql(&bin, &former, &passfile);
    assert!(
        admitted,
        "the impostor should answer the former settings: {output}"
    );

    for way in [RemoteLogin::Certificate, RemoteLogin::Scram] {
        let (admitted, output) = psql(&bin, &login(way), &passfile);
        assert!(
            !admitted,
            "{way:?}: the impostor was taken for the primary: {output}"
        );
        assert!(
            output.contains("does not match host name"),
            "{way:?}: refused for another reason: {output}"
        );
    }

    // Serving the cluster's name, with the certificate login the
    // primary's pg_hba.conf has: admitted.
    user.private_files([
        (
            pgdata.join("postgresql.auto.conf"),
            serve("genuine").as_str(),
        ),
        (pgdata.join("pg_hba.conf"), hba("cert").as_str()),
    ])
    .expect("configuration");
    as_postgres(&user, &pg_ctl, &["-D", &pgdata_text, "reload"]).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (admitted, output) = psql(&bin, &login(RemoteLogin::Certificate), &passfile);
        if admitted {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the genuine primary was refused: {output}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
