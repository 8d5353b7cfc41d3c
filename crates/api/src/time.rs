//! Times as Kubernetes keeps them: a `metav1.Time` is written in whole
//! seconds, so a time with a fraction reads back different from what was
//! written. Status fields are set through [`kube_time`], so that what the
//! operator composes equals what it reads back (a status that never
//! compares equal would be written again on every pass).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// `time`, rounded down to the second.
pub fn kube_time(time: Timestamp) -> Time {
    Time(Timestamp::from_second(time.as_second()).unwrap_or(time))
}

/// An RFC 3339 time (an instance report's), rounded down to the second.
pub fn parse_kube_time(text: &str) -> Option<Time> {
    text.parse::<Timestamp>().ok().map(kube_time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_reads_back_as_it_was_composed() {
        let precise: Timestamp = "2026-12-04T17:51:41.182086Z".parse().expect("time");
        let composed = kube_time(precise);
        let json = serde_json::to_string(&composed).expect("serialises");
        let read: Time = serde_json::from_str(&json).expect("deserialises");
        assert_eq!(read, composed, "{json}");
        // Kept as it was, the fraction is lost on the way.
        let kept: Time =
            serde_json::from_str(&serde_json::to_string(&Time(precise)).expect("json"))
                .expect("time");
        assert_ne!(kept, Time(precise));
        assert_eq!(
            parse_kube_time("2026-12-04T17:51:41.9Z"),
            Some(kube_time("2026-12-04T17:51:41Z".parse().expect("time")))
        );
    }
}
