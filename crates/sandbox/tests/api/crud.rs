//! Create, get, list, update and delete through kube-rs.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::common::{self, ROOT_CA, TestSandbox, code, config_map};

#[tokio::test]
async fn create_fills_in_uid_timestamp_and_generate_name() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let created = api
        .create(
            &PostParams::default(),
            &config_map("plain", json!({"a": "1"})),
        )
        .await
        .expect("created");
    assert!(created.uid().is_some_and(|u| u.len() == 36));
    assert!(created.metadata.creation_timestamp.is_some());
    assert!(created.resource_version().is_some());
    assert_eq!(created.namespace().as_deref(), Some("default"));
    let mut generated = config_map("", json!({}));
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let generated = api
        .create(&PostParams::default(), &generated)
        .await
        .expect("created");
    assert!(generated.name_any().starts_with("gen-") && generated.name_any().len() == 9);
    let again = api
        .create(&PostParams::default(), &config_map("plain", json!({})))
        .await;
    assert_eq!(code(&again.expect_err("duplicate refused")), 409);
}

#[tokio::test]
async fn missing_objects_and_namespaces_are_not_found() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    assert_eq!(code(&api.get("nothing").await.expect_err("missing")), 404);
    let elsewhere: Api<ConfigMap> = Api::namespaced(t.client.clone(), "nowhere");
    let refused = elsewhere
        .create(&PostParams::default(), &config_map("a", json!({})))
        .await;
    assert_eq!(code(&refused.expect_err("no such namespace")), 404);
}

#[tokio::test]
async fn stale_updates_conflict() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let first = api
        .create(&PostParams::default(), &config_map("cm", json!({"a": "1"})))
        .await
        .expect("created");
    let mut fresh = first.clone();
    fresh.data = Some([("a".to_owned(), "2".to_owned())].into());
    let updated = api
        .replace("cm", &PostParams::default(), &fresh)
        .await
        .expect("update");
    assert_ne!(updated.resource_version(), first.resource_version());
    let mut stale = first.clone();
    stale.data = Some([("a".to_owned(), "3".to_owned())].into());
    let conflict = api.replace("cm", &PostParams::default(), &stale).await;
    let error = conflict.expect_err("stale write refused");
    assert_eq!(code(&error), 409);
    assert_eq!(
        api.get("cm").await.expect("get").data.expect("data")["a"],
        "2"
    );
}

#[tokio::test]
async fn lists_filter_by_label_and_field_selectors() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    for (name, tier) in [("a", "db"), ("b", "db"), ("c", "web")] {
        let mut cm = config_map(name, json!({}));
        cm.metadata.labels = Some([("tier".to_owned(), tier.to_owned())].into());
        api.create(&PostParams::default(), &cm)
            .await
            .expect("created");
    }
    let names = |list: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        list.items
            .iter()
            .map(ResourceExt::name_any)
            .filter(|name| name != ROOT_CA)
            .collect()
    };
    let db = api
        .list(&ListParams::default().labels("tier=db"))
        .await
        .expect("list");
    assert_eq!(names(db), vec!["a", "b"]);
    let not_db = api
        .list(&ListParams::default().labels("tier notin (db)"))
        .await
        .expect("list");
    assert_eq!(names(not_db), vec!["c"]);
    let by_name = api
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .expect("list");
    assert_eq!(names(by_name), vec!["b"]);
    let unsupported = api.list(&ListParams::default().fields("data.a=1")).await;
    assert_eq!(code(&unsupported.expect_err("unsupported field")), 400);
}

#[tokio::test]
async fn lists_page_with_limit_and_continue() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    for i in 0..7 {
        api.create(
            &PostParams::default(),
            &config_map(&format!("cm-{i}"), json!({})),
        )
        .await
        .expect("created");
    }
    let mut seen = Vec::new();
    let mut params = ListParams::default().limit(3);
    let mut pages = 0;
    loop {
        let page = api.list(&params).await.expect("page");
        pages += 1;
        seen.extend(
            page.items
                .iter()
                .map(ResourceExt::name_any)
                .filter(|name| name != ROOT_CA),
        );
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, (0..7).map(|i| format!("cm-{i}")).collect::<Vec<_>>());
}

#[tokio::test]
async fn deletes_honour_preconditions() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let created = api
        .create(&PostParams::default(), &config_map("cm", json!({})))
        .await
        .expect("created");
    let wrong = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("not-the-uid".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    assert_eq!(
        code(
            &api.delete("cm", &wrong)
                .await
                .expect_err("precondition fails")
        ),
        409
    );
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: created.uid(),
            resource_version: created.resource_version(),
        }),
        ..DeleteParams::default()
    };
    api.delete("cm", &right).await.expect("deleted");
    assert_eq!(code(&api.get("cm").await.expect_err("gone")), 404);
}

