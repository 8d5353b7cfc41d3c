//! What the kubelet gives a pod to reach the API server as its
//! ServiceAccount: the `kubernetes` Service's environment variables, and
//! bound tokens for `serviceAccountToken` projections, requested through
//! TokenRequest and replaced before they expire.
//!
//! As the kubelet's token manager does, a token is refreshed once 80% of
//! its lifetime has passed, or after 24 hours, whichever comes first; the
//! file is replaced atomically (written beside it, then renamed), so a
//! reader sees the old token or the new one, never a mix.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, Service, ServiceAccount, ServiceAccountTokenProjection};
use kube::api::PostParams;
use kube::{Api, Client, ResourceExt};

use super::files::FileOwner;
use super::input_error::InputError;

/// The `kubernetes` Service in `default`: its cluster IP and port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubernetesService {
    pub ip: String,
    pub port: i32,
    /// The port's name (`https`).
    pub port_name: Option<String>,
}

impl KubernetesService {
    /// Reads the Service; `None` when it does not exist (yet).
    pub async fn fetch(client: &Client) -> Result<Option<Self>, InputError> {
        let api: Api<Service> = Api::namespaced(client.clone(), "default");
        let Some(service) = api.get_opt("kubernetes").await? else {
            return Ok(None);
        };
        let spec = service.spec.unwrap_or_default();
        let (Some(ip), Some(port)) = (
            spec.cluster_ip,
            spec.ports.and_then(|p| p.into_iter().next()),
        ) else {
            return Ok(None);
        };
        Ok(Some(Self {
            ip,
            port: port.port,
            port_name: port.name,
        }))
    }

    /// The variables every container gets (`KUBERNETES_SERVICE_HOST` and
    /// the service link variables), as the kubelet writes them.
    pub fn env(&self) -> Vec<(String, String)> {
        let (ip, port) = (&self.ip, self.port);
        let url = format!("tcp://{ip}:{port}");
        let prefix = format!("KUBERNETES_PORT_{port}_TCP");
        let mut vars = vec![
            ("KUBERNETES_SERVICE_HOST".to_owned(), ip.clone()),
            ("KUBERNETES_SERVICE_PORT".to_owned(), port.to_string()),
        ];
        if let Some(name) = self.port_name.as_deref().filter(|n| !n.is_empty()) {
            let name = name.to_uppercase().replace('-', "_");
            vars.push((format!("KUBERNETES_SERVICE_PORT_{name}"), port.to_string()));
        }
        vars.extend([
            ("KUBERNETES_PORT".to_owned(), url.clone()),
            (prefix.clone(), url),
            (format!("{prefix}_PROTO"), "tcp".to_owned()),
            (format!("{prefix}_PORT"), port.to_string()),
            (format!("{prefix}_ADDR"), ip.clone()),
        ]);
        vars
    }
}

/// A token and its lifetime.
#[derive(Clone, Debug)]
pub struct Token {
    pub token: String,
    pub issued: SystemTime,
    pub expires: SystemTime,
}

impl Token {
    /// When the kubelet replaces it: at 80% of its lifetime, or after 24
    /// hours.
    pub fn refresh_at(&self) -> SystemTime {
        let lifetime = self
            .expires
            .duration_since(self.issued)
            .unwrap_or(Duration::ZERO);
        let refresh = lifetime.mul_f64(0.8).min(Duration::from_secs(24 * 3600));
        self.issued + refresh
    }
}

/// Requests a token for the pod's ServiceAccount, bound to the pod, for
/// the projection's audience and lifetime.
pub async fn request_token(
    client: &Client,
    pod: &Pod,
    projection: &ServiceAccountTokenProjection,
) -> Result<Token, InputError> {
    let namespace = pod.namespace().unwrap_or_default();
    let account = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| "default".into());
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: projection.audience.iter().cloned().collect(),
            expiration_seconds: Some(projection.expiration_seconds.unwrap_or(3600)),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(pod.name_any()),
                uid: pod.uid(),
            }),
        },
        ..TokenRequest::default()
    };
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    let issued = SystemTime::now();
    let answer = api
        .create_token_request(&account, &PostParams::default(), &request)
        .await?;
    let status = answer.status.ok_or_else(|| InputError::Token {
        account: account.clone(),
        message: "the answer has no status".into(),
    })?;
    let expires = UNIX_EPOCH
        + Duration::from_secs(
            u64::try_from(status.expiration_timestamp.0.as_second()).unwrap_or(0),
        );
    Ok(Token {
        token: status.token,
        issued,
        expires,
    })
}

/// A token file to keep fresh.
#[derive(Clone, Debug)]
pub struct TokenFile {
    pub path: PathBuf,
    pub projection: ServiceAccountTokenProjection,
    pub mode: u32,
    pub token: Token,
}

/// Writes `content` to `path` by renaming a file written beside it; a
/// `path` that is a link (a volume's name for a file of its current
/// payload) keeps pointing where it did, at the new content.
pub fn replace_file(
    path: &Path,
    content: &[u8],
    mode: u32,
    owner: Option<FileOwner>,
) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let path = resolved.as_path();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&temporary, content)?;
    std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(mode))?;
    if let Some(owner) = owner {
        std::os::unix::fs::chown(&temporary, Some(owner.uid), Some(owner.gid))?;
    }
    std::fs::rename(&temporary, path)
}

