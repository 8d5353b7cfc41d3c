//! Major-version upgrades with `pg_upgrade`: the arguments of each step
//! and how to read what the programs print. Running them is the instance
//! manager's (`tusk_instance::major_upgrade`).

use std::ffi::OsString;
use std::path::Path;

/// How every cluster Tusk creates is initialised besides its checksums
/// and superuser: `pg_upgrade` needs the new cluster to match the old one.
pub const INITDB_LOCALE_ARGS: [&str; 2] = ["--encoding=UTF8", "--locale=C"];

/// The first major whose `initdb` turns data checksums on by default (and
/// knows `--no-data-checksums`).
const CHECKSUMS_BY_DEFAULT: u32 = 18;

/// Whether a cluster has data checksums, from `pg_controldata`'s output
/// (`Data page checksum version: 1`); `None` when the line is missing.
pub fn checksums_enabled(controldata: &str) -> Option<bool> {
    controldata.lines().find_map(|line| {
        let value = line.strip_prefix("Data page checksum version:")?.trim();
        value.parse::<u32>().ok().map(|version| version != 0)
    })
}

/// `initdb`'s arguments for the new cluster of `major` beside a cluster
/// with (or without) data checksums: the same checksums, encoding and
/// locale, and the same superuser, which connects over the local socket
/// by peer authentication while `pg_upgrade` runs (the old cluster's
/// `pg_hba.conf` and `pg_ident.conf` are copied over it afterwards).
pub fn initdb_args(new_data: &Path, major: u32, checksums: bool, superuser: &str) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["--pgdata".into(), new_data.into()];
    match (checksums, major >= CHECKSUMS_BY_DEFAULT) {
        (true, _) => args.push("--data-checksums".into()),
        (false, true) => args.push("--no-data-checksums".into()),
        (false, false) => {}
    }
    args.extend(INITDB_LOCALE_ARGS.map(OsString::from));
    args.extend([
        "--auth-local=peer".into(),
        "--auth-host=scram-sha-256".into(),
        "--username".into(),
        superuser.into(),
    ]);
    args
}

/// The lines of a `pg_hba.conf` the servers `pg_upgrade` starts need: the
/// local ones (they listen on a private socket only). The network lines
/// may name methods the new major's build lacks (`cert` in a build without
/// SSL refuses to start); the instance manager writes the whole file again
/// at the next start.
pub fn local_access(hba: &str) -> String {
    let mut kept: String = hba
        .lines()
        .filter(|line| {
            let first = line.split_whitespace().next().unwrap_or("#");
            first.starts_with('#') || first == "local"
        })
        .collect::<Vec<_>>()
        .join("\n");
    kept.push('\n');
    kept
}

/// What the old cluster's server runs with while `pg_upgrade` reads it.
pub const OLD_SERVER_OPTIONS: &str = "-c ssl=off -c archive_mode=off";

/// Where the two clusters and their programs are.
#[derive(Clone, Debug)]
pub struct Clusters<'a> {
    pub old_bin: &'a Path,
    pub new_bin: &'a Path,
    pub old_data: &'a Path,
    pub new_data: &'a Path,
    /// The directory of the temporary servers' sockets: private to this
    /// upgrade, so two upgrades on one machine never meet, and no one else
    /// connects meanwhile.
    pub socket_dir: &'a Path,
    pub superuser: &'a str,
}

/// What one `pg_upgrade` run does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `--check`: compatibility only; neither cluster is changed.
    Check,
    /// `--link`: the new cluster takes the old one's files by hard link.
    /// Until the new cluster is first started, the old one can be brought
    /// back (its `global/pg_control.old` renamed to `pg_control`); after
    /// that, only a backup or a replica of the old major brings it back.
    Link,
}

