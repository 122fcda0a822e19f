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
//! by the views crate (`dep-views`), as are the magics' timelines and DAGs. Only this crate
//! knows Jupyter, zeromq or message JSON.
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
mod server;
mod wire;

use std::fs;
use std::path::Path;

use anyhow::Context as _;
use dep_interp as interp;

pub use kernelspec::{install_kernelspec, InstallTarget};
pub use magic::help as magic_help;

/// Runs the kernel described by a Jupyter connection file until a client asks it to shut down.
/// The session runs under `session_config` (its policy and threads), with observation and
/// expression values turned on, as a notebook needs.
pub fn run_kernel(
    connection_file: &Path,
    session_config: interp::SessionConfig,
) -> anyhow::Result<()> {
    let text = fs::read_to_string(connection_file)
        .with_context(|| format!("reading the connection file {}", connection_file.display()))?;
    let connection: jupyter_protocol::ConnectionInfo = serde_json::from_str(&text)
        .with_context(|| format!("parsing the connection file {}", connection_file.display()))?;
    exit_when_the_parent_dies();
    server::run(connection, session_config)
}

/// Ends the kernel once the process that started it (Jupyter's kernel manager) is gone, as
/// ipykernel does: a client killed without shutting its kernel down would otherwise leave it
/// running for ever, its variables and threads held. Seen as this process being handed to
/// another parent (init, or a subreaper); checked every second.
fn exit_when_the_parent_dies() {
    #[cfg(unix)]
    {
        let parent = std::os::unix::process::parent_id();
        let watch = std::thread::Builder::new()
            .name("dep-kernel-parent".into())
            .spawn(move || loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
                if std::os::unix::process::parent_id() != parent {
                    eprintln!("dep kernel: the process that started it is gone; exiting");
                    std::process::exit(0);
                }
            });
        // Without a thread to spare the kernel still runs; only this watch is missing.
        drop(watch);
    }
}
