//! HTML views: a live-state fragment (queues and ops tables) for notebooks, and a
//! self-contained replay player.
//!
//! The player renders the final state as static HTML on the server side, then a small script
//! (no dependencies) re-folds the embedded event log to show any step. Where scripts are stripped
//! (GitHub, some notebook viewers) the final state still shows; the script only enhances it.
//! The script's fold mirrors [`crate::Replay::frame_at`] and its markup mirrors [`fragment`];
//! `player_script_draws_what_rust_draws` runs the script under Node.js (when installed) and
//! checks that it draws, at every step, exactly the markup this module draws for that frame.

use std::fmt::Write;

use dep_engine::OpState;
use serde_json::json;

use crate::color::{self, Role};
use crate::frame::{Frame, FrameOp};
use crate::last_events::Prologue;
use crate::replay::Replay;
use crate::stepper::Stepper;
use crate::util::{escape_xml, format_ns};

const STYLE: &str = "
.dep-view { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
.dep-view table { border-collapse: collapse; margin: 6px 0; }
.dep-view th { text-align: left; color: #6b7280; font-weight: normal; padding: 2px 8px; }
.dep-view td { padding: 2px 8px; border-top: 1px solid #e5e7eb; vertical-align: top; }
.dep-view table.dep-queues, .dep-view table.dep-ops { table-layout: auto; margin: 6px 0; }
.dep-view table.dep-queues th, .dep-view table.dep-queues td, .dep-view table.dep-ops th, .dep-view table.dep-ops td { text-align: left; }
.dep-view .dep-acc { display: inline-block; padding: 1px 6px; margin: 1px 2px; border-radius: 3px; }
.dep-view .dep-acc.dep-queued { opacity: 0.55; border: 1px dashed #6b7280; }
.dep-view .dep-state { padding: 1px 6px; border-radius: 3px; }
.dep-view .dep-why td { border-top: none; color: #9a3412; padding-left: 24px; }
.dep-view .dep-controls { margin: 6px 0; }
.dep-view .dep-controls input[type=range] { width: 60%; vertical-align: middle; }
";

/// The queues and ops of a frame as an HTML fragment with its own `<style>`, for a notebook's
/// `display_data` (`text/html`).
pub fn fragment(frame: &Frame) -> String {
    format!(
        "<div class=\"dep-view\"><style>{}{}</style>{}</div>\n",
        STYLE,
        scoped_css(),
        tables(frame)
    )
}

/// [`fragment`] under a heading: a bold line (a notebook cell's number, engine and progress),
/// then, when given, a note in the failed colour (an error, an interrupt).
pub fn fragment_with_heading(frame: &Frame, heading: &str, note: Option<&str>) -> String {
    let mut head = format!(
        "<div class=\"dep-heading\" style=\"font-weight:bold;margin:2px 0\">{}</div>",
        escape_xml(heading)
    );
    if let Some(note) = note {
        let _ = write!(
            head,
            "<div class=\"dep-note\" style=\"color:{};margin:2px 0\">{}</div>",
            Role::State(OpState::Failed).hex(),
            escape_xml(note)
        );
    }
    format!(
        "<div class=\"dep-view\"><style>{}{}</style>{}\n{}</div>\n",
        STYLE,
        scoped_css(),
        head,
        tables(frame)
    )
}

/// How many op rows the player shows at a step: those around the op the step's event
/// concerns, with how many come before and after (a long run's every op at every step would
/// make each step megabytes long).
const PLAYER_OPS: usize = 100;

/// The fewest events between two of the player script's checkpoints (it keeps the state
/// between steps as [`Stepper`] does, with the same spacing).
const PLAYER_CHECKPOINT_EVERY: usize = 4096;

/// A self-contained HTML page that steps through every event of a replay: a slider and step
/// buttons, the queues and the ops around each step's event. Without scripts it shows the final
/// state. When the replay's events are a cut of a longer run's ([`crate::LastEvents`]), the
/// page starts from the state its `prologue` rebuilds, numbers the steps as the whole run does
/// and says what was cut.
pub fn player(replay: &Replay, title: &str, prologue: &Prologue) -> String {
    let mut stepper = Stepper::after(replay, prologue.clone());
    let n_events = replay.events().len();
    stepper.go_to(n_events);
    let n_run_events = stepper.run_step(n_events);
    let cut_note = if prologue.is_cut() {
        format!(
            "<p class=\"dep-cut\">The run had {n_run_events} events: this page steps through the last {}, from the state the first {} left (the {} ops finished by then are counted, not shown).</p>\n",
            n_events - prologue.n_events,
            prologue.n_run_events_before,
            prologue.n_ops_left_out,
        )
    } else {
        String::new()
    };
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title><style>{STYLE}{css}</style></head>\n<body><div class=\"dep-view\">\n<h3>{title}</h3>\n{cut_note}<div class=\"dep-controls\"><button id=\"dep-first\">⏮</button> <button id=\"dep-prev\">◀</button> <input id=\"dep-slider\" type=\"range\" min=\"{first}\" max=\"{n_events}\" value=\"{n_events}\"> <button id=\"dep-next\">▶</button> <button id=\"dep-last\">⏭</button></div>\n<div id=\"dep-step\">step {n_run_events}/{n_run_events}: the end of the run</div>\n<div id=\"dep-frame\">{tables}</div>\n</div>\n<script type=\"application/json\" id=\"dep-data\">",
        title = escape_xml(title),
        css = scoped_css(),
        first = prologue.n_events,
        tables = step_tables(&stepper, PLAYER_OPS),
    );
    write_player_data(
        replay,
        prologue,
        PLAYER_OPS,
        PLAYER_CHECKPOINT_EVERY,
        &mut page,
    );
    let _ = write!(
        page,
        "</script>\n<script>{PLAYER_JS}</script>\n</body></html>\n"
    );
    page
}

/// The player's data block, written to the end of `out`: worker names, the layout, where the
/// run was cut, and the events one object each, written one at a time (a long run's log is
/// never held twice).
fn write_player_data(
    replay: &Replay,
    prologue: &Prologue,
    ops_shown: usize,
    checkpoint_every: usize,
    out: &mut String,
) {
    let mut data = json!({
        "workers": replay.worker_names(),
        "maxQueue": MAX_QUEUE_ENTRIES,
        "opsShown": ops_shown,
        "checkpointEvery": checkpoint_every,
        "start": prologue.n_events,
        "eventsBefore": prologue.n_run_events_before,
        "cutTime": prologue.cut_ns,
        "opsLeftOut": prologue.n_ops_left_out,
        "leftOutBefore": prologue.left_out_before,
    })
    .to_string();
    data.pop(); // the closing brace: the events follow
    out.push_str(&data);
    out.push_str(",\"events\":[");
    for (index, event) in replay.events().iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        // `<` only occurs inside JSON strings, where `\u003c` means the same; this keeps a
        // label such as `</script>` from ending the data block.
        let json = crate::trace::event_to_json(event).to_string();
        out.push_str(&json.replace('<', "\\u003c"));
    }
    out.push_str("]}");
}

/// The tables of the stepper's step as the player shows them: the queues, and at most `room`
/// ops around the step's event, with how many come before (those a cut left out included) and
/// after.
fn step_tables(stepper: &Stepper, room: usize) -> String {
    let window = stepper.window(room);
    let frame = stepper.frame_of(window.clone());
    let shown = stepper.ids(window.clone());
    let (n_earlier, n_later) = stepper.ops_outside(&window);
    let left_out_between = stepper.ops_left_out_between(&window);
    tables_where(
        &frame,
        |op| shown.contains(&op.id),
        |op| left_out_between.get(&op.id).copied().unwrap_or(0),
        (n_earlier, n_later),
    )
}

fn scoped_css() -> String {
    color::css()
        .lines()
        .map(|line| format!(".dep-view {line}\n"))
        .collect()
}

/// How many accesses of one variable's queue a table shows; the rest are counted (a queue of
/// thousands of pending accesses would make every redraw megabytes long and tell nothing more).
const MAX_QUEUE_ENTRIES: usize = 12;

fn tables(frame: &Frame) -> String {
    tables_where(frame, |_| true, |_| 0, (0, 0))
}

/// The queues, and the ops for which `shown` holds (the others are there to be named in the
/// queues and the reasons for waiting), after a row counting `n_earlier` ops left out before
/// them and before one counting `n_later` after; each op after a row counting the ops a cut
/// left out just before it (`left_out_before`), where there are any.
fn tables_where(
    frame: &Frame,
    shown: impl Fn(&FrameOp) -> bool,
    left_out_before: impl Fn(&FrameOp) -> usize,
    (n_earlier, n_later): (usize, usize),
) -> String {
    let mut html = String::new();
    html.push_str(
        "<table class=\"dep-queues\"><tr><th>variable</th><th>queue (oldest first)</th></tr>\n",
    );
    for var in &frame.vars {
        let _ = write!(html, "<tr><td>{}</td><td>", escape_xml(&var.name));
        if var.queue.is_empty() {
            html.push_str("<span class=\"dep-dim\">idle</span>");
        }
        for access in var.queue.iter().take(MAX_QUEUE_ENTRIES) {
            let op = frame.op(access.op);
            let state = op.map_or(OpState::Waiting, |op| op.state);
            let label = op.map_or_else(|| access.op.to_string(), |op| op.describe());
            let _ = write!(
                html,
                "<span class=\"dep-acc {} {}\" title=\"{}\">{} {}</span>",
                Role::State(state).css_class(),
                if access.granted {
                    "dep-granted"
                } else {
                    "dep-queued"
                },
                if access.granted { "granted" } else { "waiting" },
                if access.write { "W" } else { "R" },
                escape_xml(&label)
            );
        }
        if let Some(n_more) = var
            .queue
            .len()
            .checked_sub(MAX_QUEUE_ENTRIES)
            .filter(|n| *n > 0)
        {
            let _ = write!(html, "<span class=\"dep-dim\">… +{n_more} more</span>");
        }
        html.push_str("</td></tr>\n");
    }
    html.push_str("</table>\n<table class=\"dep-ops\"><tr><th>op</th><th>line</th><th>state</th><th>worker</th><th>start</th><th>duration</th></tr>\n");
    // "… 3 earlier ops", "… 1 op done before the cut".
    let left_out = |html: &mut String, n: usize, before: &str, after: &str| {
        if n > 0 {
            let ops = if n == 1 { "op" } else { "ops" };
            let _ = writeln!(
                html,
                "<tr><td colspan=\"6\"><span class=\"dep-dim\">… {n} {before}{ops}{after}</span></td></tr>"
            );
        }
    };
    left_out(&mut html, n_earlier, "earlier ", "");
    for op in frame.ops.iter().filter(|op| shown(op)) {
        left_out(&mut html, left_out_before(op), "", " done before the cut");
        let duration = match (op.started_ns, op.finished_ns) {
            (Some(start), Some(end)) => format_ns(end.saturating_sub(start)),
            _ => String::new(),
        };
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td><span class=\"dep-state {}\">{}</span></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape_xml(&op.label),
            escape_xml(&crate::util::line_column(op.line, op.place.as_deref())),
            Role::State(op.state).css_class(),
            op.state.name(),
            escape_xml(op.worker.as_deref().unwrap_or("")),
            op.started_ns.map(format_ns).unwrap_or_default(),
            duration,
        );
        if let Some(reason) = frame.why_waiting(op) {
            let _ = writeln!(
                html,
                "<tr class=\"dep-why\"><td colspan=\"6\">↳ {} {}</td></tr>",
                escape_xml(&op.describe()),
                escape_xml(&reason)
            );
        }
    }
    left_out(&mut html, n_later, "later ", "");
    html.push_str("</table>\n");
    html
}

/// The player's script: keeps the state at its step as [`Stepper`] does (the queues and the
/// unfinished ops, finished ones from their records, checkpoints for going back) and draws what
/// [`step_tables`] draws.
const PLAYER_JS: &str = r#"
(function () {
  var data = JSON.parse(document.getElementById('dep-data').textContent);
  var events = data.events, workers = data.workers;
  // A long run's page holds its last events after a prologue that rebuilds the state where they
  // begin: its steps are numbered as the whole run's, and the slider starts after the prologue.
  var start = data.start, before = data.eventsBefore;
  function runStep(n) { return n - Math.min(start, n) + before; }
  var slider = document.getElementById('dep-slider');
  var stepText = document.getElementById('dep-step');
  var frameBox = document.getElementById('dep-frame');
  function esc(s) { return String(s).replace(/[&<>"']/g, function (c) {
    return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]; }); }
  function ns(t) {
    if (t < 1000) return t + ' ns';
    if (t < 100000) return (Math.round(t / 100) / 10).toFixed(1).replace(/\.0$/, '') + ' µs';
    if (t < 1e9) return (Math.round(t / 1e4) / 100).toFixed(2) + ' ms';
    return (Math.round(t / 1e7) / 100).toFixed(2) + ' s';
  }
  function workerName(w) { return workers[w] !== undefined ? workers[w] : 'worker ' + w; }
  // Every op's record at the end of the run, in one pass: an op finished by a step shows so.
  var recs = {}, order = [], names = {};
  events.forEach(function (e) {
    var r = recs[e.op];
    if (e.kind === 'var_created') names[e.var] = e.name;
    else if (e.kind === 'pushed') {
      recs[e.op] = {label: e.label, line: e.line, reads: e.reads, writes: e.writes, state: 'waiting',
        worker: null, start: null, end: null, pos: order.length};
      order.push(e.op);
    } else if (!r) return;
    else if (e.kind === 'ready') r.state = 'ready';
    else if (e.kind === 'started') { r.state = 'running'; r.start = e.t; r.worker = workerName(e.worker); }
    else if (e.kind === 'finished') { r.state = e.state; r.end = e.t; }
  });
  function describe(r) { return r.line > 0 ? r.label + ' (line ' + r.line + ')' : r.label; }
  function opText(id) { return recs[id] ? describe(recs[id]) : 'op' + id; }
  function varName(v) { return names[v] !== undefined ? names[v] : 'v' + v; }
  function describeEvent(e) {
    switch (e.kind) {
      case 'var_created': return 'created ' + e.name;
      case 'var_deleted': return 'deleted ' + varName(e.var);
      case 'pushed': return 'pushed ' + opText(e.op);
      case 'granted': return 'granted ' + varName(e.var) + ' to ' + opText(e.op);
      case 'ready': return 'ready: ' + opText(e.op);
      case 'cancelled': return 'cancelled ' + opText(e.op) + ' (it keeps its place in its queues until its turn)';
      case 'started': return 'started ' + opText(e.op) + ' on ' + workerName(e.worker);
      case 'finished': return e.state + ' ' + opText(e.op);
      default: return 'dev:' + e.lane + ' ran the kernels of ' + opText(e.op) + ' for ' + ns(Math.max(e.end - e.start, 0));
    }
  }
  // The state after `n` events: the live variables' queues and the unfinished ops.
  function fresh() { return {n: 0, pushed: 0, queues: new Map(), unfinished: new Map()}; }
  function copy(s) {
    var queues = new Map(), unfinished = new Map();
    s.queues.forEach(function (q, v) {
      queues.set(v, q.map(function (a) { return {op: a.op, write: a.write, granted: a.granted}; }));
    });
    s.unfinished.forEach(function (u, id) { unfinished.set(id, {state: u.state, start: u.start, worker: u.worker}); });
    return {n: s.n, pushed: s.pushed, queues: queues, unfinished: unfinished};
  }
  function size(s) {
    var n = s.queues.size + s.unfinished.size;
    s.queues.forEach(function (q) { n += q.length; });
    return n;
  }
  function apply(s, e) {
    s.n++;
    var u = s.unfinished.get(e.op);
    if (e.kind === 'var_created') s.queues.set(e.var, []);
    else if (e.kind === 'var_deleted') s.queues.delete(e.var);
    else if (e.kind === 'pushed') {
      s.pushed++;
      s.unfinished.set(e.op, {state: 'waiting', start: null, worker: null});
      var add = function (v, write) {
        if (!s.queues.has(v)) s.queues.set(v, []);
        s.queues.get(v).push({op: e.op, write: write, granted: false});
      };
      e.reads.forEach(function (v) { add(v, false); });
      e.writes.forEach(function (v) { add(v, true); });
    } else if (e.kind === 'granted') {
      var q = s.queues.get(e.var) || [];
      for (var i = 0; i < q.length; i++) if (q[i].op === e.op) { q[i].granted = true; break; }
    } else if (e.kind === 'ready') { if (u && u.state !== 'cancelled') u.state = 'ready'; }
    else if (e.kind === 'cancelled') { if (u && (u.state === 'waiting' || u.state === 'ready')) u.state = 'cancelled'; }
    else if (e.kind === 'started') { if (u) { u.state = 'running'; u.start = e.t; u.worker = workerName(e.worker); } }
    else if (e.kind === 'finished' && u) {
      s.unfinished.delete(e.op);
      var r = recs[e.op];
      if (r) r.reads.concat(r.writes).forEach(function (v) {
        var q = s.queues.get(v); if (!q) return;
        var first = q.findIndex(function (a) { return a.op === e.op; });
        if (first < 0) return;
        var end = first; while (end < q.length && q[end].op === e.op) end++;
        q.splice(first, end - first);
      });
    }
  }
  var state = fresh(), checkpoints = [], reached = 0;
  function goTo(n) {
    if (n < state.n) {
      var k = checkpoints.length;
      while (k > 0 && checkpoints[k - 1].n > n) k--;
      state = k ? copy(checkpoints[k - 1]) : fresh();
    }
    while (state.n < n) {
      apply(state, events[state.n]);
      if (state.n > reached) {
        reached = state.n;
        var last = checkpoints.length ? checkpoints[checkpoints.length - 1].n : 0;
        if (state.n - last >= Math.max(data.checkpointEvery, 8 * size(state))) checkpoints.push(copy(state));
      }
    }
  }
  // An op as the current step shows it.
  function view(id) {
    var r = recs[id], u = state.unfinished.get(id);
    return u ? {label: r.label, line: r.line, state: u.state, worker: u.worker, start: u.start, end: null} : r;
  }
  function windowOf(room) {
    var e = state.n > 0 ? events[state.n - 1] : null;
    var focus = e && recs[e.op] ? recs[e.op].pos : Math.max(state.pushed - 1, 0);
    var first = Math.max(focus - Math.floor(room / 3), 0);
    var end = Math.min(first + room, state.pushed);
    return [Math.min(first, Math.max(end - room, 0)), end];
  }
  function why(vars, opId) {
    var clauses = [], allGranted = true;
    vars.forEach(function (v) {
      var lastWrite = null, readsSince = [];
      state.queues.get(v).forEach(function (a) {
        if (!a.granted && a.op === opId) {
          allGranted = false;
          var behind = !a.write || !readsSince.length ? (lastWrite === null ? [] : [lastWrite]) : readsSince.slice();
          var writes = !a.write || !readsSince.length;
          if (behind.length) {
            var who = behind.map(function (id) {
              var b = view(id);
              var tail = b.state === 'running' ? ', running on ' + b.worker
                : b.state === 'ready' ? ', ready for a free worker' : b.state === 'waiting' ? ', itself waiting' : ', ' + b.state;
              return 'by ' + describe(b) + tail;
            });
            clauses.push('for ' + varName(v) + ': ' + (writes ? 'written' : 'read') + ' ' + who.join(', and '));
          }
        }
        if (a.write) { lastWrite = a.op; readsSince = []; } else readsSince.push(a.op);
      });
    });
    // Nothing ahead of it: just pushed, or the op before it has just ended; or every access
    // granted, before it is made ready (Frame::why_waiting).
    return clauses.length ? 'waits ' + clauses.join('; and ')
      : allGranted ? 'has every grant: the engine makes it ready next'
      : 'waits for its grants: nothing is ahead of it in its queues';
  }
  // How many of the run's ops were pushed before the op at position p, left out of the page or
  // not (Prologue::run_ops_before).
  function runOpsBefore(p) {
    return p + (p < data.leftOutBefore.length ? data.leftOutBefore[p] : data.opsLeftOut);
  }
  // "… 3 earlier ops", "… 1 op done before the cut".
  function leftOut(n, before, after) {
    return n > 0 ? '<tr><td colspan="6"><span class="dep-dim">… ' + n + ' ' + before + (n === 1 ? 'op' : 'ops') + after +
      '</span></td></tr>\n' : '';
  }
  function render(n) {
    goTo(n);
    var vars = Array.from(state.queues.keys()).sort(function (a, b) { return a - b; });
    var html = '<table class="dep-queues"><tr><th>variable</th><th>queue (oldest first)</th></tr>\n';
    vars.forEach(function (v) {
      var q = state.queues.get(v);
      html += '<tr><td>' + esc(varName(v)) + '</td><td>';
      if (!q.length) html += '<span class="dep-dim">idle</span>';
      q.slice(0, data.maxQueue).forEach(function (a) {
        var o = view(a.op);
        html += '<span class="dep-acc dep-' + o.state + ' ' + (a.granted ? 'dep-granted' : 'dep-queued') +
          '" title="' + (a.granted ? 'granted' : 'waiting') + '">' + (a.write ? 'W' : 'R') + ' ' + esc(describe(o)) + '</span>';
      });
      if (q.length > data.maxQueue) html += '<span class="dep-dim">… +' + (q.length - data.maxQueue) + ' more</span>';
      html += '</td></tr>\n';
    });
    html += '</table>\n<table class="dep-ops"><tr><th>op</th><th>line</th><th>state</th><th>worker</th><th>start</th><th>duration</th></tr>\n';
    var w = windowOf(data.opsShown);
    var runPushed = state.pushed + data.opsLeftOut;
    var earlier = runOpsBefore(w[0]);
    html += leftOut(earlier, 'earlier ', '');
    for (var p = w[0]; p < w[1]; p++) {
      if (p > w[0]) html += leftOut(runOpsBefore(p) - runOpsBefore(p - 1) - 1, '', ' done before the cut');
      var o = view(order[p]);
      html += '<tr><td>' + esc(o.label) + '</td><td>' + (o.line > 0 ? o.line : '') + '</td><td><span class="dep-state dep-' + o.state + '">' +
        o.state + '</span></td><td>' + esc(o.worker || '') + '</td><td>' + (o.start === null ? '' : ns(o.start)) + '</td><td>' +
        (o.start !== null && o.end !== null ? ns(o.end - o.start) : '') + '</td></tr>\n';
      var reason = o.state === 'waiting' ? why(vars, order[p]) : null;
      if (reason) html += '<tr class="dep-why"><td colspan="6">↳ ' + esc(describe(o)) + ' ' + esc(reason) + '</td></tr>\n';
    }
    html += leftOut(w[1] > w[0] ? runPushed - runOpsBefore(w[1] - 1) - 1 : runPushed - earlier, 'later ', '');
    frameBox.innerHTML = html + '</table>\n';
    var head = 'step ' + runStep(n) + '/' + runStep(events.length) + ' at ';
    if (n === start && before > 0) head += ns(data.cutTime) + ': the state after the run\'s first ' + before + ' events';
    else head += ns(n > 0 ? events[n - 1].t : 0) + ': ' + (n === 0 ? 'the start, before any event' : describeEvent(events[n - 1]));
    stepText.textContent = head;
  }
  function go(n) { n = Math.max(start, Math.min(events.length, n)); slider.value = n; render(n); }
  slider.addEventListener('input', function () { render(Math.max(start, +slider.value)); });
  document.getElementById('dep-first').onclick = function () { go(start); };
  document.getElementById('dep-prev').onclick = function () { go(+slider.value - 1); };
  document.getElementById('dep-next').onclick = function () { go(+slider.value + 1); };
  document.getElementById('dep-last').onclick = function () { go(events.length); };
  document.addEventListener('keydown', function (k) {
    var at = +slider.value;
    var moves = { ArrowRight: at + 1, n: at + 1, ArrowLeft: at - 1, p: at - 1,
                  PageDown: at + 100, PageUp: at - 100, Home: start, End: events.length };
    if (!(k.key in moves)) return;
    // The slider, when it has the focus, would move by the same key too: one key, one move.
    k.preventDefault();
    go(moves[k.key]);
  });
})();
"#;

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::process::{Command, Stdio};

    use super::*;

    #[test]
    fn a_heading_and_a_note_go_above_the_tables() {
        let frame = crate::tests::threaded_mutation_replay().final_frame();
        let html = fragment_with_heading(&frame, "cell[3] · <threaded>", Some("interrupted"));
        let heading = html.find("cell[3] · &lt;threaded&gt;").unwrap();
        let note = html.find("interrupted").unwrap();
        assert!(
            heading < note && note < html.find("<table class=\"dep-queues\"").unwrap(),
            "{html}"
        );
        assert!(html.ends_with(&format!("{}</div>\n", tables(&frame))));
    }

    /// Runs the player's script in Node.js against a stub DOM, steps it through every event,
    /// and compares its markup with `tables(frame_at(step))`. Skipped when `node` is missing.
    #[test]
    fn a_long_queue_shows_its_first_entries_and_counts_the_rest() {
        let replay = crate::tests::long_queue_replay();
        // A's whole queue (its write, then the 20 reads behind it) shows up
        // at some step: 12 entries, then the count of the others.
        let rows_of_a: Vec<String> = (0..=replay.events().len())
            .map(|step| tables(&replay.frame_at(step)))
            .filter_map(|html| {
                let row = html
                    .split("</tr>")
                    .find(|row| row.contains("<tr><td>A</td>"))?;
                Some(row.to_string())
            })
            .collect();
        let fullest = rows_of_a
            .iter()
            .find(|row| row.contains("… +9 more</span>"))
            .expect("a step with all 21 accesses of A queued");
        assert_eq!(fullest.matches("dep-acc ").count(), MAX_QUEUE_ENTRIES);
        assert!(rows_of_a
            .iter()
            .all(|row| row.matches("dep-acc ").count() <= MAX_QUEUE_ENTRIES));
    }

    /// The player says what `Frame::why_waiting` says of an op whose every access is granted.
    #[test]
    fn player_script_says_why_an_op_with_every_grant_waits_as_rust_does() {
        assert!(PLAYER_JS.contains(&format!("'{}'", crate::frame::ALL_GRANTED)));
    }

    #[test]
    fn player_script_draws_what_rust_draws() {
        let mut drawn = Vec::new();
        for replay in [
            crate::tests::threaded_mutation_replay(),
            crate::tests::long_queue_replay(),
            crate::tests::self_update_replay(),
            crate::tests::cancelled_replay(),
        ] {
            drawn.push(player_script_matches_rust(&replay, &Prologue::default()));
        }
        assert_waits_and_windows_were_drawn(&drawn);
    }

    /// Unless Node.js is missing (nothing drawn), some step showed a waiting op's reason and
    /// some step left ops out of its window.
    fn assert_waits_and_windows_were_drawn(drawn: &[(usize, usize)]) {
        if drawn.iter().all(|counts| *counts == (0, 0)) {
            return;
        }
        assert!(
            drawn.iter().any(|(waiting, _)| *waiting > 0),
            "no waiting op shown"
        );
        assert!(
            drawn.iter().any(|(_, windowed)| *windowed > 0),
            "no step left ops out"
        );
    }

    /// A page of a run's last events starts where the cut left the run and numbers its steps as
    /// the run's: its script draws what Rust draws from the same cut.
    #[test]
    fn player_script_draws_a_cut_run_as_rust_does() {
        let mut drawn = Vec::new();
        for replay in [
            crate::tests::threaded_mutation_replay(),
            crate::tests::self_update_replay(),
            crate::tests::long_chain_replay(200),
            crate::tests::overtaken_replay(),
        ] {
            let n = replay.events().len();
            // Several cuts: where an op carried over was pushed before ops left out, the counts
            // of ops before and after the rows are the run's (`Stepper::ops_outside`).
            for kept in [n / 3, 2 * n / 3] {
                let cut = crate::LastEvents::cut(replay.events().iter().cloned(), kept);
                let cut_replay = Replay::new(cut.events, replay.worker_names().to_vec());
                drawn.push(player_script_matches_rust(&cut_replay, &cut.prologue));
            }
            let cut = crate::LastEvents::cut(replay.events().iter().cloned(), n / 2);
            assert!(cut.prologue.is_cut());
            let cut_replay = Replay::new(cut.events, replay.worker_names().to_vec());
            drawn.push(player_script_matches_rust(&cut_replay, &cut.prologue));
            let page = player(&cut_replay, "cut", &cut.prologue);
            assert!(page.contains(&format!(
                "The run had {n} events: this page steps through the last {},",
                n / 2
            )));
            assert!(page.contains(&format!("step {n}/{n}: the end of the run")));
        }
        assert_waits_and_windows_were_drawn(&drawn);
        // Where the cut carries the slow op that ten others overtook and left some of those
        // out, the tables count them between the ops they show, as the script does (above).
        let replay = crate::tests::overtaken_replay();
        let events = replay.events();
        let reads: Vec<_> = replay.ops()[2..12].iter().map(|op| op.id).collect();
        let last_read_end = events
            .iter()
            .rposition(|event| {
                matches!(event.kind, dep_engine::EventKind::Finished { op, .. } if reads.contains(&op))
            })
            .unwrap();
        // On a loaded machine the slow op may start only after the reads have ended: the cut
        // then falls after its start, so that it runs across the cut either way.
        let slow = replay.ops()[1].id;
        let slow_start = events
            .iter()
            .position(|event| {
                matches!(event.kind, dep_engine::EventKind::Started { op, .. } if op == slow)
            })
            .unwrap();
        let cut_after = last_read_end.max(slow_start);
        let cut = crate::LastEvents::cut(events.iter().cloned(), events.len() - cut_after - 1);
        let cut_replay = Replay::new(cut.events, replay.worker_names().to_vec());
        player_script_matches_rust(&cut_replay, &cut.prologue);
        let stepper = crate::Stepper::after(&cut_replay, cut.prologue);
        let tables = step_tables(&stepper, 100);
        assert!(
            tables.contains("… 10 ops done before the cut</span>"),
            "{tables}"
        );
    }

    /// The player's keys move it as the terminal's do, one move a key: each key it takes is
    /// kept from the focused slider, which would move by it too (→ went two steps).
    #[test]
    fn the_players_keys_move_it_once_each() {
        let harness = r#"
            const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
            const els = {};
            const el = (id) => els[id] || (els[id] = {value: '0', textContent: '', innerHTML: '',
                listeners: {}, addEventListener(type, f) { this.listeners[type] = f; }});
            el('dep-data').textContent = input.data;
            let onKey = null;
            global.document = {getElementById: el,
                addEventListener(type, f) { if (type === 'keydown') onKey = f; }};
            eval(input.js);
            const seen = [];
            for (const key of ['n', 'ArrowRight', 'End', 'p', 'PageUp', 'Home', 'PageDown', 'x']) {
                let kept = false;
                onKey({key, preventDefault() { kept = true; }});
                seen.push([key, +el('dep-slider').value, kept]);
            }
            console.log(JSON.stringify(seen));
        "#;
        let Ok(mut child) = Command::new("node")
            .arg("-e")
            .arg(harness)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
        else {
            eprintln!("skipped: Node.js (`node`) is not installed");
            return;
        };
        let replay = crate::tests::long_chain_replay(400);
        let n = replay.events().len();
        let mut data = String::new();
        write_player_data(&replay, &Prologue::default(), 6, 10, &mut data);
        let input = json!({"data": data, "js": PLAYER_JS});
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        let seen: Vec<(String, usize, bool)> = serde_json::from_slice(&output.stdout).unwrap();
        let expected: Vec<(String, usize, bool)> = [
            ("n", 1, true),
            ("ArrowRight", 2, true),
            ("End", n, true),
            ("p", n - 1, true),
            ("PageUp", n - 101, true),
            ("Home", 0, true),
            ("PageDown", 100, true),
            ("x", 100, false),
        ]
        .into_iter()
        .map(|(key, at, kept)| (key.to_string(), at, kept))
        .collect();
        assert_eq!(seen, expected);
    }

    /// Steps the player's script in Node.js through every step of `replay` (from the end of
    /// its `prologue`) and 200 jumps, and compares its step line and markup with Rust's.
    /// Returns how many waiting ops' rows and how many windowed steps it drew (0 when `node` is
    /// missing).
    fn player_script_matches_rust(replay: &Replay, prologue: &Prologue) -> (usize, usize) {
        let harness = r#"
            const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
            const els = {};
            const el = (id) => els[id] || (els[id] = {value: '0', textContent: '', innerHTML: '',
                listeners: {}, addEventListener(type, f) { this.listeners[type] = f; }});
            el('dep-data').textContent = input.data;
            global.document = {getElementById: el, addEventListener() {}};
            eval(input.js);
            const frames = [];
            for (const n of input.steps) {
                el('dep-slider').value = String(n);
                el('dep-slider').listeners.input();
                frames.push([el('dep-step').textContent, el('dep-frame').innerHTML]);
            }
            console.log(JSON.stringify(frames));
        "#;
        let child = Command::new("node")
            .arg("-e")
            .arg(harness)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn();
        let Ok(mut child) = child else {
            eprintln!("skipped: Node.js (`node`) is not installed");
            return (0, 0);
        };
        // Few rows and close checkpoints, so that windows and going back are exercised: every
        // step forward, then jumps back and forth.
        let (ops_shown, checkpoint_every) = (6, 10);
        let n = replay.events().len();
        let first = prologue.n_events;
        let mut steps: Vec<usize> = (first..=n).collect();
        let mut jump = 7;
        for _ in 0..200 {
            jump = (jump * 31 + 17) % (n + 1);
            steps.push(jump.max(first));
        }
        let mut data = String::new();
        write_player_data(replay, prologue, ops_shown, checkpoint_every, &mut data);
        let input = json!({"data": data, "js": PLAYER_JS, "steps": steps});
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        let frames: Vec<(String, String)> = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(frames.len(), steps.len());
        let (mut n_waiting_rows, mut n_windowed) = (0, 0);
        let mut stepper = crate::Stepper::after(replay, prologue.clone());
        for (&step, (step_text, markup)) in steps.iter().zip(&frames) {
            stepper.go_to(step);
            assert_eq!(*markup, step_tables(&stepper, ops_shown), "step {step}");
            // Rust's own line, numbered as the whole run's steps, the prologue's end included.
            let rust_step = crate::text::step(&stepper, &crate::TextStyle::plain(80));
            let expected = rust_step.lines().next().unwrap();
            assert_eq!(*step_text, expected, "step {step}");
            n_waiting_rows += markup.matches("dep-why").count();
            n_windowed += usize::from(markup.contains("earlier op"));
        }
        (n_waiting_rows, n_windowed)
    }
}
