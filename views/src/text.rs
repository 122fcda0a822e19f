//! Text views for terminals: queues, ops with why-waiting, a compact timeline, the summary.
//!
//! Every function returns a `String` of whole lines, at most [`TextStyle::width`] columns wide
//! (ANSI escapes aside), coloured by [`crate::color`] when [`TextStyle::color`] is on.

use std::collections::HashSet;

use dep_engine::OpState;

use crate::color::{paint, Role};
use crate::frame::{Frame, FrameOp};
use crate::replay::{Lane, Replay};
use crate::stepper::Stepper;
use crate::summary::Summary;
use crate::util::{self, format_ns, pad, truncate, width};

/// How text views are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextStyle {
    /// Colour with ANSI escapes.
    pub color: bool,
    /// Columns available (at least 40 are used).
    pub width: usize,
}

impl TextStyle {
    /// No colour, `width` columns: for files, pipes and tests.
    pub fn plain(width: usize) -> TextStyle {
        TextStyle {
            color: false,
            width,
        }
    }

    /// Colour unless the `NO_COLOR` environment variable is set and not empty
    /// (<https://no-color.org>), `width` columns.
    pub fn terminal(width: usize) -> TextStyle {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
        TextStyle {
            color: !no_color,
            width,
        }
    }

    /// The columns text is laid out in: the width, at least 40.
    pub fn columns(&self) -> usize {
        self.width.max(40)
    }

    fn paint(&self, text: &str, role: Role) -> String {
        paint(text, role, self.color)
    }
}

/// One row per live variable: its name, then its pending accesses in queue order, each an R or W
/// with the op's statement and line, `●` when granted and `○` while it waits.
pub fn queues(frame: &Frame, style: &TextStyle) -> String {
    let mut text = String::new();
    text.push_str(&style.paint("queues  (● granted, ○ waiting)", Role::Dim));
    text.push('\n');
    if frame.vars.is_empty() {
        text.push_str("  no live variables\n");
        return text;
    }
    // As wide as the longest name, so that names are shown whole and told apart, as long as
    // a queue's first entry still has room; a name wider still is cut in its middle, its end
    // kept (`learning_…rate_b`).
    let most = (style.columns())
        .saturating_sub(QUEUE_ROW_ROOM)
        .max(QUEUE_LEAST_NAME);
    let name_width = frame
        .vars
        .iter()
        .map(|var| width(&var.name))
        .max()
        .unwrap_or(1)
        .clamp(1, most);
    for var in &frame.vars {
        let name = util::cut_middle(&var.name, name_width);
        let mut row = format!("  {name}{} ", " ".repeat(name_width - width(&name)));
        let mut used = width(&row);
        if var.queue.is_empty() {
            row.push_str(&style.paint("idle", Role::Dim));
        }
        for (index, access) in var.queue.iter().enumerate() {
            let op = frame.op(access.op);
            let label = op.map_or_else(|| access.op.to_string(), queue_label);
            let entry = format!(
                "{} {} {label}",
                if access.granted { "●" } else { "○" },
                if access.write { "W" } else { "R" },
            );
            let separator = if index == 0 { "" } else { " │ " };
            let n_left = var.queue.len() - index;
            let more = format!(" … +{n_left}");
            let fits = used + separator.len() + width(&entry) + more.len() <= style.columns()
                || (n_left == 1 && used + 3 + width(&entry) <= style.columns());
            if !fits {
                row.push_str(&style.paint(&more, Role::Dim));
                break;
            }
            let role = match (op.map(|op| op.state), access.granted) {
                (Some(state), _) if state != OpState::Waiting => Role::State(state),
                (_, true) => Role::State(OpState::Ready),
                (_, false) => Role::State(OpState::Waiting),
            };
            row.push_str(separator);
            row.push_str(&style.paint(&entry, role));
            used += width(separator) + width(&entry);
        }
        text.push_str(&row);
        text.push('\n');
    }
    text
}

/// The columns a queue row keeps beside a long name: the indent and the space after the name,
/// a first entry of [`QUEUE_LABEL_COLUMNS`] with its marks (`● W `), and the room of the
/// separator or count that follows it.
const QUEUE_ROW_ROOM: usize = 3 + 4 + QUEUE_LABEL_COLUMNS + 3;
/// The fewest columns of the queues' name column where the terminal is too narrow for more.
const QUEUE_LEAST_NAME: usize = 12;

