//! How an engine runs its ops: the policy and its worker counts, from code or the environment.

use std::fmt;
use std::str::FromStr;

use crate::sync::Arc;
use crate::EventSink;

/// A running policy: how ready ops get to a thread. Dependency tracking is the same for all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Each op runs at push, synchronously, on the pushing thread: the serial reference. (An op
    /// pushed behind an asynchronous op that has not completed runs when it completes, on the
    /// completing thread.)
    Naive,
    /// One pool of worker threads with one priority-ordered ready queue for every device.
    Threaded,
    /// One worker group per device: a CPU pool, streams per GPU, a copy worker.
    PerDevice,
    /// Values computed at push (as naive); times from a cost model on a virtual clock, with
    /// every device a script names simulated (see the `sim` module).
    Sim,
}

impl Policy {
    /// Every policy, in the order help texts list them.
    pub const ALL: [Policy; 4] = [
        Policy::Naive,
        Policy::Threaded,
        Policy::PerDevice,
        Policy::Sim,
    ];

    /// The policy's name as `DEP_ENGINE` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Naive => "naive",
            Policy::Threaded => "threaded",
            Policy::PerDevice => "per-device",
            Policy::Sim => "sim",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = String;

    fn from_str(text: &str) -> Result<Policy, String> {
        match text {
            "naive" => Ok(Policy::Naive),
            "threaded" => Ok(Policy::Threaded),
            "per-device" | "perdevice" | "device" => Ok(Policy::PerDevice),
            "sim" => Ok(Policy::Sim),
            _ => Err(format!(
                "unknown engine `{text}` (expected naive, threaded, per-device or sim)"
            )),
        }
    }
}

/// An engine's configuration.
#[derive(Clone)]
pub struct EngineConfig {
    /// The running policy.
    pub policy: Policy,
    /// Worker threads of the CPU pool (threaded and per-device policies).
    pub threads: usize,
    /// Workers (streams) per GPU under the per-device policy.
    pub gpu_streams: usize,
    /// Where events go; `None` costs nothing.
    pub sink: Option<Arc<dyn EventSink>>,
}

impl fmt::Debug for EngineConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineConfig")
            .field("policy", &self.policy)
            .field("threads", &self.threads)
            .field("gpu_streams", &self.gpu_streams)
            .field("observed", &self.sink.is_some())
            .finish()
    }
}

impl Default for EngineConfig {
    /// Threaded, one worker per available core, unobserved.
    fn default() -> EngineConfig {
        EngineConfig {
            policy: Policy::Threaded,
            threads: default_threads(),
            gpu_streams: 2,
            sink: None,
        }
    }
}

impl EngineConfig {
    /// A configuration with `policy` and otherwise the defaults.
    pub fn with_policy(policy: Policy) -> EngineConfig {
        EngineConfig {
            policy,
            ..EngineConfig::default()
        }
    }

    /// The defaults, overridden by `DEP_ENGINE` (naive, threaded, per-device) and `DEP_THREADS`.
    pub fn from_env() -> Result<EngineConfig, String> {
        let mut config = EngineConfig::default();
        if let Ok(engine) = std::env::var("DEP_ENGINE") {
            config.policy = engine
                .parse()
                .map_err(|error| format!("DEP_ENGINE: {error}"))?;
        }
        if let Ok(threads) = std::env::var("DEP_THREADS") {
            config.threads =
                parse_threads(&threads).map_err(|error| format!("DEP_THREADS: {error}"))?;
        }
        Ok(config)
    }
}

/// Parses a worker count: a whole number from 1 to 256.
pub fn parse_threads(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(threads) if (1..=256).contains(&threads) => Ok(threads),
        _ => Err(format!(
            "`{text}` is not a thread count (expected a whole number from 1 to 256)"
        )),
    }
}

fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}
