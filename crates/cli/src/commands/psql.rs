//! `tusk psql CLUSTER [--superuser] [-- PSQL ARGS]`: runs `psql` against
//! the cluster's read-write Service (`<cluster>-rw`, its cluster IP, port
//! 5432) as the application owner, or the superuser, with the password the
//! operator keeps in the credentials Secret (`<cluster>-app`,
//! `<cluster>-superuser`), read through the API and handed to psql in
//! `PGPASSWORD`, never on the command line.
//!
//! The server is verified (`sslmode=verify-full`): by the Service's name
//! (`<cluster>-rw.<namespace>.svc`, which its certificate carries, with
//! the cluster IP as `hostaddr`) against the cluster's authority from
//! `<cluster>-ca`, written to `~/.cache/tusk/<namespace>.<cluster>.ca.crt`
//! for psql (`PGSSLROOTCERT`). A cluster without that Secret is reached as
//! psql's defaults say.
//!
//! `--print` prints the psql command instead, with the password replaced
//! by the kubectl command that reads it, so the line can be run as it is.

use std::process::ExitCode;

use k8s_openapi::api::core::v1::{Secret, Service};
use tusk_api::contract::{
    CA_KEY, Credential, PASSWORD_KEY, POSTGRES_PORT, TlsSecret, USERNAME_KEY,
};

use super::CommandError;
use super::cluster_access::{ClusterRef, Target, block_on, kubernetes};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: ClusterRef,
    /// Connect as the PostgreSQL superuser instead of the application owner.
    #[arg(long)]
    pub superuser: bool,
    /// Print the psql command (password hidden) instead of running it.
    #[arg(long)]
    pub print: bool,
    /// The psql program.
    #[arg(long, env = "TUSK_PSQL", default_value = "psql")]
    pub psql: String,
    /// Arguments passed on to psql (after `--`).
    #[arg(last = true)]
    pub extra: Vec<String>,
}

/// Where and as whom to connect.
#[derive(Clone, Debug, PartialEq)]
pub struct Connection {
    pub namespace: String,
    pub cluster: String,
    pub host: String,
    pub port: u16,
    pub user: String,
    pub dbname: String,
    /// The Secret holding the password.
    pub secret: String,
    pub password: String,
    /// The authority the server's certificate chains to, when known.
    pub ca: Option<ServerAuthority>,
}

/// The authority PostgreSQL's certificate chains to: the cluster's own
/// (`<cluster>-ca`), or the owner's issuer's
/// (`spec.certificates.serverSecret`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerAuthority {
    /// The Secret whose `ca.crt` holds it.
    pub secret: String,
    /// Its certificate (PEM).
    pub pem: String,
}

impl Connection {
    /// libpq connection settings, without the password: the server
    /// verified by the Service's name when the cluster's authority is
    /// known.
    pub fn conninfo(&self) -> String {
        let user = conninfo_value(&self.user);
        let dbname = conninfo_value(&self.dbname);
        match &self.ca {
            Some(_) => format!(
                "host={}-rw.{}.svc hostaddr={} port={} user={user} dbname={dbname} sslmode=verify-full",
                self.cluster, self.namespace, self.host, self.port
            ),
            None => format!(
                "host={} port={} user={user} dbname={dbname}",
                self.host, self.port
            ),
        }
    }

    /// Where psql finds the authority, under `home`.
    fn ca_file(&self, home: &str) -> String {
        format!(
            "{home}/.cache/tusk/{}.{}.ca.crt",
            self.namespace, self.cluster
        )
    }

    /// A shell line running psql, with the password (and the authority)
    /// read by kubectl.
    pub fn command_line(&self, psql: &str, extra: &[String]) -> String {
        let authority = match &self.ca {
            Some(authority) => format!(
                "mkdir -p \"$HOME/.cache/tusk\" && kubectl get secret {} -n {} -o jsonpath='{{.data.ca\\.crt}}' | base64 -d > \"{file}\" && PGSSLROOTCERT=\"{file}\" ",
                authority.secret,
                self.namespace,
                file = self.ca_file("$HOME"),
            ),
            None => String::new(),
        };
        let mut line = format!(
            "{authority}PGPASSWORD=\"$(kubectl get secret {} -n {} -o jsonpath='{{.data.{PASSWORD_KEY}}}' | base64 -d)\" {} {}",
            self.secret,
            self.namespace,
            shell_quote(psql),
            shell_quote(&self.conninfo())
        );
        for arg in extra {
            line.push(' ');
            line.push_str(&shell_quote(arg));
        }
        line
    }
}

