//! CEL cost, judged by a real kube-apiserver (v1.36, from the shared
//! Kubernetes folder) and by the sandbox's API server: the same CRDs are
//! created on both with `kubectl create`, and the two must agree on which
//! are refused, which rules and messages they name, and (within
//! [`TOLERANCE`]) by what factor each is over its budget.
//!
//! The CRDs: Tusk's two as generated; rules just under and just over the
//! per-expression limit (sized from the sandbox's own estimate of one
//! item, so the pair brackets kube-apiserver's estimate within 3%);
//! unbounded strings against `maxLength`; rules over map keys and values;
//! messages that join keys or name the first; a rule under an unbounded
//! list (charged as many times as its object fits in a request); and a
//! schema whose rules are each under the limit but together over the
//! schema's. Then one probe a construct or function (macros, string and
//! list functions, `in`, comparisons, quantities, URLs, int-or-string,
//! literals as ranges): a list of objects checked by that one expression,
//! as long as makes the sandbox's estimate 1.2 times the limit, so that
//! kube-apiserver prints its own estimate to the sixth digit. A table of
//! every case is printed, so that drift shows:
//! `cargo test -p tusk --test referee_cel_cost -- --nocapture`.
//!
//! Where the shared folder is absent the test says so and returns.

#[allow(dead_code)]
mod process;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tusk_api::admission::cost::{self, PER_EXPRESSION_LIMIT};
use tusk_sandbox::testing::TestSandbox;
use tusk_sandbox::testing::kube_up::{Components, KubeUp};

/// How far the sandbox's factor may be from kube-apiserver's, relative.
const TOLERANCE: f64 = 0.03;

const LIMIT: Duration = Duration::from_secs(60);

/// One CRD to judge.
struct Case {
    name: String,
    crd: Value,
}

/// A CRD `Case<index>` whose `spec` is `spec`.
fn synthetic(index: usize, name: &str, spec: Value) -> Case {
    let plural = format!("case{index}s");
    Case {
        name: name.to_owned(),
        crd: json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.cost.tusk.dev")},
            "spec": {
                "group": "cost.tusk.dev",
                "scope": "Namespaced",
                "names": {"plural": plural, "kind": format!("Case{index}")},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": spec}}}}]
            }
        }),
    }
}

const NAME_PATTERN: &str = "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')";
const LETTERS: &str = "self.matches('^[a-z]+$')";

/// A list of `max_items` strings of at most 64 characters, each checked
/// against a name pattern.
fn names_list(max_items: u64) -> Value {
    json!({"type": "object", "properties": {"names": {
        "type": "array", "maxItems": max_items,
        "items": {"type": "string", "maxLength": 64,
                  "x-kubernetes-validations": [{"rule": NAME_PATTERN}]}}}})
}

/// What the sandbox charges the costliest expression of `crd`, and all.
fn sandbox_estimate(crd: &Value) -> (u64, u64) {
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let costs = cost::schema_costs(schema, "");
    let charged = |e: &cost::ExpressionCost| match e.part {
        cost::Part::Rule => e.charged(),
        cost::Part::MessageExpression => e.cost,
    };
    let max = costs.iter().map(charged).max().unwrap_or(0);
    let total = costs
        .iter()
        .fold(0u64, |sum, e| sum.saturating_add(e.charged()));
    (max, total)
}

