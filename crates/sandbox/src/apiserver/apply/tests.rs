use serde_json::json;

use super::*;

fn write<'a>(manager: &'a str) -> Write<'a> {
    Write {
        manager,
        subresource: "",
        api_version: "v1",
        scope: Scope::Whole,
        time: "2026-01-01T00:00:00Z",
        types: &BuiltinLists,
    }
}

#[test]
fn fields_v1_round_trips_with_keyed_elements() {
    let object = json!({"spec": {"containers": [{"name": "a", "image": "x"}]}, "metadata": {"labels": {"l": "1"}}});
    let set = fields_of(&object, &BuiltinLists, Scope::Whole);
    let v1 = to_fields_v1(&set);
    assert_eq!(
        v1["f:spec"]["f:containers"]["k:{\"name\":\"a\"}"]["f:image"],
        json!({})
    );
    assert!(
        v1["f:spec"]["f:containers"]["k:{\"name\":\"a\"}"]
            .get(".")
            .is_some()
    );
    assert_eq!(from_fields_v1(&v1), set);
}

#[test]
fn apply_removes_list_elements_a_manager_stops_applying() {
    let config = |names: &[&str]| {
        let containers: Vec<Value> = names
            .iter()
            .map(|n| json!({"name": n, "image": format!("{n}:1")}))
            .collect();
        json!({"metadata": {"name": "p"}, "spec": {"containers": containers}})
    };
    let two = apply(
        &json!({"metadata": {"name": "p"}}),
        &config(&["a", "b"]),
        &write("ctl"),
        false,
        "Pod",
        "p",
    )
    .expect("first apply");
    let one = apply(&two, &config(&["a"]), &write("ctl"), false, "Pod", "p").expect("second apply");
    assert_eq!(
        one["spec"]["containers"],
        json!([{"name": "a", "image": "a:1"}])
    );
    // An element another manager also owns stays.
    let mut shared = two.clone();
    let mut entries = read_entries(&shared);
    entries.push(Entry {
        manager: "other".into(),
        operation: "Update".into(),
        subresource: String::new(),
        api_version: "v1".into(),
        time: String::new(),
        fields: fields_of(
            &json!({"spec": {"containers": [{"name": "b"}]}}),
            &BuiltinLists,
            Scope::Whole,
        ),
    });
    write_entries(&mut shared, &entries);
    let kept = apply(&shared, &config(&["a"]), &write("ctl"), false, "Pod", "p").expect("apply");
    assert_eq!(kept["spec"]["containers"].as_array().map(Vec::len), Some(2));
}

#[test]
fn apply_conflicts_unless_forced_and_removes_dropped_fields() {
    let first = apply(
        &json!({"metadata": {"name": "x"}}),
        &json!({"metadata": {"name": "x", "labels": {"a": "1", "b": "2"}}}),
        &write("one"),
        false,
        "ConfigMap",
        "x",
    )
    .expect("first apply");
    let conflict = apply(
        &first,
        &json!({"metadata": {"name": "x", "labels": {"a": "9"}}}),
        &write("two"),
        false,
        "ConfigMap",
        "x",
    );
    assert!(matches!(conflict, Err(ApiError::Conflict { .. })));
    let forced = apply(
        &first,
        &json!({"metadata": {"name": "x", "labels": {"a": "9"}}}),
        &write("two"),
        true,
        "ConfigMap",
        "x",
    )
    .expect("forced apply");
    assert_eq!(forced["metadata"]["labels"]["a"], "9");
    let dropped = apply(
        &forced,
        &json!({"metadata": {"name": "x"}}),
        &write("one"),
        false,
        "ConfigMap",
        "x",
    )
    .expect("apply without b");
    assert_eq!(dropped["metadata"]["labels"], json!({"a": "9"}));
}
