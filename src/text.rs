//! Wording helpers shared by every layer: durations, counts and lists as people read them.

/// A duration for people: `850ms`, `12.3s`, `4m 05s`, `1h 02m`.
pub(crate) fn human_duration(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let tenths = (ms + 50) / 100;
    if tenths < 600 {
        return format!("{}.{}s", tenths / 10, tenths % 10);
    }
    let secs = (ms + 500) / 1000;
    if secs < 3600 {
        return format!("{}m {:02}s", secs / 60, secs % 60);
    }
    let mins = (secs + 30) / 60;
    format!("{}h {:02}m", mins / 60, mins % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_switch_units_at_their_boundaries() {
        assert_eq!(human_duration(0), "0ms");
        assert_eq!(human_duration(850), "850ms");
        assert_eq!(human_duration(999), "999ms");
        assert_eq!(human_duration(1000), "1.0s");
        assert_eq!(human_duration(12_340), "12.3s");
        assert_eq!(human_duration(59_949), "59.9s");
        assert_eq!(human_duration(59_950), "1m 00s");
        assert_eq!(human_duration(245_000), "4m 05s");
        assert_eq!(human_duration(3_599_499), "59m 59s");
        assert_eq!(human_duration(3_599_500), "1h 00m");
        assert_eq!(human_duration(3_720_000), "1h 02m");
        assert_eq!(human_duration(90_000_000), "25h 00m");
    }
}
