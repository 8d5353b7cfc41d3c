//! What the API server adds to Pods, Services and PVCs, and the fields it
//! keeps immutable.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{TestSandbox, code};

#[tokio::test]
async fn pods_get_the_kubernetes_defaults() {
    let t = TestSandbox::start().await;
    let api: Api<Pod> = Api::default_namespaced(t.client.clone());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "postgres:16", "ports": [{"containerPort": 5432}]},
                                {"name": "l", "image": "busybox"}]}
    }))
    .expect("pod");
    let created = api
        .create(&PostParams::default(), &pod)
        .await
        .expect("created");
    let spec = created.spec.expect("spec");
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
    assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(spec.service_account_name.as_deref(), Some("default"));
    let c = &spec.containers[0];
    assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(
        spec.containers[1].image_pull_policy.as_deref(),
        Some("Always")
    );
    assert_eq!(
        c.termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(
        c.ports.as_ref().expect("ports")[0].protocol.as_deref(),
        Some("TCP")
    );
    let status = created.status.expect("status");
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
}

#[tokio::test]
async fn services_get_a_loopback_cluster_ip_that_never_changes() {
    let t = TestSandbox::start().await;
    let api: Api<Service> = Api::default_namespaced(t.client.clone());
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "db-rw"},
        "spec": {"selector": {"app": "db"}, "ports": [{"port": 5432}]}
    }))
    .expect("service");
    let created = api
        .create(&PostParams::default(), &service)
        .await
        .expect("created");
    let spec = created.spec.expect("spec");
    let ip = spec.cluster_ip.clone().expect("cluster IP");
    assert!(ip.starts_with("127."), "{ip} is a loopback address");
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(spec.session_affinity.as_deref(), Some("None"));
    let port = &spec.ports.expect("ports")[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    assert_eq!(
        port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(5432))
    );
    let second: Service = serde_json::from_value(
        json!({"metadata": {"name": "db-ro"}, "spec": {"ports": [{"port": 5432}]}}),
    )
    .expect("service");
    let second = api
        .create(&PostParams::default(), &second)
        .await
        .expect("created");
    assert_ne!(
        second.spec.and_then(|s| s.cluster_ip),
        Some(ip.clone()),
        "addresses are unique"
    );
    let changed = api
        .patch(
            "db-rw",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"clusterIP": "127.9.9.9"}})),
        )
        .await;
    assert_eq!(code(&changed.expect_err("clusterIP is immutable")), 422);
}

/// Two sandboxes side by side (tests in one process) hand out different
/// cluster IPs: one sandbox's proxy must never answer for another's
/// Service (a client of one cluster reached the other's PostgreSQL).
#[tokio::test]
async fn two_sandboxes_hand_out_different_cluster_ips() {
    let (a, b) = (TestSandbox::start().await, TestSandbox::start().await);
    let mut first_ips = Vec::new();
    let mut own_ips = Vec::new();
    for sandbox in [&a, &b] {
        let api: Api<Service> = Api::default_namespaced(sandbox.client.clone());
        let service: Service = serde_json::from_value(
            json!({"metadata": {"name": "db-rw"}, "spec": {"ports": [{"port": 5432}]}}),
        )
        .expect("service");
        let ip = api
            .create(&PostParams::default(), &service)
            .await
            .expect("created")
            .spec
            .and_then(|s| s.cluster_ip)
            .expect("a cluster IP");
        let own = api
            .get("kubernetes")
            .await
            .expect("the kubernetes Service")
            .spec
            .and_then(|s| s.cluster_ip)
            .expect("its cluster IP");
        let block = |ip: &str| ip.rsplit_once('.').map(|(block, _)| block.to_owned());
        assert_eq!(block(&ip), block(&own), "{ip} is in the block of {own}");
        first_ips.push(ip);
        own_ips.push(own);
    }
    // The blocks come from the data directories: two of 255 may meet.
    if own_ips[0] != own_ips[1] {
        assert_ne!(first_ips[0], first_ips[1]);
    }
}

