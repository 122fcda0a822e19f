//! The live display under a running cell: one `display_data` with a `transient.display_id`,
//! then `update_display_data` with the same id while ops run, at most ten a second, and the
//! final state last.
//!
//! A watcher thread draws it from the session's `dep_views::live::LiveSource` (the engine's
//! monitor and event log, both of which may be read while the executor thread pushes or blocks
//! in a `print`), so the display moves even when the session is busy. What it draws is the one
//! live view model of `dep_views::live`, folded incrementally (`LiveFold`), rendered as HTML
//! with its text as the fallback. The executor stops the watcher, then sends the final state
//! itself: after `stop` returns nothing else touches the display, so the final state is the
//! last one a client sees.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use dep_engine::lock;
use dep_views::live::{LiveFold, LiveSource};
use jupyter_protocol as jp;

use crate::iopub::CellOutput;

/// The least time between two updates (so at most ten a second).
const UPDATE_INTERVAL: Duration = Duration::from_millis(100);
/// How often the watcher looks for the first op before the display exists.
const FIRST_LOOK_INTERVAL: Duration = Duration::from_millis(10);
/// A live display being drawn by its watcher thread.
pub(crate) struct LiveDisplay {
    stop: mpsc::Sender<()>,
    watcher: thread::JoinHandle<()>,
    shared: Arc<Shared>,
}

/// What the watcher thread and the executor share; the lock is held while one of them draws,
/// so exactly one `display_data` goes out and every later drawing is an update.
struct Shared {
    source: LiveSource,
    output: CellOutput,
    display_id: String,
    drawn: Mutex<Drawn>,
}

struct Drawn {
    shown: bool,
    last_html: String,
    /// The cell as read so far: each drawing reads on from there.
    cell: LiveFold,
}

/// A handle that makes the display appear before the cell's first printed line, so that the
/// display sits above the output it explains.
#[derive(Clone)]
pub(crate) struct ShowBeforeOutput(Arc<Shared>);

impl ShowBeforeOutput {
    pub(crate) fn show(&self) {
        if !lock(&self.0.drawn).shown {
            self.0.draw(false, None);
        }
    }
}

impl LiveDisplay {
    /// Starts watching: the display appears as soon as an op is pending, or before the first
    /// printed output of a cell that pushed ops.
    pub(crate) fn start(source: LiveSource, output: CellOutput) -> LiveDisplay {
        let cell = LiveFold::new(&source);
        let shared = Arc::new(Shared {
            source,
            output,
            display_id: uuid::Uuid::new_v4().to_string(),
            drawn: Mutex::new(Drawn {
                shown: false,
                last_html: String::new(),
                cell,
            }),
        });
        let (stop, stopped) = mpsc::channel::<()>();
        let watcher = {
            let shared = shared.clone();
            thread::Builder::new()
                .name("dep-display".to_string())
                .spawn(move || watch(&shared, &stopped))
                .expect("spawning the display thread")
        };
        LiveDisplay {
            stop,
            watcher,
            shared,
        }
    }

    pub(crate) fn show_before_output(&self) -> ShowBeforeOutput {
        ShowBeforeOutput(self.shared.clone())
    }

    /// Stops the watcher and shows the final state, `note` under the title. A cell that ran
    /// no op shows nothing.
    pub(crate) fn finish(self, note: Option<String>) {
        let _ = self.stop.send(());
        // The watcher only draws; if it panicked, the final state below still goes out.
        let _ = self.watcher.join();
        self.shared.draw(true, note);
    }
}

impl Shared {
    /// Draws the display now: a `display_data` the first time, an update after that (skipped
    /// when nothing changed). Nothing is drawn while the cell has no op.
    fn draw(&self, finished: bool, note: Option<String>) {
        let mut drawn = lock(&self.drawn);
        let view = drawn.cell.view(&self.source, finished);
        if view.n_ops() == 0 && !drawn.shown {
            return;
        }
        let html = view.html(note.as_deref());
        if drawn.shown && html == drawn.last_html {
            return;
        }
        let data = jp::Media::new(vec![
            jp::MediaType::Html(html.clone()),
            jp::MediaType::Plain(view.text(note.as_deref())),
        ]);
        if drawn.shown {
            self.output
                .send(jp::UpdateDisplayData::new(data, &self.display_id));
        } else {
            self.output.send(display_data(data, &self.display_id));
            drawn.shown = true;
        }
        drawn.last_html = html;
    }
}

fn watch(shared: &Shared, stopped: &mpsc::Receiver<()>) {
    loop {
        let shown = lock(&shared.drawn).shown;
        let wait = if shown {
            UPDATE_INTERVAL
        } else {
            FIRST_LOOK_INTERVAL
        };
        match stopped.recv_timeout(wait) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        if !shown && shared.source.monitor.n_unfinished() == 0 {
            continue;
        }
        shared.draw(false, None);
    }
}

fn display_data(data: jp::Media, display_id: &str) -> jp::DisplayData {
    jp::DisplayData {
        data,
        metadata: Default::default(),
        transient: Some(jp::Transient {
            display_id: Some(display_id.to_string()),
        }),
    }
}
