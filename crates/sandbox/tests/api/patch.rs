//! PATCH: JSON merge, JSON patch with `test`, strategic merge for built-in
//! kinds, and server-side apply with field ownership.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{TestSandbox, code, config_map, install_widgets, widget, widgets};

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [
            {"name": "db", "image": "postgres:16", "env": [{"name": "A", "value": "1"}],
             "ports": [{"containerPort": 5432}]},
            {"name": "side", "image": "busybox:1"}
        ]}
    }))
    .expect("valid pod")
}

#[tokio::test]
async fn json_merge_patch_sets_and_removes_fields() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    api.create(
        &PostParams::default(),
        &config_map("cm", json!({"a": "1", "b": "2"})),
    )
    .await
    .expect("created");
    let patched = api
        .patch(
            "cm",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": null, "c": "3"}})),
        )
        .await
        .expect("patched");
    let data = patched.data.expect("data");
    assert!(!data.contains_key("a"));
    assert_eq!(data["c"], "3");
}

#[tokio::test]
async fn json_patch_test_operations_guard_the_change() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    api.create(&PostParams::default(), &config_map("cm", json!({"a": "1"})))
        .await
        .expect("created");
    let guarded: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/a", "value": "1"},
        {"op": "replace", "path": "/data/a", "value": "2"}
    ]))
    .expect("patch");
    let patched = api
        .patch("cm", &PatchParams::default(), &Patch::Json::<()>(guarded))
        .await
        .expect("applied");
    assert_eq!(patched.data.expect("data")["a"], "2");
    let failing: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/a", "value": "1"},
        {"op": "replace", "path": "/data/a", "value": "3"}
    ]))
    .expect("patch");
    let refused = api
        .patch("cm", &PatchParams::default(), &Patch::Json::<()>(failing))
        .await;
    assert_eq!(code(&refused.expect_err("test fails")), 422);
    assert_eq!(
        api.get("cm").await.expect("get").data.expect("data")["a"],
        "2"
    );
}

#[tokio::test]
async fn strategic_merge_merges_containers_and_conditions_by_key() {
    let t = TestSandbox::start().await;
    let api: Api<Pod> = Api::default_namespaced(t.client.clone());
    api.create(&PostParams::default(), &pod("p"))
        .await
        .expect("created");
    let patched = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"spec": {"containers": [{"name": "side", "image": "busybox:2"}]}}),
            ),
        )
        .await
        .expect("patched");
    let spec = patched.spec.expect("spec");
    assert_eq!(spec.containers.len(), 2, "the other container is kept");
    assert_eq!(spec.containers[0].image.as_deref(), Some("postgres:16"));
    assert_eq!(spec.containers[0].env.as_ref().map(Vec::len), Some(1));
    assert_eq!(spec.containers[1].image.as_deref(), Some("busybox:2"));
    let condition = |type_: &str, status: &str| json!({"type": type_, "status": status});
    api.patch_status(
        "p",
        &PatchParams::default(),
        &Patch::Strategic(json!({"status": {"conditions": [condition("Ready", "False"), condition("Initialized", "True")]}})),
    )
    .await
    .expect("conditions written");
    let merged = api
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"conditions": [condition("Ready", "True")]}})),
        )
        .await
        .expect("conditions merged");
    let conditions: Vec<(String, String)> = merged
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(
        conditions,
        vec![
            ("Ready".into(), "True".into()),
            ("Initialized".into(), "True".into())
        ]
    );
    let custom = {
        install_widgets(&t.client).await;
        let widgets = widgets(&t.client, "v1");
        widgets
            .create(&PostParams::default(), &widget("w", json!({"size": 1})))
            .await
            .expect("created");
        widgets
            .patch(
                "w",
                &PatchParams::default(),
                &Patch::Strategic(json!({"spec": {"size": 2}})),
            )
            .await
    };
    assert_eq!(
        code(&custom.expect_err("no strategic merge for custom kinds")),
        415
    );
}

