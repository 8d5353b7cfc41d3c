//! Operator-wide settings that are not part of any cluster's spec: which
//! image carries the instance manager and which user PostgreSQL runs as.
//!
//! `tusk operator` takes each from a flag or its environment variable
//! ([`setting`]); `tusk plan` reads them from the operator's Deployment
//! ([`OperatorConfig::from_container`]), so that it plans with the
//! settings the running operator has.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Container;

/// The environment variable of each setting; its flag is the same name
/// without `TUSK_`, in lower case with dashes ([`flag_of`]).
pub mod setting {
    pub const OPERATOR_IMAGE: &str = "TUSK_OPERATOR_IMAGE";
    pub const DEFAULT_POSTGRES_IMAGE: &str = "TUSK_DEFAULT_POSTGRES_IMAGE";
    pub const POSTGRES_UID: &str = "TUSK_POSTGRES_UID";
    pub const POSTGRES_GID: &str = "TUSK_POSTGRES_GID";
    pub const MAX_CONCURRENT_UPGRADES: &str = "TUSK_MAX_CONCURRENT_UPGRADES";

    /// Every setting [`super::OperatorConfig`] is read from.
    pub const ALL: [&str; 5] = [
        OPERATOR_IMAGE,
        DEFAULT_POSTGRES_IMAGE,
        POSTGRES_UID,
        POSTGRES_GID,
        MAX_CONCURRENT_UPGRADES,
    ];
}

/// The command-line flag of the setting `env`: `TUSK_POSTGRES_UID` is
/// `--postgres-uid`.
pub fn flag_of(env: &str) -> String {
    let name = env.strip_prefix("TUSK_").unwrap_or(env);
    format!("--{}", name.to_ascii_lowercase().replace('_', "-"))
}

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
    /// The settings `lookup` finds by environment variable name, the
    /// defaults for the others; an error names a setting whose value is
    /// not one.
    pub fn from_settings(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let defaults = Self::default();
        let id = |env: &str, default: i64| match lookup(env) {
            None => Ok(default),
            Some(text) => text
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|id| *id >= 1)
                .ok_or_else(|| format!("{env}: {text:?} is not a user or group id (1 or more)")),
        };
        let limit = match lookup(setting::MAX_CONCURRENT_UPGRADES) {
            None => defaults.max_concurrent_upgrades,
            Some(text) => text
                .trim()
                .parse::<u16>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    format!(
                        "{}: {text:?} is not a number of clusters (1 to 65535)",
                        setting::MAX_CONCURRENT_UPGRADES
                    )
                })?,
        };
        Ok(Self {
            postgres_uid: id(setting::POSTGRES_UID, defaults.postgres_uid)?,
            postgres_gid: id(setting::POSTGRES_GID, defaults.postgres_gid)?,
            operator_image: lookup(setting::OPERATOR_IMAGE).unwrap_or(defaults.operator_image),
            default_postgres_image: lookup(setting::DEFAULT_POSTGRES_IMAGE)
                .unwrap_or(defaults.default_postgres_image),
            max_concurrent_upgrades: limit,
            ..defaults
        })
    }

    /// The settings of the operator container `container` (of its
    /// Deployment), as `tusk operator` would read them there: a flag in its
    /// arguments over the variable in its environment, over the default.
    /// Also the settings whose variable is not a literal value (a
    /// `valueFrom`), which are left at their defaults.
    pub fn from_container(container: &Container) -> Result<(Self, Vec<String>), String> {
        let mut found: BTreeMap<&str, String> = BTreeMap::new();
        let mut unresolved = Vec::new();
        for var in container.env.iter().flatten() {
            let Some(name) = setting::ALL.into_iter().find(|s| *s == var.name) else {
                continue;
            };
            match &var.value {
                Some(value) => {
                    found.insert(name, value.clone());
                }
                None if var.value_from.is_some() => unresolved.push(name.to_owned()),
                None => {
                    found.remove(name);
                }
            }
        }
        let args = container.args.iter().flatten();
        let mut args = args.peekable();
        while let Some(arg) = args.next() {
            for name in setting::ALL {
                let flag = flag_of(name);
                if let Some(value) = arg.strip_prefix(&format!("{flag}=")) {
                    found.insert(name, value.to_owned());
                } else if *arg == flag
                    && let Some(value) = args.peek()
                {
                    found.insert(name, (*value).clone());
                }
            }
        }
        unresolved.retain(|name| !found.contains_key(name.as_str()));
        let config = Self::from_settings(|name| found.get(name).cloned())?;
        Ok((config, unresolved))
    }

    /// The image for PostgreSQL `version` when the spec names none.
    pub fn postgres_image(&self, version: u32) -> String {
        self.default_postgres_image
            .replace("{version}", &version.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(value: serde_json::Value) -> Container {
        serde_json::from_value(value).expect("container")
    }

    #[test]
    fn settings_are_read_from_the_deployments_container_flags_first() {
        let (config, unresolved) = OperatorConfig::from_container(&container(serde_json::json!({
            "name": "operator",
            "args": ["operator", "--postgres-gid=104", "--max-concurrent-upgrades", "3"],
            "env": [
                {"name": "TUSK_OPERATOR_IMAGE", "value": "registry.example/tusk:1.2.3"},
                {"name": "TUSK_POSTGRES_UID", "value": "101"},
                {"name": "TUSK_POSTGRES_GID", "value": "999"},
                {"name": "TUSK_DEFAULT_POSTGRES_IMAGE",
                 "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            ],
        })))
        .expect("settings");
        assert_eq!(config.operator_image, "registry.example/tusk:1.2.3");
        assert_eq!((config.postgres_uid, config.postgres_gid), (101, 104));
        assert_eq!(config.max_concurrent_upgrades, 3);
        assert_eq!(
            config.default_postgres_image,
            OperatorConfig::default().default_postgres_image
        );
        assert_eq!(unresolved, ["TUSK_DEFAULT_POSTGRES_IMAGE"]);
        assert_eq!(flag_of(setting::POSTGRES_UID), "--postgres-uid");
    }

    #[test]
    fn a_setting_that_is_no_value_is_named() {
        let error = OperatorConfig::from_container(&container(serde_json::json!({
            "name": "operator", "env": [{"name": "TUSK_POSTGRES_UID", "value": "0"}],
        })))
        .expect_err("uid 0");
        assert_eq!(
            error,
            "TUSK_POSTGRES_UID: \"0\" is not a user or group id (1 or more)"
        );
        let error = OperatorConfig::from_settings(|name| {
            (name == setting::MAX_CONCURRENT_UPGRADES).then(|| "many".to_owned())
        })
        .expect_err("not a number");
        assert!(
            error.starts_with("TUSK_MAX_CONCURRENT_UPGRADES: \"many\""),
            "{error}"
        );
    }
}
