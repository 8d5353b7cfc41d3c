//! Children and ownership: creation with owner references, zero-write
//! convergence, drift repair, deletion policies and credentials (R9, R13-R15).

use crate::support::*;

#[tokio::test]
async fn children_are_created_with_owner_references_and_status_is_reported() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    let created = create(&h.client, "orders", small()).await;
    wait_for("every child", || children_exist(&h.client, "orders")).await;

    let uid = created.uid().expect("uid");
    let pod: Pod = get(&h.client, "orders-1").await.expect("pod");
    let owner = &pod.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("PostgresCluster", uid.as_str(), Some(true))
    );
    let secret: Secret = get(&h.client, "orders-app").await.expect("secret");
    assert_eq!(secret.owner_references()[0].uid, uid);

    wait_for("the Provisioning phase", || async {
        status_phase(&h.client, "orders").await == Some(ClusterPhase::Provisioning)
    })
    .await;
    let live: PostgresCluster = get(&h.client, "orders").await.expect("cluster");
    let status = live.status.clone().expect("status");
    assert_eq!(status.target_primary.as_deref(), Some("orders-1"));
    assert_eq!(status.latest_instance_serial, 1);
    assert_eq!(status.selector.as_deref(), Some("tusk.dev/cluster=orders"));
    assert_eq!(status.observed_generation, live.metadata.generation);
    assert!(
        live.finalizers()
            .iter()
            .any(|f| f == "postgres.tusk.dev/cleanup")
    );
    let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
    for expected in ["Ready", "Progressing", "Degraded"] {
        assert!(types.contains(&expected), "{types:?}");
    }
    operator.stop().await;
}

#[tokio::test]
async fn a_converged_reconcile_makes_no_writes() {
    passes_ask_the_api_nothing("steady", small()).await;
}

/// A restore rehearsal's pod and volume are read by name (they are not
/// cached); once found absent they are not read again until the operator
/// starts a rehearsal, so a pass with none under way asks nothing either.
#[tokio::test]
async fn passes_with_no_rehearsal_under_way_do_not_read_its_absent_objects() {
    let mut spec = small();
    spec["backup"] = serde_json::json!({"destination": {"url": "s3://backups/steady"}});
    passes_ask_the_api_nothing("archived", spec).await;
}

/// Once a cluster's first passes settled, later ones (at least one)
/// write nothing and read nothing from the API.
async fn passes_ask_the_api_nothing(name: &str, spec: serde_json::Value) {
    let h = sandbox(true).await;
    let metrics = free_port();
    let operator = Operator::start_with_http(&h.client, None, Some(metrics));
    create(&h.client, name, spec).await;
    wait_for("every child", || children_exist(&h.client, name)).await;
    wait_for("status", || async {
        status_phase(&h.client, name).await.is_some()
    })
    .await;
    // Let the first reconciles settle, then watch more than one requeue
    // period (10 s while provisioning).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let writes_before = h.sandbox.faults().writes();
    let requests_before = h.sandbox.faults().count("*", "*");
    let reconciles_before = reconciles(metrics).await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    let reconciled = reconciles(metrics).await - reconciles_before;
    assert!(
        reconciled >= 1,
        "the controller must have reconciled meanwhile"
    );
    assert_eq!(
        h.sandbox.faults().writes() - writes_before,
        0,
        "writes: {:?}",
        h.sandbox.faults().counts()
    );
    let requests = h.sandbox.faults().count("*", "*") - requests_before;
    // Children come from watch caches: a converged reconcile asks the API nothing.
    assert_eq!(
        requests, 0,
        "{requests} API requests for {reconciled} converged reconciles"
    );
    operator.stop().await;
}

