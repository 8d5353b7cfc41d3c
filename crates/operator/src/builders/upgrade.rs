//! The major upgrade's pod (see [`crate::upgrade`] and
//! [`tusk_api::upgrade`]): the primary's pod as the new major would run
//! it (image, `PG_BIN_DIR`, security context, credentials, the primary's
//! volume), running `tusk instance upgrade` once, with an init container
//! of the old major's image that copies that major's installation into
//! the pod's `/run` scratch volume (`pg_upgrade` needs both majors'
//! programs; an image carries one). Labelled [`labels::UPGRADE_OF`], never
//! [`labels::CLUSTER`]. Owned by the cluster.
//!
//! The pre-check pod has the same shape on a scratch volume of the
//! cluster's size and class ([`upgrade_check_pvc`]) and runs `tusk
//! instance upgrade-check` (see [`crate::upgrade`]).

use k8s_openapi::api::core::v1::{Container, PersistentVolumeClaim, Pod};
use tusk_api::labels;
use tusk_api::upgrade::{
    OLD_BIN_DIR_ENV, OLD_INSTALL_DIR, RESULT_ENV, check_pod_name, old_bin_dir, pod_name,
};

use super::child_meta;
use super::container::{restricted, value_env};
use super::pod::{mount, template_pod};
use super::rehearsal::{one_shot, one_shot_labels};
use super::storage::instance_pvc;
use crate::config::OperatorConfig;
use crate::names::InstanceName;
use crate::validate::{MajorTarget, ValidatedCluster};

/// The upgrade pod for moving the data of `primary` (the cluster's running
/// major, `cluster.version` and `cluster.image`) to `target`.
pub fn upgrade_pod(
    cluster: &ValidatedCluster,
    config: &OperatorConfig,
    primary: &InstanceName,
    target: &MajorTarget,
) -> Pod {
    let name = pod_name(cluster.name.as_str());
    with_both_majors(cluster, config, primary, target, (&name, "upgrade"))
}

/// The pre-check pod: `pg_upgrade --check` to `target` on a restore of
/// the newest backup, on its own scratch volume.
pub fn upgrade_check_pod(
    cluster: &ValidatedCluster,
    config: &OperatorConfig,
    target: &MajorTarget,
) -> Pod {
    let name = check_pod_name(cluster.name.as_str());
    let volume = InstanceName::recorded(&name);
    with_both_majors(cluster, config, &volume, target, (&name, "upgrade-check"))
}

/// The pre-check's scratch volume: the cluster's size and class.
pub fn upgrade_check_pvc(cluster: &ValidatedCluster) -> PersistentVolumeClaim {
    let name = check_pod_name(cluster.name.as_str());
    let mut pvc = instance_pvc(cluster, &InstanceName::recorded(&name));
    let mut metadata = child_meta(cluster, &name);
    metadata.labels = Some(one_shot_labels(labels::UPGRADE_OF, cluster));
    pvc.metadata = metadata;
    pvc
}

/// A one-shot pod `name` running `tusk instance <command>` with the
/// programs of `target` on the volume of `volume`, the cluster's running
/// major's installation copied beside by an init container.
fn with_both_majors(
    cluster: &ValidatedCluster,
    config: &OperatorConfig,
    volume: &InstanceName,
    target: &MajorTarget,
    (name, command): (&str, &str),
) -> Pod {
    let mut upgraded = cluster.clone();
    upgraded.version = target.version;
    upgraded.image.clone_from(&target.image);
    let mut pod = template_pod(&upgraded, config, volume);
    one_shot(
        &mut pod,
        child_meta(cluster, name),
        one_shot_labels(labels::UPGRADE_OF, cluster),
        command,
        RESULT_ENV,
    );
    if let Some(spec) = pod.spec.as_mut() {
        spec.init_containers
            .get_or_insert_with(Vec::new)
            .push(copy_old_major(cluster));
        for container in &mut spec.containers {
            container
                .env
                .get_or_insert_with(Vec::new)
                .push(value_env(OLD_BIN_DIR_ENV, old_bin_dir(cluster.version)));
        }
    }
    pod
}

