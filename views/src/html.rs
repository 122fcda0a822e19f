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
use crate::frame::Frame;
use crate::replay::Replay;
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

/// A self-contained HTML page that steps through every event of a replay: a slider and step
/// buttons, the queues and ops at each step. Without scripts it shows the final state.
pub fn player(replay: &Replay, title: &str) -> String {
    let data = player_data(replay);
    let n_events = replay.events().len();
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title><style>{STYLE}{css}</style></head>\n<body><div class=\"dep-view\">\n<h3>{title}</h3>\n<div class=\"dep-controls\"><button id=\"dep-first\">⏮</button> <button id=\"dep-prev\">◀</button> <input id=\"dep-slider\" type=\"range\" min=\"0\" max=\"{n_events}\" value=\"{n_events}\"> <button id=\"dep-next\">▶</button> <button id=\"dep-last\">⏭</button></div>\n<div id=\"dep-step\">step {n_events}/{n_events}: the end of the run</div>\n<div id=\"dep-frame\">{tables}</div>\n</div>\n<script type=\"application/json\" id=\"dep-data\">{data}</script>\n<script>{PLAYER_JS}</script>\n</body></html>\n",
        title = escape_xml(title),
        css = scoped_css(),
        tables = tables(&replay.final_frame()),
    );
    page
}