/// Replaces each token before it expires, for as long as the pod runs
/// (the caller aborts the task). A failed request is retried every few
/// seconds; the old token stays until then.
pub async fn keep_fresh(
    client: Client,
    pod: Pod,
    mut files: Vec<TokenFile>,
    owner: Option<FileOwner>,
) {
    loop {
        let Some(next) = files.iter_mut().min_by_key(|f| f.token.refresh_at()) else {
            return;
        };
        let wait = next
            .token
            .refresh_at()
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        tokio::time::sleep(wait).await;
        match request_token(&client, &pod, &next.projection).await {
            Ok(token) => match replace_file(&next.path, token.token.as_bytes(), next.mode, owner) {
                Ok(()) => next.token = token,
                Err(error) => {
                    tracing::warn!(path = %next.path.display(), %error, "cannot replace a token")
                }
            },
            Err(error) => {
                tracing::warn!(pod = %pod.name_any(), %error, "cannot refresh a token; retrying");
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    }
}

/// The user and group PostgreSQL pods should ask for on this machine: the
/// `postgres` user when the sandbox runs as root (PostgreSQL refuses root,
/// and initdb needs a user that exists), else the sandbox's own user, which
/// every pod runs as anyway. `None` when running as root without a
/// `postgres` user.
pub fn postgres_identity() -> Option<(u32, u32)> {
    if nix::unistd::geteuid().is_root() {
        let user = nix::unistd::User::from_name("postgres").ok().flatten()?;
        Some((user.uid.as_raw(), user.gid.as_raw()))
    } else {
        Some((
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_refreshed_at_four_fifths_of_their_life_or_after_a_day() {
        let issued = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let token = |seconds: u64| Token {
            token: String::new(),
            issued,
            expires: issued + Duration::from_secs(seconds),
        };
        assert_eq!(token(3600).refresh_at(), issued + Duration::from_secs(2880));
        assert_eq!(
            token(7 * 86400).refresh_at(),
            issued + Duration::from_secs(86400)
        );
    }

    #[test]
    fn the_kubernetes_service_gives_the_kubelets_variables() {
        let service = KubernetesService {
            ip: "127.1.9.1".into(),
            port: 443,
            port_name: Some("https".into()),
        };
        let env: std::collections::BTreeMap<String, String> = service.env().into_iter().collect();
        let expected = [
            ("KUBERNETES_SERVICE_HOST", "127.1.9.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
            ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
            ("KUBERNETES_PORT", "tcp://127.1.9.1:443"),
            ("KUBERNETES_PORT_443_TCP", "tcp://127.1.9.1:443"),
            ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
            ("KUBERNETES_PORT_443_TCP_PORT", "443"),
            ("KUBERNETES_PORT_443_TCP_ADDR", "127.1.9.1"),
        ];
        let expected: std::collections::BTreeMap<String, String> = expected
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(env, expected);
    }

    /// The claims of a JWT, unverified.
    fn claims(token: &str) -> serde_json::Value {
        use base64::Engine;
        let payload = token.split('.').nth(1).expect("a JWT");
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .expect("base64url");
        serde_json::from_slice(&bytes).expect("JSON claims")
    }

    #[tokio::test]
    async fn a_token_due_for_refresh_is_replaced_by_a_new_bound_one() {
        let t = crate::testing::TestSandbox::start().await;
        let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "tusk"}]}
        }))
        .expect("pod");
        let pod = pods
            .create(&PostParams::default(), &pod)
            .await
            .expect("pod");
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("token");
        std::fs::write(&path, "old").expect("write");
        let now = SystemTime::now();
        let file = TokenFile {
            path: path.clone(),
            projection: ServiceAccountTokenProjection {
                path: "token".into(),
                expiration_seconds: Some(600),
                audience: None,
            },
            mode: 0o644,
            token: Token {
                token: "old".into(),
                issued: now - Duration::from_secs(1000),
                expires: now + Duration::from_secs(10),
            },
        };
        let task = tokio::spawn(keep_fresh(t.client.clone(), pod.clone(), vec![file], None));
        let token =
            crate::testing::eventually("the token is replaced", crate::testing::WAIT, || async {
                std::fs::read_to_string(&path).ok().filter(|t| t != "old")
            })
            .await;
        task.abort();
        let claims = claims(&token);
        assert_eq!(claims["kubernetes.io"]["pod"]["name"], "p");
        assert_eq!(
            claims["kubernetes.io"]["pod"]["uid"].as_str(),
            pod.metadata.uid.as_deref()
        );
        assert_eq!(claims["sub"], "system:serviceaccount:default:default");
        let lifetime = claims["exp"].as_i64().unwrap_or(0) - claims["iat"].as_i64().unwrap_or(0);
        assert_eq!(lifetime, 600);
    }

    #[test]
    fn a_replaced_file_is_whole_and_leaves_nothing_beside_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("token");
        replace_file(&path, b"one", 0o644, None).expect("write");
        replace_file(&path, b"two", 0o600, None).expect("replace");
        assert_eq!(std::fs::read(&path).expect("read"), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("token")]);
    }
}
