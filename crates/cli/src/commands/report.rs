//! `tusk report CLUSTER`: a support bundle, a directory holding what one
//! needs to understand a cluster without access to it:
//!
//! - `summary.txt`: `tusk status` and `tusk why`, as printed;
//! - `cluster.yaml`: the PostgresCluster, spec and status;
//! - `objects/<kind>.yaml`: every object labelled with the cluster (pods,
//!   claims, Services, disruption budgets, the primary lease, RBAC) and
//!   the PostgresBackups naming it;
//! - `secrets.yaml`: the cluster's Secrets with every value replaced by
//!   its length: names and keys only, never a credential;
//! - `events.yaml`: the namespace's events about the cluster and its
//!   objects, oldest first;
//! - `logs/<pod>.log`: each instance's log (and `<pod>.previous.log`,
//!   the container's previous run, when it restarted).
//!
//! `managedFields` are left out everywhere. Logs are PostgreSQL's and the
//! instance manager's as they are: a query text logged by a user's own
//! `log_statement` setting is in them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, LogParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use tusk_api::v1alpha1::PostgresBackup;

use super::CommandError;
use super::cluster_access::{ClusterRef, Target, block_on, kubernetes};
use super::{status, why};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: ClusterRef,
    /// Directory to write the bundle to; must not exist or be empty
    /// [default: tusk-report-NAMESPACE-CLUSTER-TIME].
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    block_on(async {
        let target = Target::connect(args.at.namespace.as_deref()).await?;
        let name = &args.at.cluster;
        let cluster = target.cluster(name).await?;
        let dir = args.output.clone().unwrap_or_else(|| {
            let time = Timestamp::now().strftime("%Y%m%dT%H%M%SZ");
            PathBuf::from(format!("tusk-report-{}-{name}-{time}", target.namespace))
        });
        prepare(&dir)?;
        let bundle = Bundle { dir: dir.clone() };
        let pods = target.pods(name).await?;
        let events = target.events().await?;

        let report = status::render(&status::report(&cluster, &pods));
        let reasons = why::reasons(&cluster, &pods, &why::warnings_about(&cluster, &events));
        let why = if reasons.is_empty() {
            "Ready\n".to_owned()
        } else {
            reasons.iter().map(|r| format!("- {r}\n")).collect()
        };
        bundle.text("summary.txt", &format!("{report}\nWhy:\n{why}"))?;
        bundle.yaml("cluster.yaml", &[without_managed_fields(cluster.clone())])?;

        let selector = ListParams::default().labels(&tusk_api::labels::cluster_selector(name));
        let mut names: BTreeSet<String> = BTreeSet::from([name.clone()]);
        names.extend(bundle.objects::<Pod>(&target, &selector).await?);
        names.extend(
            bundle
                .objects::<PersistentVolumeClaim>(&target, &selector)
                .await?,
        );
        names.extend(bundle.objects::<Service>(&target, &selector).await?);
        names.extend(
            bundle
                .objects::<PodDisruptionBudget>(&target, &selector)
                .await?,
        );
        names.extend(bundle.objects::<ConfigMap>(&target, &selector).await?);
        names.extend(bundle.objects::<ServiceAccount>(&target, &selector).await?);
        names.extend(bundle.objects::<Role>(&target, &selector).await?);
        names.extend(bundle.objects::<RoleBinding>(&target, &selector).await?);
        names.extend(bundle.objects::<Lease>(&target, &selector).await?);
        let backups: Vec<PostgresBackup> = target
            .api::<PostgresBackup>()
            .list(&ListParams::default())
            .await
            .map_err(kubernetes)?
            .items
            .into_iter()
            .filter(|b| b.spec.cluster == *name)
            .map(without_managed_fields)
            .collect();
        names.extend(backups.iter().map(ResourceExt::name_any));
        if !backups.is_empty() {
            bundle.yaml("objects/postgresbackup.yaml", &backups)?;
        }

        let secrets = target
            .api::<Secret>()
            .list(&selector)
            .await
            .map_err(kubernetes)?
            .items;
        names.extend(secrets.iter().map(ResourceExt::name_any));
        let redacted: Vec<Secret> = secrets.into_iter().map(redacted).collect();
        bundle.yaml("secrets.yaml", &redacted)?;

        bundle.yaml("events.yaml", &events_about(events, &names))?;
        bundle.logs(&target, &pods).await?;
        outln!("{}", dir.display())?;
        Ok(ExitCode::SUCCESS)
    })
}

/// Creates `dir`, refusing one that holds anything: a bundle never mixes
/// with (or overwrites) another.
fn prepare(dir: &Path) -> Result<(), CommandError> {
    let write_error = |source| CommandError::Write {
        path: dir.display().to_string(),
        source,
    };
    if let Ok(mut entries) = std::fs::read_dir(dir)
        && entries.next().is_some()
    {
        return Err(CommandError::Write {
            path: dir.display().to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "the directory is not empty; name a new one with --output",
            ),
        });
    }
    std::fs::create_dir_all(dir.join("objects")).map_err(write_error)?;
    std::fs::create_dir_all(dir.join("logs")).map_err(write_error)
}

