//! `dep kernel`: run the Jupyter kernel (Jupyter starts it with `--connection-file`), or
//! `dep kernel install` its kernelspec. Everything Jupyter is in the `dep-kernel` crate.

use std::process::ExitCode;

use dep_engine as engine;
use dep_interp::SessionConfig;

use crate::cli::{KernelAction, KernelArgs, KernelInstallArgs};

pub(crate) fn kernel(args: &KernelArgs) -> ExitCode {
    match (&args.action, &args.connection_file) {
        (Some(KernelAction::Install(install_args)), _) => install(install_args),
        (None, Some(connection_file)) => {
            let config = engine::EngineConfig::from_env().and_then(|engine| {
                dep_interp::comm::timeout_from_env()?;
                Ok((engine, dep_interp::interactive_kept_events()?))
            });
            let session_config = match config {
                Ok((engine_config, kept_events)) => SessionConfig {
                    policy: engine_config.policy,
                    threads: engine_config.threads,
                    kept_events,
                    ..SessionConfig::default()
                },
                Err(error) => {
                    eprintln!("dep: {error}");
                    return ExitCode::from(2);
                }
            };
            match dep_kernel::run_kernel(connection_file, session_config) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("dep: kernel: {error:#}");
                    ExitCode::from(1)
                }
            }
        }
        (None, None) => {
            eprintln!("dep: `dep kernel` needs --connection-file FILE (Jupyter passes it); to make Jupyter find the kernel, run `dep kernel install`");
            ExitCode::from(2)
        }
    }
}

fn install(args: &KernelInstallArgs) -> ExitCode {
    let target = match (&args.prefix, args.sys_prefix) {
        (Some(prefix), _) => dep_kernel::InstallTarget::Prefix(prefix.clone()),
        (None, true) => dep_kernel::InstallTarget::SysPrefix,
        (None, false) => dep_kernel::InstallTarget::User,
    };
    let installed = std::env::current_exe()
        .map_err(anyhow::Error::from)
        .and_then(|binary| dep_kernel::install_kernelspec(&target, &binary));
    match installed {
        Ok(spec_dir) => {
            println!("installed the dep kernelspec in {}", spec_dir.display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("dep: kernel install: {error:#}");
            ExitCode::from(1)
        }
    }
}
