//! Fault injection and the request counter.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;
use tusk_sandbox::Failure;

use crate::common::{TestSandbox, code, config_map};

#[tokio::test]
async fn injected_failures_hit_the_next_matching_requests_only() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let faults = t.sandbox.faults();
    faults.reset_counts();
    faults.fail_next(
        1,
        "create",
        "configmaps",
        Failure::TooManyRequests {
            retry_after_seconds: 1,
        },
    );
    faults.fail_next(1, "create", "configmaps", Failure::Unavailable);
    faults.fail_next(1, "get", "*", Failure::Internal);
    // kube-rs retries 429 (after Retry-After) and 503 by itself.
    let started = Instant::now();
    api.create(&PostParams::default(), &config_map("a", json!({})))
        .await
        .expect("succeeds once the injected failures are used up");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After was honoured"
    );
    assert_eq!(faults.count("create", "configmaps"), 3);
    assert_eq!(code(&api.get("a").await.expect_err("500")), 500);
    api.get("a").await.expect("the rule is used up");
    assert_eq!(faults.count("get", "configmaps"), 2);
}

#[tokio::test]
async fn delays_slow_every_response() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    t.sandbox
        .faults()
        .set_delay(Some(Duration::from_millis(300)));
    let started = Instant::now();
    api.list(&Default::default()).await.expect("list");
    assert!(started.elapsed() >= Duration::from_millis(300));
    t.sandbox.faults().set_delay(None);
}

#[tokio::test]
async fn requests_are_counted_by_verb_and_resource() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let faults = t.sandbox.faults();
    faults.reset_counts();
    api.create(&PostParams::default(), &config_map("a", json!({})))
        .await
        .expect("created");
    api.get("a").await.expect("get");
    api.get("a").await.expect("get");
    api.list(&Default::default()).await.expect("list");
    assert_eq!(faults.count("create", "configmaps"), 1);
    assert_eq!(faults.count("get", "configmaps"), 2);
    assert_eq!(faults.count("list", "configmaps"), 1);
    assert_eq!(faults.writes(), 1);
}
