//! Which rank of which job `dep run` is: alone, or one rank of an MPI job (`mpirun -n N dep run
//! ...`, with the binary built with `--features mpi`). Rank-aware output: only rank 0 prints
//! unless `--all-ranks` (each line then prefixed `[rN] `), and errors name their rank.

use std::io::{self, Write};
use std::sync::Arc;

use dep_engine as engine;
use dep_interp::comm::{Communicator, LocalRanks};

use crate::cli::RunArgs;

/// How to build dep so that it runs under mpirun.
fn build_with_mpi() -> &'static str {
    "build dep with MPI: install Open MPI (Debian: apt-get install libopenmpi-dev openmpi-bin libclang-dev), then `cargo build --release --features mpi`"
}

/// This process's place in its job.
pub(crate) enum Ranks {
    /// A process on its own: one rank.
    Alone,
    /// One rank of an MPI job.
    #[cfg(feature = "mpi")]
    Mpi(Arc<crate::mpi_ranks::MpiRanks>),
    /// Rank 0 of ranks simulated in this process (`--engine sim --ranks N`), all of them.
    Simulated(Vec<Arc<LocalRanks>>),
}

/// Where real ranks come from, for errors about `--ranks`.
#[cfg(feature = "mpi")]
const REAL_RANKS: &str = "for real ranks, start dep with mpirun -n N";
#[cfg(not(feature = "mpi"))]
const REAL_RANKS: &str = "for real ranks, start dep with mpirun -n N after you";

/// The number of processes mpirun (or another PMI launcher) started this one among, if it did.
pub(crate) fn launched_size() -> Option<usize> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"]
        .iter()
        .find_map(|name| std::env::var(name).ok())
        .and_then(|size| size.trim().parse().ok())
}

impl Ranks {
    /// Joins the job this process was launched in: MPI when mpirun started it, simulated ranks
    /// with `--ranks N` (under `--engine sim` only), alone otherwise. Without the `mpi` feature,
    /// being one of several processes is an error saying how to build with MPI.
    pub(crate) fn connect(args: &RunArgs) -> Result<Ranks, String> {
        if let Some(n) = args.ranks {
            if launched_size().is_some() {
                return Err(format!("--ranks {n} simulates ranks in one process; under mpirun the processes are the ranks: leave --ranks out"));
            }
            if args.session_config()?.policy != engine::Policy::Sim {
                let how = if cfg!(feature = "mpi") {
                    REAL_RANKS.to_string()
                } else {
                    format!("{REAL_RANKS} {}", build_with_mpi())
                };
                return Err(format!(
                    "--ranks {n} runs simulated ranks: add --engine sim; {how}"
                ));
            }
            return Ok(Ranks::Simulated(LocalRanks::group(
                usize::from(n),
                dep_interp::comm::timeout(),
            )));
        }
        match launched_size() {
            #[cfg(feature = "mpi")]
            Some(_) => crate::mpi_ranks::MpiRanks::start().map(Ranks::Mpi),
            #[cfg(not(feature = "mpi"))]
            Some(size) if size > 1 => Err(format!(
                "started as one of {size} processes (mpirun?), but this dep was built without MPI: {}", build_with_mpi()
            )),
            _ => Ok(Ranks::Alone),
        }
    }

    /// The communicator a session of this rank uses (`None`: alone, the session's default).
    pub(crate) fn communicator(&self) -> Option<Arc<dyn Communicator>> {
        match self {
            Ranks::Alone => None,
            #[cfg(feature = "mpi")]
            Ranks::Mpi(mpi) => Some(mpi.clone()),
            Ranks::Simulated(comms) => Some(comms[0].clone()),
        }
    }

    /// How many ranks of the job run on this machine, this one included (1 alone, and for
    /// simulated ranks, which run on the virtual clock).
    pub(crate) fn local_size(&self) -> usize {
        match self {
            Ranks::Alone | Ranks::Simulated(_) => 1,
            #[cfg(feature = "mpi")]
            Ranks::Mpi(mpi) => mpi.local_size(),
        }
    }

    /// Gives this rank its share of the machine's cores as CPU workers when several ranks run
    /// on it and the user chose no worker count (`threads_chosen`: `--threads` or
    /// `DEP_THREADS`): see [`CoreShare`]. Returns the share when it changed `config`'s count.
    pub(crate) fn share_cores(
        &self,
        config: &mut dep_interp::SessionConfig,
        threads_chosen: bool,
    ) -> Option<CoreShare> {
        if threads_chosen
            || !matches!(
                config.policy,
                engine::Policy::Threaded | engine::Policy::PerDevice
            )
        {
            return None;
        }
        let usable = std::thread::available_parallelism().map_or(1, |cores| cores.get());
        let share = CoreShare::of(machine_cores().unwrap_or(usable), self.local_size(), usable);
        if share.workers == config.threads {
            return None;
        }
        config.threads = share.workers;
        Some(share)
    }

