//! What gives pods an identity: the ServiceAccount admission plugin's token
//! volume, the root CA ConfigMap in every namespace, and the `kubernetes`
//! Service with its Endpoints and the API server certificate's names.

use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Namespace, Pod, Service, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::common::{TestSandbox, WAIT, eventually, wait_for};

const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn pod(name: &str, spec: Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("pod")
}

fn as_json(pod: &Pod) -> Value {
    serde_json::to_value(pod).expect("json")
}

#[tokio::test]
async fn every_container_gets_the_token_volume_unless_it_mounts_that_path_itself() {
    let t = TestSandbox::start().await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    let spec = json!({
        "initContainers": [{"name": "copy", "image": "tusk"}],
        "containers": [
            {"name": "main", "image": "tusk"},
            {"name": "own", "image": "tusk", "volumeMounts": [{"name": "mine", "mountPath": TOKEN_PATH}]}
        ],
        "volumes": [{"name": "mine", "emptyDir": {}}]
    });
    let created = as_json(
        &pods
            .create(&PostParams::default(), &pod("p", spec))
            .await
            .expect("pod"),
    );
    assert_eq!(created["spec"]["serviceAccountName"], "default");
    assert_eq!(created["spec"]["serviceAccount"], "default");
    let volumes = created["spec"]["volumes"].as_array().expect("volumes");
    let token = volumes
        .iter()
        .find(|v| {
            v["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("kube-api-access-"))
        })
        .expect("a kube-api-access volume");
    let name = token["name"].as_str().expect("name");
    assert_eq!(name.len(), "kube-api-access-".len() + 5, "{name}");
    assert_eq!(
        token["projected"],
        json!({"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ]})
    );
    let mount = json!({"name": name, "readOnly": true, "mountPath": TOKEN_PATH});
    assert_eq!(
        created["spec"]["initContainers"][0]["volumeMounts"],
        json!([mount])
    );
    assert_eq!(
        created["spec"]["containers"][0]["volumeMounts"],
        json!([mount])
    );
    assert_eq!(
        created["spec"]["containers"][1]["volumeMounts"],
        json!([{"name": "mine", "mountPath": TOKEN_PATH}]),
        "a container's own mount at the token path is kept"
    );
}

#[tokio::test]
async fn automount_turned_off_on_the_pod_or_its_account_adds_no_token() {
    let t = TestSandbox::start().await;
    let accounts: Api<ServiceAccount> = Api::namespaced(t.client.clone(), "default");
    let quiet: ServiceAccount = serde_json::from_value(
        json!({"metadata": {"name": "quiet"}, "automountServiceAccountToken": false}),
    )
    .expect("sa");
    accounts
        .create(&PostParams::default(), &quiet)
        .await
        .expect("sa");
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    let container = json!([{"name": "main", "image": "tusk"}]);
    let cases = [
        (
            "pod-off",
            json!({"automountServiceAccountToken": false, "containers": container}),
            false,
        ),
        (
            "account-off",
            json!({"serviceAccountName": "quiet", "containers": container}),
            false,
        ),
        (
            "pod-overrides",
            json!({"serviceAccountName": "quiet", "automountServiceAccountToken": true, "containers": container}),
            true,
        ),
    ];
    for (name, spec, mounted) in cases {
        let created = as_json(
            &pods
                .create(&PostParams::default(), &pod(name, spec))
                .await
                .expect("pod"),
        );
        let has_volume = created["spec"]["volumes"]
            .as_array()
            .is_some_and(|v| !v.is_empty());
        let has_mount = created["spec"]["containers"][0]["volumeMounts"]
            .as_array()
            .is_some_and(|m| !m.is_empty());
        assert_eq!(
            (has_volume, has_mount),
            (mounted, mounted),
            "{name}: {created}"
        );
    }
}

#[tokio::test]
async fn a_pod_naming_a_missing_account_is_refused_with_kubes_message() {
    let t = TestSandbox::start().await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    let spec =
        json!({"serviceAccountName": "ghost", "containers": [{"name": "main", "image": "tusk"}]});
    let error = pods
        .create(&PostParams::default(), &pod("p", spec))
        .await
        .expect_err("refused");
    let kube::Error::Api(status) = error else {
        panic!("not an API error: {error}");
    };
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        "pods \"p\" is forbidden: error looking up service account default/ghost: serviceaccount \"ghost\" not found"
    );
}

fn sandbox_ca(t: &TestSandbox) -> String {
    std::fs::read_to_string(t.dir.path().join("ca.crt")).expect("the sandbox CA")
}

#[tokio::test]
async fn every_namespace_holds_the_root_ca_and_gets_it_back_after_a_delete() {
    let t = TestSandbox::start().await;
    let ca = sandbox_ca(&t);
    let namespaces: Api<Namespace> = Api::all(t.client.clone());
    let team: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "team"}})).expect("ns");
    namespaces
        .create(&PostParams::default(), &team)
        .await
        .expect("ns");
    for namespace in ["default", "kube-system", "team"] {
        let maps: Api<ConfigMap> = Api::namespaced(t.client.clone(), namespace);
        let found = eventually("the root CA ConfigMap", WAIT, || async {
            maps.get_opt("kube-root-ca.crt").await.ok().flatten()
        })
        .await;
        let data = found.data.unwrap_or_default();
        assert_eq!(data.get("ca.crt"), Some(&ca), "in {namespace}");
    }
    let maps: Api<ConfigMap> = Api::namespaced(t.client.clone(), "team");
    let first = maps.get("kube-root-ca.crt").await.expect("map");
    maps.delete("kube-root-ca.crt", &DeleteParams::default())
        .await
        .expect("delete");
    let again = eventually("the root CA ConfigMap is recreated", WAIT, || async {
        maps.get_opt("kube-root-ca.crt")
            .await
            .ok()
            .flatten()
            .filter(|m| m.metadata.uid != first.metadata.uid)
    })
    .await;
    assert_eq!(
        again.data.clone().unwrap_or_default().get("ca.crt"),
        Some(&ca)
    );
    let mut edited = again.clone();
    edited.data = Some([("ca.crt".to_owned(), "not a CA".to_owned())].into());
    maps.replace("kube-root-ca.crt", &PostParams::default(), &edited)
        .await
        .expect("edit");
    wait_for("the root CA is put back", WAIT, || async {
        maps.get("kube-root-ca.crt")
            .await
            .is_ok_and(|m| m.data.unwrap_or_default().get("ca.crt") == Some(&ca))
    })
    .await;
}

