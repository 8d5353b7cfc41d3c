//! The machine's kubectl reading pods' logs and running commands in them
//! through the sandbox: `pods/log` (tail, timestamps, limit, follow,
//! previous, containers by name) and `pods/exec` over WebSocket (output
//! streams, exit codes, stdin), with the API server proxying to the
//! kubelet.

#[path = "kubelet_support/mod.rs"]
mod support;

use std::process::{Output, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::LogParams;
use serde_json::json;
use support::{Node, SHELL, WAIT, eventually, pod_json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const NS: &str = "default";
/// How long one kubectl command may take.
const KUBECTL_LIMIT: Duration = Duration::from_secs(60);

fn kubectl_command(node: &Node, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("kubectl");
    command
        .args(args)
        .env("KUBECONFIG", node.kubeconfig())
        .env("HOME", node.dir.path())
        .env("KUBECACHEDIR", node.dir.path().join("kubectl-cache"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Runs kubectl to its end (bounded), feeding `input` as its stdin.
async fn kubectl_with(node: &Node, args: &[&str], input: Option<&[u8]>) -> Output {
    let mut command = kubectl_command(node, args);
    if input.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command.spawn().expect("kubectl runs");
    if let Some(input) = input {
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input).await.expect("write stdin");
        drop(stdin);
    }
    tokio::time::timeout(KUBECTL_LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("kubectl {args:?} ends in time"))
        .expect("kubectl output")
}

async fn kubectl(node: &Node, args: &[&str]) -> Output {
    kubectl_with(node, args, None).await
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

async fn succeed(node: &Node, args: &[&str]) -> String {
    let output = kubectl(node, args).await;
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {}{}",
        stdout(&output),
        stderr(&output)
    );
    stdout(&output)
}

async fn wait_running(node: &Node, name: &str, restarts: i64) {
    let pods = node.pods(NS);
    eventually("the container running", WAIT, || async {
        let pod = pod_json(&pods, name).await?;
        let statuses = pod["status"]["containerStatuses"].as_array()?.clone();
        statuses
            .iter()
            .all(|s| s["state"]["running"].is_object() && s["restartCount"] == restarts)
            .then_some(())
    })
    .await;
}

fn shell_pod(name: &str, script: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": SHELL, "command": ["/bin/sh", "-c", script]}]
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_tails_limits_timestamps_and_follows_until_the_container_exits() {
    let node = Node::start().await;
    let pod = node
        .create_pod(
            NS,
            shell_pod(
                "counter",
                "for i in 1 2 3 4 5; do echo line $i; done; \
                 while [ ! -f \"$HOME/go\" ]; do sleep 0.1; done; echo late",
            ),
        )
        .await;
    eventually("the first lines", WAIT, || async {
        let output = kubectl(&node, &["logs", "counter"]).await;
        (stdout(&output) == "line 1\nline 2\nline 3\nline 4\nline 5\n").then_some(())
    })
    .await;
    assert_eq!(
        succeed(&node, &["logs", "counter", "--tail=2"]).await,
        "line 4\nline 5\n"
    );
    assert_eq!(
        succeed(&node, &["logs", "counter", "--limit-bytes=9"]).await,
        "line 1\nli"
    );
    assert_eq!(
        succeed(&node, &["logs", "counter", "--since=1h", "--tail=1"]).await,
        "line 5\n"
    );
    let stamped = succeed(&node, &["logs", "counter", "--timestamps", "--tail=1"]).await;
    let (time, line) = stamped.split_once(' ').expect("a time before the line");
    let time: jiff::Timestamp = time.parse().expect("an RFC 3339 time");
    assert!(time <= jiff::Timestamp::now(), "{stamped}");
    assert_eq!(line, "line 5\n");
    // The container has not restarted, so it has no previous log.
    let previous = kubectl(&node, &["logs", "counter", "--previous"]).await;
    assert!(!previous.status.success());
    assert!(
        stderr(&previous)
            .contains("previous terminated container \"main\" in pod \"counter\" not found"),
        "{}",
        stderr(&previous)
    );
    // Follow: the lines so far, then the late one, then the end.
    let mut follow = kubectl_command(&node, &["logs", "-f", "counter"])
        .spawn()
        .expect("kubectl runs");
    let mut lines = BufReader::new(follow.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    while seen.len() < 5 {
        let line = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .expect("a line in time")
            .expect("read")
            .expect("a line");
        seen.push(line);
    }
    std::fs::write(node.pod_dir(&pod).join("go"), "").expect("go file");
    let rest = tokio::time::timeout(WAIT, async {
        let mut rest = Vec::new();
        while let Some(line) = lines.next_line().await.expect("read") {
            rest.push(line);
        }
        rest
    })
    .await
    .expect("the follow ends when the container exits");
    assert_eq!(rest, vec!["late".to_owned()]);
    let status = tokio::time::timeout(WAIT, follow.wait())
        .await
        .expect("kubectl ends")
        .expect("status");
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_reads_each_container_and_init_container_by_name() {
    let node = Node::start().await;
    node.create_pod(
        NS,
        json!({
            "metadata": {"name": "two"},
            "spec": {
                "initContainers": [{"name": "setup", "image": SHELL, "command": ["/bin/sh", "-c", "echo from setup"]}],
                "containers": [
                    {"name": "a", "image": SHELL, "command": ["/bin/sh", "-c", "echo from a; exec sleep 600"]},
                    {"name": "b", "image": SHELL, "command": ["/bin/sh", "-c", "echo from b >&2; exec sleep 600"]}
                ]
            }
        }),
    )
    .await;
    wait_running(&node, "two", 0).await;
    eventually("b's output", WAIT, || async {
        (stdout(&kubectl(&node, &["logs", "two", "-c", "b"]).await) == "from b\n").then_some(())
    })
    .await;
    assert_eq!(
        succeed(&node, &["logs", "two", "-c", "setup"]).await,
        "from setup\n"
    );
    assert_eq!(
        succeed(&node, &["logs", "two", "--container=a"]).await,
        "from a\n"
    );
    // kubectl picks the first container itself when none is named.
    let defaulted = kubectl(&node, &["logs", "two"]).await;
    assert_eq!(stdout(&defaulted), "from a\n");
    assert!(
        stderr(&defaulted).contains("Defaulted container \"a\""),
        "{}",
        stderr(&defaulted)
    );
    let wrong = kubectl(&node, &["logs", "two", "-c", "c"]).await;
    assert!(!wrong.status.success());
    assert!(
        stderr(&wrong).contains("container c is not valid for pod two"),
        "{}",
        stderr(&wrong)
    );
    // The API itself asks for a name, as kube-apiserver does.
    let pods: kube::Api<Pod> = node.pods(NS);
    let error = pods
        .logs("two", &LogParams::default())
        .await
        .expect_err("a container must be named");
    let kube::Error::Api(status) = error else {
        panic!("not an API error: {error}");
    };
    assert_eq!(status.code, 400);
    assert_eq!(
        status.message,
        "a container name must be specified for pod two, choose one of: [a b] or one of the init containers: [setup]"
    );
    // A log is text, and a client asking for text only gets it.
    let request = axum::http::Request::get("/api/v1/namespaces/default/pods/two/log?container=a")
        .header("Accept", "text/plain")
        .body(Vec::new())
        .expect("request");
    let text = node
        .client
        .request_text(request)
        .await
        .expect("text/plain is served");
    assert_eq!(text, "from a\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_previous_shows_the_run_before_a_restart() {
    let node = Node::start().await;
    node.create_pod(
        NS,
        json!({
            "metadata": {"name": "flaky"},
            "spec": {"containers": [{"name": "main", "image": SHELL, "command": ["/bin/sh", "-c",
                "n=$(cat \"$HOME/runs\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$HOME/runs\"; \
                 echo run $n; if [ $n -lt 2 ]; then echo failing >&2; exit 1; fi; exec sleep 600"]}]}
        }),
    )
    .await;
    wait_running(&node, "flaky", 1).await;
    eventually("the second run's output", WAIT, || async {
        (stdout(&kubectl(&node, &["logs", "flaky"]).await) == "run 2\n").then_some(())
    })
    .await;
    let previous = succeed(&node, &["logs", "flaky", "--previous"]).await;
    assert!(
        previous == "run 1\nfailing\n" || previous == "failing\nrun 1\n",
        "{previous}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_carries_stdout_stderr_stdin_and_the_exit_code() {
    let node = Node::start().await;
    node.create_pod(
        NS,
        json!({
            "metadata": {"name": "shell"},
            "spec": {
                "volumes": [{"name": "work", "emptyDir": {}}],
                "containers": [{
                    "name": "main",
                    "image": SHELL,
                    "command": ["/bin/sh", "-c", "pwd > \"$HOME/main-pwd\"; exec sleep 600"],
                    "workingDir": "/work",
                    "env": [{"name": "GREETING", "value": "hello"}],
                    "volumeMounts": [{"name": "work", "mountPath": "/work"}]
                }]
            }
        }),
    )
    .await;
    wait_running(&node, "shell", 0).await;
    let output = kubectl(
        &node,
        &[
            "exec",
            "shell",
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 3",
        ],
    )
    .await;
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert_eq!(stdout(&output), "out\n");
    assert!(stderr(&output).starts_with("err\n"), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("command terminated with exit code 3"),
        "{}",
        stderr(&output)
    );
    // The command runs as the container does: its environment, its
    // working directory (a translated mount), its volumes.
    let seen = succeed(
        &node,
        &[
            "exec",
            "shell",
            "--",
            "sh",
            "-c",
            "echo $GREETING; pwd; echo saved > /work/file; cat /work/file",
        ],
    )
    .await;
    let pod = node.pods(NS).get("shell").await.expect("pod");
    let main_pwd = std::fs::read_to_string(node.pod_dir(&pod).join("main-pwd")).expect("main pwd");
    assert_eq!(seen, format!("hello\n{main_pwd}saved\n"));
    let echoed = kubectl_with(
        &node,
        &["exec", "-i", "shell", "--", "cat"],
        Some(b"one\ntwo\n"),
    )
    .await;
    assert!(echoed.status.success(), "{}", stderr(&echoed));
    assert_eq!(stdout(&echoed), "one\ntwo\n");
    let counted = kubectl_with(
        &node,
        &["exec", "-i", "shell", "--", "wc", "-l"],
        Some(b"a\nb\nc\n"),
    )
    .await;
    assert_eq!(stdout(&counted).trim(), "3");
    // With -it from a terminal (script(1) gives kubectl one) the client
    // has no stderr stream; the command's stderr shows as its output.
    let in_terminal = kubectl_command(&node, &[])
        .as_std()
        .get_envs()
        .fold(tokio::process::Command::new("script"), |mut c, (k, v)| {
            if let Some(v) = v {
                c.env(k, v);
            }
            c
        })
        .args([
            "-q",
            "-e",
            "-c",
            "kubectl exec -it shell -- sh -c 'echo to-stderr >&2; exit 4'",
            "/dev/null",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let in_terminal = tokio::time::timeout(KUBECTL_LIMIT, in_terminal)
        .await
        .expect("kubectl -it ends in time")
        .expect("script runs");
    assert!(
        stdout(&in_terminal).contains("to-stderr"),
        "{}{}",
        stdout(&in_terminal),
        stderr(&in_terminal)
    );
    assert_eq!(
        in_terminal.status.code(),
        Some(4),
        "{}",
        stderr(&in_terminal)
    );
    // kubectl cp into a pod is tar over exec, its target path translated.
    let local = node.dir.path().join("to-copy.txt");
    std::fs::write(&local, "copied\n").expect("local file");
    let local = local.to_string_lossy().into_owned();
    succeed(&node, &["cp", &local, "shell:/work/copied.txt"]).await;
    let copied = succeed(&node, &["exec", "shell", "--", "cat", "/work/copied.txt"]).await;
    assert_eq!(copied, "copied\n");
    let missing = kubectl(&node, &["exec", "shell", "-c", "nope", "--", "true"]).await;
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("container nope is not valid for pod shell"),
        "{}",
        stderr(&missing)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_runs_as_the_containers_user() {
    let node = Node::start().await;
    let postgres = nix::unistd::User::from_name("postgres")
        .expect("user lookup")
        .expect("the postgres user exists (scripts/setup installs PostgreSQL)");
    node.create_pod(
        NS,
        json!({
            "metadata": {"name": "as-postgres"},
            "spec": {
                "securityContext": {"runAsNonRoot": true, "runAsUser": postgres.uid.as_raw()},
                "containers": [{"name": "main", "image": SHELL, "command": ["sleep", "600"]}]
            }
        }),
    )
    .await;
    wait_running(&node, "as-postgres", 0).await;
    let faults = node.faults();
    let pid = faults
        .pid(NS, "as-postgres", "main")
        .expect("the container runs");
    let container_uid = support::uid_of(pid).expect("process uid");
    let exec_uid = succeed(&node, &["exec", "as-postgres", "--", "id", "-u"]).await;
    assert_eq!(exec_uid.trim(), container_uid.to_string());
    assert_ne!(container_uid, 0, "a non-root pod runs as root");
}

/// Sends a bare HTTP/1.1 GET to the kubelet's endpoint and returns the
/// status code and body.
async fn kubelet_get(port: u16, path: &str, token: Option<&str>) -> (u16, String) {
    use tokio::io::AsyncReadExt;
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the kubelet endpoint accepts");
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut answer = String::new();
    tokio::time::timeout(WAIT, stream.read_to_string(&mut answer))
        .await
        .expect("an answer in time")
        .expect("read");
    let code = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    (code, answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubelet_endpoint_is_announced_and_answers_only_the_api_server() {
    let node = Node::start().await;
    node.create_pod(NS, shell_pod("quiet", "echo hush; exec sleep 600"))
        .await;
    wait_running(&node, "quiet", 0).await;
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(node.client.clone());
    let sandbox = nodes.get("sandbox").await.expect("the node");
    let port = sandbox
        .status
        .and_then(|s| s.daemon_endpoints)
        .and_then(|d| d.kubelet_endpoint)
        .map(|e| e.port)
        .expect("the kubelet endpoint is announced");
    let port = u16::try_from(port).expect("a port");
    let path = "/containerLogs/default/quiet/main";
    assert_eq!(kubelet_get(port, path, None).await.0, 401);
    assert_eq!(kubelet_get(port, path, Some("guess")).await.0, 401);
    let kubeconfig: serde_json::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(node.kubeconfig()).expect("kubeconfig"))
            .expect("yaml");
    let token = kubeconfig["users"][0]["user"]["token"]
        .as_str()
        .expect("a token");
    let (code, answer) = kubelet_get(port, path, Some(token)).await;
    assert_eq!(code, 200, "{answer}");
    assert!(answer.contains("hush"), "{answer}");
}