/// A libpq value, quoted when it needs to be.
fn conninfo_value(value: &str) -> String {
    if !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
    {
        return value.to_owned();
    }
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// `value` as one shell word.
pub fn shell_quote(value: &str) -> String {
    if !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./=:,@".contains(&b))
    {
        return value.to_owned();
    }
    format!("'{}'", value.replace('\'', "'\\''"))
}

fn secret_field(secret: &Secret, key: &str) -> Result<String, CommandError> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .ok_or_else(|| CommandError::Kubernetes(format!("Secret {name} has no key {key}")))?;
    String::from_utf8(bytes.0.clone())
        .map_err(|_| CommandError::Kubernetes(format!("Secret {name}: {key} is not UTF-8")))
}

/// The connection to `cluster`'s read-write Service.
pub async fn connection(
    target: &Target,
    cluster: &str,
    superuser: bool,
) -> Result<Connection, CommandError> {
    let spec = target.cluster(cluster).await?.spec;
    let service_name = format!("{cluster}-rw");
    let service = target
        .api::<Service>()
        .get_opt(&service_name)
        .await
        .map_err(kubernetes)?
        .ok_or_else(|| {
            CommandError::Kubernetes(format!(
                "no Service {service_name} in namespace {} (has the operator created the cluster yet?)",
                target.namespace
            ))
        })?;
    let host = service
        .spec
        .and_then(|s| s.cluster_ip)
        .filter(|ip| !ip.is_empty() && ip != "None")
        .ok_or_else(|| {
            CommandError::Kubernetes(format!("Service {service_name} has no cluster IP"))
        })?;
    if superuser && !spec.postgres.superuser_access {
        return Err(CommandError::Kubernetes(format!(
            "the superuser of {cluster} may not log in over the network \
             (spec.postgres.superuserAccess is false); set it to true to allow it, \
             or connect as the application owner without --superuser"
        )));
    }
    let credential = if superuser {
        Credential::Superuser
    } else {
        Credential::App
    };
    let secret_name = credential.secret_name(cluster);
    let secret = target
        .api::<Secret>()
        .get_opt(&secret_name)
        .await
        .map_err(kubernetes)?
        .ok_or_else(|| {
            CommandError::Kubernetes(format!(
                "no Secret {secret_name} in namespace {}",
                target.namespace
            ))
        })?;
    let ca_secret = spec.certificates.as_ref().map_or_else(
        || TlsSecret::Ca.secret_name(cluster),
        |own| own.server_secret.clone(),
    );
    let ca = target
        .api::<Secret>()
        .get_opt(&ca_secret)
        .await
        .map_err(kubernetes)?
        .map(|secret| secret_field(&secret, CA_KEY))
        .transpose()?
        .map(|pem| ServerAuthority {
            secret: ca_secret,
            pem,
        });
    Ok(Connection {
        namespace: target.namespace.clone(),
        cluster: cluster.to_owned(),
        host,
        port: POSTGRES_PORT,
        user: secret_field(&secret, USERNAME_KEY)?,
        dbname: spec.initdb().database,
        secret: secret_name,
        password: secret_field(&secret, PASSWORD_KEY)?,
        ca,
    })
}

