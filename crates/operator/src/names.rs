//! Deterministic names of a cluster's children (R8: children are found by
//! name and owner reference, so every reconcile computes the same names).

use std::fmt;

/// A cluster name known to be usable as a prefix of its children's names:
/// a DNS label of at most [`ClusterName::MAX_LEN`] characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClusterName(String);

/// An instance name, `<cluster>-<serial>`: the name of its Pod and its PVC.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceName(String);

impl ClusterName {
    /// Leaves room for `-<serial>` and `-replication` within 63 characters.
    pub const MAX_LEN: usize = 50;

    /// Checks `name` once; later code relies on it.
    pub fn new(name: &str) -> Option<Self> {
        let bytes = name.as_bytes();
        let valid = !name.is_empty()
            && name.len() <= Self::MAX_LEN
            && bytes[0].is_ascii_lowercase()
            && bytes[bytes.len() - 1] != b'-'
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-');
        valid.then(|| Self(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The instance with this serial.
    pub fn instance(&self, serial: u32) -> InstanceName {
        InstanceName(format!("{}-{serial}", self.0))
    }

    /// The serial of `instance` if it belongs to this cluster.
    pub fn serial_of(&self, instance: &str) -> Option<u32> {
        let serial = instance.strip_prefix(&self.0)?.strip_prefix('-')?;
        if serial.starts_with('0') {
            return None;
        }
        serial.parse().ok()
    }

    /// Read-write Service: selects the primary.
    pub fn rw_service(&self) -> String {
        format!("{}-rw", self.0)
    }
    /// Read-only Service: selects the replicas.
    pub fn ro_service(&self) -> String {
        format!("{}-ro", self.0)
    }
    /// Read Service: selects every instance.
    pub fn r_service(&self) -> String {
        format!("{}-r", self.0)
    }
    /// Secret of the PostgreSQL superuser.
    pub fn superuser_secret(&self) -> String {
        format!("{}-superuser", self.0)
    }
    /// Secret of the application database owner.
    pub fn app_secret(&self) -> String {
        format!("{}-app", self.0)
    }
    /// Secret of the replication user.
    pub fn replication_secret(&self) -> String {
        format!("{}-replication", self.0)
    }
    /// ServiceAccount, Role and RoleBinding of the instance managers.
    pub fn instance_account(&self) -> String {
        format!("{}-instance", self.0)
    }
    /// PodDisruptionBudget of the primary.
    pub fn primary_pdb(&self) -> String {
        format!("{}-primary", self.0)
    }
    /// PodDisruptionBudget of the replicas.
    pub fn replicas_pdb(&self) -> String {
        format!("{}-replicas", self.0)
    }
}

impl InstanceName {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// An instance name recorded in status by an earlier reconcile.
    pub fn recorded(name: &str) -> Self {
        Self(name.to_owned())
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for InstanceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_are_dns_labels_with_room_for_suffixes() {
        assert!(ClusterName::new("orders").is_some());
        assert!(ClusterName::new("orders-eu-1").is_some());
        for bad in [
            "",
            "Orders",
            "1orders",
            "orders-",
            "orders_db",
            &"o".repeat(51),
        ] {
            assert!(ClusterName::new(bad).is_none(), "{bad:?} must be refused");
        }
        assert!(ClusterName::new(&"o".repeat(50)).is_some());
    }

    #[test]
    fn instance_serials_round_trip() {
        let cluster = ClusterName::new("orders").expect("valid");
        assert_eq!(cluster.instance(12).as_str(), "orders-12");
        assert_eq!(cluster.serial_of("orders-12"), Some(12));
        assert_eq!(
            cluster.serial_of("orders-eu-1"),
            None,
            "another cluster's instance"
        );
        assert_eq!(cluster.serial_of("orders-rw"), None);
        assert_eq!(
            cluster.serial_of("orders-01"),
            None,
            "serials have no leading zero"
        );
        assert_eq!(cluster.serial_of("billing-1"), None);
    }

    #[test]
    fn children_have_distinct_names() {
        let cluster = ClusterName::new("orders").expect("valid");
        let mut names = vec![
            cluster.rw_service(),
            cluster.ro_service(),
            cluster.r_service(),
            cluster.superuser_secret(),
            cluster.app_secret(),
            cluster.replication_secret(),
            cluster.instance_account(),
            cluster.primary_pdb(),
            cluster.replicas_pdb(),
        ];
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count);
    }
}
