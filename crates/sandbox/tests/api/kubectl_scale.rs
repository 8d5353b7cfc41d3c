//! `kubectl scale` on a PostgresCluster through the scale subresource its
//! CRD declares: `spec.instances` changes, and values the CRD forbids are
//! refused with the CRD's messages.

use serde_json::Value;

use crate::common::TestSandbox;
use crate::kubectl::{kubectl, succeed, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scales_a_postgres_cluster_within_its_crd_rules() {
    let t = TestSandbox::with_tusk_crds().await;
    succeed(
        &t,
        &["apply", "--server-side", "-f", "deploy/examples/small.yaml"],
    );
    let scaled = succeed(&t, &["scale", "pgc", "small", "--replicas", "2"]);
    assert!(
        scaled.contains("postgrescluster.postgres.tusk.dev/small scaled"),
        "{scaled}"
    );
    let instances = succeed(
        &t,
        &["get", "pgc", "small", "-o", "jsonpath={.spec.instances}"],
    );
    assert_eq!(instances, "2");
    let raw = succeed(
        &t,
        &[
            "get",
            "--raw",
            "/apis/postgres.tusk.dev/v1alpha1/namespaces/default/postgresclusters/small/scale",
        ],
    );
    let scale: Value = serde_json::from_str(&raw).expect("a Scale in JSON");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(scale["status"]["replicas"], 0);
    // kubectl scale --current-replicas sends the precondition kubectl checks.
    let stale = kubectl(
        &t,
        &[
            "scale",
            "pgc",
            "small",
            "--current-replicas",
            "1",
            "--replicas",
            "3",
        ],
    );
    assert!(!stale.status.success(), "{}", text(&stale));
    let too_many = kubectl(&t, &["scale", "pgc", "small", "--replicas", "65"]);
    assert!(!too_many.status.success());
    assert!(
        text(&too_many).contains("The PostgresCluster \"small\" is invalid")
            && text(&too_many).contains("spec.instances: 65 is greater than the maximum of 64"),
        "{}",
        text(&too_many)
    );
    let none = kubectl(&t, &["scale", "pgc", "small", "--replicas", "0"]);
    assert!(!none.status.success());
    assert!(
        text(&none).contains("must be at least 1: a cluster needs a primary"),
        "{}",
        text(&none)
    );
    let unchanged = succeed(
        &t,
        &["get", "pgc", "small", "-o", "jsonpath={.spec.instances}"],
    );
    assert_eq!(unchanged, "2");
}

/// PUT of a Scale: its resourceVersion is a precondition, and a negative
/// count is refused before the object is touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_a_scale_checks_its_version_and_its_count() {
    use kube::api::{Api, PostParams};
    use tusk_api::v1alpha1::PostgresCluster;

    let t = TestSandbox::with_tusk_crds().await;
    succeed(
        &t,
        &["apply", "--server-side", "-f", "deploy/examples/small.yaml"],
    );
    let clusters: Api<PostgresCluster> = Api::default_namespaced(t.client.clone());
    let scale = clusters.get_scale("small").await.expect("a Scale");
    assert_eq!(scale.spec.as_ref().and_then(|s| s.replicas), Some(1));
    let version = scale.metadata.resource_version.clone().expect("a version");
    let body = |replicas: i64, version: &str| {
        serde_json::from_value::<k8s_openapi::api::autoscaling::v1::Scale>(serde_json::json!({
            "apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "small", "resourceVersion": version},
            "spec": {"replicas": replicas},
        }))
        .expect("a Scale")
    };
    let replaced = clusters
        .replace_scale("small", &PostParams::default(), &body(3, &version))
        .await
        .expect("replaced");
    assert_eq!(replaced.spec.and_then(|s| s.replicas), Some(3));
    let stale = clusters
        .replace_scale("small", &PostParams::default(), &body(4, &version))
        .await
        .expect_err("a stale version is refused");
    assert_eq!(crate::common::code(&stale), 409, "{stale}");
    let negative = clusters
        .replace_scale("small", &PostParams::default(), &body(-1, ""))
        .await
        .expect_err("a negative count is refused");
    assert_eq!(crate::common::code(&negative), 422, "{negative}");
    assert!(
        negative
            .to_string()
            .contains("must be greater than or equal to 0"),
        "{negative}"
    );
    let live = clusters.get("small").await.expect("the cluster");
    assert_eq!(live.spec.instances, 3);
}