#[tokio::test]
async fn edited_and_deleted_children_are_restored() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    create(&h.client, "drift", small()).await;
    wait_for("every child", || children_exist(&h.client, "drift")).await;

    let services: Api<Service> = Api::namespaced(h.client.clone(), NS);
    let edit =
        json!({"spec": {"selector": {"tusk.dev/cluster": "drift", "tusk.dev/role": "replica"}}});
    services
        .patch("drift-rw", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .expect("edit");
    services
        .delete("drift-ro", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for("the -rw selector restored and -ro recreated", || async {
        let rw = get::<Service>(&h.client, "drift-rw").await;
        let role = rw
            .and_then(|s| s.spec)
            .and_then(|s| s.selector)
            .and_then(|s| s.get("tusk.dev/role").cloned());
        role.as_deref() == Some("primary") && get::<Service>(&h.client, "drift-ro").await.is_some()
    })
    .await;
    operator.stop().await;
}

#[tokio::test]
async fn deletion_with_retain_keeps_the_volume_and_delete_removes_it() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    create(&h.client, "keep", small()).await;
    let mut spec = small();
    spec["deletionPolicy"] = json!("Delete");
    create(&h.client, "drop", spec).await;
    wait_for("children of both", || async {
        children_exist(&h.client, "keep").await && children_exist(&h.client, "drop").await
    })
    .await;
    wait_for("finalizers", || async {
        let has = |c: Option<PostgresCluster>| c.is_some_and(|c| !c.finalizers().is_empty());
        has(get(&h.client, "keep").await) && has(get(&h.client, "drop").await)
    })
    .await;

    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    clusters
        .delete("keep", &DeleteParams::default())
        .await
        .expect("delete keep");
    clusters
        .delete("drop", &DeleteParams::default())
        .await
        .expect("delete drop");
    wait_for("both clusters gone", || async {
        get::<PostgresCluster>(&h.client, "keep").await.is_none()
            && get::<PostgresCluster>(&h.client, "drop").await.is_none()
    })
    .await;
    wait_for(
        "the Delete volume collected and the Retain one kept",
        || async {
            get::<PersistentVolumeClaim>(&h.client, "drop-1")
                .await
                .is_none()
                && get::<PersistentVolumeClaim>(&h.client, "keep-1")
                    .await
                    .is_some()
        },
    )
    .await;
    let kept: PersistentVolumeClaim = get(&h.client, "keep-1").await.expect("kept");
    assert!(
        kept.owner_references().is_empty(),
        "a retained volume is detached from its cluster"
    );
    assert_eq!(
        kept.labels().get("tusk.dev/retained").map(String::as_str),
        Some("true")
    );
    wait_for("the pods collected", || async {
        get::<Pod>(&h.client, "keep-1").await.is_none()
    })
    .await;
    operator.stop().await;
}

#[tokio::test]
async fn credentials_are_generated_once_and_never_overwritten() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    create(&h.client, "creds", small()).await;
    wait_for("every child", || children_exist(&h.client, "creds")).await;
    let password = |secret: Secret| {
        secret
            .data
            .and_then(|d| d.get("password").cloned())
            .map(|p| p.0)
    };
    let generated =
        password(get(&h.client, "creds-app").await.expect("secret")).expect("a password");
    assert!(generated.len() >= 32, "a strong generated password");
    // A person rotates the password; later reconciles leave it alone.
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), NS);
    let rotated = json!({"stringData": {"password": "rotated-by-a-person"}});
    secrets
        .patch(
            "creds-app",
            &PatchParams::default(),
            &Patch::Merge(&rotated),
        )
        .await
        .expect("rotate");
    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    clusters
        .patch(
            "creds",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"instances": 2}})),
        )
        .await
        .expect("a spec change, so the cluster is reconciled again");
    wait_for("the change observed", || async {
        get::<PostgresCluster>(&h.client, "creds")
            .await
            .and_then(|c| c.status)
            .and_then(|s| s.observed_generation)
            == Some(2)
    })
    .await;
    let now = password(get(&h.client, "creds-app").await.expect("secret"));
    assert_eq!(now.as_deref(), Some(b"rotated-by-a-person".as_slice()));
    operator.stop().await;
}

/// The message of the cluster's Degraded condition when its reason is
/// `reason`.
async fn condition_with_reason(client: &Client, name: &str, reason: &str) -> Option<String> {
    condition(client, name, "Degraded")
        .await
        .filter(|(status, why, _)| status == "True" && why == reason)
        .map(|(_, _, message)| message)
}