#[tokio::test]
async fn state_survives_a_restart() {
    let mut t = TestSandbox::start().await;
    common::install_widgets(&t.client).await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let created = api
        .create(
            &PostParams::default(),
            &config_map("kept", json!({"k": "v"})),
        )
        .await
        .expect("created");
    let widgets = common::widgets(&t.client, "v1");
    widgets
        .create(
            &PostParams::default(),
            &common::widget("w", json!({"size": 2})),
        )
        .await
        .expect("widget created");
    t.sandbox.stop();
    let restarted = tusk_sandbox::Sandbox::start(tusk_sandbox::Config::new(t.dir.path()))
        .await
        .expect("restarts on the same data");
    let client: Client = common::client_for(&restarted).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let kept = api.get("kept").await.expect("still there");
    assert_eq!(kept.uid(), created.uid());
    assert_eq!(kept.data.as_ref().expect("data")["k"], "v");
    let widgets = common::widgets(&client, "v1");
    assert_eq!(
        widgets
            .get("w")
            .await
            .expect("custom kind still served")
            .data["spec"]["size"],
        2
    );
    // resourceVersions keep increasing across the restart.
    let next = api
        .create(&PostParams::default(), &config_map("after", json!({})))
        .await
        .expect("created");
    let rv = |cm: &ConfigMap| {
        cm.resource_version()
            .and_then(|v| v.parse::<u64>().ok())
            .expect("numeric rv")
    };
    assert!(rv(&next) > rv(&kept));
}

#[tokio::test]
async fn requests_without_the_token_are_unauthorized() {
    let t = TestSandbox::start().await;
    let path = t.dir.path().join("kubeconfig");
    let text = std::fs::read_to_string(&path).expect("kubeconfig");
    let token_line = text
        .lines()
        .find(|l| l.trim_start().starts_with("token:"))
        .expect("token line");
    let bad = text.replace(token_line, "    token: wrong");
    let kubeconfig: kube::config::Kubeconfig = serde_yaml_ng::from_str(&bad).expect("parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    let client = Client::try_from(config).expect("client");
    let api: Api<Namespace> = Api::all(client);
    assert_eq!(code(&api.get("default").await.expect_err("refused")), 401);
}

#[tokio::test]
async fn events_recorded_through_events_k8s_io_are_listed_as_core_events() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event;
    let t = TestSandbox::start().await;
    let events: Api<Event> = Api::default_namespaced(t.client.clone());
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": "db.failover"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": {"kind": "PostgresCluster", "name": "db", "namespace": "default"},
        "reason": "Failover", "note": "promoted db-2", "type": "Warning", "action": "Promote",
        "reportingController": "tusk.dev/operator", "reportingInstance": "tusk-0"
    }))
    .expect("event");
    events
        .create(&PostParams::default(), &event)
        .await
        .expect("recorded");
    let core: Api<CoreEvent> = Api::default_namespaced(t.client.clone());
    let listed = core
        .list(&ListParams::default().fields("involvedObject.name=db"))
        .await
        .expect("listed as core events");
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].message.as_deref(), Some("promoted db-2"));
    assert_eq!(
        listed.items[0].reporting_component.as_deref(),
        Some("tusk.dev/operator")
    );
    let back = events
        .get("db.failover")
        .await
        .expect("read back through events.k8s.io");
    assert_eq!(back.note.as_deref(), Some("promoted db-2"));
}

#[tokio::test]
async fn deletecollection_removes_only_the_selected_objects() {
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    for (name, tier) in [("a", "db"), ("b", "db"), ("c", "web")] {
        let mut cm = config_map(name, json!({}));
        cm.metadata.labels = Some([("tier".to_owned(), tier.to_owned())].into());
        api.create(&PostParams::default(), &cm)
            .await
            .expect("created");
    }
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("tier=db"),
    )
    .await
    .expect("deleted");
    let left: Vec<String> = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(ResourceExt::name_any)
        .filter(|name| name != ROOT_CA)
        .collect();
    assert_eq!(left, vec!["c"]);
}

#[tokio::test]
async fn a_continue_token_older_than_the_history_is_gone() {
    let t = TestSandbox::start_with(|mut c| {
        c.history_limit = 3;
        c
    })
    .await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    for i in 0..4 {
        api.create(
            &PostParams::default(),
            &config_map(&format!("cm-{i}"), json!({})),
        )
        .await
        .expect("created");
    }
    let page = api
        .list(&ListParams::default().limit(2))
        .await
        .expect("first page");
    let token = page.metadata.continue_.expect("more pages");
    for i in 4..8 {
        api.create(
            &PostParams::default(),
            &config_map(&format!("cm-{i}"), json!({})),
        )
        .await
        .expect("created");
    }
    let expired = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await;
    assert_eq!(code(&expired.expect_err("too old")), 410);
}

#[tokio::test]
async fn an_exact_list_of_an_older_version_is_refused_not_faked() {
    use kube::api::VersionMatch;
    let t = TestSandbox::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let first = api
        .create(&PostParams::default(), &config_map("a", json!({})))
        .await
        .expect("created");
    let current = api.list(&ListParams::default()).await.expect("list");
    let exact_now = ListParams::default()
        .at(&current.metadata.resource_version.clone().expect("rv"))
        .matching(VersionMatch::Exact);
    assert_eq!(
        api.list(&exact_now)
            .await
            .expect("current version")
            .items
            .iter()
            .filter(|cm| cm.name_any() != ROOT_CA)
            .count(),
        1
    );
    api.create(&PostParams::default(), &config_map("b", json!({})))
        .await
        .expect("created");
    let exact_old = ListParams::default()
        .at(&first.resource_version().expect("rv"))
        .matching(VersionMatch::Exact);
    assert_eq!(
        code(&api.list(&exact_old).await.expect_err("not kept")),
        410
    );
}
