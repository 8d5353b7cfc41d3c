//! The `pod-template-hash`: what names a Deployment's ReplicaSet for one
//! pod template and keeps the ReplicaSets' selectors apart.
//!
//! As in kube-controller-manager, the hash is FNV-1a (32 bits) over the
//! template (and the Deployment's `collisionCount`, when set), written in
//! decimal and then in the consonant-and-digit alphabet Kubernetes uses for
//! generated names, so it never spells a word. Kubernetes hashes the Go
//! structure; this hashes the template's JSON with sorted keys, so the
//! values differ from a real cluster's but have the same properties: the
//! same template always gives the same hash, any change gives another.

use serde_json::Value;

/// Kubernetes' alphabet for generated names (`rand.SafeEncodeString`).
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The label every ReplicaSet of a Deployment and its pods carry.
pub const LABEL: &str = "pod-template-hash";

fn fnv1a(bytes: &[u8], mut hash: u32) -> u32 {
    for byte in bytes {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// JSON with object keys sorted at every level.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The template without the hash label, which the ReplicaSet's copy
/// carries and the Deployment's does not.
pub fn without_hash(template: &Value) -> Value {
    let mut template = template.clone();
    if let Some(labels) = template
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(LABEL);
        if labels.is_empty()
            && let Some(meta) = template.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.remove("labels");
        }
    }
    template
}

/// The hash of a pod template (with the Deployment's collision count).
pub fn pod_template_hash(template: &Value, collision_count: Option<i32>) -> String {
    let mut text = String::new();
    canonical(&without_hash(template), &mut text);
    let mut hash = fnv1a(text.as_bytes(), 0x811c_9dc5);
    if let Some(count) = collision_count {
        hash = fnv1a(&count.to_le_bytes(), hash);
    }
    hash.to_string()
        .bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}

/// Whether two templates are the same apart from the hash label
/// (`EqualIgnoreHash`).
pub fn same_template(a: &Value, b: &Value) -> bool {
    without_hash(a) == without_hash(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(image: &str) -> Value {
        json!({"metadata": {"labels": {"app": "web"}},
               "spec": {"containers": [{"name": "web", "image": image}]}})
    }

    #[test]
    fn the_hash_depends_on_the_template_alone() {
        let a = pod_template_hash(&template("web:1"), None);
        assert_eq!(a, pod_template_hash(&template("web:1"), None));
        assert_ne!(a, pod_template_hash(&template("web:2"), None));
        assert_ne!(a, pod_template_hash(&template("web:1"), Some(1)));
        assert!(a.bytes().all(|b| ALPHABET.contains(&b)), "{a}");
        assert!(!a.is_empty() && a.len() <= 10);
    }

    #[test]
    fn key_order_and_the_hash_label_do_not_change_the_hash() {
        let reordered = json!({"spec": {"containers": [{"image": "web:1", "name": "web"}]},
                               "metadata": {"labels": {"app": "web", LABEL: "xyz"}}});
        assert_eq!(
            pod_template_hash(&template("web:1"), None),
            pod_template_hash(&reordered, None)
        );
        assert!(same_template(&template("web:1"), &reordered));
        assert!(!same_template(&template("web:1"), &template("web:2")));
    }
}