#[tokio::test]
async fn a_recreated_cluster_never_adopts_a_retained_volume() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    let first = create(&h.client, "again", small()).await;
    wait_for("every child", || children_exist(&h.client, "again")).await;
    let claim: PersistentVolumeClaim = get(&h.client, "again-1").await.expect("claim");
    assert!(
        claim.owner_references().is_empty(),
        "under Retain a volume has no owner reference, so no garbage collection can take it"
    );
    assert_eq!(
        claim.labels().get("tusk.dev/cluster-uid"),
        first.uid().as_ref()
    );
    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    clusters
        .delete("again", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for("the cluster gone", || async {
        get::<PostgresCluster>(&h.client, "again").await.is_none()
    })
    .await;
    let retained: PersistentVolumeClaim = get(&h.client, "again-1").await.expect("retained");

    let second = create(&h.client, "again", small()).await;
    wait_for("a VolumeConflict condition naming the claim", || async {
        condition_with_reason(&h.client, "again", "VolumeConflict")
            .await
            .is_some_and(|m| m.contains("again-1") && m.contains("retained"))
    })
    .await;
    wait_for("a VolumeConflict event", || async {
        events_of(&h.client, "again")
            .await
            .iter()
            .any(|(reason, note)| reason == "VolumeConflict" && note.contains("again-1"))
    })
    .await;
    let after: PersistentVolumeClaim = get(&h.client, "again-1").await.expect("still there");
    assert_eq!(
        after.metadata.resource_version, retained.metadata.resource_version,
        "the retained claim is not changed"
    );
    assert_eq!(
        after.labels().get("tusk.dev/cluster-uid"),
        first.uid().as_ref()
    );
    assert_ne!(first.uid(), second.uid());
    assert!(
        get::<Pod>(&h.client, "again-1").await.is_none(),
        "no pod runs on a volume that is not the cluster's"
    );

    // Once the old claim is gone, the instance starts on a new volume.
    Api::<PersistentVolumeClaim>::namespaced(h.client.clone(), NS)
        .delete("again-1", &DeleteParams::default())
        .await
        .expect("delete the old claim");
    wait_for("a new claim made for the new cluster", || async {
        get::<PersistentVolumeClaim>(&h.client, "again-1")
            .await
            .is_some_and(|c| c.labels().get("tusk.dev/cluster-uid") == second.uid().as_ref())
    })
    .await;
    operator.stop().await;
}

#[tokio::test]
async fn a_claim_someone_else_made_is_never_taken_over() {
    let h = sandbox(true).await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(h.client.clone(), NS);
    let theirs: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "taken-1", "labels": {"app": "theirs"}},
        "spec": {"accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "5Gi"}}}
    }))
    .expect("a claim");
    let theirs = claims
        .create(&PostParams::default(), &theirs)
        .await
        .expect("their claim");
    let operator = Operator::start(&h.client, None);
    create(&h.client, "taken", small()).await;
    wait_for("a VolumeConflict condition", || async {
        condition_with_reason(&h.client, "taken", "VolumeConflict")
            .await
            .is_some_and(|m| m.contains("taken-1") && m.contains("not made by Tusk"))
    })
    .await;
    let after = claims.get("taken-1").await.expect("their claim");
    assert_eq!(
        after.metadata.resource_version, theirs.metadata.resource_version,
        "their claim is untouched"
    );
    assert!(get::<Pod>(&h.client, "taken-1").await.is_none());
    operator.stop().await;
}

#[tokio::test]
async fn changing_the_deletion_policy_moves_the_owner_reference() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    let created = create(&h.client, "policy", small()).await;
    wait_for("every child", || children_exist(&h.client, "policy")).await;
    let uid = created.uid().expect("uid");
    assert!(!owns(&h.client, &uid).await);
    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    let to = |policy: &str| json!({"spec": {"deletionPolicy": policy}});
    clusters
        .patch(
            "policy",
            &PatchParams::default(),
            &Patch::Merge(&to("Delete")),
        )
        .await
        .expect("to Delete");
    wait_for("the cluster owns its volume", || owns(&h.client, &uid)).await;
    clusters
        .patch(
            "policy",
            &PatchParams::default(),
            &Patch::Merge(&to("Retain")),
        )
        .await
        .expect("to Retain");
    wait_for("the volume free again", || async {
        !owns(&h.client, &uid).await
    })
    .await;
    operator.stop().await;
}

/// Whether the cluster with `uid` owns the volume `policy-1`.
async fn owns(client: &Client, uid: &str) -> bool {
    get::<PersistentVolumeClaim>(client, "policy-1")
        .await
        .is_some_and(|c| c.owner_references().iter().any(|o| o.uid == uid))
}

#[tokio::test]
async fn credentials_someone_else_made_are_never_used() {
    let planted = json!({
        "metadata": {"name": "planted-superuser"},
        "stringData": {"username": "postgres", "password": "known-to-someone"}
    });
    a_planted_secret_is_refused("planted", planted).await;
}

/// A certificate Secret of the cluster's names that Tusk did not make (a
/// server certificate someone planted, whose key they hold) is never
/// mounted.
#[tokio::test]
async fn certificates_someone_else_made_are_never_used() {
    let planted = json!({
        "metadata": {"name": "forged-server"},
        "stringData": {"tls.crt": "a certificate", "tls.key": "a key known to someone"}
    });
    a_planted_secret_is_refused("forged", planted).await;
}

