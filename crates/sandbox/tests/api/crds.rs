//! Custom kinds: served once their CRD exists, validated by their schema
//! and CEL rules, defaulted, pruned, with a status subresource, several
//! versions and printer columns.

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::common::{TestSandbox, code, install_widgets, widget, widgets};

fn message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_custom_kind_is_served_as_soon_as_its_crd_exists() {
    let t = TestSandbox::start().await;
    let before = widgets(&t.client, "v1").list(&Default::default()).await;
    assert_eq!(code(&before.expect_err("not served yet")), 404);
    install_widgets(&t.client).await;
    let api = widgets(&t.client, "v1");
    let created = api
        .create(&PostParams::default(), &widget("w1", json!({"size": 3})))
        .await
        .expect("created");
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created.data["spec"]["color"], "red",
        "schema default applied"
    );
    let discovery = kube::Discovery::new(t.client.clone())
        .run()
        .await
        .expect("discovery");
    let group = discovery.get("example.com").expect("group discovered");
    assert_eq!(group.preferred_version_or_latest(), "v1");
    assert!(group.versions().any(|v| v == "v1beta1"));
    assert!(
        !group.versions().any(|v| v == "v1alpha1"),
        "unserved versions are hidden"
    );
}

#[tokio::test]
async fn every_served_version_reads_the_same_object() {
    let t = TestSandbox::start().await;
    install_widgets(&t.client).await;
    widgets(&t.client, "v1")
        .create(&PostParams::default(), &widget("w", json!({"size": 2})))
        .await
        .expect("created");
    let beta = widgets(&t.client, "v1beta1")
        .get("w")
        .await
        .expect("served as v1beta1");
    assert_eq!(
        beta.types.as_ref().map(|t| t.api_version.as_str()),
        Some("example.com/v1beta1")
    );
    assert_eq!(beta.data["spec"]["size"], 2);
    let alpha = widgets(&t.client, "v1alpha1").get("w").await;
    assert_eq!(code(&alpha.expect_err("unserved version")), 404);
}

#[tokio::test]
async fn schema_violations_are_422_with_causes_naming_the_field() {
    let t = TestSandbox::start().await;
    install_widgets(&t.client).await;
    let api = widgets(&t.client, "v1");
    let cases: [(Value, &str); 6] = [
        (json!({"size": 11}), "spec.size"),
        (json!({"size": "big"}), "spec.size"),
        (json!({"size": 1, "color": "green"}), "spec.color"),
        (json!({"size": 1, "name": "UPPER"}), "spec.name"),
        (json!({"size": 1, "name": "waytoolongname"}), "spec.name"),
        // kube-apiserver names the missing field itself.
        (json!({"color": "red"}), "spec.size"),
    ];
    for (index, (spec, field)) in cases.into_iter().enumerate() {
        let refused = api
            .create(
                &PostParams::default(),
                &widget(&format!("bad{index}"), spec.clone()),
            )
            .await
            .expect_err("invalid widget refused");
        let kube::Error::Api(status) = &refused else {
            panic!("expected an API error for {spec}");
        };
        assert_eq!(status.code, 422, "{spec}: {}", status.message);
        let causes = status
            .details
            .as_ref()
            .map(|d| d.causes.clone())
            .unwrap_or_default();
        assert!(
            causes.iter().any(|c| c.field == field),
            "{spec}: causes {causes:?} do not name {field}"
        );
    }
    let nullable = api
        .create(
            &PostParams::default(),
            &widget("nullable", json!({"size": 1, "note": null, "port": "http"})),
        )
        .await;
    assert!(
        nullable.is_ok(),
        "nullable and int-or-string accepted: {nullable:?}"
    );
}

#[tokio::test]
async fn cel_rules_and_transition_rules_are_enforced() {
    let t = TestSandbox::start().await;
    install_widgets(&t.client).await;
    let api = widgets(&t.client, "v1");
    let forbidden = api
        .create(
            &PostParams::default(),
            &widget("f", json!({"size": 1, "name": "banned"})),
        )
        .await
        .expect_err("CEL rule refuses");
    assert_eq!(code(&forbidden), 422);
    assert!(
        message(&forbidden).contains("that name is forbidden"),
        "{}",
        message(&forbidden)
    );
    api.create(&PostParams::default(), &widget("g", json!({"size": 5})))
        .await
        .expect("created");
    let shrink = api
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 4}})),
        )
        .await
        .expect_err("transition rule refuses");
    assert!(
        message(&shrink).contains("size may grow but never shrink"),
        "{}",
        message(&shrink)
    );
    let grown = api
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 6}})),
        )
        .await
        .expect("growing is allowed");
    assert_eq!(grown.data["spec"]["size"], 6);
}

