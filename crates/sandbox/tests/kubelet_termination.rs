//! Termination messages as the kubelet reports them: a container writes
//! why it ended to its `terminationMessagePath` (a fresh empty file for
//! every start, reached at that path), and the kubelet shows the file's
//! last 4096 bytes as `state.terminated.message`; with
//! `FallbackToLogsOnError`, a container that failed and wrote nothing is
//! explained by the end of its log.

#[path = "kubelet_support/mod.rs"]
mod support;

use serde_json::{Value, json};
use support::{Node, SHELL, WAIT, eventually, pod_json};

const NS: &str = "default";

/// A container of `SHELL` running `script`.
fn shell(name: &str, script: &str) -> Value {
    json!({"name": name, "image": SHELL, "command": ["/bin/sh", "-c", script]})
}

/// A pod that runs `containers` once.
fn run_once(name: &str, containers: Vec<Value>) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": containers}
    })
}

/// The container statuses of pod `name` once every container has
/// terminated, by name.
async fn terminated(node: &Node, name: &str) -> serde_json::Map<String, Value> {
    let pods = node.pods(NS);
    eventually(
        &format!("{name}'s containers to terminate"),
        WAIT,
        || async {
            let pod = pod_json(&pods, name).await?;
            let statuses = pod["status"]["containerStatuses"].as_array()?.clone();
            let done = statuses
                .iter()
                .all(|s| s["state"]["terminated"].is_object());
            done.then(|| {
                statuses
                    .into_iter()
                    .map(|s| (s["name"].as_str().unwrap_or_default().to_owned(), s))
                    .collect()
            })
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_container_writes_to_its_termination_log_is_its_message() {
    let node = Node::start().await;
    let mut container = shell("main", "printf done-42 > \"$MSG\"; exit 3");
    container["env"] = json!([{"name": "MSG", "value": "/dev/termination-log"}]);
    // Any user may write the file (a sandbox not running as root runs
    // every container as itself).
    container["securityContext"] = json!({"runAsUser": 65534, "runAsGroup": 65534});
    node.create_pod(NS, run_once("reporter", vec![container]))
        .await;
    let statuses = terminated(&node, "reporter").await;
    let main = &statuses["main"]["state"]["terminated"];
    assert_eq!(main["exitCode"], 3, "{main}");
    assert_eq!(main["reason"], "Error");
    assert_eq!(main["message"], "done-42", "{main}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_termination_message_keeps_its_last_4096_bytes() {
    let node = Node::start().await;
    // A path of the container's choosing, named in the script itself.
    let script = "head -c 1000 /dev/zero | tr '\\0' a > /tmp/tusk-result; \
        head -c 4096 /dev/zero | tr '\\0' b >> /tmp/tusk-result";
    let mut container = shell("main", script);
    container["terminationMessagePath"] = json!("/tmp/tusk-result");
    node.create_pod(NS, run_once("verbose", vec![container]))
        .await;
    let statuses = terminated(&node, "verbose").await;
    let main = &statuses["main"]["state"]["terminated"];
    assert_eq!(main["exitCode"], 0, "{main}");
    let message = main["message"].as_str().expect("a message");
    assert_eq!(message.len(), 4096);
    assert_eq!(message, "b".repeat(4096), "the kubelet keeps the end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_to_logs_on_error_explains_a_failure_with_the_end_of_the_log() {
    let node = Node::start().await;
    let noisy = "for i in $(seq 1 100); do echo line-$i; done";
    let mut fallback = shell("fallback", &format!("{noisy}; exit 1"));
    fallback["terminationMessagePolicy"] = json!("FallbackToLogsOnError");
    let mut succeeded = shell("succeeded", noisy);
    succeeded["terminationMessagePolicy"] = json!("FallbackToLogsOnError");
    let file_only = shell("file-only", &format!("{noisy}; exit 1"));
    node.create_pod(
        NS,
        run_once("failing", vec![fallback, succeeded, file_only]),
    )
    .await;
    let statuses = terminated(&node, "failing").await;
    let state = |name: &str| statuses[name]["state"]["terminated"].clone();
    let expected: String = (21..=100).map(|i| format!("line-{i}\n")).collect();
    assert_eq!(state("fallback")["exitCode"], 1);
    assert_eq!(
        state("fallback")["message"],
        expected,
        "the last 80 lines of the log"
    );
    let succeeded = state("succeeded");
    assert_eq!(succeeded["exitCode"], 0);
    assert!(succeeded["message"].is_null(), "{succeeded}");
    let file_only = state("file-only");
    assert_eq!(file_only["exitCode"], 1);
    assert!(file_only["message"].is_null(), "{file_only}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_start_gets_an_empty_termination_log() {
    let node = Node::start().await;
    // Each run shows what it found in the file, then appends to it.
    let script = "cat /dev/termination-log; printf run >> /dev/termination-log; exit 1";
    node.create_pod(
        NS,
        json!({
            "metadata": {"name": "again"},
            "spec": {"restartPolicy": "OnFailure", "containers": [shell("main", script)]}
        }),
    )
    .await;
    let pods = node.pods(NS);
    let main = eventually("two restarts", WAIT, || async {
        let pod = pod_json(&pods, "again").await?;
        let main = pod["status"]["containerStatuses"][0].clone();
        (main["restartCount"].as_i64()? >= 2).then_some(main)
    })
    .await;
    let last = &main["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 1, "{main}");
    assert_eq!(last["message"], "run", "not the first run's too: {main}");
}
