//! Every network connection to a cluster is encrypted, and clients can
//! verify whom they talk to: real `psql` (libpq) connects through `-rw`
//! with `sslmode=verify-full` and the authority from `<cluster>-ca`; a
//! plain connection and a name the certificate does not carry are refused;
//! the standby streams over TLS, logged in by its certificate; a server
//! certificate issued again is served after a reload, with no restart and
//! the open session still answering. The instance API is HTTPS with the
//! same certificate, and `/status` answers only a token the cluster's
//! authority signed. The superuser logs in over the network only when
//! `spec.postgres.superuserAccess` allows it.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::tls::{first_certificate, presented, presented_by_api, psql, text};
use common::{NS, World, pod_ip, wait_for};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tusk_sandbox::testing;

const CLUSTER: &str = "sealed";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_verify_the_server_standbys_log_in_by_certificate_and_a_renewed_certificate_is_served_without_a_restart()
 {
    let world = World::start().await;
    world
        .create_cluster(
            CLUSTER,
            json!({"instances": 2, "postgres": {"version": 15}, "storage": {"size": "1Gi"}}),
        )
        .await;
    world.wait_ready(CLUSTER, 2).await;
    let secrets: Api<Secret> = Api::namespaced(world.client.clone(), NS);
    let public = secrets.get("sealed-ca").await.expect("the CA Secret");
    assert_eq!(
        public
            .data
            .as_ref()
            .map(|d| d.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["ca.crt".to_owned()]),
        "the Secret clients read holds the authority's certificate alone"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, text(&public, "ca.crt")).expect("CA file");
    let app = secrets.get("sealed-app").await.expect("the app Secret");
    let rw = world.service_ip("sealed-rw").await;
    let superuser = secrets
        .get("sealed-superuser")
        .await
        .expect("the superuser Secret");
    let as_user = |user: &Secret, host: &str, mode: &str, ca: &Path| {
        format!(
            "host={host} hostaddr={rw} port=5432 user={} password={} dbname=postgres sslmode={mode} sslrootcert={}",
            text(user, "username"),
            text(user, "password"),
            ca.display()
        )
    };
    let conninfo = |host: &str, mode: &str, ca: &Path| as_user(&app, host, mode, ca);
    let service_name = format!("sealed-rw.{NS}.svc");

    // libpq verifies the server by the Service's name and the cluster's
    // authority, and the session is encrypted.
    let verified = conninfo(&service_name, "verify-full", &ca_file);
    let mut answer = Err(String::new());
    for _ in 0..20 {
        answer = psql(
            &verified,
            "select ssl from pg_stat_ssl where pid = pg_backend_pid()",
        );
        if answer.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(answer.as_deref(), Ok("t"));

    // A name the certificate does not carry, another authority, and no
    // encryption at all are refused.
    let refused = psql(
        &conninfo("elsewhere.example", "verify-full", &ca_file),
        "select 1",
    )
    .expect_err("a name the certificate lacks");
    assert!(refused.contains("does not match host name"), "{refused}");
    let other_ca = dir.path().join("other.crt");
    std::fs::write(
        &other_ca,
        rcgen::generate_simple_self_signed(vec!["sealed-rw".to_owned()])
            .expect("a certificate")
            .cert
            .pem(),
    )
    .expect("other CA file");
    let refused = psql(
        &conninfo(&service_name, "verify-full", &other_ca),
        "select 1",
    )
    .expect_err("another authority");
    assert!(refused.contains("certificate verify failed"), "{refused}");
    let refused = psql(&conninfo(&service_name, "disable", &ca_file), "select 1")
        .expect_err("a plain connection");
    assert!(refused.contains("no encryption"), "{refused}");

    // The superuser may not log in over the network, with the right
    // password and a verified connection, until the cluster allows it;
    // then it may, with no restart.
    let privileged = as_user(&superuser, &service_name, "verify-full", &ca_file);
    let refused = psql(&privileged, "select 1").expect_err("the superuser over the network");
    assert!(
        refused.contains("pg_hba.conf rejects connection"),
        "{refused}"
    );
    let restarts = world.restarts(CLUSTER).await;
    world
        .clusters()
        .patch(
            CLUSTER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"postgres": {"superuserAccess": true}}})),
        )
        .await
        .expect("superuser access allowed");
    wait_for("the superuser let in", Duration::from_secs(30), || async {
        psql(&privileged, "select 1").is_ok()
    })
    .await;
    assert_eq!(world.restarts(CLUSTER).await, restarts, "nothing restarted");

    // The standby streams over TLS, logged in by its certificate.
    // (What a walsender is, only a privileged role sees.)
    let mut streaming = Err(String::new());
    for _ in 0..40 {
        streaming = psql(
            &privileged,
            "select s.ssl, s.client_dn from pg_stat_replication r join pg_stat_ssl s using (pid)",
        );
        if streaming.as_ref().is_ok_and(|rows| !rows.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(streaming.as_deref(), Ok("t|/CN=streaming_replica"));

    let primary = world
        .status(CLUSTER)
        .await
        .current_primary
        .expect("a primary");
    let primary_ip = pod_ip(&world, &primary)
        .await
        .expect("the primary's address");
    instance_api_answers_the_authority_alone(&world, &primary_ip, &ca_file).await;

    // The server certificate is issued again when due: the instances
    // serve the new one after a reload, with no restart, and an open
    // session goes on.
    let session = world.connect("sealed-rw", CLUSTER).await;
    let before = world.restarts(CLUSTER).await;
    // The certificate is issued again, quietly, once the second pod has an
    // address (the certificate names the instances' addresses): the one to
    // renew is the Secret's once the instances serve it.
    let old = testing::eventually(
        "the server Secret's certificate presented through -rw",
        Duration::from_secs(60),
        || async {
            let server = secrets
                .get("sealed-server")
                .await
                .expect("the server Secret");
            first_certificate(&text(&server, "tls.crt"))
                .filter(|current| presented(&rw).as_deref() == Some(current.as_str()))
        },
    )
    .await;
    secrets
        .patch(
            "sealed-server",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "postgres.tusk.dev/renew-after": "2000-01-01T00:00:00Z"
            }}})),
        )
        .await
        .expect("made due");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let renewed = loop {
        let secret = secrets
            .get("sealed-server")
            .await
            .expect("the server Secret");
        let current = first_certificate(&text(&secret, "tls.crt")).unwrap_or_default();
        if !current.is_empty() && current != old {
            break current;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server certificate was not issued again within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    wait_for("an event saying so", Duration::from_secs(30), || async {
        world
            .story(CLUSTER)
            .await
            .contains("CertificateIssued: Secret sealed-server issued again")
    })
    .await;
    wait_for(
        "the renewed certificate presented through -rw",
        Duration::from_secs(150),
        || async { presented(&rw).as_deref() == Some(renewed.as_str()) },
    )
    .await;
    wait_for(
        "the renewed certificate presented by the instance API",
        Duration::from_secs(30),
        || async { presented_by_api(&primary_ip).as_deref() == Some(renewed.as_str()) },
    )
    .await;
    session
        .simple_query("select 1")
        .await
        .expect("the session opened before the renewal still answers");
    assert_eq!(psql(&verified, "select 1").as_deref(), Ok("1"));
    assert_eq!(world.restarts(CLUSTER).await, before, "nothing restarted");
}

/// `curl` to the instance API at `ip`, verifying it by `ca_file` and the
/// name `sealed-rw`: the HTTP status, or why the request failed.
fn curl_api(ip: &str, ca_file: &Path, path: &str, token: Option<&str>) -> Result<String, String> {
    let mut command = Command::new("curl");
    command.args([
        "-sS",
        "--max-time",
        "5",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--cacert",
        &ca_file.display().to_string(),
        "--resolve",
        &format!("sealed-rw:8000:{ip}"),
        &format!("https://sealed-rw:8000{path}"),
    ]);
    if let Some(token) = token {
        command.args(["-H", &format!("x-tusk-token: {token}")]);
    }
    let output = command
        .output()
        .map_err(|e| format!("curl cannot run: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// The instance API is HTTPS with the cluster's server certificate (no
/// plain HTTP); probes answer anyone; `/status` answers a token signed by
/// the cluster's authority for this cluster, and refuses none, an expired
/// one, one for another cluster and one from another key.
async fn instance_api_answers_the_authority_alone(world: &World, ip: &str, ca_file: &Path) {
    use tusk_operator::builders::certificates::{Authority, TokenKey};
    use tusk_operator::instance_api::unix_now;

    let secrets: Api<Secret> = Api::namespaced(world.client.clone(), NS);
    let key = secrets
        .get("sealed-api-token-key")
        .await
        .expect("the token key");
    let signer = TokenKey::from_secret(&key).expect("the token key reads");
    let now = unix_now();
    let token = |cluster: &str, at: u64| {
        signer
            .sign_token("e2e-test", NS, cluster, at)
            .expect("a token")
    };
    // The authority's key issues certificates; it signs no token a pod
    // made with the token key accepts.
    let ca_key = secrets.get("sealed-ca-key").await.expect("the authority");
    let authority = Authority::from_secret(&ca_key).expect("the authority reads");
    let by_authority = authority
        .sign_legacy_token("e2e-test", NS, CLUSTER, now)
        .expect("a token");
    assert_eq!(
        curl_api(ip, ca_file, "/status", Some(&by_authority)).as_deref(),
        Ok("401")
    );

    assert_eq!(curl_api(ip, ca_file, "/readyz", None).as_deref(), Ok("200"));
    assert_eq!(curl_api(ip, ca_file, "/status", None).as_deref(), Ok("401"));
    let good = token(CLUSTER, now);
    assert_eq!(
        curl_api(ip, ca_file, "/status", Some(&good)).as_deref(),
        Ok("200")
    );
    let expired = token(CLUSTER, now - 600);
    assert_eq!(
        curl_api(ip, ca_file, "/status", Some(&expired)).as_deref(),
        Ok("401")
    );
    let elsewhere = token("other", now);
    assert_eq!(
        curl_api(ip, ca_file, "/status", Some(&elsewhere)).as_deref(),
        Ok("401")
    );
    let stranger = rcgen::KeyPair::generate().expect("a key");
    let forged = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256),
        &tusk_api::instance::TokenClaims::new("forger", NS, CLUSTER, now),
        &jsonwebtoken::EncodingKey::from_ec_pem(stranger.serialize_pem().as_bytes()).expect("key"),
    )
    .expect("a forged token");
    assert_eq!(
        curl_api(ip, ca_file, "/status", Some(&forged)).as_deref(),
        Ok("401")
    );

    // The server is verified: another authority fails the handshake, and
    // nothing answers plain HTTP.
    let other = ca_file.with_file_name("other.crt");
    let refused = curl_api(ip, &other, "/readyz", None).expect_err("another authority");
    assert!(refused.contains("certificate"), "{refused}");
    let plain = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "5",
            &format!("http://{ip}:8000/readyz"),
        ])
        .output()
        .expect("curl runs");
    assert!(!plain.status.success(), "plain HTTP answered");
}
