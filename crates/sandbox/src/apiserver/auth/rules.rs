//! RBAC policy rules as kube-apiserver evaluates them: whether a rule
//! allows a request (`VerbMatches`, `APIGroupMatches`, `ResourceMatches`
//! with `*` and `*/subresource`, `ResourceNameMatches`,
//! `NonResourceURLMatches` with a trailing `*`), whether rules cover
//! others (the escalation check's `Covers`), and the compact form of the
//! rules an escalation is missing, for its error message.
//!
//! As in kube-apiserver, `pods/*` is not a wildcard: it matches only a
//! resource literally named so. Pure functions, tested by tables.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;

/// One rule of a Role or ClusterRole.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default)]
    pub api_groups: Vec<String>,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub resource_names: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
}

/// What a request addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Resource(ResourceTarget),
    /// A non-resource URL path (`/api`, `/healthz`, ...).
    Path(String),
}

/// A resource request's attributes (kube-apiserver's RequestInfo).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceTarget {
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    pub namespace: String,
}

/// The rules of a Role or ClusterRole object; malformed rules are
/// skipped, as they grant nothing.
pub fn rules_of(role: &Value) -> Vec<PolicyRule> {
    role.get("rules")
        .and_then(Value::as_array)
        .map(|rules| {
            rules
                .iter()
                .filter_map(|rule| serde_json::from_value(rule.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

fn has(set: &[String], item: &str) -> bool {
    set.iter().any(|s| s == item)
}

fn has_all(set: &[String], items: &[String]) -> bool {
    items.iter().all(|item| has(set, item))
}

pub fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    has(&rule.verbs, "*") || has(&rule.verbs, verb)
}

pub fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    has(&rule.api_groups, "*") || has(&rule.api_groups, group)
}

/// `combined` is `resource` or `resource/subresource`.
pub fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    rule.resources.iter().any(|r| {
        r == "*"
            || r == combined
            || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
    })
}

pub fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    rule.resource_names.is_empty() || has(&rule.resource_names, name)
}

fn url_matches(pattern: &str, path: &str) -> bool {
    pattern == "*"
        || pattern == path
        || pattern
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

pub fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    rule.non_resource_urls.iter().any(|p| url_matches(p, path))
}

/// Whether `rule` allows `verb` on `target` (kube-apiserver's RuleAllows).
pub fn allows(rule: &PolicyRule, verb: &str, target: &Target) -> bool {
    match target {
        Target::Resource(r) => {
            let combined = if r.subresource.is_empty() {
                r.resource.clone()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            verb_matches(rule, verb)
                && api_group_matches(rule, &r.group)
                && resource_matches(rule, &combined, &r.subresource)
                && resource_name_matches(rule, &r.name)
        }
        Target::Path(path) => verb_matches(rule, verb) && non_resource_url_matches(rule, path),
    }
}

/// A rule split into rules of one group, resource, verb and name (or one
/// URL and verb).
pub fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &String| vec![s.clone()];
    let mut parts = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let base = PolicyRule {
                    verbs: one(verb),
                    api_groups: one(group),
                    resources: one(resource),
                    ..PolicyRule::default()
                };
                if rule.resource_names.is_empty() {
                    parts.push(base);
                } else {
                    for name in &rule.resource_names {
                        parts.push(PolicyRule {
                            resource_names: one(name),
                            ..base.clone()
                        });
                    }
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            parts.push(PolicyRule {
                verbs: one(verb),
                non_resource_urls: one(url),
                ..PolicyRule::default()
            });
        }
    }
    parts
}

fn resources_cover(owner: &[String], wanted: &[String]) -> bool {
    if has(owner, "*") || has_all(owner, wanted) {
        return true;
    }
    wanted.iter().all(|path| {
        has(owner, path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| has(owner, &format!("*/{sub}")))
    })
}

fn urls_cover(owner: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|path| {
        owner.iter().any(|o| {
            o == path
                || o.strip_suffix('*')
                    .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
        })
    })
}

/// Whether `owner` covers `part` (a rule from [`breakdown`]).
fn rule_covers(owner: &PolicyRule, part: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &part.verbs);
    let groups = has(&owner.api_groups, "*") || has_all(&owner.api_groups, &part.api_groups);
    let names = if part.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &part.resource_names)
    };
    verbs
        && groups
        && names
        && resources_cover(&owner.resources, &part.resources)
        && urls_cover(&owner.non_resource_urls, &part.non_resource_urls)
}

/// The parts of `wanted` that no rule of `owner` covers (empty when the
/// owner holds every permission in `wanted`).
pub fn uncovered(owner: &[PolicyRule], wanted: &[PolicyRule]) -> Vec<PolicyRule> {
    wanted
        .iter()
        .flat_map(breakdown)
        .filter(|part| !owner.iter().any(|o| rule_covers(o, part)))
        .collect()
}

/// Rules of one group, one resource and at most one name merged across
/// verbs (kube-apiserver's CompactRules).
pub fn compact(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut merged: Vec<PolicyRule> = Vec::new();
    let mut complex = Vec::new();
    for rule in rules {
        let simple = rule.api_groups.len() == 1
            && rule.resources.len() == 1
            && rule.resource_names.len() <= 1
            && rule.non_resource_urls.is_empty();
        if !simple {
            complex.push(rule);
            continue;
        }
        let same = merged.iter_mut().find(|m| {
            m.api_groups == rule.api_groups
                && m.resources == rule.resources
                && m.resource_names == rule.resource_names
        });
        match same {
            Some(existing) => {
                for verb in rule.verbs {
                    if !has(&existing.verbs, &verb) {
                        existing.verbs.push(verb);
                    }
                }
            }
            None => merged.push(rule),
        }
    }
    complex.extend(merged);
    complex
}

fn quoted(items: &[String]) -> String {
    let inner: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", inner.join(" "))
}

/// A rule as kube-apiserver writes it in escalation errors:
/// `{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`.
pub fn compact_string(rule: &PolicyRule) -> String {
    let fields = [
        ("APIGroups", &rule.api_groups),
        ("Resources", &rule.resources),
        ("NonResourceURLs", &rule.non_resource_urls),
        ("ResourceNames", &rule.resource_names),
        ("Verbs", &rule.verbs),
    ];
    let parts: Vec<String> = fields
        .iter()
        .filter(|(_, values)| !values.is_empty())
        .map(|(label, values)| format!("{label}:{}", quoted(values)))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// The missing rules, compacted, one per line in sorted order.
pub fn describe_missing(missing: Vec<PolicyRule>) -> String {
    let lines: BTreeSet<String> = compact(missing).iter().map(compact_string).collect();
    lines.into_iter().collect::<Vec<_>>().join("\n")
}

/// Go's `%q` of a list of strings: `["a" "b"]`.
pub fn go_quoted(items: &[String]) -> String {
    quoted(items)
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
