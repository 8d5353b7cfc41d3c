//! Value equality as kube-apiserver sees it after decoding: `15` and `15.0`
//! are the same number, so a configuration that spells a number differently
//! from the stored object neither conflicts nor changes it.

use serde_json::{Number, Value};

/// Whether `a` and `b` are the same value, numbers compared by value.
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => same_number(a, b),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(key, value)| b.get(key).is_some_and(|other| same(value, other)))
        }
        _ => a == b,
    }
}

/// Integers compare exactly (no rounding through `f64`); a float equals an
/// integer only when it is that whole number.
fn same_number(a: &Number, b: &Number) -> bool {
    match (integer(a), integer(b)) {
        (Some(a), Some(b)) => a == b,
        (Some(whole), None) => whole_float(b) == Some(whole),
        (None, Some(whole)) => whole_float(a) == Some(whole),
        (None, None) => a.as_f64() == b.as_f64(),
    }
}

fn integer(number: &Number) -> Option<i128> {
    number
        .as_i64()
        .map(i128::from)
        .or_else(|| number.as_u64().map(i128::from))
}

fn whole_float(number: &Number) -> Option<i128> {
    let float = number.as_f64()?;
    // Beyond 2^63 a float no longer names one integer exactly enough to matter here.
    (float.fract() == 0.0 && float.abs() < 9.2e18).then_some(float as i128)
}

/// Optional values, compared with [`same`].
pub fn same_option(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same(a, b),
        (None, None) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn whole_floats_equal_their_integers() {
        assert!(same(&json!({"minimum": 15}), &json!({"minimum": 15.0})));
        assert!(same(&json!([1, 2.0]), &json!([1.0, 2])));
        assert!(!same(&json!(15), &json!(15.5)));
        assert!(!same(&json!(15), &json!("15")));
    }

    #[test]
    fn large_integers_stay_exact() {
        assert!(!same(
            &json!(9_007_199_254_740_993_u64),
            &json!(9_007_199_254_740_992_u64)
        ));
        assert!(same(&json!(u64::MAX), &json!(u64::MAX)));
    }
}