/// How many columns a queue entry gives its op's statement and place together, unless the place
/// alone leaves the statement fewer than [`QUEUE_LEAST_STATEMENT`].
const QUEUE_LABEL_COLUMNS: usize = 32;
/// The fewest columns a queue entry gives its op's statement.
const QUEUE_LEAST_STATEMENT: usize = 12;

/// An op as a queue entry names it: its statement cut to fit, keeping the loop counters at its
/// end ([`truncate`]), then its place whole (`set(x, 0, work(70… i=0 (<repl>:2)`), so that the
/// entries of a loop's ops, and of ops on different lines, stay told apart.
fn queue_label(op: &FrameOp) -> String {
    let place = util::line_column(op.line, op.place.as_deref());
    let place = match (&op.place, place.is_empty()) {
        (_, true) => String::new(),
        (Some(_), false) => format!(" ({place})"),
        (None, false) => format!(" (line {place})"),
    };
    let room = QUEUE_LABEL_COLUMNS
        .saturating_sub(width(&place))
        .max(QUEUE_LEAST_STATEMENT);
    format!("{}{place}", truncate(&op.label, room))
}

/// The ops table: statement, line, state, worker, start and duration; under every waiting op,
/// why it waits (`↳ D = B * C (line 4) waits for B: written by …, running on cpu:1`).
pub fn ops(frame: &Frame, style: &TextStyle) -> String {
    ops_where(frame, style, |_| true, |_| 0)
}

/// What the start column of [`ops`] counts from when its frame is the session's (`:ops`), not
/// an input's as a live panel's is: the two show one op's start apart, and each says where it
/// counts from.
pub fn session_clock_note(frame: &Frame) -> String {
    format!(
        "start: on the session's clock, at {} now (a live panel counts from its input's first push)",
        format_ns(frame.time_ns)
    )
}

/// [`ops`] listing only the ops that hold a place in the engine (a live panel's room): the
/// unfinished ones and the cancelled ones still in their queues until their turn
/// ([`Frame::holds_a_place`]).
pub fn unfinished_ops(frame: &Frame, style: &TextStyle) -> String {
    ops_where(frame, style, |op| frame.holds_a_place(op), |_| 0)
}

/// The ops table of the ops of `frame` that are `shown`, each after a line counting the ops left
/// out just before it (`left_out_before`: a cut replay's ops finished before its cut, pushed
/// between two ops it carries), where there are any; the others are still there to name in the
/// reasons for waiting.
fn ops_where(
    frame: &Frame,
    style: &TextStyle,
    shown: impl Fn(&FrameOp) -> bool,
    left_out_before: impl Fn(&FrameOp) -> usize,
) -> String {
    let shown_ops: Vec<&FrameOp> = frame.ops.iter().filter(|op| shown(op)).collect();
    // The line column: a number, or a place (`cell[2]:3`) where a front-end named it.
    let lines: Vec<String> = shown_ops
        .iter()
        .map(
            |op| match crate::util::line_column(op.line, op.place.as_deref()) {
                line if line.is_empty() => "-".to_string(),
                line => line,
            },
        )
        .collect();
    let line_width = lines.iter().map(|line| width(line)).fold(5, usize::max);
    // The worker column: as wide as the longest worker's name (`cpu->gpu1`), so that no two
    // read the same.
    let worker_width = shown_ops
        .iter()
        .filter_map(|op| op.worker.as_deref())
        .map(width)
        .fold(8, usize::max);
    let fixed = line_width + 1 + 9 + 1 + worker_width + 1 + 10 + 1 + 10;
    let label_width = style.columns().saturating_sub(fixed + 1).max(12);
    let mut text = String::new();
    let header = format!(
        "{} {:>line_width$} {:<9} {:<worker_width$} {:>10} {:>10}",
        pad("op", label_width),
        "line",
        "state",
        "worker",
        "start",
        "duration"
    );
    text.push_str(&style.paint(header.trim_end(), Role::Dim));
    text.push('\n');
    if shown_ops.is_empty() {
        text.push_str("  no ops\n");
        return text;
    }
    for (op, line) in shown_ops.into_iter().zip(lines) {
        let n_left_out = left_out_before(op);
        if n_left_out > 0 {
            let note = format!("  … {} done before the cut", count(n_left_out, "op"));
            text.push_str(&style.paint(&note, Role::Dim));
            text.push('\n');
        }
        let duration = match (op.started_ns, op.finished_ns) {
            (Some(start), Some(end)) => format_ns(end.saturating_sub(start)),
            (Some(start), None) => format!("{}+", format_ns(frame.time_ns.saturating_sub(start))),
            _ => "-".to_string(),
        };
        let row = format!(
            "{} {:>line_width$} {} {:<worker_width$} {:>10} {:>10}",
            pad(&op.label, label_width),
            line,
            style.paint(&format!("{:<9}", op.state.name()), Role::State(op.state)),
            op.worker.as_deref().unwrap_or("-"),
            op.started_ns.map_or_else(|| "-".to_string(), format_ns),
            duration,
        );
        text.push_str(row.trim_end());
        text.push('\n');
        if let Some(reason) = frame.why_waiting(op) {
            let sentence = format!("{} {reason}", op.describe());
            for (index, line) in wrap(&sentence, style.columns().saturating_sub(4))
                .iter()
                .enumerate()
            {
                let lead = if index == 0 { "  ↳ " } else { "    " };
                text.push_str(lead);
                text.push_str(&style.paint(line, Role::State(OpState::Waiting)));
                text.push('\n');
            }
        }
    }
    text
}