fn cases() -> Vec<Case> {
    let mut cases: Vec<Case> = tusk_api::crds()
        .into_iter()
        .map(|crd| Case {
            name: format!("Tusk's {}", crd.spec.names.kind),
            crd: serde_json::to_value(&crd).expect("a CRD serializes"),
        })
        .collect();
    // One name costs the sandbox `per_name`; the pair brackets the limit.
    let (per_name, _) = sandbox_estimate(&synthetic(0, "", names_list(1)).crd);
    let under = (PER_EXPRESSION_LIMIT as f64 * 0.97 / per_name as f64).floor() as u64;
    let over = (PER_EXPRESSION_LIMIT as f64 * 1.03 / per_name as f64).ceil() as u64;
    let unbounded_strings = |max_length: Option<u64>| {
        let mut item = json!({"type": "string", "x-kubernetes-validations": [{"rule": LETTERS}]});
        if let Some(max_length) = max_length {
            item["maxLength"] = json!(max_length);
        }
        json!({"type": "object", "properties": {"tags": {
            "type": "array", "maxItems": 50, "items": item}}})
    };
    let map = |max_properties: Option<u64>, rule: &str, message: Option<&str>| {
        let mut validation = json!({"rule": rule});
        if let Some(message) = message {
            validation["messageExpression"] = json!(message);
        }
        let mut map = json!({"type": "object",
            "additionalProperties": {"type": "string"},
            "x-kubernetes-validations": [validation]});
        if let Some(max) = max_properties {
            map["maxProperties"] = json!(max);
        }
        json!({"type": "object", "properties": {"parameters": map}})
    };
    let durable = "!has(self.parameters) || self.parameters.all(k, \
        k.lowerAscii() != 'synchronous_commit' || \
        self.parameters[k].lowerAscii() in ['on', 'remote_apply'])";
    let parameters = |max_properties: u64, max_length: Option<u64>| {
        let mut values = json!({"type": "string"});
        if let Some(max_length) = max_length {
            values["maxLength"] = json!(max_length);
        }
        json!({"type": "object", "x-kubernetes-validations": [{"rule": durable}],
            "properties": {"parameters": {"type": "object", "maxProperties": max_properties,
                "additionalProperties": values}}})
    };
    let rules: Vec<Value> = (0..12)
        .map(|i| {
            let last = (b'z' - i as u8) as char;
            json!({"rule": format!("self.matches('^[a-{last}]+$')")})
        })
        .collect();
    let synthetic_cases = [
        (
            format!("{under} names, just under the limit"),
            names_list(under),
        ),
        (
            format!("{over} names, just over the limit"),
            names_list(over),
        ),
        ("50 unbounded strings".to_owned(), unbounded_strings(None)),
        (
            "50 strings of maxLength 253".to_owned(),
            unbounded_strings(Some(253)),
        ),
        (
            "map values by key, 100 entries".to_owned(),
            map(Some(100), "self.all(k, self[k].matches('^[a-z]+$'))", None),
        ),
        (
            "map keys, unbounded map".to_owned(),
            map(
                None,
                "self.all(k, k.matches('^[a-z.]+$') && !k.startsWith('tusk.dev/'))",
                None,
            ),
        ),
        (
            "message joining map keys".to_owned(),
            map(
                Some(64),
                "self.all(k, !k.startsWith('x'))",
                Some("'bad: ' + self.filter(k, k.startsWith('x')).join(', ')"),
            ),
        ),
        (
            "message naming the first key".to_owned(),
            map(
                Some(64),
                "self.all(k, !k.startsWith('x'))",
                Some("'bad: ' + self.filter(k, k.startsWith('x'))[0]"),
            ),
        ),
        (
            "rule on each of 30 map values".to_owned(),
            json!({"type": "object", "properties": {"labels": {"type": "object",
                "maxProperties": 30, "additionalProperties": {"type": "string",
                    "x-kubernetes-validations": [{"rule": LETTERS}]}}}}),
        ),
        (
            "object in an unbounded list".to_owned(),
            json!({"type": "object", "properties": {"members": {"type": "array", "items": {
                "type": "object", "required": ["name"],
                "properties": {"name": {"type": "string", "maxLength": 64}},
                "x-kubernetes-validations": [{"rule": "self.name.matches('^[a-z]+$')"}]}}}}),
        ),
        (
            "parameters: 256, values unbounded".to_owned(),
            parameters(256, None),
        ),
        (
            "parameters: 256, values of 1024".to_owned(),
            parameters(256, Some(1024)),
        ),
        (
            "12 rules of 8.8M: schema total".to_owned(),
            json!({"type": "object", "properties": {"tags": {"type": "array",
                "maxItems": 14, "items": {"type": "string",
                    "x-kubernetes-validations": rules}}}}),
        ),
        (
            "transition rule".to_owned(),
            json!({"type": "object", "properties": {"class": {"type": "string",
                "maxLength": 253,
                "x-kubernetes-validations": [{"rule": "self == oldSelf",
                    "message": "immutable"}]}}}),
        ),
    ];
    let mut specs: Vec<(String, Value)> = synthetic_cases.into_iter().collect();
    for expression in PROBES {
        // Sized so that the sandbox's estimate is 1.2 times the limit:
        // kube-apiserver then prints its own to the sixth digit.
        let (one, _) = sandbox_estimate(&synthetic(0, "", probe(expression, 1)).crd);
        let copies = (PER_EXPRESSION_LIMIT as f64 * 1.2 / one.max(1) as f64).ceil() as u64;
        specs.push((
            format!("probe `{expression}`"),
            probe(expression, copies.max(1)),
        ));
    }
    for (index, (name, spec)) in specs.into_iter().enumerate() {
        cases.push(synthetic(index + 1, &name, spec));
    }
    cases
}

