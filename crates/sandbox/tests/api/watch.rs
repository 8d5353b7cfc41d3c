//! Watches: resume from a resourceVersion, bookmarks, 410 Gone, timeouts,
//! and kube-rs watchers that survive dropped connections.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use crate::common::{ROOT_CA, TestSandbox, WAIT, config_map};

async fn next_event(
    stream: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin),
) -> WatchEvent<ConfigMap> {
    tokio::time::timeout(WAIT, stream.try_next())
        .await
        .expect("an event before the timeout")
        .expect("a healthy stream")
        .expect("the stream is still open")
}

#[tokio::test]
async fn watch_from_a_resource_version_replays_later_changes() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let first = api
        .create(&PostParams::default(), &config_map("a", json!({})))
        .await
        .expect("created");
    let rv = first.resource_version().expect("rv");
    api.create(&PostParams::default(), &config_map("b", json!({})))
        .await
        .expect("created");
    api.delete("a", &Default::default()).await.expect("deleted");
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    match next_event(&mut stream).await {
        WatchEvent::Added(cm) => assert_eq!(cm.name_any(), "b"),
        other => panic!("expected ADDED b, got {other:?}"),
    }
    match next_event(&mut stream).await {
        WatchEvent::Deleted(cm) => assert_eq!(cm.name_any(), "a"),
        other => panic!("expected DELETED a, got {other:?}"),
    }
    api.create(&PostParams::default(), &config_map("c", json!({})))
        .await
        .expect("created");
    match next_event(&mut stream).await {
        WatchEvent::Added(cm) => assert_eq!(cm.name_any(), "c"),
        other => panic!("expected ADDED c, got {other:?}"),
    }
}

#[tokio::test]
async fn bookmarks_arrive_when_asked() {
    let t = TestSandbox::start_with(|mut c| {
        c.bookmark_interval = Duration::from_millis(200);
        c
    })
    .await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let created = api
        .create(&PostParams::default(), &config_map("a", json!({})))
        .await
        .expect("created");
    let rv = created.resource_version().expect("rv");
    let mut stream = api
        .watch(
            &WatchParams {
                bookmarks: true,
                ..WatchParams::default()
            },
            &rv,
        )
        .await
        .expect("watch")
        .boxed();
    match next_event(&mut stream).await {
        WatchEvent::Bookmark(bookmark) => assert_eq!(bookmark.metadata.resource_version, rv),
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn watching_from_a_version_older_than_history_is_gone() {
    let t = TestSandbox::start_with(|mut c| {
        c.history_limit = 3;
        c
    })
    .await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let first = api
        .create(&PostParams::default(), &config_map("a", json!({})))
        .await
        .expect("created");
    for i in 0..5 {
        api.create(
            &PostParams::default(),
            &config_map(&format!("x{i}"), json!({})),
        )
        .await
        .expect("created");
    }
    let rv = first.resource_version().expect("rv");
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    match next_event(&mut stream).await {
        WatchEvent::Error(status) => assert_eq!(status.code, 410),
        other => panic!("expected 410 Gone, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_timeout_is_honoured() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let started = std::time::Instant::now();
    let stream = api
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .expect("watch");
    let events: Vec<_> = tokio::time::timeout(WAIT, stream.collect::<Vec<_>>())
        .await
        .expect("the stream ends by itself");
    assert!(events.iter().all(|e| matches!(e, Ok(WatchEvent::Added(_)))));
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn label_selected_watch_sees_objects_enter_and_leave() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let created = api
        .create(&PostParams::default(), &config_map("a", json!({})))
        .await
        .expect("created");
    let mut stream = api
        .watch(
            &WatchParams::default().labels("pick=yes"),
            &created.resource_version().expect("rv"),
        )
        .await
        .expect("watch")
        .boxed();
    let mut labelled = api.get("a").await.expect("get");
    labelled.metadata.labels = Some([("pick".to_owned(), "yes".to_owned())].into());
    let labelled = api
        .replace("a", &PostParams::default(), &labelled)
        .await
        .expect("labelled");
    assert!(matches!(
        next_event(&mut stream).await,
        WatchEvent::Added(_)
    ));
    let mut unlabelled = labelled;
    unlabelled.metadata.labels = None;
    api.replace("a", &PostParams::default(), &unlabelled)
        .await
        .expect("unlabelled");
    assert!(matches!(
        next_event(&mut stream).await,
        WatchEvent::Deleted(_)
    ));
}

#[tokio::test]
async fn kube_watcher_resumes_after_watches_are_closed() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let mut names = watcher(api.clone(), watcher::Config::default())
        .applied_objects()
        .map_ok(|cm| cm.name_any())
        .try_filter(|name| std::future::ready(name != ROOT_CA))
        .boxed();
    api.create(&PostParams::default(), &config_map("before", json!({})))
        .await
        .expect("created");
    let first = tokio::time::timeout(WAIT, names.try_next())
        .await
        .expect("event")
        .expect("ok");
    assert_eq!(first.as_deref(), Some("before"));
    // A second object arrives through the open watch.
    api.create(&PostParams::default(), &config_map("during", json!({})))
        .await
        .expect("created");
    let second = tokio::time::timeout(WAIT, names.try_next())
        .await
        .expect("event")
        .expect("ok");
    assert_eq!(second.as_deref(), Some("during"));
    assert_eq!(t.sandbox.faults().count("watch", "configmaps"), 1);
    t.sandbox.faults().close_watches();
    // The watcher reconnects only while its stream is polled: poll it (no
    // event is due) until its second watch request has arrived, so the
    // next object is delivered by the new watch.
    let deadline = tokio::time::Instant::now() + WAIT;
    while t.sandbox.faults().count("watch", "configmaps") < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watcher reconnects"
        );
        let _ = tokio::time::timeout(Duration::from_millis(50), names.try_next()).await;
    }
    api.create(&PostParams::default(), &config_map("after", json!({})))
        .await
        .expect("created");
    let mut seen = Vec::new();
    while !seen.contains(&"after".to_owned()) {
        let name = tokio::time::timeout(WAIT, names.try_next())
            .await
            .expect("event after reconnect")
            .expect("ok")
            .expect("open");
        seen.push(name);
    }
    assert!(t.sandbox.faults().count("watch", "configmaps") >= 2);
}

#[tokio::test]
async fn streaming_lists_deliver_initial_events_and_their_end_bookmark() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    for name in ["a", "b"] {
        api.create(&PostParams::default(), &config_map(name, json!({})))
            .await
            .expect("created");
    }
    let mut events = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut initial = Vec::new();
    loop {
        let event = tokio::time::timeout(WAIT, events.try_next())
            .await
            .expect("an event")
            .expect("ok")
            .expect("open");
        match event {
            watcher::Event::Init => {}
            watcher::Event::InitApply(cm) if cm.name_any() == ROOT_CA => {}
            watcher::Event::InitApply(cm) => initial.push(cm.name_any()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?} before the initial list ended"),
        }
    }
    initial.sort();
    assert_eq!(initial, vec!["a", "b"]);
    assert_eq!(
        t.sandbox.faults().count("list", "configmaps"),
        0,
        "no list request"
    );
}
