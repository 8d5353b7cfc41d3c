//! What the day-2 commands (`status`, `why`, `psql`, `logs`, `fence`)
//! share: a client from the kubeconfig (KUBECONFIG or the current
//! context, as kubectl), the namespace (`-n`, else the context's), and the
//! PostgresCluster they act on.

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use tusk_api::v1alpha1::PostgresCluster;

use super::CommandError;

/// A client and the namespace a command works in.
/// The cluster a command is about, as every cluster command names it.
#[derive(clap::Args)]
pub struct ClusterRef {
    /// The PostgresCluster.
    pub cluster: String,
    /// Namespace of the cluster [default: the kubeconfig's].
    #[arg(short, long)]
    pub namespace: Option<String>,
}

pub struct Target {
    pub client: Client,
    pub namespace: String,
}

pub fn kubernetes(error: kube::Error) -> CommandError {
    CommandError::Kubernetes(error.to_string())
}

/// Runs `work` on a fresh runtime (the commands are synchronous at the top).
pub fn block_on<T>(
    work: impl std::future::Future<Output = Result<T, CommandError>>,
) -> Result<T, CommandError> {
    let runtime = tokio::runtime::Runtime::new().map_err(CommandError::Runtime)?;
    runtime.block_on(work)
}

impl Target {
    /// Connects as kubectl would; `namespace` overrides the context's.
    pub async fn connect(namespace: Option<&str>) -> Result<Self, CommandError> {
        let client = Client::try_default().await.map_err(kubernetes)?;
        let namespace =
            namespace.map_or_else(|| client.default_namespace().to_owned(), str::to_owned);
        Ok(Self { client, namespace })
    }

    pub fn clusters(&self) -> Api<PostgresCluster> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The cluster `name`; an error naming the namespace when there is none.
    pub async fn cluster(&self, name: &str) -> Result<PostgresCluster, CommandError> {
        self.clusters()
            .get_opt(name)
            .await
            .map_err(kubernetes)?
            .ok_or_else(|| {
                CommandError::Kubernetes(format!(
                    "no PostgresCluster {name} in namespace {}",
                    self.namespace
                ))
            })
    }

    /// Every event of the namespace (core/v1, which also shows those
    /// written through events.k8s.io).
    pub async fn events(&self) -> Result<Vec<k8s_openapi::api::core::v1::Event>, CommandError> {
        Ok(self
            .api::<k8s_openapi::api::core::v1::Event>()
            .list(&ListParams::default())
            .await
            .map_err(kubernetes)?
            .items)
    }

    /// The cluster's instance pods, by name.
    pub async fn pods(&self, cluster: &str) -> Result<Vec<Pod>, CommandError> {
        let selector = tusk_api::labels::cluster_selector(cluster);
        let mut pods = self
            .api::<Pod>()
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(kubernetes)?
            .items;
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Ok(pods)
    }
}

/// Whether a pod's `Ready` condition is True.
pub fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Left-aligned columns, two spaces apart, each as wide as its widest cell.
pub fn table(rows: &[Vec<String>], indent: &str) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = indent.to_owned();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                let pad = widths[c].saturating_sub(cell.chars().count()) + 2;
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let rows = vec![
            vec!["NAME".to_owned(), "ROLE".to_owned(), "LAG".to_owned()],
            vec!["db-10".to_owned(), "primary".to_owned(), String::new()],
        ];
        assert_eq!(
            table(&rows, "  "),
            "  NAME   ROLE     LAG\n  db-10  primary\n"
        );
    }
}
