//! The kubelet runs pods as real local processes: init containers before
//! containers, restarts by policy, graceful deletion, users, volumes that
//! outlive pods and sandbox restarts.

#[path = "kubelet_support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Node, SHELL, WAIT, alive, condition, eventually, pod_json, uid_of};

const NS: &str = "default";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_init_container_runs_to_completion_before_the_main_container() {
    let node = Node::start().await;
    support::create_secret(&node, NS).await;
    let pod = node
        .create_pod(NS, json!({
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "volumes": [
                    {"name": "work", "emptyDir": {}},
                    {"name": "creds", "secret": {"secretName": "creds"}}
                ],
                "initContainers": [{
                    "name": "prepare",
                    "image": SHELL,
                    "command": ["/bin/sh", "-c", "echo prepared > /work/state; sleep 0.3"],
                    "volumeMounts": [{"name": "work", "mountPath": "/work"}]
                }],
                "containers": [{
                    "name": "main",
                    "image": SHELL,
                    "command": ["/bin/sh", "-c"],
                    "args": ["cat /work/state; cat /etc/creds/password; echo; echo \"$POD $NS $IP $PASSWORD\"; test -z \"$KUBECONFIG\" && echo no-kubeconfig; exec sleep 600"],
                    "env": [
                        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}}
                    ],
                    "volumeMounts": [
                        {"name": "work", "mountPath": "/work"},
                        {"name": "creds", "mountPath": "/etc/creds"}
                    ]
                }]
            }
        }))
        .await;
    let pods = node.pods(NS);
    let status = eventually("the pod to run and be ready", WAIT, || async {
        let pod = pod_json(&pods, "web").await?;
        (pod["status"]["phase"] == "Running" && condition(&pod, "Ready").as_deref() == Some("True"))
            .then_some(pod)
    })
    .await;
    assert_eq!(status["spec"]["nodeName"], "sandbox");
    let init = &status["status"]["initContainerStatuses"][0];
    assert_eq!(init["state"]["terminated"]["exitCode"], 0, "{init}");
    assert_eq!(init["state"]["terminated"]["reason"], "Completed");
    let main = &status["status"]["containerStatuses"][0];
    assert!(main["state"]["running"]["startedAt"].is_string(), "{main}");
    let ip = status["status"]["podIP"]
        .as_str()
        .expect("pod IP")
        .to_owned();
    assert!(ip.starts_with("127.2."), "{ip}");
    let log = node.log(&pod, "main", 0);
    let expected = format!("prepared\ns3cret\nweb default {ip} s3cret\nno-kubeconfig\n");
    eventually("the main container's output", WAIT, || async {
        (support::log_text(&log)? == expected).then_some(())
    })
    .await;
    let init_log = support::log_text(&node.log(&pod, "prepare", 0)).expect("init log exists");
    assert_eq!(init_log, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_container_is_restarted_and_counted() {
    let node = Node::start().await;
    node.create_pod(
        NS,
        json!({
            "metadata": {"name": "worker"},
            "spec": {"containers": [{"name": "main", "image": SHELL, "command": ["sleep", "600"]}]}
        }),
    )
    .await;
    let faults = node.faults();
    let first = eventually("the container to start", WAIT, || async {
        faults.pid(NS, "worker", "main")
    })
    .await;
    faults.kill(NS, "worker", "main").expect("kill");
    let pods = node.pods(NS);
    let status = eventually("a restart", WAIT, || async {
        let pod = pod_json(&pods, "worker").await?;
        let main = pod["status"]["containerStatuses"][0].clone();
        (main["restartCount"] == 1 && main["state"]["running"].is_object()).then_some(main)
    })
    .await;
    assert_eq!(
        status["lastState"]["terminated"]["exitCode"], 137,
        "{status}"
    );
    assert_eq!(status["lastState"]["terminated"]["signal"], 9);
    let second = eventually("the new process", WAIT, || async {
        faults.pid(NS, "worker", "main").filter(|p| *p != first)
    })
    .await;
    assert!(alive(second));
    assert!(!alive(first));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_pod_stops_it_with_sigterm_then_sigkill_after_the_grace_period() {
    let node = Node::start().await;
    let marker = node.dir.path().join("terminated-gracefully");
    // Each shell touches a file once its trap is set, so the test deletes
    // the pods only after that.
    let polite_trapped = node.dir.path().join("polite-trapped");
    let stubborn_trapped = node.dir.path().join("stubborn-trapped");
    node.create_pod(NS, json!({
        "metadata": {"name": "polite"},
        "spec": {
            "terminationGracePeriodSeconds": 10,
            "containers": [{"name": "main", "image": SHELL, "command": ["/bin/sh", "-c",
                format!("trap 'sleep 0.5; echo bye > {}; exit 0' TERM; touch {}; while :; do sleep 0.1; done", marker.display(), polite_trapped.display())]}]
        }
    }))
    .await;
    node.create_pod(NS, json!({
        "metadata": {"name": "stubborn"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": SHELL, "command": ["/bin/sh", "-c", format!("trap '' TERM; touch {}; while :; do sleep 0.1; done", stubborn_trapped.display())]}]
        }
    }))
    .await;
    let faults = node.faults();
    let polite = eventually("polite to start", WAIT, || async {
        faults.pid(NS, "polite", "main")
    })
    .await;
    let stubborn = eventually("stubborn to start", WAIT, || async {
        faults.pid(NS, "stubborn", "main")
    })
    .await;
    eventually("both shells to set their traps", WAIT, || async {
        (polite_trapped.exists() && stubborn_trapped.exists()).then_some(())
    })
    .await;
    let pods = node.pods(NS);
    let started = Instant::now();
    pods.delete("polite", &DeleteParams::default())
        .await
        .expect("delete polite");
    pods.delete("stubborn", &DeleteParams::default())
        .await
        .expect("delete stubborn");
    eventually("polite to exit", WAIT, || async {
        (!alive(polite)).then_some(())
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(&marker).expect("the TERM handler ran"),
        "bye\n"
    );
    eventually("stubborn to be killed", WAIT, || async {
        (!alive(stubborn)).then_some(())
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "stubborn got its grace period"
    );
    eventually("both pods gone", WAIT, || async {
        (pods.get_opt("polite").await.ok()?.is_none()
            && pods.get_opt("stubborn").await.ok()?.is_none())
        .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_asks_for_non_root_never_runs_as_root() {
    let node = Node::start().await;
    let running_as_root = nix::unistd::geteuid().is_root();
    let postgres = nix::unistd::User::from_name("postgres")
        .expect("user lookup")
        .expect("the postgres user exists (scripts/setup installs PostgreSQL)");
    node.create_pod(
        NS,
        json!({
            "metadata": {"name": "refused"},
            "spec": {
                "securityContext": {"runAsNonRoot": true},
                "containers": [{"name": "main", "image": SHELL, "command": ["sleep", "600"]}]
            }
        }),
    )
    .await;
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
    let faults = node.faults();
    let pid = eventually("as-postgres to start", WAIT, || async {
        faults.pid(NS, "as-postgres", "main")
    })
    .await;
    let uid = uid_of(pid).expect("process uid");
    assert_ne!(uid, 0, "a non-root pod runs as root");
    if running_as_root {
        assert_eq!(uid, postgres.uid.as_raw());
        let pods = node.pods(NS);
        let waiting = eventually("refused to be held back", WAIT, || async {
            let pod = pod_json(&pods, "refused").await?;
            let waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"].clone();
            (waiting["reason"] == "CreateContainerConfigError").then_some(waiting)
        })
        .await;
        assert!(
            waiting["message"]
                .as_str()
                .expect("message")
                .contains("runAsNonRoot"),
            "{waiting}"
        );
        assert!(faults.pid(NS, "refused", "main").is_none());
    } else {
        // Without root the sandbox can only run pods as its own user.
        assert_eq!(uid, nix::unistd::geteuid().as_raw());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmapped_image_leaves_the_container_waiting_with_a_reason() {
    let node = Node::start().await;
    node.create_pod(NS, json!({
        "metadata": {"name": "elsewhere"},
        "spec": {"containers": [{"name": "main", "image": "registry.example/unknown:1", "command": ["sleep", "600"]}]}
    }))
    .await;
    let pods = node.pods(NS);
    let waiting = eventually("the waiting reason", WAIT, || async {
        let pod = pod_json(&pods, "elsewhere").await?;
        let waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"].clone();
        (waiting["reason"] == "ImageNotMapped").then_some(waiting)
    })
    .await;
    assert!(
        waiting["message"]
            .as_str()
            .expect("message")
            .contains("registry.example/unknown:1")
    );
    assert!(node.faults().pid(NS, "elsewhere", "main").is_none());
}

fn claim_pod(name: &str, script: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            "containers": [{
                "name": "main", "image": SHELL, "command": ["/bin/sh", "-c", script],
                "volumeMounts": [{"name": "data", "mountPath": "/var/lib/data"}]
            }]
        }
    })
}

async fn wait_succeeded(node: &Node, name: &str) -> serde_json::Value {
    let pods = node.pods(NS);
    eventually(&format!("{name} to finish"), WAIT, || async {
        let pod = pod_json(&pods, name).await?;
        let phase = pod["status"]["phase"].as_str()?.to_owned();
        assert_ne!(phase, "Failed", "{pod}");
        (phase == "Succeeded").then_some(pod)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_data_survives_pod_recreation_and_a_sandbox_restart() {
    let mut node = Node::start().await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(node.client.clone(), NS);
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("claim");
    claims
        .create(&PostParams::default(), &claim)
        .await
        .expect("claim created");
    let bound = eventually("the claim to bind", WAIT, || async {
        let claim = claims.get("data").await.ok()?;
        (claim.status.as_ref()?.phase.as_deref() == Some("Bound")).then_some(claim)
    })
    .await;
    let volume = bound
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .expect("volume name");
    let volumes: Api<PersistentVolume> = Api::all(node.client.clone());
    let pv = volumes.get(&volume).await.expect("volume exists");
    assert_eq!(
        pv.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Bound")
    );

    node.create_pod(NS, claim_pod("writer", "echo kept > /var/lib/data/file"))
        .await;
    wait_succeeded(&node, "writer").await;
    let pods = node.pods(NS);
    pods.delete("writer", &DeleteParams::default())
        .await
        .expect("delete writer");

    let check = "test \"$(cat /var/lib/data/file)\" = kept";
    node.create_pod(NS, claim_pod("reader", check)).await;
    wait_succeeded(&node, "reader").await;

    node.restart().await;
    let pods = node.pods(NS);
    pods.delete("reader", &DeleteParams::default())
        .await
        .expect("delete reader");
    node.create_pod(NS, claim_pod("after-restart", check)).await;
    wait_succeeded(&node, "after-restart").await;

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(node.client.clone(), NS);
    claims
        .patch(
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})),
        )
        .await
        .expect("grow the claim");
    eventually("the capacity to grow", WAIT, || async {
        let claim = claims.get("data").await.ok()?;
        let capacity = claim.status?.capacity?.get("storage")?.0.clone();
        (capacity == "2Gi").then_some(())
    })
    .await;
    assert_eq!(bound.name_any(), "data");

    // Deleting the claim reclaims its volume and directory.
    let directory = node.dir.path().join("volumes").join(&volume);
    assert!(directory.is_dir());
    let pods = node.pods(NS);
    pods.delete("after-restart", &DeleteParams::default())
        .await
        .expect("delete the last user");
    claims
        .delete("data", &DeleteParams::default())
        .await
        .expect("delete the claim");
    let volumes: Api<PersistentVolume> = Api::all(node.client.clone());
    eventually("the volume to be reclaimed", WAIT, || async {
        let gone = volumes.get_opt(&volume).await.ok()?.is_none();
        (gone && !directory.exists()).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_reports_ready_and_renews_its_lease() {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Node as KubeNode;
    let node = Node::start().await;
    let nodes: Api<KubeNode> = Api::all(node.client.clone());
    let ready = eventually("the node to be ready", WAIT, || async {
        let kube_node = nodes.get_opt("sandbox").await.ok()??;
        let status = kube_node.status?;
        let ready = status
            .conditions?
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        ready.then_some(status.capacity?)
    })
    .await;
    assert!(
        ready.contains_key("cpu") && ready.contains_key("memory") && ready.contains_key("pods")
    );
    let leases: Api<Lease> = Api::namespaced(node.client.clone(), "kube-node-lease");
    let first = eventually("the lease", WAIT, || async {
        leases.get_opt("sandbox").await.ok()??.spec?.renew_time
    })
    .await;
    let renewed = eventually("a renewal", WAIT, || async {
        let time = leases.get_opt("sandbox").await.ok()??.spec?.renew_time?;
        (time != first).then_some(time)
    })
    .await;
    assert!(renewed.0 > first.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_pods_come_back_after_a_sandbox_restart() {
    let mut node = Node::start().await;
    node.create_pod(
        NS,
        json!({
            "metadata": {"name": "steady"},
            "spec": {"containers": [{"name": "main", "image": SHELL, "command": ["sleep", "600"]}]}
        }),
    )
    .await;
    let faults = node.faults();
    let before = eventually("steady to start", WAIT, || async {
        faults.pid(NS, "steady", "main")
    })
    .await;
    let ip_before =
        pod_json(&node.pods(NS), "steady").await.expect("pod")["status"]["podIP"].clone();
    node.restart().await;
    assert!(
        !alive(before),
        "the sandbox stopped the container it started"
    );
    let faults = node.faults();
    let after = eventually("steady to start again", WAIT, || async {
        faults.pid(NS, "steady", "main")
    })
    .await;
    assert_ne!(before, after);
    let pods = node.pods(NS);
    let pod = eventually("steady to be running", WAIT, || async {
        let pod = pod_json(&pods, "steady").await?;
        (pod["status"]["phase"] == "Running").then_some(pod)
    })
    .await;
    assert_eq!(
        pod["status"]["podIP"], ip_before,
        "the pod keeps its address"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applied_manifests_are_followed_until_they_converge() {
    use tusk_sandbox::converge;
    let node = Node::start().await;
    converge::install_crds(&node.client)
        .await
        .expect("CRDs installed");
    let flag = node.dir.path().join("ready-flag");
    let manifest = node.dir.path().join("app.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: app\nspec:\n  selector: {{app: app}}\n  ports: [{{port: 8080}}]\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata:\n  name: app\n  labels: {{app: app}}\nspec:\n  containers:\n  - name: main\n    image: {SHELL}\n    command: [sleep, '600']\n    readinessProbe:\n      exec: {{command: [test, -f, {}]}}\n      periodSeconds: 1\n",
            flag.display()
        ),
    )
    .expect("write manifest");
    let documents = converge::read_manifests(&manifest).expect("manifest parses");
    let applied = converge::apply(&node.client, &documents)
        .await
        .expect("applied");
    assert_eq!(
        applied
            .iter()
            .map(converge::Applied::describe)
            .collect::<Vec<_>>(),
        vec!["service default/app", "pod default/app"]
    );
    let waiting = eventually("the pod to run unready", WAIT, || async {
        let waiting = converge::waiting_for(&node.client, &applied).await;
        let pod = pod_json(&node.pods(NS), "app").await?;
        (pod["status"]["phase"] == "Running").then_some(waiting)
    })
    .await;
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert!(waiting[0].starts_with("pod default/app ("), "{waiting:?}");
    std::fs::write(&flag, "").expect("flag");
    eventually("everything to converge", WAIT, || async {
        converge::waiting_for(&node.client, &applied)
            .await
            .is_empty()
            .then_some(())
    })
    .await;
    // Applying again is a no-op that still succeeds.
    converge::apply(&node.client, &documents)
        .await
        .expect("re-applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_liveness_probe_restarts_the_container() {
    let node = Node::start().await;
    let alive_flag = node.dir.path().join("alive");
    std::fs::write(&alive_flag, "").expect("flag");
    node.create_pod(NS, json!({
        "metadata": {"name": "probed"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main", "image": SHELL, "command": ["sleep", "600"],
                "startupProbe": {"exec": {"command": ["test", "-f", alive_flag]}, "periodSeconds": 1},
                "livenessProbe": {"exec": {"command": ["test", "-f", alive_flag]}, "periodSeconds": 1, "failureThreshold": 2}
            }]
        }
    }))
    .await;
    let pods = node.pods(NS);
    eventually(
        "the container to start and pass its probes",
        WAIT,
        || async {
            let pod = pod_json(&pods, "probed").await?;
            let main = pod["status"]["containerStatuses"][0].clone();
            (main["started"] == true && main["ready"] == true).then_some(())
        },
    )
    .await;
    std::fs::remove_file(&alive_flag).expect("remove flag");
    let restarted = eventually("a liveness restart", WAIT, || async {
        let pod = pod_json(&pods, "probed").await?;
        let main = pod["status"]["containerStatuses"][0].clone();
        (main["restartCount"].as_i64()? >= 1).then_some(main)
    })
    .await;
    let message = restarted["lastState"]["terminated"]["message"]
        .as_str()
        .expect("a message");
    assert!(message.starts_with("Liveness probe failed"), "{restarted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_cannot_start_backs_off_instead_of_spinning() {
    let node = Node::start().await;
    node.create_pod(NS, json!({
        "metadata": {"name": "missing"},
        "spec": {"containers": [{"name": "main", "image": SHELL, "command": ["/nonexistent/program"]}]}
    }))
    .await;
    let pods = node.pods(NS);
    let waiting = eventually("the failure to show", WAIT, || async {
        let pod = pod_json(&pods, "missing").await?;
        let main = pod["status"]["containerStatuses"][0].clone();
        let reason = main["state"]["waiting"]["reason"].as_str()?.to_owned();
        (reason == "CrashLoopBackOff" || reason == "RunContainerError").then_some(main)
    })
    .await;
    assert!(
        waiting["lastState"]["terminated"]["message"].is_string()
            || waiting["state"]["waiting"]["message"].is_string(),
        "{waiting}"
    );
    // Spinning would restart at once; back-off (immediately, 0.5 s, 1 s,
    // then every 2 s) needs at least 1.5 s for three more restarts.
    let restarts =
        |pod: &serde_json::Value| pod["status"]["containerStatuses"][0]["restartCount"].as_i64();
    let first = restarts(&pod_json(&pods, "missing").await.expect("pod")).unwrap_or(0);
    let started = Instant::now();
    eventually("three more restarts", WAIT, || async {
        let pod = pod_json(&pods, "missing").await?;
        (restarts(&pod)? >= first + 3).then_some(())
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "three restarts after {:?}: the kubelet does not back off",
        started.elapsed()
    );
}
