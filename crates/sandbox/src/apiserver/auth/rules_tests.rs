//! Table tests of rule matching and coverage, cases after
//! kube-apiserver's own.

use super::*;

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
    let v = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect();
    PolicyRule {
        verbs: v(verbs),
        api_groups: v(groups),
        resources: v(resources),
        resource_names: v(names),
        non_resource_urls: Vec::new(),
    }
}

fn urls(verbs: &[&str], paths: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: verbs.iter().map(|s| (*s).to_owned()).collect(),
        non_resource_urls: paths.iter().map(|s| (*s).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

fn target(group: &str, resource: &str, sub: &str, name: &str) -> Target {
    Target::Resource(ResourceTarget {
        group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
        name: name.into(),
        namespace: "ns".into(),
    })
}

/// (what, rule, verb, target, allowed)
type Case<'t> = (&'static str, PolicyRule, &'static str, &'t Target, bool);

fn check(cases: &[Case<'_>]) {
    for (what, rule, verb, target, expected) in cases {
        assert_eq!(allows(rule, verb, target), *expected, "{what}");
    }
}

#[test]
fn verbs_and_groups_match_exactly_or_by_star() {
    let pods = target("", "pods", "", "web");
    let deploy = target("apps", "deployments", "", "");
    check(&[
        (
            "exact",
            rule(&["get"], &[""], &["pods"], &[]),
            "get",
            &pods,
            true,
        ),
        (
            "other verb",
            rule(&["get"], &[""], &["pods"], &[]),
            "list",
            &pods,
            false,
        ),
        (
            "verb *",
            rule(&["*"], &[""], &["pods"], &[]),
            "delete",
            &pods,
            true,
        ),
        (
            "other group",
            rule(&["get"], &["apps"], &["pods"], &[]),
            "get",
            &pods,
            false,
        ),
        (
            "group *",
            rule(&["get"], &["*"], &["deployments"], &[]),
            "get",
            &deploy,
            true,
        ),
        ("urls only", urls(&["get"], &["*"]), "get", &pods, false),
    ]);
}

#[test]
fn subresources_match_apart_from_their_resource() {
    let pods = target("", "pods", "", "web");
    let status = target("", "pods", "status", "web");
    check(&[
        (
            "resource *",
            rule(&["get"], &[""], &["*"], &[]),
            "get",
            &status,
            true,
        ),
        (
            "main is not status",
            rule(&["update"], &[""], &["pods"], &[]),
            "update",
            &status,
            false,
        ),
        (
            "status is not main",
            rule(&["get"], &[""], &["pods/status"], &[]),
            "get",
            &pods,
            false,
        ),
        (
            "subresource",
            rule(&["update"], &[""], &["pods/status"], &[]),
            "update",
            &status,
            true,
        ),
        (
            "*/subresource",
            rule(&["get"], &[""], &["*/status"], &[]),
            "get",
            &status,
            true,
        ),
        (
            "*/other",
            rule(&["get"], &[""], &["*/log"], &[]),
            "get",
            &status,
            false,
        ),
        (
            "*/sub not main",
            rule(&["get"], &[""], &["*/status"], &[]),
            "get",
            &pods,
            false,
        ),
        (
            "pods/* is literal",
            rule(&["get"], &[""], &["pods/*"], &[]),
            "get",
            &status,
            false,
        ),
    ]);
}

#[test]
fn resource_names_restrict_requests_that_name_an_object() {
    let pods = target("", "pods", "", "web");
    let deploy = target("apps", "deployments", "", "");
    check(&[
        (
            "name listed",
            rule(&["get"], &[""], &["pods"], &["web"]),
            "get",
            &pods,
            true,
        ),
        (
            "name not listed",
            rule(&["get"], &[""], &["pods"], &["db"]),
            "get",
            &pods,
            false,
        ),
        (
            "names and no name",
            rule(&["list"], &[""], &["pods"], &["web"]),
            "list",
            &deploy,
            false,
        ),
    ]);
}

#[test]
fn non_resource_urls_match_exactly_or_by_a_trailing_star() {
    let cases: &[(&[&str], &str, &str, bool)] = &[
        (&["/healthz"], "get", "/healthz", true),
        (&["/healthz"], "get", "/healthz/ping", false),
        (&["/healthz/*"], "get", "/healthz/ping", true),
        (&["/healthz*"], "get", "/healthzz", true),
        (&["/apis/*"], "get", "/apis", false),
        (&["*"], "get", "/anything", true),
        (&["/version"], "post", "/version", false),
    ];
    for (paths, verb, path, expected) in cases {
        let rule = urls(&["get"], paths);
        assert_eq!(
            allows(&rule, verb, &Target::Path((*path).to_owned())),
            *expected,
            "{paths:?} {verb} {path}"
        );
    }
    let resource_rule = rule(&["*"], &["*"], &["*"], &[]);
    assert!(!allows(&resource_rule, "get", &Target::Path("/api".into())));
}

#[test]
fn coverage_breaks_rules_down_and_accepts_wildcards() {
    let owner = vec![
        rule(&["get", "list"], &[""], &["pods", "*/status"], &[]),
        rule(&["update"], &[""], &["configmaps"], &["app"]),
        urls(&["get"], &["/metrics/*"]),
    ];
    let cases: &[(PolicyRule, usize)] = &[
        (rule(&["get"], &[""], &["pods"], &[]), 0),
        (rule(&["get"], &[""], &["pods"], &["web"]), 0),
        (rule(&["get", "watch"], &[""], &["pods"], &[]), 1),
        (rule(&["get"], &[""], &["services/status"], &[]), 0),
        (rule(&["get"], &["apps"], &["pods"], &[]), 1),
        (rule(&["update"], &[""], &["configmaps"], &["app"]), 0),
        (rule(&["update"], &[""], &["configmaps"], &[]), 1),
        (
            rule(&["update"], &[""], &["configmaps"], &["app", "other"]),
            1,
        ),
        (urls(&["get"], &["/metrics/cpu"]), 0),
        (urls(&["get", "post"], &["/metrics/cpu", "/debug"]), 3),
    ];
    for (wanted, missing) in cases {
        assert_eq!(
            uncovered(&owner, std::slice::from_ref(wanted)).len(),
            *missing,
            "{wanted:?}"
        );
    }
    let everything = vec![rule(&["*"], &["*"], &["*"], &[]), urls(&["*"], &["*"])];
    let wanted = rule(
        &["get", "escalate"],
        &["rbac.authorization.k8s.io"],
        &["roles"],
        &[],
    );
    assert!(uncovered(&everything, &[wanted, urls(&["get"], &["/x"])]).is_empty());
}

#[test]
fn missing_rules_are_compacted_and_written_as_kube_apiserver_writes_them() {
    let missing = uncovered(
        &[],
        &[
            rule(&["get", "list"], &[""], &["pods", "secrets"], &[]),
            rule(&["update"], &["apps"], &["deployments"], &["web"]),
            urls(&["get"], &["/metrics"]),
        ],
    );
    assert_eq!(
        describe_missing(missing),
        [
            r#"{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}"#,
            r#"{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}"#,
            r#"{APIGroups:["apps"], Resources:["deployments"], ResourceNames:["web"], Verbs:["update"]}"#,
            r#"{NonResourceURLs:["/metrics"], Verbs:["get"]}"#,
        ]
        .join("\n")
    );
}

#[test]
fn rules_are_read_from_role_objects() {
    let role = serde_json::json!({"rules": [
        {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
        {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
        {"verbs": "not a list"}
    ]});
    let rules = rules_of(&role);
    assert_eq!(rules.len(), 2);
    assert_eq!(rules[0], rule(&["get"], &[""], &["pods"], &["a"]));
    assert_eq!(rules[1], urls(&["get"], &["/healthz"]));
}
