//! One loopback address per pod.
//!
//! On Linux all of 127.0.0.0/8 reaches the loopback interface, so giving
//! each pod its own 127.x.y.z lets every PostgreSQL listen on 5432 without
//! clashing, and makes `status.podIP` mean what it means on a cluster: the
//! address other pods use to reach this one. Pods take addresses from
//! 127.2.0.0/16; 127.0.0.0/16 is left to the API server and the host.
//! An address already in a pod's status is kept, so a restarted sandbox
//! gives pods back the addresses their peers know.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Mutex;

#[derive(Debug, thiserror::Error)]
pub enum AddressError {
    #[error("all {0} pod addresses of the node are in use")]
    Exhausted(usize),
}

const FIRST: u32 = u32::from_be_bytes([127, 2, 0, 2]);
const LAST: u32 = u32::from_be_bytes([127, 2, 255, 254]);

/// Hands out pod addresses, each to one pod (by uid); release them when
/// the pod is gone.
#[derive(Debug)]
pub struct AddressPool {
    used: Mutex<BTreeMap<Ipv4Addr, String>>,
    /// The first and last address handed out.
    first: u32,
    last: u32,
    /// Where the search for a free address starts, so that two sandboxes
    /// on one machine (tests running side by side) rarely hand out the
    /// same address.
    start: u32,
}

impl Default for AddressPool {
    fn default() -> Self {
        Self {
            used: Mutex::default(),
            first: FIRST,
            last: LAST,
            start: 0,
        }
    }
}

impl AddressPool {
    fn used(&self) -> std::sync::MutexGuard<'_, BTreeMap<Ipv4Addr, String>> {
        self.used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A pool whose search starts at a place derived from `seed` (the data
    /// directory), the same on every start of the same sandbox.
    pub fn seeded(seed: &str) -> Self {
        Self::seeded_in(seed, Ipv4Addr::from(FIRST), Ipv4Addr::from(LAST))
    }

    /// A pool of the addresses `first..=last` (a container network's
    /// subnet), its search starting at a place derived from `seed`.
    pub fn seeded_in(seed: &str, first: Ipv4Addr, last: Ipv4Addr) -> Self {
        let hash = seed.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        let (first, last) = (u32::from(first), u32::from(last).max(u32::from(first)));
        Self {
            used: Mutex::default(),
            first,
            last,
            start: (hash % u64::from(last - first + 1)) as u32,
        }
    }

    /// Holds `ip` for the pod `uid` (which had it before a restart) so no
    /// other pod takes it first.
    pub fn reserve(&self, uid: &str, ip: Ipv4Addr) {
        if (self.first..=self.last).contains(&u32::from(ip)) {
            self.used().entry(ip).or_insert_with(|| uid.to_owned());
        }
    }

    /// Gives the pod `uid` its `previous` address when that is free or
    /// held for it, else the lowest free one.
    pub fn allocate(
        &self,
        uid: &str,
        previous: Option<Ipv4Addr>,
    ) -> Result<Ipv4Addr, AddressError> {
        let mut used = self.used();
        if let Some(ip) = previous
            && (self.first..=self.last).contains(&u32::from(ip))
            && used.get(&ip).is_none_or(|owner| owner == uid)
        {
            used.insert(ip, uid.to_owned());
            return Ok(ip);
        }
        let size = self.last - self.first + 1;
        let free = (0..size)
            .map(|i| Ipv4Addr::from(self.first + (self.start + i) % size))
            .find(|ip| !used.contains_key(ip))
            .ok_or(AddressError::Exhausted(size as usize))?;
        used.insert(free, uid.to_owned());
        Ok(free)
    }

    pub fn release(&self, ip: Ipv4Addr) {
        self.used().remove(&ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_get_distinct_bindable_addresses() {
        let pool = AddressPool::default();
        let a = pool.allocate("a", None).expect("first");
        let b = pool.allocate("b", None).expect("second");
        assert_ne!(a, b);
        for ip in [a, b] {
            let listener = std::net::TcpListener::bind((ip, 0)).expect("bind pod address");
            let port = listener.local_addr().expect("addr").port();
            std::net::TcpStream::connect((ip, port)).expect("connect to pod address");
        }
    }

    #[test]
    fn sandboxes_in_different_directories_start_apart() {
        let a = AddressPool::seeded("/tmp/a")
            .allocate("p", None)
            .expect("a");
        let b = AddressPool::seeded("/tmp/b")
            .allocate("p", None)
            .expect("b");
        assert_ne!(a, b);
        let again = AddressPool::seeded("/tmp/a")
            .allocate("p", None)
            .expect("again");
        assert_eq!(a, again, "the same sandbox starts at the same place");
    }

    #[test]
    fn a_known_address_is_kept_and_released_ones_are_reused() {
        let pool = AddressPool::default();
        let kept = Ipv4Addr::new(127, 2, 3, 7);
        pool.reserve("old", kept);
        let newcomer = pool.allocate("new", Some(kept)).expect("newcomer");
        assert_ne!(newcomer, kept, "an address held for a pod goes to no other");
        assert_eq!(pool.allocate("old", Some(kept)).expect("kept"), kept);
        pool.release(newcomer);
        assert_eq!(pool.allocate("third", None).expect("reuse"), newcomer);
        let outside = pool
            .allocate("fourth", Some(Ipv4Addr::new(10, 0, 0, 1)))
            .expect("outside the range");
        assert_ne!(outside, Ipv4Addr::new(10, 0, 0, 1));
    }
}
