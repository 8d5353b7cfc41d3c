//! The operator's admission webhook, served by the test on loopback with a
//! certificate for 127.0.0.1, and the ValidatingWebhookConfiguration that
//! sends an API server to it: the operator's own (rules, failure policy,
//! namespace selector) with a `url` client instead of its Service, which
//! neither kube-apiserver from kube-up nor a bare sandbox can route to.

use std::sync::Arc;

use serde_json::{Value, json};
use tusk_operator::config::OperatorConfig;
use tusk_operator::webhook::certificate;
use tusk_operator::webhook::serve::{self, Served};

/// A running webhook; stops when dropped.
pub struct LoopbackWebhook {
    pub url: String,
    /// The authority its certificate chains to (PEM).
    pub bundle: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl LoopbackWebhook {
    pub async fn start() -> Self {
        let issued = certificate::issue(
            &["127.0.0.1".to_owned()],
            k8s_openapi::jiff::Timestamp::now(),
            None,
        )
        .expect("a certificate");
        let served = Arc::new(Served::default());
        served
            .load(&issued.cert_pem, &issued.key_pem)
            .expect("the certificate loads");
        let listener = serve::bind("127.0.0.1:0".parse().expect("an address"))
            .await
            .expect("a loopback port");
        let port = listener.local_addr().expect("an address").port();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve::serve(
            listener,
            served,
            OperatorConfig::default(),
            async {
                let _ = stopped.await;
            },
        ));
        Self {
            url: format!("https://127.0.0.1:{port}{}", serve::PATH),
            bundle: issued.bundle_pem,
            stop: Some(stop),
        }
    }
}

impl Drop for LoopbackWebhook {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The operator's configuration, calling `url` and trusting `bundle`,
/// with `policy` and `timeout`; `exempt` is the namespace its selector
/// leaves out.
pub fn configuration(url: &str, bundle: &str, policy: &str, timeout: u32, exempt: &str) -> Value {
    let mut configuration =
        serde_json::to_value(tusk_operator::install::validating_webhook_configuration())
            .expect("the configuration serialises");
    let webhook = &mut configuration["webhooks"][0];
    webhook["clientConfig"] = json!({
        "url": url,
        "caBundle": serde_json::to_value(k8s_openapi::ByteString(bundle.as_bytes().to_vec()))
            .expect("base64"),
    });
    webhook["failurePolicy"] = json!(policy);
    webhook["timeoutSeconds"] = json!(timeout);
    webhook["namespaceSelector"]["matchExpressions"][0]["values"] = json!([exempt]);
    configuration["apiVersion"] = json!("admissionregistration.k8s.io/v1");
    configuration["kind"] = json!("ValidatingWebhookConfiguration");
    configuration
}
