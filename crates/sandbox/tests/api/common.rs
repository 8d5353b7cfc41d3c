//! What the API tests share beyond [`tusk_sandbox::testing`]: a test CRD,
//! its objects, and the shared harness re-exported.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};
pub use tusk_sandbox::testing::{
    TestSandbox, WAIT, client_for, eventually, install_tusk_crds, wait_for,
};

/// The ConfigMap the root CA publisher keeps in every namespace, which
/// lists of ConfigMaps include as on any cluster.
pub const ROOT_CA: &str = "kube-root-ca.crt";

pub fn config_map(name: &str, data: Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": data,
    }))
    .expect("valid ConfigMap")
}

/// A test CRD `widgets.example.com`: two versions (v1 served and stored,
/// v1beta1 served), a status subresource, printer columns, defaults, an
/// enum, bounds, a pattern and CEL rules including a transition rule.
pub fn widget_crd() -> Value {
    let schema = json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "minimum": 1, "maximum": 10},
                    "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                    "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
                    "note": {"type": "string", "nullable": true},
                    "port": {"x-kubernetes-int-or-string": true},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "items": {"type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string"}, "value": {"type": "string"}}}}
                },
                "x-kubernetes-validations": [
                    {"rule": "self.size >= oldSelf.size", "message": "size may grow but never shrink"},
                    {"rule": "!has(self.name) || self.name != 'banned'", "message": "that name is forbidden"}
                ]
            },
            "status": {
                "type": "object",
                "properties": {"phase": {"type": "string"}, "ready": {"type": "integer"}}
            }
        }
    });
    let columns = json!([
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]);
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wg"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": schema},
                 "subresources": {"status": {}},
                 "additionalPrinterColumns": columns},
                {"name": "v1beta1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": schema},
                 "subresources": {"status": {}}},
                {"name": "v1alpha1", "served": false, "storage": false,
                 "schema": {"openAPIV3Schema": schema}}
            ]
        }
    })
}

pub async fn install_widgets(client: &Client) {
    create_crd(client, widget_crd()).await;
}

pub async fn create_crd(client: &Client, crd: Value) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crd: CustomResourceDefinition = serde_json::from_value(crd).expect("valid CRD");
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.create(&PostParams::default(), &crd)
        .await
        .expect("CRD is created");
}

pub fn widgets(client: &Client, version: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", version, "Widget"),
        "widgets",
    );
    Api::namespaced_with(client.clone(), "default", &resource)
}

pub fn widget(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("valid Widget")
}

/// The HTTP status code of a kube error.
pub fn code(error: &kube::Error) -> u16 {
    match error {
        kube::Error::Api(status) => status.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}