/// `pg_upgrade`'s arguments.
pub fn pg_upgrade_args(clusters: &Clusters<'_>, mode: Mode) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "--old-bindir".into(),
        clusters.old_bin.into(),
        "--new-bindir".into(),
        clusters.new_bin.into(),
        "--old-datadir".into(),
        clusters.old_data.into(),
        "--new-datadir".into(),
        clusters.new_data.into(),
        "--socketdir".into(),
        clusters.socket_dir.into(),
        "--username".into(),
        clusters.superuser.into(),
        // The old cluster's configuration is the instance manager's, which
        // names TLS files and an archive command of the instance's pod:
        // neither is there for `pg_upgrade`'s private server (the manager
        // writes its configuration again at the next start).
        format!("--old-options={OLD_SERVER_OPTIONS}").into(),
    ];
    args.push(match mode {
        Mode::Check => "--check".into(),
        Mode::Link => "--link".into(),
    });
    args
}

/// The gist of a failed `pg_upgrade`: the check that failed (its line
/// ending in `fatal`) and what followed it up to `Failure, exiting`, on
/// one line; the report files it names are `files`.
pub fn failure_summary(output: &str) -> (String, Vec<String>) {
    let lines: Vec<&str> = output.lines().map(str::trim).collect();
    let start = lines
        .iter()
        .position(|l| {
            l.ends_with("fatal")
                || l.ends_with("*failure*")
                || l.starts_with("error")
                || l.contains("FATAL")
        })
        .unwrap_or(0);
    let mut summary = Vec::new();
    let mut files = Vec::new();
    for line in &lines[start..] {
        if line.is_empty() || line.starts_with("Failure, exiting") {
            continue;
        }
        if line.starts_with('/') && line.ends_with(".txt") {
            files.push((*line).to_owned());
        }
        // "Consult the last few lines of "/…/pg_upgrade_server.log" for the
        // probable cause of the failure."
        if let Some((_, rest)) = line.split_once("the last few lines of \"")
            && let Some((path, _)) = rest.split_once('"')
        {
            files.push(path.to_owned());
        }
        summary.push(line.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    (summary.join(" "), files)
}

/// The part of a log `pg_upgrade` names that says why it failed, at most
/// `max` lines: from the first error a client program (`pg_restore`,
/// `psql`) or the server reported, or else the log's last lines.
pub fn log_gist(log: &str, max: usize) -> Vec<&str> {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let cause = lines
        .iter()
        .position(|l| l.contains(" error: ") || l.starts_with("ERROR:") || l.starts_with("FATAL:"));
    match cause {
        Some(first) => lines[first..].iter().take(max).copied().collect(),
        None => lines[lines.len().saturating_sub(max)..].to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_state_is_read_from_pg_controldata() {
        let on = "pg_control version number:            1300\n\
                  Data page checksum version:           1\n";
        let off = "Data page checksum version:           0\n";
        assert_eq!(checksums_enabled(on), Some(true));
        assert_eq!(checksums_enabled(off), Some(false));
        assert_eq!(checksums_enabled("pg_control version number: 1300"), None);
    }

    #[test]
    fn the_new_cluster_matches_the_old_ones_checksums() {
        let has = |args: &[OsString], flag: &str| args.iter().any(|a| a == flag);
        let dir = Path::new("/data/pgdata.16");
        let with = initdb_args(dir, 16, true, "postgres");
        assert!(has(&with, "--data-checksums") && !has(&with, "--no-data-checksums"));
        // 18 turns them on by default: a cluster without them must say so.
        let without_18 = initdb_args(dir, 18, false, "postgres");
        assert!(has(&without_18, "--no-data-checksums"));
        let without_17 = initdb_args(dir, 17, false, "postgres");
        assert!(!has(&without_17, "--no-data-checksums") && !has(&without_17, "--data-checksums"));
        assert!(has(&with, "--locale=C") && has(&with, "--encoding=UTF8"));
    }

    #[test]
    fn a_failed_check_is_summed_up_with_its_report_files() {
        let output = "Performing Consistency Checks\n\
            -----------------------------\n\
            Checking cluster versions                                     ok\n\
            Checking for presence of required libraries                   fatal\n\
            \n\
            Your installation references loadable libraries that are missing from the\n\
            new installation.  You can add these libraries to the new installation,\n\
            or remove the functions using them from the old installation.  A list of\n\
            problem libraries is in the file:\n    \
            /data/pgdata.16/pg_upgrade_output.d/20261205T094500.123/loadable_libraries.txt\n\
            Failure, exiting\n";
        let (summary, files) = failure_summary(output);
        assert!(
            summary
                .starts_with("Checking for presence of required libraries fatal Your installation"),
            "{summary}"
        );
        assert!(!summary.contains("Failure, exiting"), "{summary}");
        assert_eq!(
            files,
            ["/data/pgdata.16/pg_upgrade_output.d/20261205T094500.123/loadable_libraries.txt"]
        );
    }

    #[test]
    fn a_failed_schema_restore_is_summed_up_from_its_cause() {
        let output = "Performing Upgrade\n\
            ------------------\n\
            Restoring global objects in the new cluster                   ok\n\
            Restoring database schemas in the new cluster\n                                                            \
            *failure*\n\
            \n\
            Consult the last few lines of \"/d/pg_upgrade_output.d/x/log/pg_upgrade_dump_5.log\" for\n\
            the probable cause of the failure.\n\
            Failure, exiting\n";
        let (summary, files) = failure_summary(output);
        assert!(summary.starts_with("*failure* Consult"), "{summary}");
        assert_eq!(
            files,
            ["/d/pg_upgrade_output.d/x/log/pg_upgrade_dump_5.log"]
        );

        let log = "pg_restore: creating TABLE \"public.words\"\n\
            pg_restore: creating VIEW \"public.backend_writes\"\n\
            pg_restore: while PROCESSING TOC:\n\
            pg_restore: from TOC entry 220; 1259 16495 VIEW backend_writes postgres\n\
            pg_restore: error: could not execute query: ERROR:  column pg_stat_bgwriter.buffers_backend does not exist\n\
            LINE 2:     pg_stat_bgwriter.buffers_backend\n\
            Command was:\n\
            CREATE VIEW \"public\".\"backend_writes\" AS\n\
            SELECT 1;\n";
        let gist = log_gist(log, 3);
        assert_eq!(gist.len(), 3, "{gist:?}");
        assert!(
            gist[0].contains("buffers_backend does not exist"),
            "{gist:?}"
        );
        // No error in it: the log's last lines.
        assert_eq!(log_gist("a\nb\n\nc\n", 2), ["b", "c"]);
    }

    #[test]
    fn only_the_local_lines_of_pg_hba_go_to_the_new_cluster() {
        let hba = "# TYPE DATABASE USER ADDRESS METHOD\n\
                   local   all  postgres  peer map=tusk\n\
                   local   all  all   scram-sha-256\n\
                   hostssl replication  streaming_replica  all  cert\n\
                   host    all  postgres  all  reject\n";
        assert_eq!(
            local_access(hba),
            "# TYPE DATABASE USER ADDRESS METHOD\n\
             local   all  postgres  peer map=tusk\n\
             local   all  all   scram-sha-256\n"
        );
    }

    #[test]
    fn an_old_server_that_does_not_start_points_at_its_log_and_runs_without_tls_or_archiving() {
        let output = "Checking cluster versions ok

*failure*
            Consult the last few lines of \"/data/pgdata.16/log/pg_upgrade_server.log\" for
            the probable cause of the failure.
";
        let (_, files) = failure_summary(output);
        assert_eq!(files, ["/data/pgdata.16/log/pg_upgrade_server.log"]);
        let clusters = Clusters {
            old_bin: Path::new("/old/bin"),
            new_bin: Path::new("/new/bin"),
            old_data: Path::new("/data/pgdata"),
            new_data: Path::new("/data/pgdata.16"),
            socket_dir: Path::new("/run/upgrade"),
            superuser: "postgres",
        };
        let args = pg_upgrade_args(&clusters, Mode::Check);
        assert!(
            args.iter()
                .any(|a| a == "--old-options=-c ssl=off -c archive_mode=off"),
            "{args:?}"
        );
    }
}