#[tokio::test]
async fn unknown_fields_are_pruned_or_refused_when_strict() {
    let t = TestSandbox::start().await;
    install_widgets(&t.client).await;
    let api = widgets(&t.client, "v1");
    let created = api
        .create(
            &PostParams::default(),
            &widget(
                "p",
                json!({"size": 1, "typo": true, "extra": {"anything": [1, 2]}}),
            ),
        )
        .await
        .expect("created with pruning");
    assert!(
        created.data["spec"].get("typo").is_none(),
        "unknown field pruned"
    );
    assert_eq!(
        created.data["spec"]["extra"]["anything"],
        json!([1, 2]),
        "preserved"
    );
    let strict = api
        .patch(
            "p",
            &PatchParams::apply("test").validation_strict(),
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "p"}, "spec": {"size": 1, "typo": true}})),
        )
        .await
        .expect_err("strict validation refuses");
    assert_eq!(code(&strict), 400);
    assert!(
        message(&strict).contains("unknown field \"spec.typo\""),
        "{}",
        message(&strict)
    );
}

#[tokio::test]
async fn generation_tracks_spec_and_status_is_its_own_subresource() {
    let t = TestSandbox::start().await;
    install_widgets(&t.client).await;
    let api = widgets(&t.client, "v1");
    api.create(&PostParams::default(), &widget("s", json!({"size": 1})))
        .await
        .expect("created");
    let status = api
        .patch_status(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 9}, "status": {"phase": "Ready"}})),
        )
        .await
        .expect("status written");
    assert_eq!(status.data["status"]["phase"], "Ready");
    assert_eq!(status.data["spec"]["size"], 1, "status writes ignore spec");
    assert_eq!(
        status.metadata.generation,
        Some(1),
        "status does not bump generation"
    );
    let labelled = api
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .expect("labels written");
    assert_eq!(
        labelled.metadata.generation,
        Some(1),
        "metadata does not bump generation"
    );
    let main = api
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}, "status": {"phase": "Lost"}})),
        )
        .await
        .expect("spec written");
    assert_eq!(main.metadata.generation, Some(2));
    assert_eq!(
        main.data["status"]["phase"], "Ready",
        "main writes ignore status"
    );
    assert_eq!(main.labels().get("a").map(String::as_str), Some("b"));
}

#[tokio::test]
async fn updates_of_custom_resources_require_a_resource_version() {
    let t = TestSandbox::start().await;
    install_widgets(&t.client).await;
    let api = widgets(&t.client, "v1");
    let created = api
        .create(&PostParams::default(), &widget("r", json!({"size": 1})))
        .await
        .expect("created");
    let mut unversioned: DynamicObject = created.clone();
    unversioned.metadata.resource_version = None;
    let refused = api.replace("r", &PostParams::default(), &unversioned).await;
    assert_eq!(code(&refused.expect_err("needs resourceVersion")), 422);
}

#[tokio::test]
async fn the_project_crds_refuse_invalid_clusters_with_their_cel_messages() {
    let t = TestSandbox::start().await;
    crate::common::install_tusk_crds(&t.client).await;
    let resource = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("postgres.tusk.dev", "v1alpha1", "PostgresCluster"),
        "postgresclusters",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(t.client.clone(), "default", &resource);
    let cluster = |size: &str| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
            "metadata": {"name": "db"},
            "spec": {"instances": 1, "postgres": {"version": 15}, "storage": {"size": size}}
        }))
        .expect("valid object")
    };
    let created = api
        .create(&PostParams::default(), &cluster("10Gi"))
        .await
        .expect("created");
    let mut shrunk = cluster("5Gi");
    shrunk.metadata.resource_version = created.resource_version();
    let refused = api
        .replace("db", &PostParams::default(), &shrunk)
        .await
        .expect_err("shrink refused");
    assert_eq!(code(&refused), 422);
    assert!(
        message(&refused).contains("spec.storage.size: storage may grow but never shrink"),
        "{}",
        message(&refused)
    );
}