/// A compact Gantt chart: one lane per worker (then one per device lane, where GPU kernels ran),
/// each op a bar holding as much of its statement as fits, `·` where the lane is idle; bars of
/// the critical path are drawn with `━`. Its axis is at least `span_ns` long when given, so that
/// two timelines share a scale. With `of`, its heading names what it draws (`timeline of
/// cell[3]`) when that is not the whole run.
pub fn timeline(
    replay: &Replay,
    style: &TextStyle,
    span_ns: Option<u64>,
    of: Option<&str>,
) -> String {
    let lanes = replay.timeline_lanes();
    let name_width = lanes
        .iter()
        .map(|lane| width(&replay.lane_name(lane)))
        .max()
        .unwrap_or(4)
        .clamp(4, 12);
    let n_cols = style.columns().saturating_sub(name_width + 5).max(10);
    let (start, end) = replay.span_ns();
    let axis_end = span_ns.map_or(end, |span_ns| end.max(start.saturating_add(span_ns)));
    let span = (axis_end - start).max(1) as f64;
    let column = |time: u64| ((time.saturating_sub(start)) as f64 / span * n_cols as f64) as usize;
    let critical: HashSet<_> = replay.critical_path().into_iter().collect();
    let mut text = String::new();
    text.push_str(&style.paint(
        &format!(
            "timeline{}  ({} wall{}; ━ critical path)",
            of.map_or(String::new(), |of| format!(" of {of}")),
            format_ns(end - start),
            origin_note(start)
        ),
        Role::Dim,
    ));
    text.push('\n');
    for lane in lanes {
        let mut cells: Vec<(char, Option<Role>)> = vec![('·', None); n_cols];
        for bar in replay.bars(&lane) {
            let op = bar.op;
            let first = column(bar.start_ns).min(n_cols - 1);
            let last = column(bar.end_ns).clamp(first + 1, n_cols);
            let on_path = critical.contains(&op.id) && matches!(lane, Lane::Worker(_));
            let role = if on_path {
                Role::Critical
            } else {
                Role::State(op.state)
            };
            let fill = if on_path { '━' } else { '─' };
            let mut label = op.label.chars();
            for (offset, cell) in cells[first..last].iter_mut().enumerate() {
                let ch = if offset == 0 && last - first > 1 {
                    '▕'
                } else {
                    label.next().unwrap_or(fill)
                };
                *cell = (ch, Some(role));
            }
        }
        text.push_str(&format!(
            "  {} │",
            pad(&replay.lane_name(&lane), name_width)
        ));
        let mut run = String::new();
        let mut run_role: Option<Role> = None;
        for (ch, role) in cells {
            if role != run_role && !run.is_empty() {
                text.push_str(&paint_run(&run, run_role, style));
                run.clear();
            }
            run_role = role;
            run.push(ch);
        }
        text.push_str(&paint_run(&run, run_role, style));
        text.push_str("│\n");
    }
    let axis_left = format!("  {} └ 0", " ".repeat(name_width));
    let axis_right = format_ns(axis_end - start);
    let gap = (name_width + 4 + n_cols + 1).saturating_sub(width(&axis_left) + width(&axis_right));
    text.push_str(&style.paint(
        &format!("{axis_left}{}{axis_right}", " ".repeat(gap)),
        Role::Dim,
    ));
    text.push('\n');
    text
}

