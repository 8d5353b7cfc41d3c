//! A server certificate of the owner's own issuer
//! (`spec.certificates.serverSecret`, a Secret as cert-manager writes one):
//! PostgreSQL serves it, clients verify it with the issuer's authority (and
//! not with the cluster's), the standby streams verifying the primary
//! against that issuer while still logging in with the cluster's own
//! client certificate, `kubectl tusk psql` trusts the issuer, and a renewed
//! certificate is served after a reload with no restart.

mod common;

use std::time::Duration;

use common::tls::{first_certificate, presented, psql, text};
use common::{NS, World, wait_for};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
use serde_json::json;

const CLUSTER: &str = "own";
const SECRET: &str = "own-server-cert";

/// The owner's issuer.
struct OwnIssuer {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl OwnIssuer {
    fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, "Example Corp issuer");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().expect("a key");
        let pem = params.self_signed(&key).expect("self-signed").pem();
        OwnIssuer {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A server certificate for the cluster's Service names, as a
    /// `kubernetes.io/tls` Secret's data.
    fn server_secret_data(&self) -> std::collections::BTreeMap<String, ByteString> {
        let names = tusk_api::contract::server_certificate_names(CLUSTER, NS);
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, names[0].clone());
        for name in names {
            params
                .subject_alt_names
                .push(SanType::DnsName(name.try_into().expect("a DNS name")));
        }
        let key = KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        [
            ("tls.crt", cert.pem()),
            ("tls.key", key.serialize_pem()),
            ("ca.crt", self.pem.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.into_bytes())))
        .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_certificate_is_served_verified_by_its_issuer_and_renewed_without_a_restart() {
    let world = World::start().await;
    let issuer = OwnIssuer::new();
    let secrets: Api<Secret> = Api::namespaced(world.client.clone(), NS);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": SECRET},
        "type": "kubernetes.io/tls",
    }))
    .expect("a Secret");
    let secret = Secret {
        data: Some(issuer.server_secret_data()),
        ..secret
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("the owner's Secret");
    world
        .create_cluster(
            CLUSTER,
            json!({"instances": 2, "postgres": {"version": 15}, "storage": {"size": "1Gi"},
                   "certificates": {"serverSecret": SECRET}}),
        )
        .await;
    // Ready means streaming for a standby: it verified the primary
    // against the owner's issuer and logged in with the cluster's client
    // certificate.
    world.wait_ready(CLUSTER, 2).await;
    let streaming = || async {
        world
            .status(CLUSTER)
            .await
            .instances
            .iter()
            .any(|i| i.role == "replica" && i.ready)
    };
    assert!(streaming().await, "a standby streams");

    let dir = tempfile::tempdir().expect("temp dir");
    let own_ca = dir.path().join("issuer.crt");
    std::fs::write(&own_ca, &issuer.pem).expect("issuer file");
    let cluster_ca = dir.path().join("cluster.crt");
    let public = secrets.get("own-ca").await.expect("the cluster's CA");
    std::fs::write(&cluster_ca, text(&public, "ca.crt")).expect("CA file");
    let app = secrets.get("own-app").await.expect("the app Secret");
    let rw = world.service_ip("own-rw").await;
    let conninfo = |ca: &std::path::Path| {
        format!(
            "host=own-rw.{NS}.svc hostaddr={rw} port=5432 user={} password={} dbname=app \
             sslmode=verify-full sslrootcert={}",
            text(&app, "username"),
            text(&app, "password"),
            ca.display()
        )
    };
    let mut answer = Err(String::new());
    for _ in 0..20 {
        answer = psql(
            &conninfo(&own_ca),
            "select ssl from pg_stat_ssl where pid = pg_backend_pid()",
        );
        if answer.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(answer.as_deref(), Ok("t"), "verified by the owner's issuer");
    let refused = psql(&conninfo(&cluster_ca), "select 1").expect_err("the cluster's CA");
    assert!(refused.contains("certificate verify failed"), "{refused}");
    let served = first_certificate(&text(&secret, "tls.crt")).expect("a certificate");
    assert_eq!(presented(&rw).as_deref(), Some(served.as_str()));

    // Renewed by the owner's issuer (as cert-manager would): served after
    // the kubelet's refresh and a reload, with no restart; the standby
    // still streams.
    let before = world.restarts(CLUSTER).await;
    let session = world.connect("own-rw", CLUSTER).await;
    let renewed = issuer.server_secret_data();
    let renewed_cert =
        first_certificate(&String::from_utf8_lossy(&renewed["tls.crt"].0)).expect("a certificate");
    secrets
        .patch(
            SECRET,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": renewed})),
        )
        .await
        .expect("renewed");
    wait_for(
        "the renewed certificate presented through -rw",
        Duration::from_secs(150),
        || async { presented(&rw).as_deref() == Some(renewed_cert.as_str()) },
    )
    .await;
    session
        .simple_query("select 1")
        .await
        .expect("the session opened before the renewal still answers");
    assert_eq!(world.restarts(CLUSTER).await, before, "nothing restarted");
    wait_for("the standby streaming", Duration::from_secs(60), streaming).await;
    world.shutdown().await;
}
