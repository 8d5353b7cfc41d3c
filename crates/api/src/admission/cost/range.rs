//! Ranges of sizes and costs, and the arithmetic kube-apiserver's estimate
//! uses on them: sums and products saturate at `u64::MAX` (an unknown size
//! is `0..=u64::MAX`), and a fractional cost factor rounds up.

/// A closed range `min..=max`: a size (characters, items, entries) or a
/// cost (units).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub min: u64,
    pub max: u64,
}

/// 2^64 as a float: a product at or above it saturates.
const TWO_TO_64: f64 = 18_446_744_073_709_551_616.0;

impl Range {
    pub const UNKNOWN: Range = Range {
        min: 0,
        max: u64::MAX,
    };

    pub const fn fixed(value: u64) -> Self {
        Self {
            min: value,
            max: value,
        }
    }

    pub fn plus(self, other: Self) -> Self {
        Self {
            min: self.min.saturating_add(other.min),
            max: self.max.saturating_add(other.max),
        }
    }

    pub fn product(self, other: Self) -> Self {
        Self {
            min: self.min.saturating_mul(other.min),
            max: self.max.saturating_mul(other.max),
        }
    }

    /// Each bound times `factor`, rounded up.
    pub fn times(self, factor: f64) -> Self {
        Self {
            min: times(self.min, factor),
            max: times(self.max, factor),
        }
    }

    /// The smallest range holding both.
    pub fn union(self, other: Self) -> Self {
        Self {
            min: self.min.min(other.min),
            max: self.max.max(other.max),
        }
    }
}

fn times(value: u64, factor: f64) -> u64 {
    let value = value as f64;
    if value > 0.0 && factor > 0.0 && value > u64::MAX as f64 / factor {
        return u64::MAX;
    }
    let product = (value * factor).ceil();
    if product >= TWO_TO_64 {
        u64::MAX
    } else {
        product as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_round_up() {
        assert_eq!(Range::fixed(1).times(0.1), Range::fixed(1));
        assert_eq!(Range::fixed(252).times(0.1), Range::fixed(26));
        assert_eq!(Range::fixed(0).times(0.1), Range::fixed(0));
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Range::UNKNOWN.plus(Range::fixed(1)).max, u64::MAX);
        assert_eq!(Range::UNKNOWN.product(Range::fixed(2)).max, u64::MAX);
        assert_eq!(Range::UNKNOWN.times(0.25).max, 4_611_686_018_427_387_904);
        assert_eq!(Range::UNKNOWN.times(2.0).max, u64::MAX);
    }
}
