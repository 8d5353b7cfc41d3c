//! Field paths: one step per map key, list element or set value.

use std::collections::BTreeSet;

use serde_json::Value;

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Seg {
    Field(String),
    /// An element of an associative list, by its key fields (sorted JSON).
    Key(String),
    /// An element of a set, by value (JSON).
    Val(String),
}

pub type Path = Vec<Seg>;
pub type FieldSet = BTreeSet<Path>;

/// `.spec.containers[name="a"].image`, as Kubernetes prints field paths in
/// conflicts.
pub fn render_path(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Field(f) => {
                out.push('.');
                out.push_str(f);
            }
            Seg::Key(k) => {
                let inner = serde_json::from_str::<Value>(k)
                    .ok()
                    .and_then(|v| v.as_object().cloned())
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .unwrap_or_default();
                out.push_str(&format!("[{inner}]"));
            }
            Seg::Val(v) => out.push_str(&format!("[{v}]")),
        }
    }
    out
}
