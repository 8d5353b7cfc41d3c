//! Operator-wide settings that are not part of any cluster's spec: which
//! image carries the instance manager and which user PostgreSQL runs as.

/// Settings of one operator deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorConfig {
    /// Image holding the `tusk` binary; an init container copies it into
    /// every PostgreSQL pod (the instance manager is injected, so any
    /// PostgreSQL image of the right major works).
    pub operator_image: String,
    /// Image used when a cluster does not name one; `{version}` is replaced
    /// by the PostgreSQL major version.
    pub default_postgres_image: String,
    /// User and group id PostgreSQL runs as inside its pods (999 in the
    /// official `postgres` images). Never 0: PostgreSQL refuses root.
    pub postgres_uid: i64,
    pub postgres_gid: i64,
    /// Seconds a pod gets to stop cleanly (fast shutdown, then immediate).
    pub termination_grace_period_seconds: i64,
    /// Clusters that roll their pods at once for nothing but a new
    /// operator version (see [`crate::rollout::slots`]).
    pub max_concurrent_upgrades: u16,
}

impl Default for OperatorConfig {
    fn default() -> Self {
        Self {
            // The instance manager must match this operator: never a
            // floating tag.
            operator_image: crate::install::operator_image(),
            default_postgres_image: "postgres:{version}".to_owned(),
            postgres_uid: 999,
            postgres_gid: 999,
            termination_grace_period_seconds: 120,
            max_concurrent_upgrades: crate::rollout::slots::DEFAULT_LIMIT,
        }
    }
}

impl OperatorConfig {
    /// The image for PostgreSQL `version` when the spec names none.
    pub fn postgres_image(&self, version: u32) -> String {
        self.default_postgres_image
            .replace("{version}", &version.to_string())
    }
}