/// The player's data block: worker names, the events and their descriptions.
fn player_data(replay: &Replay) -> String {
    let data = json!({
        "workers": replay.worker_names(),
        "maxQueue": MAX_QUEUE_ENTRIES,
        "events": crate::trace::dep_events(replay)["events"],
        "descriptions": (0..replay.events().len())
            .map(|index| replay.describe_event(index))
            .collect::<Vec<_>>(),
    });
    // `<` only occurs inside JSON strings, where `\u003c` means the same; this keeps a label
    // such as `</script>` from ending the data block.
    serde_json::to_string(&data)
        .expect("a JSON value always serializes")
        .replace('<', "\\u003c")
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
    for op in &frame.ops {
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
    html.push_str("</table>\n");
    html
}

/// The player's script: folds the first N events like `Replay::frame_at` and draws the same
/// tables as `tables`.
const PLAYER_JS: &str = r#"
(function () {
  var data = JSON.parse(document.getElementById('dep-data').textContent);
  var events = data.events;
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
  function describe(op) { return op.line > 0 ? op.label + ' (line ' + op.line + ')' : op.label; }
  function fold(n) {
    var names = {}, queues = {}, order = [], ops = {}, opOrder = [], time = 0;
    for (var i = 0; i < n; i++) {
      var e = events[i]; time = e.t;
      if (e.kind === 'var_created') { names[e.var] = e.name; queues[e.var] = []; order.push(e.var); }
      else if (e.kind === 'var_deleted') { delete queues[e.var]; }
      else if (e.kind === 'pushed') {
        e.reads.forEach(function (v) { (queues[v] = queues[v] || []).push({op: e.op, write: false, granted: false}); });
        e.writes.forEach(function (v) { (queues[v] = queues[v] || []).push({op: e.op, write: true, granted: false}); });
        ops[e.op] = {id: e.op, label: e.label, line: e.line, state: 'waiting', reads: e.reads, writes: e.writes, worker: null, start: null, end: null};
        opOrder.push(e.op);
      } else if (e.kind === 'granted') {
        (queues[e.var] || []).forEach(function (a) { if (a.op === e.op) a.granted = true; });
      } else if (e.kind === 'ready') { if (ops[e.op]) ops[e.op].state = 'ready'; }
      else if (e.kind === 'started') {
        var o = ops[e.op]; if (o) { o.state = 'running'; o.start = e.t; o.worker = data.workers[e.worker] || ('worker ' + e.worker); }
      } else if (e.kind === 'finished') {
        var f = ops[e.op]; if (f) {
          f.state = e.state; f.end = e.t;
          f.reads.concat(f.writes).forEach(function (v) {
            if (queues[v]) queues[v] = queues[v].filter(function (a) { return a.op !== e.op; });
          });
        }
      }
    }
    return {names: names, queues: queues, order: order, ops: ops, opOrder: opOrder, time: time};
  }
  function why(fr, opId) {
    var clauses = [];
    fr.order.forEach(function (v) {
      var q = fr.queues[v]; if (!q) return;
      var lastWrite = null, readsSince = [];
      q.forEach(function (a) {
        if (!a.granted && a.op === opId) {
          var behind = !a.write || !readsSince.length ? (lastWrite === null ? [] : [lastWrite]) : readsSince.slice();
          var writes = !a.write || !readsSince.length;
          if (behind.length) {
            var who = behind.map(function (id) {
              var b = fr.ops[id];
              var tail = !b ? '' : b.state === 'running' ? ', running on ' + b.worker
                : b.state === 'ready' ? ', ready for a free worker' : b.state === 'waiting' ? ', itself waiting' : ', ' + b.state;
              return 'by ' + (b ? describe(b) : 'op' + id) + tail;
            });
            clauses.push('for ' + fr.names[v] + ': ' + (writes ? 'written' : 'read') + ' ' + who.join(', and '));
          }
        }
        if (a.write) { lastWrite = a.op; readsSince = []; } else readsSince.push(a.op);
      });
    });
    return clauses.length ? 'waits ' + clauses.join('; and ') : null;
  }
  function render(n) {
    var fr = fold(n), html = '<table class="dep-queues"><tr><th>variable</th><th>queue (oldest first)</th></tr>\n';
    fr.order.forEach(function (v) {
      var q = fr.queues[v]; if (!q) return;
      html += '<tr><td>' + esc(fr.names[v]) + '</td><td>';
      if (!q.length) html += '<span class="dep-dim">idle</span>';
      q.slice(0, data.maxQueue).forEach(function (a) {
        var o = fr.ops[a.op];
        html += '<span class="dep-acc dep-' + (o ? o.state : 'waiting') + ' ' + (a.granted ? 'dep-granted' : 'dep-queued') +
          '" title="' + (a.granted ? 'granted' : 'waiting') + '">' + (a.write ? 'W' : 'R') + ' ' + esc(o ? describe(o) : 'op' + a.op) + '</span>';
      });
      if (q.length > data.maxQueue) html += '<span class="dep-dim">… +' + (q.length - data.maxQueue) + ' more</span>';
      html += '</td></tr>\n';
    });
    html += '</table>\n<table class="dep-ops"><tr><th>op</th><th>line</th><th>state</th><th>worker</th><th>start</th><th>duration</th></tr>\n';
    fr.opOrder.forEach(function (id) {
      var o = fr.ops[id];
      html += '<tr><td>' + esc(o.label) + '</td><td>' + (o.line > 0 ? o.line : '') + '</td><td><span class="dep-state dep-' + o.state + '">' +
        o.state + '</span></td><td>' + esc(o.worker || '') + '</td><td>' + (o.start === null ? '' : ns(o.start)) + '</td><td>' +
        (o.start !== null && o.end !== null ? ns(o.end - o.start) : '') + '</td></tr>\n';
      var w = o.state === 'waiting' ? why(fr, id) : null;
      if (w) html += '<tr class="dep-why"><td colspan="6">↳ ' + esc(describe(o)) + ' ' + esc(w) + '</td></tr>\n';
    });
    frameBox.innerHTML = html + '</table>\n';
    stepText.textContent = 'step ' + n + '/' + events.length + ' at ' + ns(fr.time) + ': ' +
      (n === 0 ? 'the start, before any event' : data.descriptions[n - 1]);
  }
  function go(n) { n = Math.max(0, Math.min(events.length, n)); slider.value = n; render(n); }
  slider.addEventListener('input', function () { render(+slider.value); });
  document.getElementById('dep-first').onclick = function () { go(0); };
  document.getElementById('dep-prev').onclick = function () { go(+slider.value - 1); };
  document.getElementById('dep-next').onclick = function () { go(+slider.value + 1); };
  document.getElementById('dep-last').onclick = function () { go(events.length); };
  document.addEventListener('keydown', function (k) {
    if (k.key === 'ArrowRight' || k.key === 'n') go(+slider.value + 1);
    if (k.key === 'ArrowLeft' || k.key === 'p') go(+slider.value - 1);
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

    #[test]
    fn player_script_draws_what_rust_draws() {
        for replay in [
            crate::tests::threaded_mutation_replay(),
            crate::tests::long_queue_replay(),
        ] {
            player_script_matches_rust(&replay);
        }
    }

    fn player_script_matches_rust(replay: &Replay) {
        let harness = r#"
            const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
            const els = {};
            const el = (id) => els[id] || (els[id] = {value: '0', textContent: '', innerHTML: '',
                listeners: {}, addEventListener(type, f) { this.listeners[type] = f; }});
            el('dep-data').textContent = input.data;
            global.document = {getElementById: el, addEventListener() {}};
            eval(input.js);
            const frames = [];
            for (let n = 0; n <= input.n; n++) {
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
            return;
        };
        let input = json!({
            "data": player_data(replay),
            "js": PLAYER_JS,
            "n": replay.events().len(),
        });
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        let frames: Vec<(String, String)> = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(frames.len(), replay.events().len() + 1);
        let mut n_waiting_rows = 0;
        let mut stepper = crate::Stepper::new(replay);
        for (step, (step_text, markup)) in frames.iter().enumerate() {
            assert_eq!(*markup, tables(&replay.frame_at(step)), "step {step}");
            stepper.go_to(step);
            let rust_step = crate::text::step(&stepper, &crate::TextStyle::plain(80));
            assert_eq!(
                Some(step_text.as_str()),
                rust_step.lines().next(),
                "step {step}"
            );
            n_waiting_rows += markup.matches("dep-why").count();
        }
        assert!(n_waiting_rows > 0, "the run never showed a waiting op");
    }
}
