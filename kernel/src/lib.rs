//! The Jupyter kernel for dep: notebook cells push their statements into the engine, and a
//! live display under each cell shows the variables' queues and the ops' states while they run.
//!
//! - [`run_kernel`]: what `dep kernel --connection-file FILE` runs (Jupyter starts it).
//! - [`install_kernelspec`] and [`InstallTarget`]: what `dep kernel install` runs.
//!
//! The protocol is Jupyter messaging 5.3 over the pure-Rust `zeromq` crate, in three layers:
//! frames and HMAC signatures (`wire`), typed messages and requests (`message`, on top of the
//! `jupyter-protocol` crate's content types), and the channel loops with their handlers
//! (`server`). The session itself runs on one executor thread (`executor`); the live display
//! is drawn by a watcher thread (`display`) from the engine's `Monitor` and event log, rendered
//! by the views crate (`dep-views`), as are the magics' timelines and DAGs. The kernel ends
//! with the client process that started it (`parent`). Only this crate knows Jupyter, zeromq
//! or message JSON.
//!
//! ```no_run
//! use std::path::Path;
//! use dep_kernel::{install_kernelspec, InstallTarget};
//!
//! # fn main() -> anyhow::Result<()> {
//! let spec_dir = install_kernelspec(&InstallTarget::User, Path::new("/usr/local/bin/dep"))?;
//! println!("installed the dep kernel in {}", spec_dir.display());
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod complete;
mod display;
mod executor;
mod iopub;
mod kernelspec;
mod logo;
mod magic;
mod message;
mod parent;
mod server;
mod wire;

use std::fs;
use std::path::Path;

use anyhow::Context as _;
use dep_interp as interp;

pub use kernelspec::{install_kernelspec, InstallTarget};
pub use magic::help as magic_help;

/// Runs the kernel described by a Jupyter connection file until a client asks it to shut down,
/// or until the client process that started it (`JPY_PARENT_PID`, as Jupyter sets it) ends,
/// which is an error. The session runs under `session_config` (its policy and threads), with
/// observation and expression values turned on, as a notebook needs.
pub fn run_kernel(
    connection_file: &Path,
    session_config: interp::SessionConfig,
) -> anyhow::Result<()> {
    let text = fs::read_to_string(connection_file)
        .with_context(|| format!("reading the connection file {}", connection_file.display()))?;
    let connection: jupyter_protocol::ConnectionInfo = serde_json::from_str(&text)
        .with_context(|| format!("parsing the connection file {}", connection_file.display()))?;
    server::run(connection, session_config)
}
