//! kubectl's typed commands against the sandbox: `create namespace`,
//! `create secret` and `create configmap` send protobuf bodies and ask for
//! protobuf answers; `get`, `get -w` and `delete` read them back. Raw
//! requests check the protobuf envelope's refusals.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use axum::http::{Request, header};
use base64::Engine as _;

use crate::common::{TestSandbox, WAIT, code, install_widgets, wait_for};
use crate::kubectl::{kubectl, kubectl_command, succeed, text};

/// The lines a long-running kubectl prints, as they come.
fn lines_of(child: &mut std::process::Child) -> Receiver<String> {
    let stdout = child.stdout.take().expect("stdout");
    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    lines_rx
}

fn wait_for_line(lines: &Receiver<String>, wanted: impl Fn(&str) -> bool) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if let Ok(line) = lines.recv_timeout(Duration::from_millis(200))
            && wanted(&line)
        {
            return true;
        }
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_namespaces_secrets_and_config_maps_in_protobuf() {
    let t = TestSandbox::start().await;
    let created = succeed(&t, &["create", "namespace", "shop", "-v=8"]);
    assert!(created.contains("namespace/shop created"), "{created}");
    // kubectl sent protobuf and read the server's protobuf answer.
    let answer = created
        .split_once("status=\"201 Created\"")
        .map(|(_, after)| after.split("Response Body").next().unwrap_or(""))
        .unwrap_or("");
    assert!(
        answer.contains("Content-Type: application/vnd.kubernetes.protobuf"),
        "{created}"
    );
    let phase = succeed(
        &t,
        &["get", "namespace", "shop", "-o", "jsonpath={.status.phase}"],
    );
    assert_eq!(phase, "Active");
    let secret = succeed(
        &t,
        &[
            "create",
            "secret",
            "generic",
            "db",
            "-n",
            "shop",
            "--from-literal=password=s3cret",
        ],
    );
    assert!(secret.contains("secret/db created"), "{secret}");
    let stored = succeed(
        &t,
        &[
            "get",
            "secret",
            "db",
            "-n",
            "shop",
            "-o",
            "jsonpath={.type} {.data.password}",
        ],
    );
    let encoded = base64::engine::general_purpose::STANDARD.encode("s3cret");
    assert_eq!(stored, format!("Opaque {encoded}"));
    let config = succeed(
        &t,
        &[
            "create",
            "configmap",
            "settings",
            "-n",
            "shop",
            "--from-literal=mode=fast",
        ],
    );
    assert!(config.contains("configmap/settings created"), "{config}");
    let listed = succeed(&t, &["get", "configmaps", "-n", "shop"]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("settings ") && l.contains(" 1 ")),
        "{listed}"
    );
    let again = kubectl(&t, &["create", "configmap", "settings", "-n", "shop"]);
    assert!(!again.status.success());
    assert!(
        text(&again).contains("\"settings\" already exists"),
        "{}",
        text(&again)
    );
    let deleted = succeed(&t, &["delete", "configmap", "settings", "-n", "shop"]);
    assert!(deleted.contains("\"settings\" deleted"), "{deleted}");
    let gone = kubectl(&t, &["get", "configmap", "settings", "-n", "shop"]);
    assert!(text(&gone).contains("NotFound"), "{}", text(&gone));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_watch_sees_a_secret_created_in_protobuf() {
    let t = TestSandbox::start().await;
    let mut child = kubectl_command(&t, &["get", "secrets", "-w", "--request-timeout=30s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl starts");
    let lines = lines_of(&mut child);
    let faults = t.sandbox.faults().clone();
    wait_for("kubectl to start watching", WAIT, || {
        let faults = faults.clone();
        async move { faults.count("watch", "secrets") >= 1 }
    })
    .await;
    succeed(
        &t,
        &[
            "create",
            "secret",
            "generic",
            "watched",
            "--from-literal=a=1",
        ],
    );
    let seen = wait_for_line(&lines, |line| line.starts_with("watched "));
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        seen,
        "kubectl get -w printed the Secret created in protobuf"
    );
}

async fn post(t: &TestSandbox, uri: &str, content_type: &str, body: Vec<u8>) -> kube::Error {
    let request = Request::post(uri)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::ACCEPT, "application/json")
        .body(body)
        .expect("request");
    t.client
        .request_text(request)
        .await
        .expect_err("the body is refused")
}

