//! The views of a job of several ranks (`mpirun -n N dep run ... --trace t.json`, or
//! `--engine sim --ranks N`): every rank records its events; at the end rank 0 gathers them (over
//! MPI, or from the threads of simulated ranks) and writes one trace with a process per rank,
//! one timeline with every rank's lanes, and each rank's communication figures under the
//! summary (see `dep_views::ranks`). The other ranks write no view.

use std::path::PathBuf;

use dep_engine as engine;
use dep_interp::Session;
use dep_views as views;
use views::ranks::RankRun;

use crate::ranks::{CoreShare, Ranks};
use crate::views::{write_file, ViewPlan};

/// The merged views a job of several ranks asked for, which rank 0 writes.
pub(crate) struct RankViews {
    traces: Vec<PathBuf>,
    timeline: Option<PathBuf>,
    arrows: bool,
    simulated: bool,
    /// This machine's cores shared out as CPU workers among its ranks, said under the summary.
    core_share: Option<CoreShare>,
}

impl RankViews {
    /// For a job of several ranks with views: takes the trace and the timeline out of `plan`
    /// (they are written merged, by rank 0), and leaves rank 0's plan the rest (its summary, its
    /// DOT and replay files); the other ranks keep no plan: they only record. `None` for a
    /// process alone, or without views. `core_share`: the workers this rank was given, if its
    /// machine's cores were shared out among its ranks.
    pub(crate) fn take(
        plan: &mut Option<ViewPlan>,
        ranks: &Ranks,
        core_share: Option<CoreShare>,
    ) -> Option<RankViews> {
        if ranks.size() <= 1 {
            return None;
        }
        let own = plan.as_mut()?;
        let simulated = matches!(ranks, Ranks::Simulated(_));
        let (traces, timeline, arrows) = own.take_merged_views(simulated.then_some(ranks.size()));
        if ranks.rank() != 0 {
            *plan = None;
        }
        Some(RankViews {
            traces,
            timeline,
            arrows,
            simulated,
            core_share,
        })
    }

    /// The files it writes, as their flags name them: `--trace t.json and --timeline t.svg`;
    /// `None` when it writes none (only the summary's lines).
    pub(crate) fn asked_for(&self) -> Option<String> {
        let mut views: Vec<String> = self
            .traces
            .iter()
            .map(|path| format!("--trace {}", path.display()))
            .collect();
        views.extend(
            self.timeline
                .iter()
                .map(|path| format!("--timeline {}", path.display())),
        );
        let (last, first) = views.split_last()?;
        Some(match first {
            [] => last.clone(),
            first => format!("{} and {last}", first.join(", ")),
        })
    }

    /// Writes the merged trace and timeline and prints each rank's figures (to stderr, under
    /// rank 0's summary, with the line of [`CoreShare::note`] when the ranks on this machine
    /// shared its cores out as workers). `runs` are every rank's, in rank order. Returns whether every file was
    /// written (a failure is printed).
    pub(crate) fn write(&self, mut runs: Vec<RankRun>) -> bool {
        // `offset_ns` holds when each rank's clock started ([`recorded`]): made relative to
        // the earliest here; simulated ranks share the virtual clock's origin.
        let earliest = runs.iter().map(|run| run.offset_ns).min().unwrap_or(0);
        for run in &mut runs {
            run.offset_ns = if self.simulated {
                0
            } else {
                run.offset_ns - earliest
            };
            if self.simulated {
                views::ranks::order_simulated(&mut run.events);
            }
        }
        let mut ok = true;
        for path in &self.traces {
            // Chrome JSON gets a process per rank; Perfetto's protobuf the merged run, each
            // rank's lanes named `r1 cpu:0`, ... (both with the arrows between ranks)
            ok &= if crate::trace_files::is_perfetto(path) {
                write_file(path, "--trace", views::ranks::perfetto_trace(&runs))
            } else {
                write_file(path, "--trace", views::ranks::chrome_trace(&runs))
            };
        }
        if let Some(path) = &self.timeline {
            let options = views::svg::TimelineOptions {
                arrows: self.arrows,
                simulated: self.simulated,
                ..views::svg::TimelineOptions::default()
            };
            ok &= write_file(path, "--timeline", views::ranks::timeline(&runs, &options));
        }
        let figures: Vec<views::ranks::RankFigures> = runs
            .iter()
            .map(|run| views::ranks::RankFigures::of(run.rank, &run.replay()))
            .collect();
        eprint!("{}", views::ranks::summary_text(&figures));
        if let Some(share) = &self.core_share {
            eprint!("{}", share.note());
        }
        ok
    }
}

/// What one rank recorded: its events (all of them, from `kept` when a recorder read the log,
/// else from the session's log), its engine's worker names, and as its `offset_ns` when its
/// engine's clock started (ns since the Unix epoch), which [`RankViews::write`] makes relative.
pub(crate) fn recorded(
    session: &Session,
    rank: usize,
    kept: Option<Vec<engine::Event>>,
) -> RankRun {
    let events = kept
        .or_else(|| session.event_log().map(|log| log.events()))
        .unwrap_or_default();
    RankRun {
        rank,
        events,
        worker_names: session.worker_names(),
        offset_ns: clock_start_ns(session.now_ns()),
    }
}

/// When a clock that reads `now_ns` started, in ns since the Unix epoch.
fn clock_start_ns(now_ns: u64) -> u64 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    wall.saturating_sub(now_ns)
}

/// Gathers every rank's recording on rank 0 over MPI: each is sent as its start time and its
/// events in a Chrome trace's `depEvents` (see `dep_views::trace`). Every rank's, in rank
/// order, on rank 0; `None` on the others and when the gathering failed (said on stderr).
#[cfg(feature = "mpi")]
pub(crate) fn gather_over_mpi(
    mpi: &crate::mpi_ranks::MpiRanks,
    own: RankRun,
) -> Option<Vec<RankRun>> {
    let replay = views::Replay::new(own.events, own.worker_names);
    let mut payload = own.offset_ns.to_le_bytes().to_vec();
    payload.extend_from_slice(views::trace::chrome_trace(&replay).as_bytes());
    let gathered = mpi.gather(payload)?;
    let mut runs = Vec::with_capacity(gathered.len());
    for (rank, payload) in gathered.into_iter().enumerate() {
        let decoded = payload
            .split_first_chunk::<8>()
            .ok_or_else(|| "a short message".to_string())
            .and_then(|(start, trace)| {
                let text = std::str::from_utf8(trace).map_err(|error| error.to_string())?;
                let replay = views::trace::read_trace(text).map_err(|error| error.to_string())?;
                Ok((u64::from_le_bytes(*start), replay))
            });
        match decoded {
            Ok((start, replay)) => runs.push(RankRun {
                rank,
                events: replay.events().to_vec(),
                worker_names: replay.worker_names().to_vec(),
                offset_ns: start,
            }),
            Err(message) => {
                eprintln!("dep: the views of rank {rank} could not be read: {message}");
                return None;
            }
        }
    }
    Some(runs)
}
