//! Throughput of the sandbox API server with 10,000 objects: create, list
//! (whole, paged, selected), watch (initial state and live changes), and
//! a restart that reloads everything from SQLite.
//!
//! Run with `cargo bench -p tusk-sandbox --bench api`; it prints figures
//! (recorded in docs/benchmarks.md), it asserts nothing about speed.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, ResourceExt};
use serde_json::json;
use tusk_sandbox::{Config, Sandbox};

const OBJECTS: usize = 10_000;
const IN_FLIGHT: usize = 16;

async fn client(sandbox: &Sandbox) -> Client {
    let kubeconfig = Kubeconfig::read_from(sandbox.kubeconfig_path()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    Client::try_from(config).expect("client")
}

fn config_map(i: usize) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("cm-{i:05}"), "labels": {"bucket": format!("b{}", i % 100)}},
        "data": {"index": i.to_string(), "payload": "x".repeat(200)}
    }))
    .expect("config map")
}

fn report(what: &str, elapsed: Duration, count: usize) {
    let ms = elapsed.as_secs_f64() * 1000.0;
    let rate = count as f64 / elapsed.as_secs_f64();
    println!("{what:<52} {ms:>10.1} ms  {rate:>10.0} objects/s");
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut sandbox = Sandbox::start(Config::new(dir.path()))
        .await
        .expect("sandbox");
    let client = client(&sandbox).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    println!(
        "sandbox API server, {OBJECTS} ConfigMaps (~0.5 KiB each), {IN_FLIGHT} requests in flight"
    );

    let started = Instant::now();
    stream::iter(0..OBJECTS)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &config_map(i))
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await
        .expect("creates");
    report("create", started.elapsed(), OBJECTS);

    let started = Instant::now();
    let all = api.list(&ListParams::default()).await.expect("list");
    assert_eq!(all.items.len(), OBJECTS);
    report("list all (one response)", started.elapsed(), OBJECTS);

    let started = Instant::now();
    let mut params = ListParams::default().limit(500);
    let mut seen = 0;
    loop {
        let page = api.list(&params).await.expect("page");
        seen += page.items.len();
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    assert_eq!(seen, OBJECTS);
    report(
        "list all in pages of 500 (limit/continue)",
        started.elapsed(),
        OBJECTS,
    );

    let started = Instant::now();
    let selected = api
        .list(&ListParams::default().labels("bucket=b7"))
        .await
        .expect("list");
    assert_eq!(selected.items.len(), OBJECTS / 100);
    let elapsed = started.elapsed();
    println!(
        "{:<52} {:>10.1} ms  ({} of {OBJECTS} match)",
        "list by label selector",
        elapsed.as_secs_f64() * 1000.0,
        selected.items.len()
    );

    let started = Instant::now();
    let initial = api
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let added = initial
        .take(OBJECTS)
        .try_fold(0usize, |n, e| async move {
            Ok(n + usize::from(matches!(e, WatchEvent::Added(_))))
        })
        .await
        .expect("watch events");
    assert_eq!(added, OBJECTS);
    report(
        "watch from 0: initial ADDED events",
        started.elapsed(),
        OBJECTS,
    );

    let rv = all.metadata.resource_version.clone().expect("list rv");
    let mut live = api
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    let updates = 1_000;
    let started = Instant::now();
    let patcher = {
        let api = api.clone();
        tokio::spawn(async move {
            stream::iter(0..updates)
                .map(|i| {
                    let api = api.clone();
                    async move {
                        api.patch(
                            &format!("cm-{i:05}"),
                            &PatchParams::default(),
                            &Patch::Merge(json!({"data": {"index": "changed"}})),
                        )
                        .await
                        .map(|_| ())
                    }
                })
                .buffer_unordered(IN_FLIGHT)
                .try_collect::<Vec<()>>()
                .await
        })
    };
    let mut modified = 0;
    while modified < updates {
        if let WatchEvent::Modified(_) = live.try_next().await.expect("watch").expect("open") {
            modified += 1;
        }
    }
    patcher.await.expect("patcher").expect("patches");
    report(
        "1,000 patches seen by a live watch",
        started.elapsed(),
        updates,
    );

    let started = Instant::now();
    let (_, last) = stream::iter(0..updates)
        .fold((api.clone(), None), |(api, _), i| async move {
            let got = api.get(&format!("cm-{i:05}")).await.expect("get");
            (api, Some(got.name_any()))
        })
        .await;
    assert!(last.is_some());
    report("1,000 sequential gets", started.elapsed(), updates);

    sandbox.stop();
    let started = Instant::now();
    let restarted = Sandbox::start(Config::new(dir.path()))
        .await
        .expect("restart");
    let elapsed = started.elapsed();
    let client = self::client(&restarted).await;
    let count = Api::<ConfigMap>::default_namespaced(client)
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .len();
    assert_eq!(count, OBJECTS);
    println!(
        "{:<52} {:>10.1} ms",
        "restart (reload 10,000 objects from SQLite)",
        elapsed.as_secs_f64() * 1000.0
    );
}