fn message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_bodies_without_the_prefix_or_for_custom_resources_are_refused() {
    let t = TestSandbox::start().await;
    let json = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}"#.to_vec();
    let error = post(
        &t,
        "/api/v1/namespaces/default/configmaps",
        "application/vnd.kubernetes.protobuf",
        json,
    )
    .await;
    assert_eq!(code(&error), 400, "{error}");
    assert!(
        message(&error).contains("Kubernetes prefix \"k8s\\x00\""),
        "{error}"
    );
    let truncated = b"k8s\0\x0a\xff".to_vec();
    let error = post(
        &t,
        "/api/v1/namespaces/default/configmaps",
        "application/vnd.kubernetes.protobuf",
        truncated,
    )
    .await;
    assert_eq!(code(&error), 400, "{error}");
    assert!(message(&error).contains("runtime.Unknown"), "{error}");
    install_widgets(&t.client).await;
    let error = post(
        &t,
        "/apis/example.com/v1/namespaces/default/widgets",
        "application/vnd.kubernetes.protobuf",
        b"k8s\0".to_vec(),
    )
    .await;
    assert_eq!(code(&error), 415, "{error}");
    assert!(
        message(&error).contains("accepts application/json"),
        "{error}"
    );
}

/// The other typed create commands of kubectl, each sending its kind in
/// protobuf; the objects read back as JSON with their fields intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_typed_create_commands_round_trip_their_objects() {
    let t = TestSandbox::start().await;
    let commands: [&[&str]; 6] = [
        &[
            "run",
            "web",
            "--image=postgres:17",
            "--restart=Never",
            "--port=5432",
            "--labels=app=web",
        ],
        &["create", "serviceaccount", "robot"],
        &[
            "create",
            "role",
            "reader",
            "--verb=get,list",
            "--resource=pods",
        ],
        &[
            "create",
            "rolebinding",
            "robot-reads",
            "--role=reader",
            "--serviceaccount=default:robot",
        ],
        &["create", "service", "clusterip", "db", "--tcp=5432:5432"],
        &[
            "create",
            "poddisruptionbudget",
            "web",
            "--selector=app=web",
            "--min-available=50%",
        ],
    ];
    for command in commands {
        let out = succeed(&t, command);
        assert!(out.contains("created"), "{command:?}: {out}");
    }
    let read = |args: &[&str]| succeed(&t, args);
    assert_eq!(
        read(&[
            "get",
            "pod",
            "web",
            "-o",
            "jsonpath={.spec.containers[0].ports[0].containerPort} {.metadata.labels.app}"
        ]),
        "5432 web"
    );
    assert_eq!(
        read(&["get", "role", "reader", "-o", "jsonpath={.rules[0].verbs}"]),
        "[\"get\",\"list\"]"
    );
    assert_eq!(
        read(&[
            "get",
            "rolebinding",
            "robot-reads",
            "-o",
            "jsonpath={.subjects[0].namespace}/{.subjects[0].name}"
        ]),
        "default/robot"
    );
    assert_eq!(
        read(&[
            "get",
            "service",
            "db",
            "-o",
            "jsonpath={.spec.ports[0].targetPort}"
        ]),
        "5432"
    );
    assert_eq!(
        read(&["get", "pdb", "web", "-o", "jsonpath={.spec.minAvailable}"]),
        "50%"
    );
    let bindings = read(&["get", "rolebinding", "robot-reads", "-o", "wide"]);
    assert!(
        bindings.contains("Role/reader") && bindings.contains("default/robot"),
        "{bindings}"
    );
}

/// A client that prefers protobuf watches in protobuf frames: a length,
/// then a WatchEvent around the object's protobuf body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_preferring_protobuf_streams_length_prefixed_frames() {
    use futures::AsyncReadExt as _;

    let t = TestSandbox::start().await;
    succeed(&t, &["create", "configmap", "framed", "--from-literal=a=1"]);
    let request =
        Request::get("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0")
            .header(
                header::ACCEPT,
                "application/vnd.kubernetes.protobuf, application/json",
            )
            .body(Vec::new())
            .expect("request");
    let stream = t.client.request_stream(request).await.expect("watching");
    let mut stream = Box::pin(stream);
    let mut length = [0u8; 4];
    let read = tokio::time::timeout(WAIT, stream.read_exact(&mut length)).await;
    read.expect("a frame in time").expect("a length");
    let mut body = vec![0u8; u32::from_be_bytes(length) as usize];
    stream.read_exact(&mut body).await.expect("the frame");
    let (type_, object) =
        tusk_sandbox::apiserver::protobuf::read_event(&body).expect("a WatchEvent");
    assert_eq!(type_, "ADDED");
    assert_eq!(object["kind"], "ConfigMap");
    assert_eq!(object["metadata"]["name"], "framed");
    assert_eq!(object["data"]["a"], "1");
}