    /// This process's rank.
    pub(crate) fn rank(&self) -> usize {
        self.communicator().map_or(0, |comm| comm.rank())
    }

    /// How many ranks the job has.
    pub(crate) fn size(&self) -> usize {
        self.communicator().map_or(1, |comm| comm.size())
    }

    /// Ends this rank's part of the job with exit code `code`: a rank that fails ends the whole
    /// job (MPI_Abort, after its error was written); one that succeeds finalizes MPI.
    pub(crate) fn end(&self, #[cfg_attr(not(feature = "mpi"), allow(unused))] code: u8) {
        match self {
            Ranks::Alone | Ranks::Simulated(_) => {}
            #[cfg(feature = "mpi")]
            Ranks::Mpi(mpi) => {
                if code != 0 && mpi.size() > 1 {
                    let _ = io::stdout().flush();
                    let _ = io::stderr().flush();
                    mpi.abort(i32::from(code));
                }
                mpi.finish();
            }
        }
    }

    /// Waits for rank 0 to report a failure every rank saw alike and end the job (MPI_Abort,
    /// which ends this process too); returns after ten seconds should it not. At once
    /// for simulated ranks, whose reports rank 0 writes.
    pub(crate) fn wait_for_rank_0_to_end_the_job(&self) {
        #[cfg(feature = "mpi")]
        if let Ranks::Mpi(mpi) = self {
            if mpi.size() > 1 {
                std::thread::sleep(RANK_0_REPORT_TIME);
            }
        }
    }

    /// Gathers every rank's recording on rank 0 (over MPI), `own` being this rank's: every
    /// rank's, in rank order, on rank 0; `None` on the others, and when the gathering failed
    /// (said on stderr).
    pub(crate) fn gather_runs(
        &self,
        own: dep_views::ranks::RankRun,
    ) -> Option<Vec<dep_views::ranks::RankRun>> {
        match self {
            #[cfg(feature = "mpi")]
            Ranks::Mpi(mpi) => crate::rank_views::gather_over_mpi(mpi, own),
            Ranks::Alone | Ranks::Simulated(_) => Some(vec![own]),
        }
    }

    /// An error report as this rank writes it: `error (rank 2): ...` when the job has several
    /// ranks.
    pub(crate) fn label_error(&self, rendered: &str) -> String {
        label_rank_error(rendered, self.rank(), self.size())
    }
}

/// How long a rank that saw the same failure as every other waits for rank 0 to report it and
/// end the job before it reports it itself.
#[cfg(feature = "mpi")]
const RANK_0_REPORT_TIME: std::time::Duration = std::time::Duration::from_secs(10);

/// Each rank's share of its machine's cores, as CPU workers: ranks that share a machine would
/// otherwise each start a worker per core, and on a machine with fewer cores than their busy
/// threads (each rank also runs its interpreter and its MPI progress thread) the kernel spends
/// its time switching between them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CoreShare {
    /// CPU workers per rank: the cores over the ranks on this machine, at least 1.
    pub(crate) workers: usize,
    /// The ranks on this machine.
    pub(crate) local_ranks: usize,
    /// The machine's cores.
    pub(crate) cores: usize,
}

impl CoreShare {
    /// The share of each of `local_ranks` ranks on `cores` cores, for a rank that may run on
    /// `usable` of them (fewer when mpirun bound it to some).
    pub(crate) fn of(cores: usize, local_ranks: usize, usable: usize) -> CoreShare {
        CoreShare {
            workers: (cores / local_ranks.max(1)).min(usable).max(1),
            local_ranks,
            cores,
        }
    }

    /// The line under the summary's ranks that says so.
    pub(crate) fn note(&self) -> String {
        let plural = |n: usize, word: &str| {
            if n == 1 {
                format!("{n} {word}")
            } else {
                format!("{n} {word}s")
            }
        };
        format!(
            "    {} per rank: {} share this machine's {} (--threads or DEP_THREADS chooses)\n",
            plural(self.workers, "CPU worker"),
            plural(self.local_ranks, "rank"),
            plural(self.cores, "core"),
        )
    }
}

/// The machine's cores, all of them (a process may be bound to fewer): Linux's list of online
/// CPUs; `None` where there is none.
fn machine_cores() -> Option<usize> {
    count_cpus(&std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?)
}