/// A Secret with each value replaced by its length.
pub fn redacted(mut secret: Secret) -> Secret {
    secret.metadata.managed_fields = None;
    // `kubectl apply` keeps the whole object, values included, here.
    if let Some(annotations) = secret.metadata.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    let mut keys = std::collections::BTreeMap::new();
    for (key, value) in secret.data.take().unwrap_or_default() {
        keys.insert(key, format!("<redacted: {} bytes>", value.0.len()));
    }
    for (key, value) in secret.string_data.take().unwrap_or_default() {
        keys.insert(key, format!("<redacted: {} bytes>", value.len()));
    }
    secret.string_data = Some(keys);
    secret
}

fn without_managed_fields<K: Resource>(mut object: K) -> K {
    object.meta_mut().managed_fields = None;
    object
}

/// The events whose object is one of `names`, oldest first.
pub fn events_about(events: Vec<Event>, names: &BTreeSet<String>) -> Vec<Event> {
    let mut about: Vec<Event> = events
        .into_iter()
        .filter(|e| {
            e.involved_object
                .name
                .as_ref()
                .is_some_and(|n| names.contains(n))
        })
        .map(without_managed_fields)
        .collect();
    let time = |e: &Event| {
        e.last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or(e.event_time.as_ref().map(|t| t.0))
            .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0))
    };
    about.sort_by_key(time);
    about
}

struct Bundle {
    dir: PathBuf,
}

impl Bundle {
    fn text(&self, file: &str, text: &str) -> Result<(), CommandError> {
        let path = self.dir.join(file);
        std::fs::write(&path, text).map_err(|source| CommandError::Write {
            path: path.display().to_string(),
            source,
        })
    }

    /// `items` as one YAML stream, a document each.
    fn yaml<T: Serialize>(&self, file: &str, items: &[T]) -> Result<(), CommandError> {
        let mut out = String::new();
        for item in items {
            out.push_str("---\n");
            out.push_str(&serde_yaml_ng::to_string(item)?);
        }
        self.text(file, &out)
    }

    /// Writes every `K` matching `selector` to `objects/<kind>.yaml` (none:
    /// no file); returns their names.
    async fn objects<K>(
        &self,
        target: &Target,
        selector: &ListParams,
    ) -> Result<Vec<String>, CommandError>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + Serialize
            + std::fmt::Debug,
    {
        let items = target
            .api::<K>()
            .list(selector)
            .await
            .map_err(kubernetes)?
            .items;
        let names = items.iter().map(ResourceExt::name_any).collect();
        if !items.is_empty() {
            let items: Vec<K> = items.into_iter().map(without_managed_fields).collect();
            let file = format!("objects/{}.yaml", K::kind(&()).to_lowercase());
            self.yaml(&file, &items)?;
        }
        Ok(names)
    }

    /// Each pod's first container's log, and its previous run's when it
    /// restarted. A log that cannot be read is noted in its file.
    async fn logs(&self, target: &Target, pods: &[Pod]) -> Result<(), CommandError> {
        let api = target.api::<Pod>();
        for pod in pods {
            let name = pod.name_any();
            let statuses = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref());
            let container = super::logs::container_of(pod);
            let restarted = statuses.is_some_and(|all| {
                all.iter()
                    .any(|s| Some(&s.name) == container.as_ref() && s.restart_count > 0)
            });
            for previous in [false, true] {
                if previous && !restarted {
                    continue;
                }
                let params = LogParams {
                    container: container.clone(),
                    previous,
                    ..LogParams::default()
                };
                let text = match api.logs(&name, &params).await {
                    Ok(text) => text,
                    Err(error) => format!("cannot read the log: {error}\n"),
                };
                let file = if previous {
                    format!("logs/{name}.previous.log")
                } else {
                    format!("logs/{name}.log")
                };
                self.text(&file, &text)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    #[test]
    fn a_redacted_secret_keeps_names_and_keys_and_no_value() {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some("db-app".into()),
                annotations: Some(
                    [(
                        "kubectl.kubernetes.io/last-applied-configuration".to_owned(),
                        "{\"data\":{\"password\":\"czNjcjN0\"}}".to_owned(),
                    )]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            data: Some([("password".to_owned(), ByteString(b"s3cr3t".to_vec()))].into()),
            string_data: Some([("username".to_owned(), "owner".to_owned())].into()),
            ..Secret::default()
        };
        let text = serde_yaml_ng::to_string(&redacted(secret)).expect("yaml");
        assert!(
            text.contains("db-app") && text.contains("password:"),
            "{text}"
        );
        assert!(text.contains("<redacted: 6 bytes>"), "{text}");
        assert!(text.contains("<redacted: 5 bytes>"), "{text}");
        for value in ["s3cr3t", "czNjcjN0", "owner"] {
            assert!(!text.contains(value), "{value} in {text}");
        }
    }

    #[test]
    fn events_are_those_about_the_cluster_oldest_first() {
        let event = |object: &str, second: i64| Event {
            involved_object: ObjectReference {
                name: Some(object.into()),
                ..ObjectReference::default()
            },
            last_timestamp: Some(Time(
                Timestamp::from_second(1_800_000_000 + second).expect("time"),
            )),
            ..Event::default()
        };
        let names = BTreeSet::from(["db".to_owned(), "db-1".to_owned()]);
        let about = events_about(
            vec![event("db-1", 5), event("other-1", 1), event("db", 2)],
            &names,
        );
        let objects: Vec<_> = about
            .iter()
            .filter_map(|e| e.involved_object.name.as_deref())
            .collect();
        assert_eq!(objects, ["db", "db-1"]);
    }
}