async fn kubernetes_service(client: &kube::Client) -> (Service, Endpoints) {
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), "default");
    (
        services
            .get("kubernetes")
            .await
            .expect("the kubernetes Service"),
        endpoints.get("kubernetes").await.expect("its Endpoints"),
    )
}

#[tokio::test]
async fn the_kubernetes_service_points_at_the_api_server_after_every_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (first, client) = tusk_sandbox::testing::serve(dir.path(), |c| c).await;
    let (service, _) = kubernetes_service(&client).await;
    let ip = service
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .expect("cluster IP");
    drop(first);
    drop(client);
    let (second, client) = tusk_sandbox::testing::serve(dir.path(), |c| c).await;
    let port = second.address().port();
    let (service, endpoints) = kubernetes_service(&client).await;
    let service = serde_json::to_value(&service).expect("json");
    assert_eq!(
        service["spec"]["clusterIP"], ip,
        "the address is kept across starts"
    );
    assert_eq!(service["spec"]["type"], "ClusterIP");
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}])
    );
    assert_eq!(
        serde_json::to_value(&endpoints).expect("json")["subsets"],
        json!([{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}])
    );
    assert!(ip.starts_with("127.1.") && ip.ends_with(".1"), "{ip}");
}

/// A client that reaches the API server on 127.0.0.1 and verifies its
/// certificate for `name`, as an in-cluster client reaching it through the
/// Service's address or DNS name would.
async fn verified_as(t: &TestSandbox, name: &str) -> Result<(), kube::Error> {
    let kubeconfig =
        kube::config::Kubeconfig::read_from(t.sandbox.kubeconfig_path()).expect("kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    config.tls_server_name = Some(name.to_owned());
    let client = kube::Client::try_from(config).expect("client");
    client.apiserver_version().await.map(drop)
}

#[tokio::test]
async fn the_server_certificate_names_the_service_address_and_its_dns_names() {
    let t = TestSandbox::start().await;
    let (service, _) = kubernetes_service(&t.client).await;
    let ip = service.spec.and_then(|s| s.cluster_ip).expect("cluster IP");
    for name in [
        ip.as_str(),
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ] {
        verified_as(&t, name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    assert!(
        verified_as(&t, "elsewhere.example").await.is_err(),
        "a name the certificate lacks is refused"
    );
}