/// Expressions whose cost kube-apiserver is asked for, one construct or
/// function each, on an item of [`probe`].
const PROBES: &[&str] = &[
    "self.tags.map(t, t.lowerAscii()).all(t, t.size() < 10)",
    "self.name.split('-').size() <= 3",
    "self.tags.join(',').size() < 100",
    "self.name.replace('-', '_') != 'x'",
    "self.name.indexOf('-') >= 0 && self.free.lastIndexOf('x') > 0",
    "self.tags.exists_one(t, t == 'a')",
    "self.labels.exists(k, self.labels[k].contains('x'))",
    "'a' in self.labels && self.name in self.tags",
    "self.name < self.free",
    "type(self.port) == int ? self.port > 0 : self.port.matches('^[0-9]+%$')",
    "quantity(self.size) == quantity('1Gi')",
    "quantity(self.size) != quantity('1Gi')",
    "isURL(self.url) && url(self.url).getHost() != ''",
    "self.tags.filter(t, t.startsWith('a')).size() > 0 && self.tags.isSorted()",
    "self.name.substring(1).trim().upperAscii() == 'X'",
    "self.tags + ['x'] == self.tags",
    "size(self.labels) <= 8 && self.count * 2 > 1",
    "self.tags.all(t, self.labels.exists(k, k == t))",
    "self.free.find('[0-9]+') != ''",
    "[1, 2, 3].exists(x, x == self.count)",
    "{'a': 1}.exists(k, k == self.name)",
    "self.tags.map(t, t + '-').exists(t, t == self.name)",
    "has(self.name) && self.name.endsWith('x')",
    "int(self.count) + 1 > 0 && string(self.count) != ''",
    "self.tags.exists(t, t.matches('^' + self.name + '$'))",
    "self.name.matches(self.free)",
];

/// A list of `copies` objects, each checked by `expression`.
fn probe(expression: &str, copies: u64) -> Value {
    json!({"type": "object", "properties": {"probes": {
    "type": "array", "maxItems": copies, "items": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 64},
            "free": {"type": "string"},
            "tags": {"type": "array", "maxItems": 8,
                     "items": {"type": "string", "maxLength": 32}},
            "labels": {"type": "object", "maxProperties": 8,
                       "additionalProperties": {"type": "string", "maxLength": 32}},
            "count": {"type": "integer"},
            "port": {"x-kubernetes-int-or-string": true, "maxLength": 8},
            "size": {"type": "string", "maxLength": 16},
            "url": {"type": "string", "maxLength": 128},
        },
        "x-kubernetes-validations": [{"rule": expression}],
    }}}})
}

/// A judge's answer to one CRD.
#[derive(Debug, PartialEq)]
struct Verdict {
    accepted: bool,
    /// `(field, factor)` of each cost refusal; the factor as printed
    /// (`2.5x`, `1.020000x`, `more than 100x`), empty for a named
    /// contributor to the schema's total.
    costs: Vec<(String, String)>,
    text: String,
}

impl Verdict {
    fn summary(&self) -> String {
        if self.accepted {
            return "accepted".into();
        }
        let factors: Vec<String> = self
            .costs
            .iter()
            .filter(|(_, factor)| !factor.is_empty())
            .map(|(field, factor)| format!("{} {factor}", short(field)))
            .collect();
        if factors.is_empty() {
            "refused".into()
        } else {
            format!("refused: {}", factors.join(", "))
        }
    }
}

