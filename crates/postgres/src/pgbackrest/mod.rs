//! pgBackRest, the engine behind continuous WAL archiving, backups
//! ([`backup`]) and restores ([`restore`]), and whose stanza follows a
//! major upgrade ([`stanza`]): its configuration file for one
//! stanza, the `archive_command` that hands each finished WAL segment to
//! it, and the reading of what it reports. Pure functions; the instance
//! manager writes the files and runs the commands.
//!
//! - The repository ([`Repository`]) is S3 (or S3-compatible, with an
//!   endpoint), Google Cloud Storage, Azure Blob Storage or a directory
//!   on a mounted volume. Each cluster archives under its own path
//!   (`<prefix>/<namespace>/<cluster>`), so two clusters sharing a bucket
//!   or a volume never mix their WAL.
//! - Keys are never written to the file: pgBackRest reads S3's from
//!   [`S3_KEY_ENV`] and [`S3_KEY_SECRET_ENV`], Azure's from
//!   [`AZURE_ACCOUNT_ENV`] and [`AZURE_KEY_ENV`], in its environment (a
//!   GCS service account key is a file the file names).
//! - `archive-async=y`: PostgreSQL's archiver returns at once while a
//!   pgBackRest process pushes segments in parallel; its spool (status
//!   files, not WAL copies) lives on the data volume. No
//!   `archive-push-queue-max`: when the repository fails, WAL is kept
//!   in `pg_wal` (never dropped), and the failure is reported instead.

use std::fmt::Write as _;

mod backup;
mod repository;
mod restore;
mod server;
mod stanza;

pub use backup::*;
pub use repository::*;
pub use restore::*;
pub use server::*;
pub use stanza::*;

use repository::no_line_break;

/// Environment variable holding the S3 access key id.
pub const S3_KEY_ENV: &str = "PGBACKREST_REPO1_S3_KEY";
/// Environment variable holding the S3 secret access key.
pub const S3_KEY_SECRET_ENV: &str = "PGBACKREST_REPO1_S3_KEY_SECRET";
/// Environment variable holding the Azure storage account's name.
pub const AZURE_ACCOUNT_ENV: &str = "PGBACKREST_REPO1_AZURE_ACCOUNT";
/// Environment variable holding the Azure storage account's shared key.
pub const AZURE_KEY_ENV: &str = "PGBACKREST_REPO1_AZURE_KEY";
/// The program, found on `PATH` (`/usr/bin/pgbackrest` from Debian's package).
pub const PROGRAM: &str = "pgbackrest";

/// One stanza: the cluster's PostgreSQL as pgBackRest sees it from inside
/// the instance, and where it archives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stanza {
    /// The stanza's name (the cluster's name).
    pub name: String,
    pub repository: Repository,
    /// `repo1-path`: see [`Repository::cluster_path`].
    pub repository_path: String,
    /// PGDATA.
    pub pgdata: String,
    /// PostgreSQL's unix socket directory and port, for `stanza-create`.
    pub socket_dir: String,
    pub port: u16,
    /// The database superuser pgBackRest connects as (peer authentication).
    pub superuser: String,
    /// Asynchronous archiving's status files: on the data volume, so they
    /// survive a restart of the pod.
    pub spool_path: String,
    /// pgBackRest's own log files (the root file system is read-only).
    pub log_path: String,
    /// Lock files (one `archive-push` at a time).
    pub lock_path: String,
}

/// How long an asynchronous WAL push, and the short commands the manager
/// runs itself (`stanza-create`, `stanza-upgrade`, `info`), wait on a
/// silent object store before giving up on an attempt (pgBackRest's
/// `io-timeout`, 60 s by default). pgBackRest retries a connection and a
/// request for several times this before it gives up and says why
/// (connection refused, a name that does not resolve, a TLS failure): at
/// 60 s that is three minutes and more, while `archive_command` itself
/// gives up after `archive-timeout` (60 s) saying only that the push timed
/// out, and the manager stops a `stanza-create` after three minutes
/// knowing only that it took too long. At 5 s the reason is recorded
/// about 45 s into an outage, within the first `archive_command`. A push
/// that fails is retried by PostgreSQL, and its segment waits in `pg_wal`
/// meanwhile, so a store that is only slow costs a retry, never WAL.
/// Backups and restores keep the default.
pub const SHORT_IO_TIMEOUT_SECONDS: u32 = 5;

/// The commands that run with [`SHORT_IO_TIMEOUT_SECONDS`].
const SHORT_COMMANDS: [&str; 4] = ["archive-push", "stanza-create", "stanza-upgrade", "info"];

/// Files a backup or a restore moves at once (pgBackRest's `process-max`
/// for those two commands; archiving keeps one). An object store answers
/// each file with its own requests, so one file at a time spends a small
/// database's backup waiting on round trips: see docs/benchmarks.md
/// ("Backups, restores and restore rehearsals").
pub const TRANSFER_PROCESSES: u32 = 4;

/// `pgbackrest.conf` for `stanza`.
pub fn render_conf(stanza: &Stanza) -> Result<String, RepositoryError> {
    let mut global = stanza.repository.options(&stanza.repository_path);
    global.extend([
        ("archive-async", "y".into()),
        ("spool-path", stanza.spool_path.clone()),
        ("log-path", stanza.log_path.clone()),
        ("lock-path", stanza.lock_path.clone()),
        ("log-level-console", "warn".into()),
        ("log-level-stderr", "off".into()),
        ("log-level-file", "info".into()),
        ("compress-type", "zst".into()),
    ]);
    let local: Vec<(&str, String)> = vec![
        ("pg1-path", stanza.pgdata.clone()),
        ("pg1-socket-path", stanza.socket_dir.clone()),
        ("pg1-port", stanza.port.to_string()),
        ("pg1-user", stanza.superuser.clone()),
    ];
    let mut out = String::from(
        "# Rendered by the Tusk instance manager from spec.backup; changes are overwritten.\n\
         # The repository keys come from the environment, never from this file.\n",
    );
    section(&mut out, "global", &global)?;
    for command in SHORT_COMMANDS {
        section(
            &mut out,
            &format!("global:{command}"),
            &[("io-timeout", SHORT_IO_TIMEOUT_SECONDS.to_string())],
        )?;
    }
    for command in ["global:backup", "global:restore"] {
        section(
            &mut out,
            command,
            &[("process-max", TRANSFER_PROCESSES.to_string())],
        )?;
    }
    section(&mut out, &stanza.name, &local)?;
    Ok(out)
}

