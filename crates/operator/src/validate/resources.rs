//! `spec.resources`: the quantities every instance's container asks for.
//! The CRD takes them as strings (Kubernetes' own schema for a quantity
//! is a string), so text that is no quantity, a negative amount, or a
//! request above its limit reach the controller, and the API server then
//! refuses every pod built from them. Refused here, naming the field, as
//! the API server names a pod's.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::error::SpecError;

/// Said of text that is not a quantity, with the API server's grammar.
pub const NOT_A_QUANTITY: &str = "must be a Kubernetes quantity, such as 500m, 2 or 4Gi \
     (quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$')";

/// Said of a negative amount.
pub const NEGATIVE: &str = "must be greater than or equal to 0";

/// The first problem of `resources`, if any.
pub fn check(resources: &ResourceRequirements) -> Result<(), SpecError> {
    let empty = BTreeMap::new();
    let requests = resources.requests.as_ref().unwrap_or(&empty);
    let limits = resources.limits.as_ref().unwrap_or(&empty);
    for (section, quantities) in [("requests", requests), ("limits", limits)] {
        for (name, quantity) in quantities {
            amount(section, name, quantity)?;
        }
    }
    for (name, request) in requests {
        let Some(limit) = limits.get(name) else {
            continue;
        };
        if tusk_api::quantity::compare(&request.0, &limit.0) == Some(Ordering::Greater) {
            return Err(SpecError {
                field: format!("spec.resources.requests.{name}"),
                rule: format!(
                    "must be less than or equal to the {name} limit ({})",
                    limit.0
                ),
            });
        }
    }
    Ok(())
}

fn amount(section: &str, name: &str, quantity: &Quantity) -> Result<(), SpecError> {
    let problem = match tusk_api::quantity::compare(&quantity.0, "0") {
        None => NOT_A_QUANTITY,
        Some(Ordering::Less) => NEGATIVE,
        Some(_) => return Ok(()),
    };
    Err(SpecError {
        field: format!("spec.resources.{section}.{name}"),
        rule: problem.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources(value: serde_json::Value) -> ResourceRequirements {
        serde_json::from_value(value).expect("resource requirements")
    }

    fn problem(value: serde_json::Value) -> Option<(String, String)> {
        check(&resources(value)).err().map(|e| (e.field, e.rule))
    }

    #[test]
    fn negative_and_unreadable_quantities_are_refused_naming_the_field() {
        assert_eq!(
            problem(serde_json::json!({"requests": {"memory": "-1Gi"}})),
            Some(("spec.resources.requests.memory".into(), NEGATIVE.into()))
        );
        assert_eq!(
            problem(serde_json::json!({"limits": {"cpu": "s3://"}})),
            Some(("spec.resources.limits.cpu".into(), NOT_A_QUANTITY.into()))
        );
        assert_eq!(
            problem(serde_json::json!({"limits": {"cpu": "1.5.2"}})).map(|p| p.0),
            Some("spec.resources.limits.cpu".into())
        );
    }

    #[test]
    fn a_request_above_its_limit_is_refused() {
        let (field, rule) = problem(serde_json::json!({
            "requests": {"memory": "2Gi", "cpu": "1"},
            "limits": {"memory": "1024Mi", "cpu": "1000m"}
        }))
        .expect("refused");
        assert_eq!(field, "spec.resources.requests.memory");
        assert!(rule.contains("1024Mi"), "{rule}");
    }

    #[test]
    fn ordinary_quantities_pass() {
        assert_eq!(
            problem(serde_json::json!({
                "requests": {"memory": "1Gi", "cpu": "250m", "ephemeral-storage": "0"},
                "limits": {"memory": "1Gi", "cpu": "2"}
            })),
            None
        );
    }
}