#[tokio::test]
async fn claims_may_grow_but_not_shrink_or_change_class() {
    let t = TestSandbox::start().await;
    let api: Api<PersistentVolumeClaim> = Api::default_namespaced(t.client.clone());
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                 "resources": {"requests": {"storage": "10Gi"}}}
    }))
    .expect("claim");
    let created = api
        .create(&PostParams::default(), &claim)
        .await
        .expect("created");
    assert_eq!(
        created.spec.as_ref().and_then(|s| s.volume_mode.as_deref()),
        Some("Filesystem")
    );
    assert_eq!(
        created.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    let patch = |body| Patch::Merge(body);
    let grown = api
        .patch(
            "data",
            &PatchParams::default(),
            &patch(json!({"spec": {"resources": {"requests": {"storage": "20Gi"}}}})),
        )
        .await
        .expect("growing is allowed");
    assert_eq!(
        grown
            .spec
            .and_then(|s| s.resources)
            .and_then(|r| r.requests)
            .expect("requests")["storage"]
            .0,
        "20Gi"
    );
    for body in [
        json!({"spec": {"resources": {"requests": {"storage": "5Gi"}}}}),
        json!({"spec": {"storageClassName": "other"}}),
        json!({"spec": {"accessModes": ["ReadWriteMany"]}}),
    ] {
        let refused = api
            .patch("data", &PatchParams::default(), &patch(body.clone()))
            .await;
        assert_eq!(code(&refused.expect_err("immutable")), 422, "{body}");
    }
}

#[tokio::test]
async fn a_pod_spec_only_changes_where_kubernetes_allows() {
    let t = TestSandbox::start().await;
    let api: Api<Pod> = Api::default_namespaced(t.client.clone());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "postgres:16", "env": [{"name": "A", "value": "1"}]}]}
    }))
    .expect("pod");
    api.create(&PostParams::default(), &pod)
        .await
        .expect("created");
    let image = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"spec": {"containers": [{"name": "c", "image": "postgres:17"}]}}),
            ),
        )
        .await
        .expect("the image may change");
    assert_eq!(
        image.spec.expect("spec").containers[0].image.as_deref(),
        Some("postgres:17")
    );
    let bound = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nodeName": "sandbox"}})),
        )
        .await
        .expect("binding sets nodeName once");
    assert_eq!(
        bound.spec.and_then(|s| s.node_name).as_deref(),
        Some("sandbox")
    );
    for body in [
        json!({"spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "2"}]}]}}),
        json!({"spec": {"nodeName": "elsewhere"}}),
    ] {
        let refused = api
            .patch(
                "p",
                &PatchParams::default(),
                &Patch::Strategic(body.clone()),
            )
            .await;
        assert_eq!(code(&refused.expect_err("immutable")), 422, "{body}");
    }
}

#[tokio::test]
async fn pods_need_an_existing_service_account_and_namespaces_get_a_default_one() {
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    let t = TestSandbox::start().await;
    let namespaces: Api<Namespace> = Api::all(t.client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team"}})).expect("ns");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
    let accounts: Api<ServiceAccount> = Api::namespaced(t.client.clone(), "team");
    accounts
        .get("default")
        .await
        .expect("the default account exists");
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "team");
    let pod = |name: &str, account: Option<&str>| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"serviceAccountName": account, "containers": [{"name": "c", "image": "postgres:16"}]}
        }))
        .expect("pod")
    };
    pods.create(&PostParams::default(), &pod("plain", None))
        .await
        .expect("default account");
    let refused = pods
        .create(&PostParams::default(), &pod("own", Some("db")))
        .await;
    assert_eq!(code(&refused.expect_err("missing account")), 403);
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "db"}})).expect("sa");
    accounts
        .create(&PostParams::default(), &account)
        .await
        .expect("account");
    pods.create(&PostParams::default(), &pod("own", Some("db")))
        .await
        .expect("now admitted");
}

#[tokio::test]
async fn a_user_id_that_would_wrap_into_root_is_refused() {
    let t = TestSandbox::start().await;
    let api: Api<Pod> = Api::default_namespaced(t.client.clone());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "wraps"},
        "spec": {"securityContext": {"runAsUser": 4_294_967_296_i64},
                 "containers": [{"name": "c", "image": "postgres:16"}]}
    }))
    .expect("pod");
    let error = api
        .create(&PostParams::default(), &pod)
        .await
        .expect_err("refused");
    assert_eq!(code(&error), 422);
    let kube::Error::Api(status) = error else {
        unreachable!("an API error")
    };
    assert!(
        status.message.contains("spec.securityContext.runAsUser")
            && status.message.contains("must be between 0 and 2147483647"),
        "{}",
        status.message
    );
    assert!(api.get_opt("wraps").await.expect("read").is_none());
}