/// The end of a field path, enough to tell the rules of a case apart.
fn short(field: &str) -> String {
    let parts: Vec<&str> = field.rsplit('.').take(2).collect();
    match parts.as_slice() {
        [last, before] if before.starts_with("x-kubernetes-validations") => {
            format!(
                "{}.{last}",
                before.trim_start_matches("x-kubernetes-validations")
            )
        }
        [last, ..] if last.starts_with("openAPIV3Schema") => "total".into(),
        [last, ..] => (*last).to_owned(),
        [] => String::new(),
    }
}

/// Creates `crd` through `kubeconfig` and reads what the server said.
fn judge(kubeconfig: &Path, scratch: &Path, case: usize, crd: &Value) -> Verdict {
    let file = scratch.join(format!("case-{case}.json"));
    std::fs::write(&file, crd.to_string()).expect("the CRD is written");
    let output = process::run_within(
        std::process::Command::new("kubectl")
            .env("KUBECONFIG", kubeconfig)
            .arg("create")
            .arg("-f")
            .arg(&file),
        LIMIT,
    );
    let text = String::from_utf8_lossy(&output.stderr).into_owned();
    let mut costs = Vec::new();
    for line in text.lines() {
        let cause = line
            .split_once("is invalid: ")
            .map_or(line, |(_, rest)| rest)
            .trim_start_matches("* ");
        let Some((field, message)) = cause.split_once(": Forbidden: ") else {
            continue;
        };
        if let Some((_, rest)) = message.split_once("exceeds budget by factor of ") {
            let factor = rest.split(" (try").next().unwrap_or(rest);
            costs.push((field.to_owned(), factor.to_owned()));
        } else if message.starts_with("contributed to estimated rule cost total") {
            costs.push((field.to_owned(), String::new()));
        }
    }
    costs.sort();
    Verdict {
        accepted: output.status.success(),
        costs,
        text,
    }
}

fn factor(printed: &str) -> Option<f64> {
    printed.strip_suffix('x')?.parse().ok()
}

/// Whether the sandbox's cost refusals are kube-apiserver's: the same
/// fields, and factors alike.
fn costs_agree(real: &Verdict, ours: &Verdict) -> bool {
    real.accepted == ours.accepted
        && real.costs.len() == ours.costs.len()
        && real.costs.iter().zip(&ours.costs).all(
            |((real_field, real_factor), (our_field, our_factor))| {
                real_field == our_field
                    && match (factor(real_factor), factor(our_factor)) {
                        (Some(a), Some(b)) => (a - b).abs() <= a * TOLERANCE,
                        _ => real_factor == our_factor,
                    }
            },
        )
}

#[tokio::test(flavor = "multi_thread")]
async fn kube_apiserver_and_the_sandbox_agree_on_cel_cost() {
    let Some(up) = KubeUp::start(Components::default()) else {
        return;
    };
    let sandbox = TestSandbox::start().await;
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let cases = cases();
    let mut rows = Vec::new();
    let mut disagreements = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let real = judge(&up.kubeconfig, scratch.path(), index, &case.crd);
        let ours = judge(
            sandbox.sandbox.kubeconfig_path(),
            scratch.path(),
            index,
            &case.crd,
        );
        let (max, total) = sandbox_estimate(&case.crd);
        rows.push(format!(
            "| {} | {} | {} | {max} | {total} |",
            case.name,
            real.summary(),
            ours.summary()
        ));
        if !costs_agree(&real, &ours) {
            disagreements.push(format!(
                "{}:\n  kube-apiserver: {}\n  sandbox: {}",
                case.name,
                real.text.trim(),
                ours.text.trim()
            ));
        }
    }
    println!(
        "| case | kube-apiserver | sandbox | sandbox's costliest expression | sandbox's total |\n\
         |---|---|---|---|---|\n{}",
        rows.join("\n")
    );
    assert!(
        disagreements.is_empty(),
        "{} of {} CRDs judged differently:\n{}",
        disagreements.len(),
        cases.len(),
        disagreements.join("\n")
    );
    let refused = rows.iter().filter(|row| row.contains("| refused")).count();
    assert!(
        refused >= 5,
        "the cases should include refusals of every kind, {refused} were refused"
    );
}