#[tokio::test]
async fn deleting_a_crd_deletes_its_objects_and_stops_serving_the_kind() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let t = TestSandbox::start().await;
    install_widgets(&t.client).await;
    let api = widgets(&t.client, "v1");
    api.create(
        &PostParams::default(),
        &widget("doomed", json!({"size": 1})),
    )
    .await
    .expect("created");
    let crds: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    crds.delete("widgets.example.com", &Default::default())
        .await
        .expect("delete accepted");
    let c = crds.clone();
    crate::common::eventually("the CRD to be gone", crate::common::WAIT, || {
        let c = c.clone();
        async move {
            c.get_opt("widgets.example.com")
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;
    let after = api.list(&Default::default()).await;
    assert_eq!(code(&after.expect_err("no longer served")), 404);
    install_widgets(&t.client).await;
    let empty = api.list(&Default::default()).await.expect("served again");
    assert!(
        empty.items.is_empty(),
        "the old objects were deleted with their CRD"
    );
}

/// Creates the widget CRD with `change` applied to the v1 schema and
/// returns the refusal's message, after checking it is a 422.
async fn refused_crd(change: impl FnOnce(&mut Value)) -> String {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let t = TestSandbox::start().await;
    let mut crd = crate::common::widget_crd();
    let versions = crd["spec"]["versions"].as_array_mut().expect("versions");
    versions.truncate(1);
    change(&mut versions[0]["schema"]["openAPIV3Schema"]);
    let crd: CustomResourceDefinition = serde_json::from_value(crd).expect("decodes");
    let api: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    let error = api
        .create(&PostParams::default(), &crd)
        .await
        .expect_err("the CRD is refused");
    assert_eq!(code(&error), 422, "{}", message(&error));
    message(&error)
}

const ROOT: &str = "spec.versions[0].schema.openAPIV3Schema";

fn add_root_rule(rule: Value) -> impl FnOnce(&mut Value) {
    move |schema| schema["x-kubernetes-validations"] = json!([rule])
}

fn assert_mentions(message: &str, expected: &str) {
    assert!(
        message.contains(expected),
        "expected {expected:?} in {message:?}"
    );
}

#[tokio::test]
async fn a_rule_field_path_must_name_a_declared_field() {
    let message = refused_crd(add_root_rule(
        json!({"rule": "true", "fieldPath": ".metadata.name"}),
    ))
    .await;
    assert_mentions(
        &message,
        &format!(
            "{ROOT}.x-kubernetes-validations[0].fieldPath: Invalid value: \".metadata.name\": \
             fieldPath must be a valid path: does not refer to a valid field"
        ),
    );
}

#[tokio::test]
async fn a_rule_reason_must_be_one_kubernetes_knows() {
    let message = refused_crd(add_root_rule(json!({"rule": "true", "reason": "TooBig"}))).await;
    assert_mentions(
        &message,
        &format!("{ROOT}.x-kubernetes-validations[0].reason: Unsupported value: \"TooBig\""),
    );
}

#[tokio::test]
async fn a_rule_is_required_and_its_message_is_one_line() {
    let empty = refused_crd(add_root_rule(json!({"rule": " ", "message": "m"}))).await;
    assert_mentions(
        &empty,
        &format!("{ROOT}.x-kubernetes-validations[0].rule: Required value: rule is not specified"),
    );
    let two_lines = refused_crd(add_root_rule(
        json!({"rule": "true", "message": "one\ntwo"}),
    ))
    .await;
    assert_mentions(
        &two_lines,
        &format!(
            "{ROOT}.x-kubernetes-validations[0].message: Invalid value: \"one\\ntwo\": message must not contain line breaks"
        ),
    );
}

#[tokio::test]
async fn a_rule_that_is_not_cel_is_refused() {
    let message = refused_crd(add_root_rule(json!({"rule": "self.spec.size >"}))).await;
    assert_mentions(
        &message,
        &format!(
            "{ROOT}.x-kubernetes-validations[0].rule: Invalid value: \"self.spec.size >\": compilation failed"
        ),
    );
}

#[tokio::test]
async fn a_message_expression_that_is_not_cel_is_refused() {
    let message = refused_crd(add_root_rule(
        json!({"rule": "true", "messageExpression": "'size ' +"}),
    ))
    .await;
    assert_mentions(
        &message,
        &format!(
            "{ROOT}.x-kubernetes-validations[0].messageExpression: Invalid value: \"'size ' +\": compilation failed"
        ),
    );
}

#[tokio::test]
async fn every_schema_node_must_have_a_type() {
    let message = refused_crd(|schema| {
        schema["properties"]["spec"]["properties"]["loose"] = json!({"description": "no type"});
    })
    .await;
    assert_mentions(
        &message,
        &format!(
            "{ROOT}.properties[spec].properties[loose].type: Required value: must not be empty for specified object fields"
        ),
    );
}

#[tokio::test]
async fn arrays_must_declare_their_items() {
    let message = refused_crd(|schema| {
        schema["properties"]["spec"]["properties"]["list"] = json!({"type": "array"});
    })
    .await;
    assert_mentions(
        &message,
        &format!(
            "{ROOT}.properties[spec].properties[list].items: Required value: must be specified"
        ),
    );
}

#[tokio::test]
async fn root_metadata_may_only_restate_name_and_generate_name() {
    let message = refused_crd(|schema| {
        schema["properties"]["metadata"] = json!({"type": "object", "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}}});
    })
    .await;
    assert_mentions(
        &message,
        &format!(
            "{ROOT}.properties[metadata]: Forbidden: must not specify anything other than name and generateName"
        ),
    );
}

#[tokio::test]
async fn properties_and_additional_properties_exclude_each_other() {
    let message = refused_crd(|schema| {
        schema["properties"]["spec"]["additionalProperties"] = json!({"type": "string"});
    })
    .await;
    assert_mentions(
        &message,
        &format!(
            "{ROOT}.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        ),
    );
}

#[tokio::test]
async fn a_rule_on_a_declared_metadata_name_is_admitted() {
    let t = TestSandbox::start().await;
    let mut crd = crate::common::widget_crd();
    for version in crd["spec"]["versions"].as_array_mut().expect("versions") {
        let schema = &mut version["schema"]["openAPIV3Schema"];
        schema["properties"]["metadata"] =
            json!({"type": "object", "properties": {"name": {"type": "string"}}});
        schema["x-kubernetes-validations"] = json!([{"rule": "size(self.metadata.name) <= 5",
            "message": "name too long", "fieldPath": ".metadata.name"}]);
    }
    crate::common::create_crd(&t.client, crd).await;
    let refused = widgets(&t.client, "v1")
        .create(
            &PostParams::default(),
            &widget("toolong", json!({"size": 1})),
        )
        .await
        .expect_err("rule applies");
    assert_mentions(&message(&refused), "metadata.name: name too long");
}

/// kube-apiserver estimates a rule's CEL cost from the schema's bounds and
/// refuses one over its budget; with one version, the schema is named as
/// the CRD's only one.
#[tokio::test]
async fn a_rule_over_the_cel_cost_budget_is_refused() {
    let message = refused_crd(add_root_rule(
        json!({"rule": "self.spec.items.all(i, !has(i.value) || i.value.matches('^[a-z]+$'))"}),
    ))
    .await;
    assert_mentions(
        &message,
        "spec.validation.openAPIV3Schema.x-kubernetes-validations[0].rule: Forbidden: \
         estimated rule cost exceeds budget by factor of more than 100x",
    );
}

#[tokio::test]
async fn a_rule_within_the_cel_cost_budget_is_admitted() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let t = TestSandbox::start().await;
    let mut crd = crate::common::widget_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["items"]
        ["maxItems"] = json!(16);
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["items"]
        ["items"]["properties"]["value"]["maxLength"] = json!(63);
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] =
        json!([{"rule": "self.spec.items.all(i, !has(i.value) || i.value.matches('^[a-z]+$'))"}]);
    let crd: CustomResourceDefinition = serde_json::from_value(crd).expect("decodes");
    let api: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    api.create(&PostParams::default(), &crd)
        .await
        .expect("bounded, the rule is cheap enough");
}