/// How to connect to `cluster`, for `tusk sandbox up` to print once the
/// cluster is ready: the plugin command, then the psql line it runs.
pub async fn how_to_connect(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    kubeconfig: &std::path::Path,
) -> Result<String, CommandError> {
    let target = Target {
        client: client.clone(),
        namespace: namespace.to_owned(),
    };
    let connection = connection(&target, cluster, false).await?;
    let exe =
        std::env::current_exe().map_or_else(|_| "tusk".to_owned(), |p| p.display().to_string());
    Ok(format!(
        "{cluster} is ready; connect with (after export KUBECONFIG={kubeconfig}):\n  \
         kubectl tusk psql {cluster}\n  \
         {line}\n\
         kubectl finds `kubectl tusk` once kubectl-tusk is on PATH: ln -s {exe} ~/.local/bin/kubectl-tusk\n\
         more: kubectl tusk status {cluster}; kubectl tusk why {cluster}; docs/getting-started.md",
        kubeconfig = shell_quote(&kubeconfig.display().to_string()),
        line = connection.command_line("psql", &[]),
        exe = shell_quote(&exe),
    ))
}

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    let connection = block_on(async {
        let target = Target::connect(args.at.namespace.as_deref()).await?;
        connection(&target, &args.at.cluster, args.superuser).await
    })?;
    if args.print {
        outln!("{}", connection.command_line(&args.psql, &args.extra))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut command = std::process::Command::new(&args.psql);
    command
        .arg(connection.conninfo())
        .args(&args.extra)
        .env("PGPASSWORD", &connection.password);
    if let Some(ca) = &connection.ca {
        let home = std::env::var("HOME").unwrap_or_else(|_| "/tmp".to_owned());
        let file = std::path::PathBuf::from(connection.ca_file(&home));
        let write = |path: &std::path::Path| {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(path, &ca.pem)
        };
        write(&file).map_err(|error| {
            CommandError::Kubernetes(format!(
                "cannot write the cluster's authority to {}: {error}",
                file.display()
            ))
        })?;
        command.env("PGSSLROOTCERT", &file);
    }
    let error = std::os::unix::process::CommandExt::exec(&mut command);
    Err(CommandError::Kubernetes(format!(
        "cannot run {}: {error}",
        args.psql
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection(user: &str) -> Connection {
        Connection {
            namespace: "shop".into(),
            cluster: "db".into(),
            host: "10.96.0.7".into(),
            port: 5432,
            user: user.into(),
            dbname: "app".into(),
            secret: "db-app".into(),
            password: "s3cret".into(),
            ca: None,
        }
    }

    #[test]
    fn with_the_cluster_authority_the_server_is_verified_by_the_service_name() {
        let verified = Connection {
            ca: Some(ServerAuthority {
                secret: "db-ca".into(),
                pem: "-----BEGIN CERTIFICATE-----".into(),
            }),
            ..connection("app")
        };
        assert_eq!(
            verified.conninfo(),
            "host=db-rw.shop.svc hostaddr=10.96.0.7 port=5432 user=app dbname=app sslmode=verify-full"
        );
        let line = verified.command_line("psql", &[]);
        assert_eq!(
            line,
            "mkdir -p \"$HOME/.cache/tusk\" && kubectl get secret db-ca -n shop -o jsonpath='{.data.ca\\.crt}' | base64 -d > \"$HOME/.cache/tusk/shop.db.ca.crt\" && \
             PGSSLROOTCERT=\"$HOME/.cache/tusk/shop.db.ca.crt\" \
             PGPASSWORD=\"$(kubectl get secret db-app -n shop -o jsonpath='{.data.password}' | base64 -d)\" \
             psql 'host=db-rw.shop.svc hostaddr=10.96.0.7 port=5432 user=app dbname=app sslmode=verify-full'"
        );
    }

    #[test]
    fn the_printed_line_reads_the_password_and_never_shows_it() {
        let line = connection("app").command_line("psql", &["-c".into(), "select 1".into()]);
        assert_eq!(
            line,
            "PGPASSWORD=\"$(kubectl get secret db-app -n shop -o jsonpath='{.data.password}' | base64 -d)\" \
             psql 'host=10.96.0.7 port=5432 user=app dbname=app' -c 'select 1'"
        );
        assert!(!line.contains("s3cret"));
    }

    #[test]
    fn odd_values_are_quoted() {
        assert_eq!(
            connection("o'brien").conninfo(),
            "host=10.96.0.7 port=5432 user='o\\'brien' dbname=app"
        );
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
