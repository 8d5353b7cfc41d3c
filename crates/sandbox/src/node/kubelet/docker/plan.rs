//! Planning one container for the Docker runtime: the container's
//! configuration from its spec (command, args and env with `$(VAR)`
//! expansion, no path translation: volumes are real mounts), its security
//! context (user, groups, read-only root, capabilities, privilege
//! escalation), its memory limit, its termination message file (bound at
//! its path), and probes and exec through the engine.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use k8s_openapi::api::core::v1::Container;
use kube::ResourceExt;

use super::{API_HOST, DockerRuntime, DockerSpec};
use crate::node::kubelet::env::{container_env, expand};
use crate::node::kubelet::plan::{
    ContainerPlan, ExecTemplate, PodFacts, add_probes, docker_exec, security,
};
use crate::node::kubelet::runtime::Launch;
use crate::node::kubelet::status::CONFIG_ERROR;

/// The `kubernetes` Service's variables as pods on the Docker network
/// reach it: through the forwarder at [`API_HOST`] and its port.
fn service_env(runtime: &DockerRuntime, facts: &PodFacts<'_>) -> Vec<(String, String)> {
    let vars = facts.inputs.service_env();
    let host = vars
        .iter()
        .find(|(name, _)| name == "KUBERNETES_SERVICE_HOST")
        .map(|(_, value)| value.clone());
    let port = runtime.api_port().to_string();
    match host {
        Some(host) if !host.is_empty() => vars
            .into_iter()
            .map(|(name, value)| {
                // The names keep the Service's port (443), as Kubernetes
                // writes them; the values say where the forwarder is.
                let value = if value == "443" {
                    port.clone()
                } else {
                    value.replace(&format!("{host}:443"), &format!("{API_HOST}:{port}"))
                };
                (name, value.replace(&host, API_HOST))
            })
            .collect(),
        _ => vars,
    }
}

/// A memory quantity in bytes (`512Mi`, `1G`, `1048576`).
pub fn memory_bytes(quantity: &str) -> Option<i64> {
    let quantity = quantity.trim();
    let split = quantity
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(quantity.len());
    let (number, suffix) = quantity.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor: f64 = match suffix {
        "" => 1.0,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        _ => return None,
    };
    Some((number * factor).ceil() as i64)
}

/// The container's bind mounts: each `volumeMount` at its `mountPath`,
/// `subPath` included, read-only when asked; and its termination message
/// file at its `terminationMessagePath`, read-write, as the kubelet mounts
/// it (the same host file the process runtime translates to).
fn mounts(facts: &PodFacts<'_>, container: &Container) -> Result<Vec<Mount>, String> {
    let mut mounts = volume_mounts(container, facts.volume_dirs)?;
    if let Some(file) = facts.termination_message(container).file {
        mounts.push(Mount {
            target: Some(file.path),
            source: Some(file.host.to_string_lossy().into_owned()),
            typ: Some(MountType::BIND),
            read_only: Some(false),
            ..Default::default()
        });
    }
    Ok(mounts)
}

/// The bind mounts of the container's `volumeMounts`.
fn volume_mounts(
    container: &Container,
    volume_dirs: &BTreeMap<String, PathBuf>,
) -> Result<Vec<Mount>, String> {
    let mut mounts = Vec::new();
    for mount in container.volume_mounts.iter().flatten() {
        let dir = volume_dirs.get(&mount.name).ok_or_else(|| {
            format!(
                "container mounts volume {:?}, which the pod does not declare",
                mount.name
            )
        })?;
        let source = match mount.sub_path.as_deref().filter(|s| !s.is_empty()) {
            Some(sub) if sub.starts_with('/') || sub.split('/').any(|p| p == "..") => {
                return Err(format!(
                    "subPath {sub:?} must be a relative path inside the volume"
                ));
            }
            Some(sub) => {
                let path = dir.join(sub);
                if !path.exists() {
                    std::fs::create_dir_all(&path).map_err(|e| format!("subPath {sub:?}: {e}"))?;
                }
                path
            }
            None => dir.clone(),
        };
        mounts.push(Mount {
            target: Some(mount.mount_path.clone()),
            source: Some(source.to_string_lossy().into_owned()),
            typ: Some(MountType::BIND),
            read_only: Some(mount.read_only.unwrap_or(false)),
            ..Default::default()
        });
    }
    Ok(mounts)
}

/// The user (`uid[:gid]`), supplementary groups and whether the
/// container asks to run as non-root.
fn identity(
    facts: &PodFacts<'_>,
    container: &Container,
) -> Result<(Option<String>, Vec<String>), String> {
    let pod = facts.pod;
    let uid = security(pod, container, |p| p.run_as_user, |c| c.run_as_user);
    let gid = security(pod, container, |p| p.run_as_group, |c| c.run_as_group);
    let non_root =
        security(pod, container, |p| p.run_as_non_root, |c| c.run_as_non_root).unwrap_or(false);
    if non_root && uid == Some(0) {
        return Err(
            "container's runAsUser breaks non-root policy (runAsNonRoot with runAsUser 0)".into(),
        );
    }
    let user = match (uid, gid) {
        (Some(uid), Some(gid)) => Some(format!("{uid}:{gid}")),
        (Some(uid), None) => Some(uid.to_string()),
        (None, Some(gid)) => Some(format!("0:{gid}")),
        (None, None) => None,
    };
    let pod_context = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let mut groups: Vec<String> = pod_context
        .and_then(|c| c.fs_group)
        .into_iter()
        .map(|g| g.to_string())
        .collect();
    groups.extend(
        pod_context
            .and_then(|c| c.supplemental_groups.clone())
            .into_iter()
            .flatten()
            .map(|g| g.to_string()),
    );
    Ok((user, groups))
}

