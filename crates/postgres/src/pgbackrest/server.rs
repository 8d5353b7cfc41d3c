//! Backups from a standby: pgBackRest's TLS server on every instance, and
//! the options with which a standby's `pgbackrest backup` reaches its
//! primary through it.
//!
//! pgBackRest backs up a standby (`backup-standby`) by starting and
//! stopping the backup on the primary and copying the replicated files
//! from the standby: the standby's pgBackRest needs the primary as a
//! second PostgreSQL host (`pg2-host`), reached through the primary's
//! `pgbackrest server` over TLS. Both sides verify each other against the
//! cluster's certificate authority: the server presents the cluster's
//! server certificate, which must name the address the standby connects
//! to (pgBackRest's client always checks the name, here an IP address),
//! and admits only a client certificate whose common name is
//! [`BACKUP_CLIENT`], for this cluster's stanza alone (`tls-server-auth`).
//!
//! Not the replication user's: a pgBackRest remote runs what its client
//! asks, as the superuser, so the identity it admits must be one only
//! backups hold; the replication certificate streams WAL and nothing else.

use std::net::IpAddr;

/// The common name of the one client certificate pgBackRest's TLS server
/// admits: the backup client's, issued for that alone (no PostgreSQL role
/// has this name, so PostgreSQL's `cert` authentication admits nobody
/// with it).
pub const BACKUP_CLIENT: &str = "tusk-backup-client";

/// The certificate files one side of the TLS connection presents and
/// verifies the other against (private copies, readable by the PostgreSQL
/// user alone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert_file: String,
    pub key_file: String,
    /// The authority the other side's certificate must chain to.
    pub ca_file: String,
}

/// The arguments of `pgbackrest server` (after `--config`): listening on
/// `address:port` with `tls`, admitting the client certificate whose
/// common name is [`BACKUP_CLIENT`] for `stanza` only.
pub fn server_args(address: IpAddr, port: u16, tls: &TlsFiles, stanza: &str) -> Vec<String> {
    vec![
        "server".to_owned(),
        format!("--tls-server-address={address}"),
        format!("--tls-server-port={port}"),
        format!("--tls-server-cert-file={}", tls.cert_file),
        format!("--tls-server-key-file={}", tls.key_file),
        format!("--tls-server-ca-file={}", tls.ca_file),
        format!("--tls-server-auth={BACKUP_CLIENT}={stanza}"),
    ]
}

/// The primary as a standby's backup sees it: its pod address and the
/// port of its TLS server; its PostgreSQL's data directory, socket, port
/// and superuser are where the standby's own are (every instance's pod
/// is made alike).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrimaryHost {
    pub address: IpAddr,
    pub server_port: u16,
    pub pgdata: String,
    pub socket_dir: String,
    pub port: u16,
    pub superuser: String,
}

/// The options `pgbackrest backup` takes on a standby: the backup runs
/// from this standby (`pg1`, the configuration file's), started and
/// stopped on `primary` (`pg2`) through its TLS server, the client
/// presenting `client` (the [`BACKUP_CLIENT`] certificate).
pub fn standby_backup_args(primary: &PrimaryHost, client: &TlsFiles) -> Vec<String> {
    vec![
        "--backup-standby=y".to_owned(),
        format!("--pg2-host={}", primary.address),
        "--pg2-host-type=tls".to_owned(),
        format!("--pg2-host-port={}", primary.server_port),
        format!("--pg2-host-cert-file={}", client.cert_file),
        format!("--pg2-host-key-file={}", client.key_file),
        format!("--pg2-host-ca-file={}", client.ca_file),
        format!("--pg2-path={}", primary.pgdata),
        format!("--pg2-socket-path={}", primary.socket_dir),
        format!("--pg2-port={}", primary.port),
        format!("--pg2-user={}", primary.superuser),
    ]
}