/// The init container that copies the old major's programs, libraries
/// and shared files, keeping their relative layout (PostgreSQL's programs
/// find the rest of their installation relative to themselves).
fn copy_old_major(cluster: &ValidatedCluster) -> Container {
    let major = cluster.version;
    let script = format!(
        "set -e; rm -rf {OLD_INSTALL_DIR}; \
         mkdir -p {OLD_INSTALL_DIR}/usr/lib/postgresql {OLD_INSTALL_DIR}/usr/share/postgresql; \
         cp -a /usr/lib/postgresql/{major} {OLD_INSTALL_DIR}/usr/lib/postgresql/; \
         cp -a /usr/share/postgresql/{major} {OLD_INSTALL_DIR}/usr/share/postgresql/"
    );
    Container {
        name: "copy-old-postgres".to_owned(),
        image: Some(cluster.image.clone()),
        command: Some(vec!["sh".to_owned(), "-c".to_owned(), script]),
        volume_mounts: Some(vec![mount("run", "/run", false)]),
        security_context: Some(restricted()),
        ..Container::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{claim_names, validated};
    use tusk_api::contract::InstanceEnv;

    fn cluster_of_15() -> ValidatedCluster {
        validated(serde_json::json!({
            "instances": 3, "postgres": {"version": 15},
            "storage": {"size": "2Gi"},
        }))
    }

    #[test]
    fn the_upgrade_pod_runs_the_new_major_on_the_primarys_volume_with_the_old_one_copied_beside() {
        let cluster = cluster_of_15();
        let target = MajorTarget {
            version: 16,
            image: "postgres:16".to_owned(),
        };
        let config = OperatorConfig::default();
        let pod = upgrade_pod(
            &cluster,
            &config,
            &InstanceName::recorded("orders-2"),
            &target,
        );
        assert_eq!(pod.metadata.name.as_deref(), Some("orders-upgrade"));
        let labels = pod.metadata.labels.clone().expect("labels");
        assert_eq!(
            labels.get(labels::UPGRADE_OF).map(String::as_str),
            Some("orders")
        );
        assert!(!labels.contains_key(labels::CLUSTER), "{labels:?}");
        let spec = pod.spec.expect("spec");
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        let container = &spec.containers[0];
        assert_eq!(container.image.as_deref(), Some("postgres:16"));
        assert_eq!(container.command.as_ref().expect("command")[2], "upgrade");
        assert!(container.readiness_probe.is_none() && container.ports.is_none());
        let env = |name: &str| {
            container
                .env
                .iter()
                .flatten()
                .find(|e| e.name == name)
                .and_then(|e| e.value.clone())
        };
        assert_eq!(
            env(InstanceEnv::PG_BIN_DIR).as_deref(),
            Some("/usr/lib/postgresql/16/bin")
        );
        assert_eq!(
            env(OLD_BIN_DIR_ENV).as_deref(),
            Some("/run/tusk-upgrade/old/usr/lib/postgresql/15/bin")
        );
        assert_eq!(claim_names(&spec), ["orders-2"]);
        let init = spec.init_containers.expect("init containers");
        let copy = init.last().expect("the copy");
        assert_eq!(copy.image.as_deref(), Some("postgres:15"));
        let script = &copy.command.as_ref().expect("command")[2];
        assert!(script.contains("cp -a /usr/lib/postgresql/15 "), "{script}");
        assert!(
            script.contains("cp -a /usr/share/postgresql/15 "),
            "{script}"
        );
        // The copy lands where the main container's /run is.
        let main_run = container
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == "/run")
            .map(|m| m.name.clone());
        let copy_run = copy
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == "/run")
            .map(|m| m.name.clone());
        assert!(main_run.is_some() && main_run == copy_run);
    }

    #[test]
    fn the_pre_check_pod_has_the_upgrade_pods_programs_on_a_scratch_volume_of_its_own() {
        let cluster = cluster_of_15();
        let target = MajorTarget {
            version: 17,
            image: "postgres:17".to_owned(),
        };
        let pod = upgrade_check_pod(&cluster, &OperatorConfig::default(), &target);
        assert_eq!(pod.metadata.name.as_deref(), Some("orders-upgrade-check"));
        let spec = pod.spec.expect("spec");
        let container = &spec.containers[0];
        assert_eq!(container.image.as_deref(), Some("postgres:17"));
        assert_eq!(
            container.command.as_ref().expect("command")[2],
            "upgrade-check"
        );
        assert_eq!(claim_names(&spec), ["orders-upgrade-check"]);
        let copy = spec.init_containers.expect("init containers");
        assert_eq!(
            copy.last().and_then(|c| c.image.as_deref()),
            Some("postgres:15")
        );
        let pvc = upgrade_check_pvc(&cluster);
        assert_eq!(pvc.metadata.name.as_deref(), Some("orders-upgrade-check"));
        let labels = pvc.metadata.labels.clone().expect("labels");
        assert!(!labels.contains_key(labels::CLUSTER), "{labels:?}");
        let size = pvc
            .spec
            .and_then(|s| s.resources)
            .and_then(|r| r.requests)
            .expect("size");
        assert_eq!(size["storage"].0, "2Gi");
    }
}
