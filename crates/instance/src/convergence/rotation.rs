//! Credentials that follow the mounted Secrets while the manager runs: the
//! kubelet rewrites a Secret volume when the Secret changes (within about
//! a minute), and the manager, reading the files on every tick, takes the
//! new passwords. On the primary they are set in PostgreSQL (as SCRAM
//! verifiers, with statement logging off: see [`crate::passwords`]); on
//! every instance the replication password file is rewritten, which the
//! WAL receiver reads at its next connection. Established sessions are
//! not touched, and nothing restarts. A changed user name is refused: the
//! roles keep their names, and the manager keeps the credentials it has.
//!
//! Certificates follow the same way: a renewed server or replication
//! certificate is copied where PostgreSQL reads it ([`crate::tls`]) and
//! PostgreSQL reloads, which new sessions see; established sessions keep
//! theirs.

use super::Manager;
use crate::desired::DesiredStateSource;
use crate::settings::Credentials;

impl<S: DesiredStateSource> Manager<S> {
    /// Takes rotated passwords from the mounted Secrets. A Secret that
    /// cannot be read, or renames a user, is logged once and the
    /// credentials in use stay.
    pub(super) fn follow_credentials(&mut self) {
        let read = Credentials::read(&self.ctx.settings.secrets_dir)
            .map_err(|error| error.to_string())
            .and_then(|newer| {
                let rotated = self.ctx.settings.credentials.rotated(&newer).map_err(|name| {
                    format!("the user name in the {name} credentials changed; a user is not renamed, the credentials in use stay")
                })?;
                Ok((newer, rotated))
            });
        let (newer, rotated) = match read {
            Ok(found) => {
                self.credentials_problem = None;
                found
            }
            Err(problem) => {
                if self.credentials_problem.as_ref() != Some(&problem) {
                    tracing::warn!(%problem, "cannot follow the mounted credentials");
                    self.credentials_problem = Some(problem);
                }
                return;
            }
        };
        if rotated.is_empty() {
            return;
        }
        self.ctx.settings.credentials = newer;
        if let Err(error) = self.ctx.prepare_run_dir() {
            tracing::warn!(%error, "cannot rewrite the replication password file");
        }
        // The primary sets them at its next step.
        self.passwords_converged = false;
        tracing::info!(credentials = ?rotated, "rotated passwords found in the mounted Secrets");
    }

    /// Copies renewed certificates from the mounted Secrets and asks for a
    /// reload. A certificate that cannot be read is logged once; the
    /// copies in use stay.
    pub(super) fn follow_certificates(&mut self) {
        match self.ctx.install_certificates() {
            Ok(changed) => {
                self.certificates_problem = None;
                // A server that is not running reads them when it starts.
                if changed && self.postmaster.is_some() {
                    tracing::info!("renewed certificates found in the mounted Secrets");
                    self.reload_pending = true;
                }
            }
            Err(error) => {
                let problem = error.to_string();
                if self.certificates_problem.as_ref() != Some(&problem) {
                    tracing::warn!(%problem, "cannot follow the mounted certificates");
                    self.certificates_problem = Some(problem);
                }
            }
        }
    }
}
