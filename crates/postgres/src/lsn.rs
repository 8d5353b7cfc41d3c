//! WAL positions (LSNs): PostgreSQL's `XXXXXXXX/XXXXXXXX` text form and the
//! byte arithmetic behind replication lag.

use std::fmt;
use std::str::FromStr;

/// A position in the write-ahead log: a 64-bit byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub u64);

/// Text that is not an LSN.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{0}` is not a WAL position (expected two hexadecimal halves like 0/3000148)")]
pub struct LsnParseError(String);

impl Lsn {
    /// Bytes from `earlier` to `self`; 0 when `earlier` is ahead.
    pub fn bytes_since(self, earlier: Lsn) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl FromStr for Lsn {
    type Err = LsnParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || LsnParseError(text.to_owned());
        let (high, low) = text.trim().split_once('/').ok_or_else(invalid)?;
        let half = |part: &str| {
            if part.is_empty() || part.len() > 8 {
                return Err(invalid());
            }
            u32::from_str_radix(part, 16).map_err(|_| invalid())
        };
        Ok(Lsn((u64::from(half(high)?) << 32) | u64::from(half(low)?)))
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsns_parse_and_print_like_postgresql() {
        let cases = [
            ("0/0", 0u64, "0/0"),
            ("0/3000148", 0x0300_0148, "0/3000148"),
            ("16/B374D848", 0x16_B374_D848, "16/B374D848"),
            ("16/b374d848", 0x16_B374_D848, "16/B374D848"),
            ("FFFFFFFF/FFFFFFFF", u64::MAX, "FFFFFFFF/FFFFFFFF"),
            (" 1/0\n", 1 << 32, "1/0"),
        ];
        for (text, value, printed) in cases {
            let lsn: Lsn = text.parse().expect("valid LSN");
            assert_eq!(lsn, Lsn(value), "{text}");
            assert_eq!(lsn.to_string(), printed, "{text}");
        }
    }

    #[test]
    fn malformed_lsns_are_rejected() {
        for text in [
            "",
            "0",
            "0/",
            "/0",
            "x/1",
            "1/2/3",
            "100000000/0",
            "-1/0",
            "0/ 1",
        ] {
            assert!(text.parse::<Lsn>().is_err(), "{text:?} must be rejected");
        }
    }

    #[test]
    fn lag_is_the_byte_distance_and_never_negative() {
        let primary: Lsn = "1/10".parse().expect("valid");
        let standby: Lsn = "0/FFFFFFF0".parse().expect("valid");
        assert_eq!(primary.bytes_since(standby), 0x20);
        assert_eq!(standby.bytes_since(primary), 0);
        assert!(standby < primary);
    }
}