#[tokio::test]
async fn server_side_apply_tracks_owners_conflicts_and_removals() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let config = |data: serde_json::Value| {
        Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": data}),
        )
    };
    let applied = api
        .patch(
            "cm",
            &PatchParams::apply("alice"),
            &config(json!({"a": "1", "b": "2"})),
        )
        .await
        .expect("created by apply");
    let managers: Vec<String> = applied
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, vec!["alice"]);
    let fields = applied.managed_fields()[0]
        .fields_v1
        .as_ref()
        .expect("fieldsV1")
        .0
        .clone();
    assert!(fields["f:data"].get("f:a").is_some());
    let conflict = api
        .patch("cm", &PatchParams::apply("bob"), &config(json!({"a": "9"})))
        .await
        .expect_err("conflict with alice");
    assert_eq!(code(&conflict), 409);
    let forced = api
        .patch(
            "cm",
            &PatchParams::apply("bob").force(),
            &config(json!({"a": "9"})),
        )
        .await
        .expect("forced");
    assert_eq!(forced.data.as_ref().expect("data")["a"], "9");
    // alice stops applying b (and no longer owns a): b is removed, a stays.
    let reduced = api
        .patch("cm", &PatchParams::apply("alice"), &config(json!({})))
        .await
        .expect("applied");
    let data = reduced.data.expect("data");
    assert_eq!(data.get("a").map(String::as_str), Some("9"));
    assert!(
        !data.contains_key("b"),
        "field dropped by its only manager is removed"
    );
    // Re-applying the same configuration changes nothing.
    let again = api
        .patch("cm", &PatchParams::apply("bob"), &config(json!({"a": "9"})))
        .await
        .expect("no-op apply");
    assert_eq!(
        again.resource_version(),
        api.get("cm").await.expect("get").resource_version()
    );
    let same_rv = api
        .patch("cm", &PatchParams::apply("bob"), &config(json!({"a": "9"})))
        .await
        .expect("no-op");
    assert_eq!(
        same_rv.resource_version(),
        again.resource_version(),
        "a no-op apply is not a write"
    );
}

#[tokio::test]
async fn apply_to_a_status_subresource_owns_only_status() {
    let t = TestSandbox::start().await;
    install_widgets(&t.client).await;
    let api = widgets(&t.client, "v1");
    let body = |spec_size: i64, phase: &str| {
        Patch::Apply(
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"size": spec_size}, "status": {"phase": phase}}),
        )
    };
    api.patch("w", &PatchParams::apply("ctl"), &body(1, "ignored"))
        .await
        .expect("created");
    let status = api
        .patch_status("w", &PatchParams::apply("ctl"), &body(5, "Ready"))
        .await
        .expect("status applied");
    assert_eq!(status.data["status"]["phase"], "Ready");
    assert_eq!(status.data["spec"]["size"], 1);
    let entry = status
        .managed_fields()
        .iter()
        .find(|m| m.subresource.as_deref() == Some("status"))
        .cloned()
        .expect("status entry");
    assert_eq!(entry.manager.as_deref(), Some("ctl"));
}

#[tokio::test]
async fn apply_with_a_resource_version_is_a_precondition() {
    let t = TestSandbox::start().await;
    install_widgets(&t.client).await;
    let api = widgets(&t.client, "v1");
    let created = api
        .patch(
            "w",
            &PatchParams::apply("ctl"),
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w"}, "spec": {"size": 1}})),
        )
        .await
        .expect("created");
    let read = created.resource_version().expect("resourceVersion");
    let status = |phase: &str, version: &str| {
        Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "resourceVersion": version},
            "status": {"phase": phase}}))
    };
    let first = api
        .patch_status(
            "w",
            &PatchParams::apply("ctl").force(),
            &status("Ready", &read),
        )
        .await
        .expect("a write against the version read");
    assert_eq!(first.data["status"]["phase"], "Ready");
    // A writer that read before that write is refused, even with force.
    let stale = api
        .patch_status(
            "w",
            &PatchParams::apply("ctl").force(),
            &status("Stale", &read),
        )
        .await
        .expect_err("a stale write is refused");
    assert_eq!(code(&stale), 409, "{stale:?}");
    let now = api.get("w").await.expect("get");
    assert_eq!(now.data["status"]["phase"], "Ready");
}

#[tokio::test]
async fn apply_compares_numbers_by_value_not_by_spelling() {
    let t = TestSandbox::start().await;
    install_widgets(&t.client).await;
    let api = widgets(&t.client, "v1");
    let stored = widget("w", json!({"size": 1, "extra": {"minimum": 15}}));
    api.create(&PostParams::default(), &stored)
        .await
        .expect("created with 15");
    let applied = api
        .patch(
            "w",
            &PatchParams::apply("kubectl"),
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w"}, "spec": {"size": 1, "extra": {"minimum": 15.0}}})),
        )
        .await
        .expect("15.0 is the value another manager stored as 15: no conflict");
    assert_eq!(
        applied.data["spec"]["extra"]["minimum"].as_f64(),
        Some(15.0)
    );
}