fn paint_run(run: &str, role: Option<Role>, style: &TextStyle) -> String {
    match role {
        Some(role) => style.paint(run, role),
        None => style.paint(run, Role::Idle),
    }
}

/// The summary: ops by state, wall time, busy time per worker, parallelism, critical path.
pub fn summary(summary: &Summary, style: &TextStyle) -> String {
    let states: Vec<String> = summary
        .n_by_state
        .iter()
        .map(|(state, count)| {
            style.paint(&format!("{count} {}", state.name()), Role::State(*state))
        })
        .collect();
    // An empty run has no states, no busy time and no critical path to show.
    if summary.n_ops == 0 {
        return "summary: no ops\n".to_string();
    }
    let mut text = format!(
        "summary: {} ({}), wall {}\n",
        count(summary.n_ops, "op"),
        states.join(", "),
        format_ns(summary.wall_ns)
    );
    let busy: Vec<String> = summary
        .busy_ns
        .iter()
        .map(|(worker, busy)| {
            let share = util::format_percent(*busy, summary.wall_ns);
            format!("{worker} {} ({share})", format_ns(*busy))
        })
        .collect();
    for line in wrap(&format!("busy: {}", busy.join(", ")), style.columns() - 2) {
        text.push_str(&format!("  {line}\n"));
    }
    text.push_str(&format!(
        "  parallelism: {:.2} (total busy time / wall time)\n",
        summary.parallelism
    ));
    if !summary.device_busy_ns.is_empty() {
        let kernels: Vec<String> = summary
            .device_busy_ns
            .iter()
            .map(|(lane, busy)| format!("{lane} {}", format_ns(*busy)))
            .collect();
        let mut line = format!("kernels: {}", kernels.join(", "));
        if let Some(gaps) = &summary.kernel_gaps {
            line.push_str(&format!(
                "; device idle between dependent kernels: mean {}, max {} over {}",
                format_ns(gaps.mean_ns),
                format_ns(gaps.max_ns),
                count(gaps.n_pairs, "pair")
            ));
        }
        for line in wrap(&line, style.columns() - 2) {
            text.push_str(&format!("  {line}\n"));
        }
    }
    let mut path: Vec<&str> = summary
        .critical_path
        .iter()
        .map(|(_, describe)| describe.as_str())
        .collect();
    let n_path = summary.critical_path_ops;
    // A long path (a loop's chain) shows its three first and three last ops.
    let elided = format!("… {} more …", n_path.saturating_sub(path.len()));
    if n_path > path.len() {
        path.insert(path.len().min(3), elided.as_str());
    }
    let mut path_text = format!(
        "critical path: {} over {}:",
        format_ns(summary.critical_path_ns),
        count(n_path, "op"),
    );
    for (index, op) in path.iter().enumerate() {
        // Non-breaking spaces keep each statement on one line; `wrap` breaks at the arrows. A
        // statement longer than a line (a bulk's) breaks at its own spaces, not inside a name.
        path_text.push_str(if index == 0 { " " } else { " → " });
        match util::width(op) + 2 < style.columns().saturating_sub(2) {
            true => path_text.push_str(&op.replace(' ', "\u{a0}")),
            false => path_text.push_str(op),
        }
    }
    for line in wrap(&path_text, style.columns() - 2) {
        let line = line.replace('\u{a0}', " ");
        text.push_str(&format!("  {}\n", style.paint(&line, Role::Critical)));
    }
    text
}

