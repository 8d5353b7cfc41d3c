//! Metadata-only reads (`Accept: ...;as=PartialObjectMetadata[List]`), as
//! the operator's `tusk plan` lists Secrets: kube-apiserver answers with
//! metadata alone, so a client that asked for it never receives a Secret's
//! data, and the wrong form for the request is refused.

use axum::http::{Request, header};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use crate::common::{TestSandbox, code};

const OBJECT: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const SECRETS: &str = "/api/v1/namespaces/default/secrets";

async fn get(t: &TestSandbox, uri: &str, accept: &str) -> Result<Value, kube::Error> {
    let request = Request::get(uri)
        .header(header::ACCEPT, accept)
        .body(Vec::new())
        .expect("request");
    let text = t.client.request_text(request).await?;
    Ok(serde_json::from_str(&text).expect("JSON"))
}

fn metadata_only(object: &Value) {
    assert_eq!(object["kind"], "PartialObjectMetadata", "{object}");
    assert_eq!(object["apiVersion"], "meta.k8s.io/v1", "{object}");
    let keys: Vec<&String> = object.as_object().expect("an object").keys().collect();
    assert_eq!(keys, ["apiVersion", "kind", "metadata"], "{object}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_only_reads_carry_metadata_and_never_a_secrets_data() {
    let t = TestSandbox::start().await;
    let secrets: Api<Secret> = Api::default_namespaced(t.client.clone());
    let secret = serde_json::from_value(json!({
        "metadata": {"name": "app", "labels": {"tusk.dev/cluster": "shop"}},
        "stringData": {"password": "hunter2"},
    }))
    .expect("a Secret");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("created");

    let listed = get(&t, SECRETS, LIST).await.expect("listed");
    assert_eq!(listed["kind"], "PartialObjectMetadataList", "{listed}");
    assert!(
        listed["metadata"]["resourceVersion"].is_string(),
        "{listed}"
    );
    let items = listed["items"].as_array().expect("items");
    assert!(!items.is_empty());
    items.iter().for_each(metadata_only);
    let app = get(&t, &format!("{SECRETS}/app"), OBJECT)
        .await
        .expect("read");
    metadata_only(&app);
    assert_eq!(app["metadata"]["labels"]["tusk.dev/cluster"], "shop");
    // kube-rs's own metadata calls decode the answers.
    let names: Vec<String> = secrets
        .list_metadata(&ListParams::default().labels("tusk.dev/cluster=shop"))
        .await
        .expect("listed")
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .collect();
    assert_eq!(names, ["app"]);

    // A watch asked for PartialObjectMetadata sends each object so.
    let watched = Request::get(format!("{SECRETS}?watch=true&timeoutSeconds=1"))
        .header(header::ACCEPT, OBJECT)
        .body(Vec::new())
        .expect("request");
    let events = t.client.request_text(watched).await.expect("watched");
    let objects: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("an event")["object"].clone())
        .collect();
    assert!(!objects.is_empty(), "{events}");
    objects.iter().for_each(metadata_only);
    assert!(!events.contains("aHVudGVyMg"), "the password's base64");

    // The wrong form for the request, or another group: 406.
    for (uri, accept) in [
        (SECRETS.to_owned(), OBJECT),
        (format!("{SECRETS}/app"), LIST),
        (
            format!("{SECRETS}/app"),
            "application/json;as=PartialObjectMetadata;g=apps;v=v1",
        ),
    ] {
        let refused = get(&t, &uri, accept).await.expect_err("not acceptable");
        assert_eq!(code(&refused), 406, "{uri} {accept}");
    }
}
