//! Columns of claims and volumes as kube-apiserver prints them.

use serde_json::{Value, json};

use crate::apiserver::table::column::{Column, string};

fn str_at<'v>(object: &'v Value, pointer: &str) -> &'v str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Access modes in kubectl's short form and fixed order.
pub fn access_modes(modes: Option<&Value>) -> String {
    let given: Vec<&str> = modes
        .and_then(Value::as_array)
        .map(|m| m.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| given.contains(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

fn phase(object: &Value) -> String {
    if object.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating".to_owned()
    } else {
        str_at(object, "/status/phase").to_owned()
    }
}

fn or_unset(text: &str) -> String {
    if text.is_empty() {
        "<unset>".to_owned()
    } else {
        text.to_owned()
    }
}

/// A claim shows capacity and access modes once bound to a volume.
fn bound(claim: &Value) -> bool {
    !str_at(claim, "/spec/volumeName").is_empty()
}

pub const CLAIM: &[Column] = &[
    string("Status", 0, |o| json!(phase(o))),
    string("Volume", 0, |o| json!(str_at(o, "/spec/volumeName"))),
    string("Capacity", 0, |o| {
        json!(if bound(o) {
            str_at(o, "/status/capacity/storage")
        } else {
            ""
        })
    }),
    string("Access Modes", 0, |o| {
        json!(if bound(o) {
            access_modes(o.pointer("/status/accessModes"))
        } else {
            String::new()
        })
    }),
    string("StorageClass", 0, |o| {
        json!(str_at(o, "/spec/storageClassName"))
    }),
    string("VolumeAttributesClass", 0, |o| {
        json!(or_unset(str_at(o, "/spec/volumeAttributesClassName")))
    }),
];

pub const VOLUME: &[Column] = &[
    string("Capacity", 0, |o| {
        json!(str_at(o, "/spec/capacity/storage"))
    }),
    string("Access Modes", 0, |o| {
        json!(access_modes(o.pointer("/spec/accessModes")))
    }),
    string("Reclaim Policy", 0, |o| {
        json!(str_at(o, "/spec/persistentVolumeReclaimPolicy"))
    }),
    string("Status", 0, |o| json!(phase(o))),
    string("Claim", 0, |o| {
        let name = str_at(o, "/spec/claimRef/name");
        json!(if name.is_empty() {
            String::new()
        } else {
            format!("{}/{name}", str_at(o, "/spec/claimRef/namespace"))
        })
    }),
    string("StorageClass", 0, |o| {
        json!(str_at(o, "/spec/storageClassName"))
    }),
    string("VolumeAttributesClass", 0, |o| {
        json!(or_unset(str_at(o, "/spec/volumeAttributesClassName")))
    }),
    string("Reason", 0, |o| json!(str_at(o, "/status/reason"))),
];

pub const VOLUME_MODE: &[Column] = &[string("VolumeMode", 1, |o| {
    json!(or_unset(str_at(o, "/spec/volumeMode")))
})];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_modes_are_short_and_ordered() {
        let modes = json!(["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"]);
        assert_eq!(access_modes(Some(&modes)), "RWO,RWX");
        assert_eq!(access_modes(None), "");
    }

    #[test]
    fn a_claim_shows_capacity_once_bound_and_a_volume_its_claim() {
        let cell = |columns: &[Column], name: &str, object: &Value| {
            let column = columns.iter().find(|c| c.name == name).expect("column");
            (column.cell)(object)
        };
        let pending = json!({"spec": {"resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": "Pending"}});
        assert_eq!(cell(CLAIM, "Capacity", &pending), "");
        assert_eq!(cell(CLAIM, "VolumeAttributesClass", &pending), "<unset>");
        let bound = json!({"spec": {"volumeName": "pv-1"},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}});
        assert_eq!(cell(CLAIM, "Capacity", &bound), "1Gi");
        assert_eq!(cell(CLAIM, "Access Modes", &bound), "RWO");
        let volume = json!({"spec": {"claimRef": {"namespace": "db", "name": "data-small-1"},
            "persistentVolumeReclaimPolicy": "Retain"}, "status": {"phase": "Bound"}});
        assert_eq!(cell(VOLUME, "Claim", &volume), "db/data-small-1");
        assert_eq!(cell(VOLUME, "Reclaim Policy", &volume), "Retain");
    }
}
