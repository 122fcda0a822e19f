//! The memory a large allocation may take, checked before it is made: a request larger than
//! what the machine can give fails with a clear error instead of waking the OOM killer.
//!
//! The budget is `DEP_MEMORY_LIMIT` when the user sets it (bytes, or with a `K`, `M`, `G` or `T`
//! suffix, powers of 1024), else the memory the kernel says is available (`MemAvailable` of
//! `/proc/meminfo`), lowered to what the process's cgroup still allows when it has a limit.
//! Only requests of at least [`CHECKED_FROM`] bytes are checked, so small tensors never pay
//! for reading `/proc`.

use super::error::{terr, Result};
use super::storage::format_bytes;

/// Requests below this many bytes are not checked (the allocator's own failure still is).
const CHECKED_FROM: u64 = 64 << 20;

/// Where a budget comes from, for the error message.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Source {
    UserLimit,
    Available,
}

/// `DEP_MEMORY_LIMIT` as the process started with it: read once, since every allocation asks
/// (reading the environment costs hundreds of instructions, more than a small op's kernel).
fn user_limit() -> Option<&'static str> {
    static USER_LIMIT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    USER_LIMIT
        .get_or_init(|| std::env::var("DEP_MEMORY_LIMIT").ok())
        .as_deref()
}

/// Fails if `bytes` more cannot be allocated within the budget.
pub(crate) fn check(bytes: u64) -> Result<()> {
    let user_limit = user_limit();
    // A user's limit applies to every size: they may set it small to try things out.
    if bytes < CHECKED_FROM && user_limit.is_none() {
        return Ok(());
    }
    let (budget, source) = match user_limit.map(parse_size) {
        Some(Some(limit)) => (
            limit.saturating_sub(super::cpu_memory().current_bytes),
            Source::UserLimit,
        ),
        Some(None) => {
            return Err(terr!(
                "DEP_MEMORY_LIMIT={:?} is not a size: write bytes, or a number with K, M, G or T",
                user_limit.unwrap_or_default()
            ))
        }
        None => match available_bytes() {
            Some(available) => (available, Source::Available),
            None => return Ok(()),
        },
    };
    if bytes <= budget {
        return Ok(());
    }
    let whence = match source {
        Source::UserLimit => "left under DEP_MEMORY_LIMIT",
        Source::Available => "available (set DEP_MEMORY_LIMIT to choose a budget)",
    };
    Err(terr!("{}", refusal(bytes, budget, whence)))
}

/// Why `bytes` cannot be allocated with `budget` left (`whence` says where from). Rounded, sizes
/// this close could read as a contradiction (`1.0 MiB` against `1024.0 KiB` left): then both in
/// bytes.
fn refusal(bytes: u64, budget: u64, whence: &str) -> String {
    let size = |n: u64| match bytes.saturating_sub(budget) < bytes / 20 {
        true => format!("{n} bytes"),
        false => format_bytes(n),
    };
    format!(
        "cannot allocate a tensor of {} elements ({}): only {} {whence}",
        bytes / 4,
        size(bytes),
        size(budget)
    )
}

/// The memory this process may take in all, if known: `DEP_MEMORY_LIMIT` when set (and a
/// size), else what the kernel can still give it. For work whose memory grows with its input
/// (reading a long trace whole) to choose a smaller way before it runs out.
pub fn budget_bytes() -> Option<u64> {
    match user_limit() {
        Some(limit) => parse_size(limit),
        None => available_bytes(),
    }
}

/// Parses `1234`, `512K`, `64M`, `8G`, `1T` (powers of 1024; a trailing `B` or `iB` is allowed).
fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let text = text
        .strip_suffix("iB")
        .or_else(|| text.strip_suffix('B'))
        .unwrap_or(text);
    let (digits, shift) = match text.chars().last()?.to_ascii_uppercase() {
        'K' => (&text[..text.len() - 1], 10),
        'M' => (&text[..text.len() - 1], 20),
        'G' => (&text[..text.len() - 1], 30),
        'T' => (&text[..text.len() - 1], 40),
        _ => (text, 0),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// The bytes the kernel can still give this process, if it says.
fn available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let available = meminfo_field(&meminfo, "MemAvailable")?;
    Some(match cgroup_room() {
        Some(room) => available.min(room),
        None => available,
    })
}

/// A `/proc/meminfo` field, in bytes.
fn meminfo_field(meminfo: &str, field: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| {
        line.strip_prefix(field)
            .is_some_and(|rest| rest.starts_with(':'))
    })?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// What the process's cgroup (v2) still allows, when it has a memory limit.
fn cgroup_room() -> Option<u64> {
    let read = |name: &str| std::fs::read_to_string(format!("/sys/fs/cgroup/{name}")).ok();
    let max: u64 = read("memory.max")?.trim().parse().ok()?; // "max" when unlimited
    let current: u64 = read("memory.current")?.trim().parse().ok()?;
    Some(max.saturating_sub(current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("1234"), Some(1234));
        assert_eq!(parse_size("512K"), Some(512 << 10));
        assert_eq!(parse_size("64m"), Some(64 << 20));
        assert_eq!(parse_size("8GiB"), Some(8 << 30));
        assert_eq!(parse_size("1 T"), Some(1 << 40));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn meminfo_fields_are_read_in_bytes() {
        let meminfo = "MemTotal:       24000000 kB\nMemFree:  1000 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(meminfo_field(meminfo, "MemAvailable"), Some(2048 * 1024));
        assert_eq!(meminfo_field(meminfo, "Mem"), None);
    }

    /// Sizes close enough to round alike are said in bytes: `(1.0 MiB): only 1024.0 KiB
    /// left` read as a contradiction.
    #[test]
    fn a_refusal_by_a_few_bytes_says_the_bytes() {
        assert_eq!(
            refusal(1 << 20, (1 << 20) - 16, "left"),
            "cannot allocate a tensor of 262144 elements (1048576 bytes): only 1048560 bytes left"
        );
        assert_eq!(
            refusal(1 << 30, 1 << 20, "left"),
            "cannot allocate a tensor of 268435456 elements (1.0 GiB): only 1.0 MiB left"
        );
    }

    #[test]
    fn a_request_larger_than_the_machine_fails_before_allocating() {
        // More than any machine this runs on has; checked without allocating.
        let error = check(1 << 50).unwrap_err();
        assert!(
            error.message().contains("cannot allocate a tensor of")
                && error.message().contains("available"),
            "{}",
            error.message()
        );
        assert!(check(1 << 20).is_ok());
    }
}
