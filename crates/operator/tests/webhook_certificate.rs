//! The webhook's certificate kept through the API (the sandbox's API
//! server, which enforces what kube-apiserver does): a first round issues
//! the Secret and puts its authority in the configuration's `caBundle`; a
//! round two months later renews it, keeping the previous authority in the
//! bundle so the certificate still served by another replica stays
//! trusted; a round in between writes nothing.

use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::PostParams;
use tusk_operator::install;
use tusk_operator::webhook::certificate::{self, SECRET};
use tusk_operator::webhook::certify::{self, Registration};
use tusk_operator::webhook::serve::Served;
use tusk_sandbox::testing::TestSandbox;

fn certificates_in(bundle: &str) -> usize {
    bundle.matches("-----BEGIN CERTIFICATE-----").count()
}

#[tokio::test]
async fn the_certificate_is_issued_injected_and_renewed_before_it_expires() {
    let t = TestSandbox::start().await;
    let namespaces: Api<Namespace> = Api::all(t.client.clone());
    namespaces
        .create(&PostParams::default(), &install::namespace())
        .await
        .expect("the operator's namespace");
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(t.client.clone());
    configurations
        .create(
            &PostParams::default(),
            &install::validating_webhook_configuration(),
        )
        .await
        .expect("the webhook configuration");
    let registration = Registration {
        namespace: install::NAMESPACE.to_owned(),
        service: tusk_operator::webhook::SERVICE.to_owned(),
        configuration: tusk_operator::webhook::CONFIGURATION.to_owned(),
    };
    let served = Arc::new(Served::default());
    assert!(!served.ready(), "nothing is served before the first round");
    let secrets: Api<Secret> = Api::namespaced(t.client.clone(), install::NAMESPACE);
    let bundle_in_configuration = || async {
        let configuration = configurations
            .get(tusk_operator::webhook::CONFIGURATION)
            .await
            .expect("the configuration");
        let webhook = configuration
            .webhooks
            .and_then(|w| w.into_iter().next())
            .expect("one webhook");
        String::from_utf8(webhook.client_config.ca_bundle.expect("a caBundle").0).expect("PEM")
    };

    let start = Timestamp::now();
    certify::round(&t.client, &registration, &served, start)
        .await
        .expect("the first round");
    assert!(served.ready());
    let first = secrets.get(SECRET).await.expect("the Secret");
    let first_bundle = certificate::bundle_of(&first).expect("a bundle");
    assert_eq!(certificates_in(&first_bundle), 1);
    assert_eq!(bundle_in_configuration().await, first_bundle);

    // A day later: nothing is due, nothing is written.
    let day = start
        .saturating_add(SignedDuration::from_hours(24))
        .expect("a day later");
    certify::round(&t.client, &registration, &served, day)
        .await
        .expect("a quiet round");
    let unchanged = secrets.get(SECRET).await.expect("the Secret");
    assert_eq!(
        unchanged.metadata.resource_version,
        first.metadata.resource_version
    );

    // Past the renewal time, a month before the certificate expires.
    let due = start
        .saturating_add(SignedDuration::from_hours(
            24 * certificate::RENEW_AFTER_DAYS + 1,
        ))
        .expect("two months later");
    const { assert!(certificate::RENEW_AFTER_DAYS < certificate::LEAF_DAYS) };
    certify::round(&t.client, &registration, &served, due)
        .await
        .expect("the renewal");
    let renewed = secrets.get(SECRET).await.expect("the Secret");
    let renewed_bundle = certificate::bundle_of(&renewed).expect("a bundle");
    assert_ne!(renewed.data, first.data, "a new certificate");
    assert_eq!(
        certificates_in(&renewed_bundle),
        2,
        "new and previous authority"
    );
    assert!(
        renewed_bundle.contains(first_bundle.trim()),
        "the previous authority stays trusted"
    );
    assert_eq!(bundle_in_configuration().await, renewed_bundle);
}
