//! What the machine can hold: sizes that come from users (instances, environments, samples) are
//! checked against the memory available before anything is allocated, so a request that cannot
//! fit is a typed error naming the field rather than an abort minutes later.

/// Host memory available to new allocations, when the platform says (Linux: `MemAvailable` of
/// `/proc/meminfo`, plus free swap); `None` elsewhere.
pub fn memory_available() -> Option<u128> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u128> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kib: u128 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    Some(field("MemAvailable:")? + field("SwapFree:").unwrap_or(0))
}

/// Whether `bytes` more can be allocated on the host: below the available memory where the
/// platform reports it, and addressable in any case.
pub fn fits_in_memory(bytes: u128) -> bool {
    bytes <= isize::MAX as u128 && memory_available().is_none_or(|available| bytes <= available)
}