/// One step of a replay as a listing prints it: which event, then the queues and every op
/// pushed so far (of a run's last events, every op they hold, with lines counting the ops left
/// out before, between and after them).
pub fn step(stepper: &Stepper, style: &TextStyle) -> String {
    let window = 0..stepper.n_pushed();
    let frame = stepper.frame();
    format!(
        "{}\n{}{}",
        step_heading(stepper, &frame),
        queues(&frame, style),
        ops_around(stepper, &frame, window, style)
    )
}

/// One step of a replay on a screen of `rows` lines of [`TextStyle::width`] columns: which
/// event, the queues (at most about half the rows, then a line counting those left out), and
/// as many ops as the other rows hold around the one the event concerns (a long run's thousands
/// of ops cannot all show), with how many are left out before and after. That op always shows,
/// with its row of the table; every line is cut to the width ([`fit_line`]), so that none wraps
/// and the heading stays on the screen.
pub fn step_on_screen(stepper: &Stepper, style: &TextStyle, rows: usize) -> String {
    let fit = |text: &str| -> Vec<String> {
        text.lines()
            .map(|line| fit_line(line, style.width))
            .collect()
    };
    let queued = stepper.frame_of(0..0);
    let queue_lines = at_most_half(fit(&busy_queues(&queued, style)), rows, style);
    // The heading and the queues; the ops take the rest: their header, a line for those left
    // out on each side, and the ops with their reasons for waiting, fewer where these run long.
    let room_for_ops = rows.saturating_sub(1 + queue_lines.len()).max(4);
    let mut n_ops = room_for_ops.saturating_sub(3).max(3);
    let (heading, mut op_lines) = loop {
        let window = stepper.window(n_ops);
        let frame = stepper.frame_of(window.clone());
        let op_lines = fit(&ops_around(stepper, &frame, window, style));
        if op_lines.len() <= room_for_ops || n_ops == 1 {
            break (step_heading(stepper, &frame), op_lines);
        }
        n_ops -= 1;
    };
    // One op whose reasons for waiting run past the rows: its row shows, the end of them not.
    op_lines.truncate(room_for_ops);
    let mut text = fit_line(&heading, style.width);
    text.push('\n');
    for line in queue_lines.iter().chain(&op_lines) {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// The lines of [`busy_queues`] on a screen of `rows` lines: all of them when they take at most
/// half of it, else the first ones and a line counting the queues left out, then the idle
/// variables' line, in half of it (at least three lines).
fn at_most_half(mut lines: Vec<String>, rows: usize, style: &TextStyle) -> Vec<String> {
    let room = (rows / 2).max(3);
    if lines.len() <= room {
        return lines;
    }
    let idle = lines
        .last()
        .filter(|line| strip_escapes(line).starts_with("  idle: "))
        .cloned();
    if idle.is_some() {
        lines.pop();
    }
    // The heading, the queues kept, the count of those left out, the idle line.
    let n_kept = room - 1 - usize::from(idle.is_some());
    let n_cut = lines.len() - n_kept;
    lines.truncate(n_kept);
    let note = format!(
        "  … {n_cut} more {}",
        if n_cut == 1 { "queue" } else { "queues" }
    );
    lines.push(fit_line(&style.paint(&note, Role::Dim), style.width));
    lines.extend(idle);
    lines
}

/// One step of a replay as [`step`] shows it, every queue included, but with at most `room`
/// ops, those around the one the event concerns, and how many are left out before and after:
/// what `dep replay` lists at each step off a terminal, so that a long run's listing grows with
/// its steps, not with their square.
pub fn step_around(stepper: &Stepper, style: &TextStyle, room: usize) -> String {
    let window = stepper.window(room);
    let frame = stepper.frame_of(window.clone());
    format!(
        "{}\n{}{}",
        step_heading(stepper, &frame),
        queues(&frame, style),
        ops_around(stepper, &frame, window, style)
    )
}

/// The ops table of `frame` with only the ops at `window` (positions among the ops pushed by
/// the stepper's step), after a line counting the run's ops pushed before them and before one
/// counting those pushed after them.
fn ops_around(
    stepper: &Stepper,
    frame: &Frame,
    window: std::ops::Range<usize>,
    style: &TextStyle,
) -> String {
    let (n_earlier, n_later) = stepper.ops_outside(&window);
    let left_out_between = stepper.ops_left_out_between(&window);
    let shown = stepper.ids(window);
    let table = ops_where(
        frame,
        style,
        |op| shown.contains(&op.id),
        |op| left_out_between.get(&op.id).copied().unwrap_or(0),
    );
    let mut text = String::new();
    let mut table_lines = table.lines();
    if let Some(header) = table_lines.next() {
        text.push_str(header);
        text.push('\n');
    }
    if n_earlier > 0 {
        let note = format!("  … {n_earlier} earlier {}", ops_word(n_earlier));
        text.push_str(&style.paint(&note, Role::Dim));
        text.push('\n');
    }
    for line in table_lines {
        text.push_str(line);
        text.push('\n');
    }
    if n_later > 0 {
        let note = format!("  … {n_later} later {}", ops_word(n_later));
        text.push_str(&style.paint(&note, Role::Dim));
        text.push('\n');
    }
    text
}

/// The queues of the variables some op waits for or holds, then the idle ones on one line.
fn busy_queues(frame: &Frame, style: &TextStyle) -> String {
    let (busy, idle): (Vec<_>, Vec<_>) = frame.vars.iter().partition(|var| !var.queue.is_empty());
    let busy_frame = Frame {
        vars: busy.into_iter().cloned().collect(),
        ..frame.clone()
    };
    let mut text = queues(&busy_frame, style);
    if busy_frame.vars.is_empty() && !idle.is_empty() {
        text.truncate(text.find('\n').map_or(text.len(), |end| end + 1));
    }
    if !idle.is_empty() {
        let names: Vec<&str> = idle.iter().map(|var| &*var.name).collect();
        let line = format!("  idle: {}", names.join(" "));
        text.push_str(&style.paint(&truncate(&line, style.columns()), Role::Dim));
        text.push('\n');
    }
    text
}

/// `step 3/40 at 1.20 ms: pushed D = B * C (line 4)`, numbered as the whole run's steps.
fn step_heading(stepper: &Stepper, frame: &Frame) -> String {
    let replay = stepper.replay();
    let n_events = stepper.step();
    let prologue = stepper.prologue();
    let (time_ns, event) = match n_events {
        n if prologue.is_cut() && n == stepper.first_step() => (
            prologue.cut_ns,
            format!(
                "the state after the run's first {} events",
                prologue.n_run_events_before
            ),
        ),
        0 => (frame.time_ns, "the start, before any event".to_string()),
        n => (frame.time_ns, replay.describe_event(n - 1)),
    };
    format!(
        "step {}/{} at {}: {event}",
        stepper.run_step(n_events),
        stepper.run_step(replay.events().len()),
        format_ns(time_ns)
    )
}

/// `line` cut to at most `columns` columns on a terminal (a wide character takes two), the ANSI
/// escapes in it kept, as they take none: `…` in its last column where it was cut, then a
/// reset of the colours where an escape came before the cut, so that no colour runs on past
/// it. A line that fits is returned as it is. What a live display draws goes through this: a
/// line wider than the terminal would wrap, and the display would lose count of its rows.
pub fn fit_line(line: &str, columns: usize) -> String {
    if shown_width(line) <= columns {
        return line.to_string();
    }
    let mut cut = String::new();
    let mut used = 0;
    let mut escaped = false;
    let mut chars = line.chars();
    while let Some(ch) = chars.next() {
        if ch == '\x1b' {
            cut.push(ch);
            cut.push_str(&escape_rest(&mut chars));
            escaped = true;
            continue;
        }
        let n_columns = unicode_width::UnicodeWidthChar::width(ch).unwrap_or(0);
        // Room is left for the `…`.
        if used + n_columns + 1 > columns {
            break;
        }
        cut.push(ch);
        used += n_columns;
    }
    if columns > 0 {
        cut.push('…');
    }
    if escaped {
        cut.push_str("\x1b[0m");
    }
    cut
}

/// Every line of `text` through [`fit_line`], each ended by a new line.
pub fn fit_lines(text: &str, columns: usize) -> String {
    let mut fitted = String::with_capacity(text.len());
    for line in text.lines() {
        fitted.push_str(&fit_line(line, columns));
        fitted.push('\n');
    }
    fitted
}

/// The columns `text` takes on a terminal, its ANSI escapes taking none.
pub fn shown_width(text: &str) -> usize {
    width(&strip_escapes(text))
}

/// `text` without its ANSI escapes: what a terminal shows of it.
fn strip_escapes(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(ch) = chars.next() {
        if ch == '\x1b' {
            escape_rest(&mut chars);
        } else {
            shown.push(ch);
        }
    }
    shown
}

/// The rest of an escape after its `ESC`, taken from `chars`: a control sequence (`[`, its
/// parameters, up to its final byte, `@` to `~`), or the one character of a short escape.
fn escape_rest(chars: &mut std::str::Chars<'_>) -> String {
    let mut rest = String::new();
    if let Some(first) = chars.next() {
        rest.push(first);
        if first == '[' {
            for ch in chars.by_ref() {
                rest.push(ch);
                if ('@'..='~').contains(&ch) {
                    break;
                }
            }
        }
    }
    rest
}

/// Splits `text` into lines of at most `width` characters, at spaces where it can.
fn wrap(text: &str, columns: usize) -> Vec<String> {
    let columns = columns.max(10);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let n_line = util::width(&line);
        let n_word = util::width(word);
        if n_line > 0 && n_line + 1 + n_word > columns {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
        while util::width(&line) > columns {
            let head = util::head(&line, columns);
            // A wide character wider than the line still goes: nothing is left behind forever.
            let head = if head.is_empty() {
                line.chars().take(1).collect()
            } else {
                head
            };
            line = line[head.len()..].to_string();
            lines.push(head);
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// Where a timeline's 0 lies on the run's clock (the one traces, replays and their steps count
/// in), when the first op was pushed after that clock's start: `, from the first push at 1.15 ms`.
pub(crate) fn origin_note(first_push_ns: u64) -> String {
    if first_push_ns == 0 {
        return String::new();
    }
    format!(", from the first push at {}", format_ns(first_push_ns))
}

/// The plural ending of a regular noun for `n` of it: "" for 1, "s" for any other count.
pub fn plural<N: Copy + PartialEq + From<u8>>(n: N) -> &'static str {
    if n == N::from(1) {
        ""
    } else {
        "s"
    }
}

/// `n` and a regular noun agreeing with it: "1 op", "2 ops", "0 edges".
pub fn count<N: Copy + std::fmt::Display + PartialEq + From<u8>>(n: N, noun: &str) -> String {
    let ending = plural(n);
    format!("{n} {noun}{ending}")
}

/// "op" or "ops", for `n` of them.
fn ops_word(n: usize) -> &'static str {
    if n == 1 {
        "op"
    } else {
        "ops"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line wider than the terminal is cut to its columns, counted as a terminal shows them
    /// (a wide character two, an escape none), with `…` at the cut; one that fits is left as
    /// it is, escapes and all.
    #[test]
    fn a_line_is_cut_to_the_columns_a_terminal_shows() {
        assert_eq!(fit_line("abcdef", 6), "abcdef");
        assert_eq!(fit_line("abcdef", 4), "abc…");
        assert_eq!(fit_line("日本語です", 6), "日本…");
        let coloured = paint("running", Role::State(OpState::Running), true);
        assert_eq!(fit_line(&coloured, 7), coloured);
        assert_eq!(shown_width(&coloured), 7);
        // Cut inside the colour: the colour is reset after the cut, and nothing else shows.
        let cut = fit_line(&format!("op {coloured} on cpu:0"), 8);
        assert_eq!(cut, "op \x1b[1;34mrunn…\x1b[0m");
        assert_eq!(shown_width(&cut), 8);
        assert_eq!(fit_lines("abcdef\nab\n", 3), "ab…\nab\n");
    }

    /// A queue entry cut to fit keeps its op's loop counters and its place whole: the writes of
    /// a loop's ops to one variable read apart (they were all `W C = work(300, ones(2) * i) i…`,
    /// the counters and the line cut off).
    #[test]
    fn a_queue_entry_cut_to_fit_keeps_the_loop_counters_and_the_place() {
        let op = |id: u64, label: &str, place: &str| FrameOp {
            id: dep_engine::OpId(id),
            label: label.into(),
            line: 1,
            place: Some(place.into()),
            state: OpState::Waiting,
            device: dep_engine::Device::Cpu,
            worker: None,
            started_ns: None,
            finished_ns: None,
            waits_on: Vec::new(),
        };
        let access = |id: u64| dep_engine::AccessSnapshot {
            op: dep_engine::OpId(id),
            write: true,
            granted: id == 0,
        };
        let frame = Frame {
            time_ns: 0,
            vars: vec![crate::frame::FrameVar {
                id: dep_engine::VarId(0),
                name: "C".into(),
                queue: vec![access(0), access(1), access(2)],
            }],
            ops: vec![
                op(0, "C = work(300, ones(2) * i) i=0", "<repl>:1"),
                op(1, "C = work(300, ones(2) * i) i=1", "<repl>:1"),
                op(2, "C = work(300, ones(2) * i) i=2", "cell[12]:3"),
            ],
            named: Vec::new(),
        };
        let text = queues(&frame, &TextStyle::plain(200));
        let row = text.lines().nth(1).unwrap();
        assert_eq!(
            row,
            "  C ● W C = work(300, on… i=0 (<repl>:1) │ ○ W C = work(300, on… i=1 (<repl>:1) \
             │ ○ W C = work(300, … i=2 (cell[12]:3)",
            "{text}"
        );
        // A short label is left whole.
        assert_eq!(
            queue_label(&op(3, "B = A + 1", "<repl>:4")),
            "B = A + 1 (<repl>:4)"
        );
    }

    /// The queues' name column is as wide as the longest name, as far as the terminal allows,
    /// and a name wider still is cut in its middle: names were cut at 12 columns, at their end,
    /// so that `learning_rate_layer_one_w` and `..._two_w` both read `learning_ra…`.
    #[test]
    fn queue_names_are_shown_whole_or_cut_apart() {
        let names = [
            "learning_rate_layer_one_w",
            "learning_rate_layer_two_w",
            "x",
        ];
        let frame = Frame {
            time_ns: 0,
            vars: (0..3u64)
                .map(|id| crate::frame::FrameVar {
                    id: dep_engine::VarId(id),
                    name: names[id as usize].into(),
                    queue: vec![dep_engine::AccessSnapshot {
                        op: dep_engine::OpId(id),
                        write: true,
                        granted: true,
                    }],
                })
                .collect(),
            ops: (0..3u64)
                .map(|id| FrameOp {
                    id: dep_engine::OpId(id),
                    label: format!("{} = ones(2)", names[id as usize]).into(),
                    line: id as u32 + 1,
                    place: None,
                    state: OpState::Running,
                    device: dep_engine::Device::Cpu,
                    worker: None,
                    started_ns: None,
                    finished_ns: None,
                    waits_on: Vec::new(),
                })
                .collect(),
            named: Vec::new(),
        };
        expect_test::expect![[r#"
            queues  (● granted, ○ waiting)
              learning_rate_layer_one_w ● W learning_rate_layer_on… (line 1)
              learning_rate_layer_two_w ● W learning_rate_layer_tw… (line 2)
              x                         ● W x = ones(2) (line 3)
        "#]]
        .assert_eq(&queues(&frame, &TextStyle::plain(100)));
        expect_test::expect![[r#"
            queues  (● granted, ○ waiting)
              learning_…er_one_w ● W learning_rate_layer_on… (line 1)
              learning_…er_two_w ● W learning_rate_layer_tw… (line 2)
              x                  ● W x = ones(2) (line 3)
        "#]]
        .assert_eq(&queues(&frame, &TextStyle::plain(60)));
    }

    /// The queues of a step take at most half the screen: the first ones, a line counting those
    /// left out, then the idle variables' line.
    #[test]
    fn the_queues_take_at_most_half_the_screen() {
        let style = TextStyle::plain(100);
        let mut lines = vec!["queues  (● granted, ○ waiting)".to_string()];
        lines.extend((0..20).map(|index| format!("  v{index} ● W v{index} = 1")));
        lines.push("  idle: a b".to_string());
        let kept = at_most_half(lines.clone(), 10, &style);
        assert_eq!(
            kept,
            [
                "queues  (● granted, ○ waiting)",
                "  v0 ● W v0 = 1",
                "  v1 ● W v1 = 1",
                "  … 18 more queues",
                "  idle: a b"
            ]
        );
        assert_eq!(at_most_half(lines[..4].to_vec(), 10, &style), lines[..4]);
    }
}