fn section(
    out: &mut String,
    name: &str,
    options: &[(&str, String)],
) -> Result<(), RepositoryError> {
    no_line_break(name)?;
    let _ = writeln!(out, "\n[{name}]");
    for (key, value) in options {
        no_line_break(value)?;
        let _ = writeln!(out, "{key}={value}");
    }
    Ok(())
}

/// The arguments every pgBackRest command of `stanza` starts with.
pub fn base_args(config_file: &str, stanza: &str) -> Vec<String> {
    vec![
        format!("--config={config_file}"),
        format!("--stanza={stanza}"),
    ]
}

/// `archive_command`: pgBackRest pushes `%p` (the segment's path) to the
/// repository. The arguments are quoted for the shell PostgreSQL runs it
/// through.
pub fn archive_command(config_file: &str, stanza: &str) -> String {
    let mut words: Vec<String> = vec![PROGRAM.to_owned()];
    words.extend(
        base_args(config_file, stanza)
            .iter()
            .map(|a| shell_quote(a)),
    );
    words.push("archive-push".into());
    words.push("\"%p\"".into());
    words.join(" ")
}

fn shell_quote(word: &str) -> String {
    let plain = word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_=./:@+,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Where asynchronous `archive-push` leaves its status files for `stanza`
/// under the spool path.
pub fn archive_status_dir(spool_path: &str, stanza: &str) -> String {
    format!("{spool_path}/archive/{stanza}/out")
}

/// The error in a line pgBackRest printed on standard error (as
/// `archive_command` does, into PostgreSQL's output): `[code]: message`,
/// from a line holding `ERROR: [code]:`. PostgreSQL's own errors
/// (`ERROR:  text`) carry no code in brackets and are not taken.
pub fn stderr_error(line: &str) -> Option<String> {
    let at = line.find("ERROR: [")?;
    let error = line[at + "ERROR: ".len()..].trim();
    error
        .split_once("]:")
        .is_some_and(|(code, _)| code.len() > 1 && code[1..].chars().all(|c| c.is_ascii_digit()))
        .then(|| explained(error.to_owned()))
}

/// `message` with what to do about it, where pgBackRest's own words do
/// not say: a pgBackRest older than the PostgreSQL major it serves reads
/// `pg_control` as "unexpected control version" (Debian 12's 2.45 knows
/// PostgreSQL up to 15; the images carry 2.55, which knows 18).
pub fn explained(message: String) -> String {
    if message.contains("unexpected control version") {
        format!(
            "{message} (this pgBackRest does not know this PostgreSQL major: the image needs a \
             newer pgBackRest: 2.47 for PostgreSQL 16, 2.53 for 17, 2.55 for 18; see docs/backup.md)"
        )
    } else {
        message
    }
}

/// The message of an asynchronous push's `.error` status file: pgBackRest
/// writes the error code on the first line and the message after it. Its
/// generic hints (`HINT: has a stanza-create been performed?`) and a cause
/// repeated for each file it tried are left out.
pub fn status_file_message(contents: &str) -> Option<String> {
    let mut lines = contents.lines();
    let code = lines.next()?.trim();
    let mut kept: Vec<&str> = Vec::new();
    for line in lines.map(str::trim) {
        if !line.is_empty() && !line.starts_with("HINT:") && !kept.contains(&line) {
            kept.push(line);
        }
    }
    let message = kept.join(" ");
    match (code.is_empty(), message.is_empty()) {
        (true, true) => None,
        (false, true) => Some(format!("pgBackRest error {code}")),
        (true, false) => Some(explained(message)),
        (false, false) => Some(explained(format!("{message} (pgBackRest error {code})"))),
    }
}

/// The gist of a failed pgBackRest command's output: its `ERROR:` line,
/// the request that failed and, for an object-store refusal, the service's
/// error code and message (the request's headers, which pgBackRest prints
/// redacted, are left out).
pub fn error_summary(output: &str) -> Option<String> {
    // Console lines may carry a time and process prefix (`P00  ERROR: ...`).
    let error = output
        .lines()
        .find_map(|l| l.find("ERROR:").map(|at| &l[at..]))?
        .trim()
        .trim_end_matches(':');
    let mut lines = output.lines().map(str::trim);
    let request = lines
        .by_ref()
        .find(|l| *l == "*** Path/Query ***:")
        .and_then(|_| lines.next())
        .filter(|l| !l.is_empty());
    let error = match request {
        Some(request) => format!("{error} ({request})"),
        None => error.to_owned(),
    };
    let between = |open: &str, close: &str| {
        let start = output.find(open)? + open.len();
        let end = output[start..].find(close)? + start;
        Some(output[start..end].to_owned())
    };
    Some(explained(
        match (
            between("<Code>", "</Code>"),
            between("<Message>", "</Message>"),
        ) {
            (Some(code), Some(message)) => format!("{error}: {code}: {message}"),
            (Some(code), None) => format!("{error}: {code}"),
            _ => error,
        },
    ))
}

#[cfg(test)]
mod tests;