/// Whether the container asks for non-root without naming its user, so
/// that only the image's user can tell.
fn non_root_unverified(facts: &PodFacts<'_>, container: &Container) -> bool {
    let pod = facts.pod;
    let non_root =
        security(pod, container, |p| p.run_as_non_root, |c| c.run_as_non_root).unwrap_or(false);
    non_root && security(pod, container, |p| p.run_as_user, |c| c.run_as_user).is_none()
}

/// The engine's host configuration of the container: joined to the pod's
/// network namespace, with its mounts, security context and memory limit.
fn host_config(
    runtime: &DockerRuntime,
    facts: &PodFacts<'_>,
    container: &Container,
    groups: Vec<String>,
) -> Result<HostConfig, String> {
    let uid = facts.pod.uid().unwrap_or_default();
    let context = container.security_context.as_ref();
    let capabilities = context.and_then(|c| c.capabilities.as_ref());
    let names = |list: Option<&Vec<String>>| -> Option<Vec<String>> {
        list.map(|l| {
            l.iter()
                .map(|c| c.trim_start_matches("CAP_").to_owned())
                .collect()
        })
    };
    let memory = match container
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("memory"))
    {
        Some(quantity) => Some(memory_bytes(&quantity.0).ok_or_else(|| {
            format!("resources.limits.memory {:?} is not a quantity", quantity.0)
        })?),
        None => None,
    };
    let no_new_privileges = context.and_then(|c| c.allow_privilege_escalation) == Some(false);
    Ok(HostConfig {
        network_mode: Some(format!(
            "container:{}",
            runtime.container_name(&uid, "pause")
        )),
        mounts: Some(mounts(facts, container)?),
        readonly_rootfs: context.and_then(|c| c.read_only_root_filesystem),
        privileged: context.and_then(|c| c.privileged),
        cap_add: names(capabilities.and_then(|c| c.add.as_ref())),
        cap_drop: names(capabilities.and_then(|c| c.drop.as_ref())),
        security_opt: no_new_privileges.then(|| vec!["no-new-privileges".to_owned()]),
        group_add: (!groups.is_empty()).then_some(groups),
        memory,
        // As on Kubernetes: no swap beyond the limit.
        memory_swap: memory,
        ..Default::default()
    })
}

/// The container's create body.
fn body(
    runtime: &DockerRuntime,
    facts: &PodFacts<'_>,
    container: &Container,
) -> Result<ContainerCreateBody, String> {
    let vars = container_env(
        facts.pod,
        container,
        facts.inputs,
        &service_env(runtime, facts),
    )
    .map_err(|e| e.to_string())?;
    let mut env = vec![("HOSTNAME".to_owned(), facts.pod.name_any())];
    env.extend(vars);
    let defined: BTreeMap<String, String> = env.iter().cloned().collect();
    let expand_all = |items: Option<&Vec<String>>| {
        items.map(|items| {
            items
                .iter()
                .map(|item| expand(item, &defined))
                .collect::<Vec<_>>()
        })
    };
    let entrypoint = expand_all(container.command.as_ref());
    let mut cmd = expand_all(container.args.as_ref());
    if entrypoint.is_some() && cmd.is_none() {
        // A command without args runs without the image's CMD.
        cmd = Some(Vec::new());
    }
    let (user, groups) = identity(facts, container)?;
    Ok(ContainerCreateBody {
        image: container.image.clone(),
        entrypoint,
        cmd,
        env: Some(env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
        working_dir: container.working_dir.clone(),
        user,
        labels: Some(runtime.labels(&facts.pod.uid().unwrap_or_default())),
        host_config: Some(host_config(runtime, facts, container, groups)?),
        ..Default::default()
    })
}

pub(crate) fn plan_container(
    runtime: &Arc<DockerRuntime>,
    facts: PodFacts<'_>,
    container: &Container,
) -> ContainerPlan {
    let log_dir = facts.pod_dir.join("logs").join(&container.name);
    let uid = facts.pod.uid().unwrap_or_default();
    let name = runtime.container_name(&uid, &container.name);
    let image = container.image.clone().unwrap_or_default();
    let mut plan = ContainerPlan {
        name: container.name.clone(),
        process: Err((String::new(), String::new())),
        log_dir: log_dir.clone(),
        startup: None,
        liveness: None,
        readiness: None,
        grace: facts.grace,
        exec: Some(ExecTemplate::Docker {
            container: name.clone(),
        }),
        termination: facts.termination_message(container),
    };
    plan.process = body(runtime, &facts, container)
        .map(|body| {
            Launch::Docker(Box::new(DockerSpec {
                runtime: runtime.clone(),
                name: name.clone(),
                image,
                image_user_must_be_non_root: non_root_unverified(&facts, container),
                body,
                log: log_dir.join("0.log"),
            }))
        })
        .map_err(|message| (CONFIG_ERROR.to_owned(), message));
    let probe_log = log_dir.join("probes.log");
    add_probes(&mut plan, container, facts.pod_ip, |command| {
        Ok(docker_exec(&name, command, probe_log.clone()))
    });
    plan
}

#[cfg(test)]
mod tests {
    use super::memory_bytes;

    #[test]
    fn memory_quantities_read_as_kubernetes_writes_them() {
        assert_eq!(memory_bytes("64Mi"), Some(64 * 1024 * 1024));
        assert_eq!(memory_bytes("1G"), Some(1_000_000_000));
        assert_eq!(memory_bytes("1048576"), Some(1_048_576));
        assert_eq!(memory_bytes("1.5Gi"), Some(1_610_612_736));
        assert_eq!(memory_bytes("lots"), None);
    }
}