/// With the Secret `planted` made by someone else, the cluster `cluster`
/// stops with a condition naming it, the Secret is untouched and no pod
/// starts.
async fn a_planted_secret_is_refused(cluster: &str, planted: serde_json::Value) {
    let h = sandbox(true).await;
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), NS);
    let planted: Secret = serde_json::from_value(planted).expect("a secret");
    let name = planted.metadata.name.clone().expect("a name");
    let planted = secrets
        .create(&PostParams::default(), &planted)
        .await
        .expect("planted secret");
    let operator = Operator::start(&h.client, None);
    create(&h.client, cluster, small()).await;
    wait_for("a SecretConflict condition naming the Secret", || async {
        condition_with_reason(&h.client, cluster, "SecretConflict")
            .await
            .is_some_and(|m| m.contains(&name))
    })
    .await;
    let after = secrets.get(&name).await.expect("still there");
    assert_eq!(
        after.metadata.resource_version, planted.metadata.resource_version,
        "the Secret is untouched"
    );
    assert!(
        get::<Pod>(&h.client, &format!("{cluster}-1"))
            .await
            .is_none(),
        "no PostgreSQL starts with a Secret Tusk did not make"
    );
    operator.stop().await;
}

/// The authority's Secret edited so it no longer says which authority it
/// is: the certificates are not issued again from a key of unknown origin;
/// the condition names the Secret and what it lacks.
#[tokio::test]
async fn an_edited_authority_is_reported_not_used() {
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    create(&h.client, "edited", small()).await;
    wait_for("every child", || children_exist(&h.client, "edited")).await;
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), NS);
    let server = secrets.get("edited-server").await.expect("issued");
    let key = secrets.get("edited-ca-key").await.expect("the authority");
    assert!(
        key.data.as_ref().is_some_and(|d| d.contains_key("tls.key")),
        "the authority keeps its key"
    );
    secrets
        .patch(
            "edited-ca-key",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {
                "postgres.tusk.dev/authority": null
            }}})),
        )
        .await
        .expect("edited");
    wait_for(
        "a SecretConflict condition naming the authority",
        || async {
            condition_with_reason(&h.client, "edited", "SecretConflict")
                .await
                .is_some_and(|m| m.contains("edited-ca-key") && m.contains("authority"))
        },
    )
    .await;
    let after = secrets.get("edited-server").await.expect("still there");
    assert_eq!(
        after.data, server.data,
        "the server certificate is not issued again from it"
    );
    operator.stop().await;
}

/// `spec.networkPolicy` makes the cluster's NetworkPolicy (owned by it,
/// admitting the declared clients to PostgreSQL); removing the
/// declaration removes the policy, and a policy of that name the cluster
/// does not own is left alone.
#[tokio::test]
async fn a_declared_network_policy_is_made_and_removed_with_its_declaration() {
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    let h = sandbox(true).await;
    let operator = Operator::start(&h.client, None);
    let mut spec = small();
    spec["networkPolicy"] = json!({"clients": [{"podSelector": {"matchLabels": {"app": "shop"}}}]});
    let created = create(&h.client, "fenced-in", spec).await;
    wait_for("the NetworkPolicy", || async {
        get::<NetworkPolicy>(&h.client, "fenced-in").await.is_some()
    })
    .await;
    let policy: NetworkPolicy = get(&h.client, "fenced-in").await.expect("policy");
    assert_eq!(
        policy.owner_references()[0].uid,
        created.uid().expect("uid")
    );
    let rules = policy.spec.and_then(|s| s.ingress).expect("rules");
    let clients = serde_json::to_value(&rules[0].from).expect("json");
    assert_eq!(
        clients[1],
        json!({"podSelector": {"matchLabels": {"app": "shop"}}})
    );

    let clusters: Api<PostgresCluster> = Api::namespaced(h.client.clone(), NS);
    clusters
        .patch(
            "fenced-in",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"networkPolicy": null}})),
        )
        .await
        .expect("declaration removed");
    wait_for("the NetworkPolicy removed", || async {
        get::<NetworkPolicy>(&h.client, "fenced-in").await.is_none()
    })
    .await;

    // One the cluster does not own, under its name and label, stays.
    let policies: Api<NetworkPolicy> = Api::namespaced(h.client.clone(), NS);
    let foreign: NetworkPolicy = serde_json::from_value(json!({
        "metadata": {"name": "fenced-in", "labels": {"tusk.dev/cluster": "fenced-in"}},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}
    }))
    .expect("a policy");
    policies
        .create(&PostParams::default(), &foreign)
        .await
        .expect("created by someone else");
    // A change of the cluster makes a pass.
    clusters
        .patch(
            "fenced-in",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"touched": "yes"}}})),
        )
        .await
        .expect("touched");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        get::<NetworkPolicy>(&h.client, "fenced-in").await.is_some(),
        "a policy the cluster does not own is never deleted"
    );
    operator.stop().await;
}
