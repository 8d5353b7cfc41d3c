//! The heartbeat the manager hands the watchdog: one 16-byte record at
//! the start of an anonymous memory file (`memfd`) both processes hold
//! open, rewritten in place after every renewal of the primary lease. No
//! queue can fill up and block the manager, and a watchdog that was
//! stopped for a while reads the newest deadline, never a stale backlog.
//!
//! The record is the deadline in nanoseconds on `CLOCK_BOOTTIME` (0 when
//! disarmed) followed by its bitwise complement, both little-endian: a
//! read that overlaps a write sees the two disagree and reads again.
//! `CLOCK_BOOTTIME` is one clock for every process of the machine and,
//! unlike `CLOCK_MONOTONIC`, keeps counting while the machine is
//! suspended, as the operator's clock elsewhere does.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Duration;

use nix::time::{ClockId, clock_gettime};

use super::decide::Heartbeat;

/// The record's size in bytes.
pub const RECORD: usize = 16;

/// Now on the clock the deadlines are written on.
pub fn now() -> Duration {
    clock_gettime(ClockId::CLOCK_BOOTTIME).map_or(Duration::ZERO, Duration::from)
}

/// The record for `heartbeat`.
pub fn encode(heartbeat: Heartbeat) -> [u8; RECORD] {
    let value = match heartbeat {
        Heartbeat::Disarmed => 0,
        // Never 0, which means disarmed.
        Heartbeat::Until(deadline) => u64::try_from(deadline.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1),
    };
    let mut record = [0; RECORD];
    record[..8].copy_from_slice(&value.to_le_bytes());
    record[8..].copy_from_slice(&(!value).to_le_bytes());
    record
}

/// The heartbeat in `record`; `None` when its halves disagree (read while
/// being written).
pub fn decode(record: &[u8; RECORD]) -> Option<Heartbeat> {
    let mut value = [0; 8];
    let mut check = [0; 8];
    value.copy_from_slice(&record[..8]);
    check.copy_from_slice(&record[8..]);
    let value = u64::from_le_bytes(value);
    if !value != u64::from_le_bytes(check) {
        return None;
    }
    Some(match value {
        0 => Heartbeat::Disarmed,
        nanos => Heartbeat::Until(Duration::from_nanos(nanos)),
    })
}

/// Reads the record; `None` when it is being rewritten or unreadable.
pub fn read(file: &File) -> Option<Heartbeat> {
    let mut record = [0; RECORD];
    file.read_exact_at(&mut record, 0).ok()?;
    decode(&record)
}

/// Writes the record in place.
pub fn write(file: &File, heartbeat: Heartbeat) -> std::io::Result<()> {
    file.write_all_at(&encode(heartbeat), 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_a_torn_one_is_refused() {
        for heartbeat in [
            Heartbeat::Disarmed,
            Heartbeat::Until(Duration::from_millis(1_234_567)),
            Heartbeat::Until(Duration::ZERO),
        ] {
            let read = decode(&encode(heartbeat));
            let expected = match heartbeat {
                // The earliest deadline there is: still armed.
                Heartbeat::Until(d) if d.is_zero() => Heartbeat::Until(Duration::from_nanos(1)),
                other => other,
            };
            assert_eq!(read, Some(expected), "{heartbeat:?}");
        }
        let mut torn = encode(Heartbeat::Until(Duration::from_secs(5)));
        torn[8..].copy_from_slice(&encode(Heartbeat::Until(Duration::from_secs(6)))[8..]);
        assert_eq!(decode(&torn), None);
        assert_eq!(decode(&[0; RECORD]), None, "an empty file is not disarmed");
    }

    #[test]
    fn the_shared_clock_moves_forward() {
        let first = now();
        std::thread::sleep(Duration::from_millis(5));
        assert!(now() >= first + Duration::from_millis(5));
        assert!(first > Duration::ZERO);
    }
}
