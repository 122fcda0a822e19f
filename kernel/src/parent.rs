//! The kernel ends with the client process that started it, as ipykernel does: Jupyter names
//! that process in `JPY_PARENT_PID` (jupyter_client sets it for every kernel it owns and leaves
//! it out for an independent one), and the kernel looks twice a second whether it still runs.
//! A kernel started without the variable (by hand) is not tied to any process.
//!
//! The starter is usually the kernel's parent: it has ended once the kernel's parent is another
//! process (an orphan is adopted by init or a subreaper at once, even while its dead parent is
//! a zombie nobody reaps), which needs no `/proc` and cannot be fooled by a reused pid. When
//! something stands between them (a wrapper that did not `exec`), the starter is read from
//! `/proc` (Linux): it has ended once it is gone, a zombie, or a new process under its pid (and
//! one `/proc` does not show at the start has ended already). Without `/proc` (other systems),
//! the kernel's parent is watched instead.

use std::time::Duration;

/// How often the kernel looks at its starter.
const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The process the kernel ends with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Starter {
    /// The kernel's parent when it started: ended once the kernel's parent is another process.
    Parent(u32),
    /// A process further up, with the start time `/proc` gave it: ended once `/proc` no longer
    /// shows that process alive.
    Process { pid: u32, start_time: u64 },
    /// A process `/proc` did not show alive when the kernel started: ended already.
    Ended(u32),
}

impl Starter {
    /// The starter named by the `JPY_PARENT_PID` environment variable, if any.
    pub(crate) fn from_env() -> Option<Starter> {
        let named = std::env::var("JPY_PARENT_PID").ok()?;
        Starter::named(&named, std::os::unix::process::parent_id())
    }

    /// The starter named by `jpy_parent_pid` (the variable's text) for a kernel whose parent
    /// is `parent`. None for no pid, or for init's (1), which never ends.
    fn named(jpy_parent_pid: &str, parent: u32) -> Option<Starter> {
        let pid = jpy_parent_pid
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|&pid| pid > 1)?;
        if pid == parent {
            return Some(Starter::Parent(parent));
        }
        Some(match process_start_time(pid) {
            Some(start_time) => Starter::Process { pid, start_time },
            None if process_start_time(std::process::id()).is_some() => Starter::Ended(pid),
            None => Starter::Parent(parent),
        })
    }

    /// The process's pid, for messages.
    fn pid(&self) -> u32 {
        match *self {
            Starter::Parent(pid) | Starter::Process { pid, .. } | Starter::Ended(pid) => pid,
        }
    }

    /// Whether the starter has ended.
    fn has_ended(&self) -> bool {
        match *self {
            Starter::Parent(parent) => std::os::unix::process::parent_id() != parent,
            Starter::Process { pid, start_time } => process_start_time(pid) != Some(start_time),
            Starter::Ended(_) => true,
        }
    }
}

/// Returns an error, which ends the kernel, once `starter` has ended; without a starter, never
/// returns.
pub(crate) async fn end_with(starter: Option<Starter>) -> anyhow::Result<()> {
    let Some(starter) = starter else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(POLL_INTERVAL).await;
        if starter.has_ended() {
            anyhow::bail!(
                "the process that started the kernel (pid {}, JPY_PARENT_PID) has ended",
                starter.pid()
            );
        }
    }
}

/// When the live process `pid` started, in clock ticks after boot (`/proc/PID/stat`'s field
/// 22); None when `/proc` does not show it, or shows a zombie or a dead process.
fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    start_time_of_stat(&stat)
}

/// The start time in a `/proc/PID/stat` line, unless its state is zombie or dead. The command
/// name, in parentheses, may hold spaces and parentheses: the fields are read after the last
/// `)`, from the state (field 3) on.
fn start_time_of_stat(stat: &str) -> Option<u64> {
    let (_, fields) = stat.rsplit_once(')')?;
    let mut fields = fields.split_whitespace();
    let state = fields.next()?;
    if matches!(state, "Z" | "X" | "x") {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starter_is_the_parent_when_jupyter_names_it() {
        assert_eq!(Starter::named("4242", 4242), Some(Starter::Parent(4242)));
        assert_eq!(Starter::named(" 4242\n", 4242), Some(Starter::Parent(4242)));
        for not_a_starter in ["", "x", "-3", "0", "1"] {
            assert_eq!(
                Starter::named(not_a_starter, 4242),
                None,
                "{not_a_starter:?}"
            );
        }
    }

    #[test]
    fn a_starter_further_up_is_read_from_proc_else_the_parent_is_watched() {
        let parent = std::os::unix::process::parent_id();
        let me = std::process::id();
        match Starter::named(&me.to_string(), parent) {
            Some(Starter::Process { pid, .. }) => assert_eq!(pid, me),
            // No /proc here: the parent stands in.
            other => assert_eq!(other, Some(Starter::Parent(parent))),
        }
        let watched = Starter::named(&me.to_string(), parent).unwrap();
        assert!(!watched.has_ended(), "this process runs");
        assert!(!Starter::Parent(parent).has_ended());
        assert!(Starter::Parent(parent + 1).has_ended());
    }

    #[test]
    fn a_starter_proc_does_not_show_has_ended_already() {
        if process_start_time(std::process::id()).is_none() {
            return; // no /proc here
        }
        // Above the largest pid Linux gives (2^22).
        let gone = 5_000_000;
        assert_eq!(
            Starter::named(&gone.to_string(), 4242),
            Some(Starter::Ended(gone))
        );
        assert!(Starter::Ended(gone).has_ended());
    }

    #[test]
    fn a_process_under_a_reused_pid_or_a_zombie_has_ended() {
        let me = std::process::id();
        let Some(start_time) = process_start_time(me) else {
            return; // no /proc here
        };
        assert!(!Starter::Process {
            pid: me,
            start_time
        }
        .has_ended());
        let reused = Starter::Process {
            pid: me,
            start_time: start_time + 1,
        };
        assert!(reused.has_ended());
    }

    #[test]
    fn the_start_time_is_read_after_the_command_name() {
        let fields: Vec<String> = (4..=30).map(|field| field.to_string()).collect();
        let line = |state: &str| format!("77 (a (b) c) {state} {}\n", fields.join(" "));
        assert_eq!(start_time_of_stat(&line("S")), Some(22));
        assert_eq!(start_time_of_stat(&line("R")), Some(22));
        assert_eq!(start_time_of_stat(&line("Z")), None);
        assert_eq!(start_time_of_stat(&line("X")), None);
        assert_eq!(start_time_of_stat("77 (short) S 1 2"), None);
    }
}