/// How many CPUs a Linux CPU list names (`0-3,8-11`, `0`).
fn count_cpus(list: &str) -> Option<usize> {
    let mut count = 0;
    for part in list.trim().split(',') {
        count += match part.split_once('-') {
            Some((first, last)) => {
                let (first, last) = (first.parse::<usize>().ok()?, last.parse::<usize>().ok()?);
                last.checked_sub(first)? + 1
            }
            None => part.parse::<usize>().map(|_| 1).ok()?,
        };
    }
    (count > 0).then_some(count)
}

/// An error report as rank `rank` of `size` writes it: `error (rank 2): ...` when there are
/// several ranks.
pub(crate) fn label_rank_error(rendered: &str, rank: usize, size: usize) -> String {
    if size <= 1 {
        return rendered.to_string();
    }
    let label = format!("error (rank {rank}):");
    rendered
        .lines()
        .map(|line| match line.strip_prefix("error:") {
            Some(rest) => format!("{label}{rest}"),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The script's output as one rank writes it: everything on rank 0, nothing on the others, or
/// with `--all-ranks` every rank's lines, each prefixed `[rN] `.
pub(crate) struct RankOutput<W: Write> {
    inner: W,
    /// `None`: the output is dropped; `Some("")`: as is; otherwise each line's prefix.
    prefix: Option<String>,
    at_line_start: bool,
}

impl<W: Write> RankOutput<W> {
    /// The output of rank `rank` of `size` ranks.
    pub(crate) fn new(inner: W, rank: usize, size: usize, all_ranks: bool) -> RankOutput<W> {
        let prefix = match (size, all_ranks) {
            (1, _) => Some(String::new()),
            (_, true) => Some(format!("[r{rank}] ")),
            (_, false) if rank == 0 => Some(String::new()),
            (_, false) => None,
        };
        RankOutput {
            inner,
            prefix,
            at_line_start: true,
        }
    }
}

impl<W: Write> RankOutput<W> {
    /// What it wrote into.
    pub(crate) fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: Write> Write for RankOutput<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &self.prefix {
            None => Ok(buf.len()),
            Some(prefix) if prefix.is_empty() => self.inner.write(buf),
            Some(prefix) => {
                for line in buf.split_inclusive(|byte| *byte == b'\n') {
                    if self.at_line_start {
                        self.inner.write_all(prefix.as_bytes())?;
                    }
                    self.inner.write_all(line)?;
                    self.at_line_start = line.ends_with(b"\n");
                }
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(rank: usize, size: usize, all_ranks: bool, parts: &[&str]) -> String {
        let mut out = RankOutput::new(Vec::new(), rank, size, all_ranks);
        for part in parts {
            out.write_all(part.as_bytes()).unwrap();
        }
        String::from_utf8(out.inner).unwrap()
    }

    #[test]
    fn only_rank_0_prints_unless_every_rank_is_asked_for() {
        assert_eq!(written(0, 1, false, &["a\n"]), "a\n");
        assert_eq!(written(0, 2, false, &["a\n"]), "a\n");
        assert_eq!(written(1, 2, false, &["a\n"]), "");
        assert_eq!(
            written(1, 2, true, &["a\nb", "c\n", "d\n"]),
            "[r1] a\n[r1] bc\n[r1] d\n"
        );
    }

    #[test]
    fn a_cpu_list_counts_its_ranges_and_single_cpus() {
        assert_eq!(count_cpus("0-1\n"), Some(2));
        assert_eq!(count_cpus("0"), Some(1));
        assert_eq!(count_cpus("0-3,8-11,14"), Some(9));
        assert_eq!(count_cpus(""), None);
        assert_eq!(count_cpus("3-1"), None);
    }

    #[test]
    fn ranks_sharing_a_machine_split_its_cores_into_workers() {
        assert_eq!(CoreShare::of(16, 4, 16).workers, 4);
        assert_eq!(CoreShare::of(2, 2, 2).workers, 1);
        assert_eq!(CoreShare::of(2, 4, 2).workers, 1, "at least one worker");
        assert_eq!(CoreShare::of(6, 4, 6).workers, 1);
        assert_eq!(CoreShare::of(8, 1, 8).workers, 8);
        assert_eq!(CoreShare::of(16, 2, 4).workers, 4, "bound to 4 cores");
        assert_eq!(
            CoreShare::of(2, 4, 2).note(),
            "    1 CPU worker per rank: 4 ranks share this machine's 2 cores (--threads or DEP_THREADS chooses)\n"
        );
    }
}
