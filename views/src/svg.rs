//! The timeline as SVG: a Gantt chart with one lane per worker and one per device lane (where a
//! GPU op's kernels ran, after the worker enqueued them), ops as bars labelled with their
//! statements, idle time as the bare lane, the critical path outlined, a time axis, and optional
//! dependency arrows.
//!
//! Labels use a monospace font so their width is known without measuring text: a label is cut to
//! the characters that fit in its bar, and the full statement is in the bar's `<title>` tooltip.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use dep_engine::{OpId, OpState};

use crate::color::Role;
use crate::replay::{Bar, Lane, Replay};
use crate::util::{self, escape_xml, format_ns, format_percent, truncate};

/// How the timeline is drawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimelineOptions {
    /// The picture's width in pixels.
    pub width_px: u32,
    /// Draw an arrow for every dependency edge (each a `path` of class `dep-arrow`, which a page
    /// may show only on hover).
    pub arrows: bool,
    /// The run was simulated: times are on the virtual clock, and the title says so.
    pub simulated: bool,
    /// The time axis covers at least this long (ns), so that timelines of different runs drawn
    /// with the same span share one scale.
    pub span_ns: Option<u64>,
    /// The title says where the axis's 0 lies on the clock traces and replays use (`, from the
    /// first push at 0.84 ms`); a live display, whose tables count from the same 0, leaves it.
    pub origin_note: bool,
    /// What the timeline draws, named in its title (`timeline of cell[3]`) when it is not the
    /// whole run: a notebook's log holds only its last cell that ran code.
    pub of: Option<String>,
}

impl Default for TimelineOptions {
    fn default() -> TimelineOptions {
        TimelineOptions {
            width_px: 1100,
            arrows: false,
            simulated: false,
            span_ns: None,
            origin_note: true,
            of: None,
        }
    }
}

const FONT: &str = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', monospace";
/// Width of one character of the 11 px monospace font (0.6 em).
const CHAR_PX: f64 = 6.6;
const LANE_PX: f64 = 32.0;
const BAR_PX: f64 = 22.0;
const TOP_PX: f64 = 40.0;
const LEFT_PX: f64 = 120.0;
const RIGHT_PX: f64 = 24.0;
const AXIS_PX: f64 = 34.0;
/// The width a lane's name takes at most, left of its busy share.
const LANE_LABEL_PX: f64 = 72.6;

/// The timeline of a replay as a standalone SVG document.
pub fn timeline(replay: &Replay, options: &TimelineOptions) -> String {
    let lanes = replay.timeline_lanes();
    let width = f64::from(options.width_px.max(400));
    let height = TOP_PX + LANE_PX * lanes.len() as f64 + AXIS_PX;
    let (start, end) = replay.span_ns();
    let axis_end = options
        .span_ns
        .map_or(end, |span_ns| end.max(start.saturating_add(span_ns)));
    let span = (axis_end - start).max(1) as f64;
    let run_span = (end - start).max(1);
    let plot = width - LEFT_PX - RIGHT_PX;
    let x_of = |time: u64| LEFT_PX + time.saturating_sub(start) as f64 / span * plot;
    let critical = replay.critical_path_lanes();
    let on_path: HashSet<_> = critical.iter().map(|(op, _)| *op).collect();
    // The path's device ops whose kernels count for them: their device lanes' bars are outlined.
    let on_device: HashSet<_> = (critical.iter())
        .filter(|(_, kernels)| *kernels)
        .map(|(op, _)| *op)
        .collect();

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="{FONT}" font-size="11">"#
    );
    let _ = writeln!(
        svg,
        r#"<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="{}"/></marker></defs>"#,
        Role::Edge.hex()
    );
    let _ = writeln!(
        svg,
        r##"<rect width="100%" height="100%" fill="#ffffff"/><text x="12" y="22" font-size="13" font-weight="bold">timeline{}{}: {}, {} wall{}</text>"##,
        (options.of.as_deref()).map_or(String::new(), |of| format!(" of {}", escape_xml(of))),
        if options.simulated {
            " (simulated: virtual time)"
        } else {
            ""
        },
        crate::text::count(replay.ops().len(), "op"),
        escape_xml(&format_ns(end - start)),
        escape_xml(&if options.origin_note {
            crate::text::origin_note(start)
        } else {
            String::new()
        })
    );
    legend(&mut svg, replay, width);

    for (row, lane) in lanes.iter().enumerate() {
        let y = TOP_PX + row as f64 * LANE_PX;
        // A running op counts up to now while the run goes on; in a run that ended, an op
        // that never finished does not count.
        let live = replay.now_ns().is_some();
        // Communications count as in the summary (`fold::RunFold`): only on a lane of the
        // network's own, once where several are in flight.
        let network = crate::fold::is_network_lane(&replay.lane_name(lane));
        let bars = replay.bars(lane);
        let counted = bars
            .iter()
            .filter(|bar| live || bar.op.finished_ns.is_some());
        let (comm, compute): (Vec<&Bar<'_>>, Vec<&Bar<'_>>) =
            counted.partition(|bar| bar.op.device == dep_engine::Device::Net);
        let comm: Vec<(u64, u64)> = comm
            .iter()
            .filter(|_| network)
            .map(|bar| (bar.start_ns, bar.end_ns))
            .collect();
        let busy: u64 = compute
            .iter()
            .map(|bar| bar.end_ns - bar.start_ns)
            .sum::<u64>()
            + crate::fold::covered_ns(&comm);
        let _ = writeln!(
            svg,
            r#"<rect x="{LEFT_PX}" y="{y:.1}" width="{plot:.1}" height="{BAR_PX}" fill="{}"/><text x="10" y="{:.1}"{}</text><text x="{:.1}" y="{:.1}" text-anchor="end" fill="{}" font-size="9">{}</text>"#,
            Role::Idle.hex(),
            y + 15.0,
            lane_label(&replay.lane_name(lane)),
            LEFT_PX - 6.0,
            y + 15.0,
            Role::Dim.hex(),
            escape_xml(&format_percent(busy, run_span)),
        );
    }

    let mut anchors = Anchors::default();
    for (row, lane) in lanes.iter().enumerate() {
        let y = TOP_PX + row as f64 * LANE_PX;
        let bars = replay.bars(lane);
        let mut index = 0;
        while index < bars.len() {
            // Bars under a pixel wide that start in the same pixel column are drawn as one: a
            // lane holds at most about one bar per pixel, whatever the number of ops, and idle
            // gaps stay visible at the picture's resolution.
            let is_thin = |bar: &Bar<'_>| x_of(bar.end_ns) - x_of(bar.start_ns) < 1.0;
            let column = x_of(bars[index].start_ns).floor();
            let mut run_end = index + 1;
            if is_thin(&bars[index]) {
                while run_end < bars.len()
                    && is_thin(&bars[run_end])
                    && x_of(bars[run_end].start_ns).floor() == column
                {
                    run_end += 1;
                }
            }
            let draw = BarDraw {
                replay,
                lane,
                y,
                start,
                on_path: &on_path,
                on_device: &on_device,
                x_of: &x_of,
            };
            let drawn = &bars[index..run_end];
            match drawn {
                [bar] => draw.bar(&mut svg, bar),
                run => draw.run(&mut svg, run),
            }
            if options.arrows && matches!(lane, Lane::Worker(_)) {
                anchors.add(drawn, y + BAR_PX / 2.0, end, &x_of);
            }
            index = run_end;
        }
    }

    if options.arrows {
        arrows(&mut svg, replay, &anchors, &on_path);
    }

    axis(&mut svg, start, axis_end, height - AXIS_PX + 4.0, &x_of);
    svg.push_str("</svg>\n");
    svg
}

/// Where dependency arrows meet what the timeline drew on worker lanes: each bar, or run of thin
/// bars drawn as one, with the ops it holds.
#[derive(Default)]
struct Anchors {
    /// Each drawn element's left end (where arrows arrive), right end (where they leave) and
    /// its lane's middle, in pixels.
    ends: Vec<(f64, f64, f64)>,
    /// The element each op was drawn in.
    of_op: HashMap<OpId, usize>,
}

impl Anchors {
    /// Adds the element that draws `bars` (one bar, or a run of thin ones) at height `y`;
    /// `end` is the run's last time, where an op still running ends.
    fn add(&mut self, bars: &[Bar<'_>], y: f64, end: u64, x_of: &dyn Fn(u64) -> f64) {
        let [first, ..] = bars else { return };
        let (left, right) = match bars {
            [bar] => (
                bar.op.started_ns.map_or(x_of(bar.start_ns), x_of),
                x_of(bar.op.finished_ns.unwrap_or(end)),
            ),
            run => (
                x_of(first.start_ns),
                x_of(
                    run.iter()
                        .map(|bar| bar.end_ns)
                        .max()
                        .unwrap_or(first.end_ns),
                ),
            ),
        };
        let element = self.ends.len();
        self.ends.push((left, right, y));
        for bar in bars {
            self.of_op.insert(bar.op.id, element);
        }
    }
}

/// How many of the dependencies an arrow stands for its tooltip names; it counts the others.
const NAMED_DEPENDENCIES: usize = 3;

/// Draws the dependency arrows between the elements the timeline drew: one arrow per pair of
/// elements, standing for every edge between their ops (none inside one element). A run of
/// thin bars holds many ops, so a long run gets at most an arrow or so per element, where an
/// arrow per edge made a 2,000,000-op timeline hundreds of megabytes of curves a pixel long.
fn arrows(svg: &mut String, replay: &Replay, anchors: &Anchors, on_path: &HashSet<OpId>) {
    struct Arrow {
        from: usize,
        to: usize,
        critical: bool,
        /// The first few dependencies by name (`RAW x`), each with how many edges it names.
        names: Vec<(String, usize)>,
        n_dependencies: usize,
    }
    let mut arrows: Vec<Arrow> = Vec::new();
    let mut place: HashMap<(usize, usize), usize> = HashMap::new();
    for edge in replay.edges() {
        let (Some(&from), Some(&to)) = (anchors.of_op.get(&edge.from), anchors.of_op.get(&edge.to))
        else {
            continue;
        };
        if from == to {
            continue;
        }
        let index = *place.entry((from, to)).or_insert_with(|| {
            arrows.push(Arrow {
                from,
                to,
                critical: false,
                names: Vec::new(),
                n_dependencies: 0,
            });
            arrows.len() - 1
        });
        let arrow = &mut arrows[index];
        arrow.critical |= on_path.contains(&edge.from) && on_path.contains(&edge.to);
        for (var, hazard) in edge.dependencies() {
            arrow.n_dependencies += 1;
            let name = format!("{} {}", hazard.short_name(), replay.var_name(var));
            match arrow.names.iter().position(|(named, _)| *named == name) {
                Some(named) => arrow.names[named].1 += 1,
                None if arrow.names.len() < NAMED_DEPENDENCIES => arrow.names.push((name, 1)),
                None => {}
            }
        }
    }
    for arrow in arrows {
        let (_, from_x, from_y) = anchors.ends[arrow.from];
        let (to_x, _, to_y) = anchors.ends[arrow.to];
        let colour = if arrow.critical {
            Role::Critical.hex()
        } else {
            Role::Edge.hex()
        };
        let title = dependencies_title(&arrow.names, arrow.n_dependencies);
        let bend = (to_x - from_x).abs().max(12.0) / 2.0;
        let _ = writeln!(
            svg,
            r#"<path class="dep-arrow" d="M{from_x:.1},{from_y:.1} C{:.1},{from_y:.1} {:.1},{to_y:.1} {to_x:.1},{to_y:.1}" fill="none" stroke="{colour}" stroke-opacity="0.7" marker-end="url(#arrow)"><title>{}</title></path>"#,
            from_x + bend,
            to_x - bend,
            escape_xml(&title),
        );
    }
}

/// An arrow's tooltip: its one dependency (`RAW x`), or how many it stands for, those named with
/// their counts and the rest counted (`5 dependencies: RAW lr ×2, WAR dH, 2 more`).
fn dependencies_title(names: &[(String, usize)], n_dependencies: usize) -> String {
    if n_dependencies == 1 {
        return names
            .first()
            .map(|(name, _)| name.clone())
            .unwrap_or_default();
    }
    let mut parts: Vec<String> = names
        .iter()
        .map(|(name, count)| match count {
            1 => name.clone(),
            count => format!("{name} ×{count}"),
        })
        .collect();
    let n_named: usize = names.iter().map(|(_, count)| count).sum();
    if n_dependencies > n_named {
        parts.push(format!("{} more", n_dependencies - n_named));
    }
    format!("{n_dependencies} dependencies: {}", parts.join(", "))
}

/// Draws the bars of one lane.
struct BarDraw<'a> {
    replay: &'a Replay,
    lane: &'a Lane,
    y: f64,
    /// The time at the left edge.
    start: u64,
    on_path: &'a HashSet<dep_engine::OpId>,
    /// The ops of `on_path` whose kernels count for them (their device bar is on the path).
    on_device: &'a HashSet<dep_engine::OpId>,
    x_of: &'a dyn Fn(u64) -> f64,
}

impl BarDraw<'_> {
    /// Whether this lane's bar of `op` is where the critical path spends its time: its
    /// worker's bar, or its kernels' on a device lane when those count for it (a chain of
    /// kernels longer than their launches).
    fn on_path(&self, op: OpId) -> bool {
        self.on_path.contains(&op)
            && match self.lane {
                Lane::Worker(_) => !self.on_device.contains(&op),
                Lane::Device(_) => self.on_device.contains(&op),
            }
    }

    /// The outline of a bar `width` pixels wide: none when it is too thin for its fill to show
    /// inside one; the critical path's colour when it holds an op's time on the path.
    fn stroke(&self, critical: bool, width: f64) -> String {
        if width < 4.0 {
            // An outline would cover a thin bar's fill.
            String::new()
        } else if critical {
            format!(r#" stroke="{}" stroke-width="2""#, Role::Critical.hex())
        } else {
            r##" stroke="#ffffff" stroke-width="0.5""##.to_string()
        }
    }

    /// One op's bar, labelled with as much of its statement as fits.
    fn bar(&self, svg: &mut String, bar: &Bar<'_>) {
        let op = bar.op;
        let x = (self.x_of)(bar.start_ns);
        let width = ((self.x_of)(bar.end_ns) - x).max(1.0);
        let what = match self.lane {
            Lane::Device(_) => {
                let enqueued = op.started_ns.map_or_else(String::new, |enqueued| {
                    format!(
                        ", {} after its enqueue",
                        format_ns(bar.start_ns.saturating_sub(enqueued))
                    )
                });
                format!("kernels on {}{enqueued}", self.replay.lane_name(self.lane))
            }
            Lane::Worker(_) => format!("{} on {}", op.id, self.replay.lane_name(self.lane)),
        };
        let tooltip = format!(
            "{} · {} · {what} from {} for {}",
            op.describe(),
            op.state.name(),
            format_ns(bar.start_ns.saturating_sub(self.start)),
            format_ns(bar.end_ns - bar.start_ns)
        );
        let _ = writeln!(
            svg,
            r#"<g><title>{}</title><rect x="{x:.1}" y="{:.1}" width="{width:.1}" height="{BAR_PX}" rx="2" fill="{}"{}/>"#,
            escape_xml(&tooltip),
            self.y,
            Role::State(op.state).hex(),
            self.stroke(self.on_path(op.id), width),
        );
        let n_chars = ((width - 6.0) / CHAR_PX).floor();
        if n_chars >= 2.0 {
            let _ = write!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" fill="{}">{}</text>"#,
                x + 3.0,
                self.y + 15.0,
                if op.state == OpState::Running {
                    "#ffffff"
                } else {
                    "#1f2328"
                },
                escape_xml(&truncate(&op.label, n_chars as usize))
            );
        }
        svg.push_str("</g>\n");
    }

    /// Several thin bars in a row as one, in the colour of their most notable state (see
    /// [`run_state`]); its tooltip counts the ops by state and names the first and the last.
    fn run(&self, svg: &mut String, run: &[Bar<'_>]) {
        let (first, last) = (&run[0], &run[run.len() - 1]);
        let x = (self.x_of)(first.start_ns);
        let end_ns = run
            .iter()
            .map(|bar| bar.end_ns)
            .max()
            .unwrap_or(last.end_ns);
        let width = ((self.x_of)(end_ns) - x).max(1.0);
        let mut states: Vec<(OpState, usize)> = Vec::new();
        for bar in run {
            match states.iter_mut().find(|(state, _)| *state == bar.op.state) {
                Some((_, count)) => *count += 1,
                None => states.push((bar.op.state, 1)),
            }
        }
        let states: Vec<String> = states
            .iter()
            .map(|(state, count)| format!("{count} {}", state.name()))
            .collect();
        let tooltip = format!(
            "{} ops on {} ({}) from {} to {}: {} … {}",
            run.len(),
            self.replay.lane_name(self.lane),
            states.join(", "),
            format_ns(first.start_ns.saturating_sub(self.start)),
            format_ns(end_ns.saturating_sub(self.start)),
            first.op.describe(),
            last.op.describe()
        );
        let critical = run.iter().any(|bar| self.on_path(bar.op.id));
        let _ = writeln!(
            svg,
            r#"<g><title>{}</title><rect x="{x:.1}" y="{:.1}" width="{width:.1}" height="{BAR_PX}" rx="2" fill="{}"{}/></g>"#,
            escape_xml(&tooltip),
            self.y,
            Role::State(run_state(run)).hex(),
            self.stroke(critical, width),
        );
    }
}

/// The state a run of thin bars is drawn in: a failure, a cancellation or a skip shows even
/// among done ops; then running, ready, waiting; done only when all are.
pub(crate) fn run_state(run: &[Bar<'_>]) -> OpState {
    const NOTABLE_FIRST: [OpState; 7] = [
        OpState::Failed,
        OpState::Cancelled,
        OpState::Skipped,
        OpState::Running,
        OpState::Ready,
        OpState::Waiting,
        OpState::Done,
    ];
    NOTABLE_FIRST
        .into_iter()
        .find(|state| run.iter().any(|bar| bar.op.state == *state))
        .unwrap_or(OpState::Done)
}

fn legend(svg: &mut String, replay: &Replay, width: f64) {
    let mut states: Vec<OpState> = Vec::new();
    for op in replay.ops() {
        if !states.contains(&op.state) {
            states.push(op.state);
        }
    }
    states.sort_by_key(|state| *state as u8);
    let mut x = width - RIGHT_PX - 110.0 - 80.0 * states.len() as f64;
    for state in states {
        let _ = write!(
            svg,
            r#"<rect x="{x:.1}" y="12" width="12" height="12" rx="2" fill="{}"/><text x="{:.1}" y="22">{}</text>"#,
            Role::State(state).hex(),
            x + 16.0,
            state.name()
        );
        x += 80.0;
    }
    let _ = writeln!(
        svg,
        r#"<rect x="{x:.1}" y="12" width="12" height="12" rx="2" fill="none" stroke="{}" stroke-width="2"/><text x="{:.1}" y="22">critical path</text>"#,
        Role::Critical.hex(),
        x + 16.0
    );
}

/// A time axis with ticks at 1, 2 or 5 × 10^k, about eight of them.
fn axis(svg: &mut String, start: u64, end: u64, y: f64, x_of: &dyn Fn(u64) -> f64) {
    // An empty span (a run of no ops) gets its one tick, `0`, and no time it did not last.
    let span = end - start;
    let rough = span.max(1) as f64 / 8.0;
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|factor| factor * magnitude)
        .find(|step| *step >= rough)
        .unwrap_or(10.0 * magnitude)
        .max(1.0) as u64;
    let _ = writeln!(
        svg,
        r#"<line x1="{LEFT_PX}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{}"/>"#,
        x_of(end),
        Role::Dim.hex()
    );
    let mut offset = 0;
    while offset <= span {
        let x = x_of(start + offset);
        let _ = writeln!(
            svg,
            r#"<line x1="{x:.1}" y1="{y:.1}" x2="{x:.1}" y2="{:.1}" stroke="{}"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="{}" font-size="10">{}</text>"#,
            y + 4.0,
            Role::Dim.hex(),
            y + 16.0,
            Role::Dim.hex(),
            escape_xml(&tick_label(offset))
        );
        // A span near the clock's limit (`:timeline 2e10s`) ends the ticks rather than wrap.
        match offset.checked_add(step) {
            Some(next) => offset = next,
            None => break,
        }
    }
}

/// An axis label: `0`, `50 ms`, `2.50 ms` (no `.00` on round ticks).
fn tick_label(offset_ns: u64) -> String {
    if offset_ns == 0 {
        return "0".to_string();
    }
    let label = format_ns(offset_ns);
    match label.split_once(' ') {
        Some((number, unit)) if number.contains('.') => {
            format!(
                "{} {unit}",
                number.trim_end_matches('0').trim_end_matches('.')
            )
        }
        _ => label,
    }
}

/// The rest of a lane's `<text` element: its name, whole. A name of up to 11 columns is
/// written as it is; one of up to 16 (a job's lanes, `dev:r0 gpu0:s0`) is squeezed into the
/// same width, and a longer one is cut there, with its full name as a tooltip. Cut at 11
/// columns, both streams of a rank's GPU read `dev:r0 gpu…`, with different figures beside.
fn lane_label(name: &str) -> String {
    match util::width(name) {
        0..=11 => format!(">{}", escape_xml(name)),
        12..=16 => format!(
            r#" textLength="{LANE_LABEL_PX}" lengthAdjust="spacingAndGlyphs">{}"#,
            escape_xml(name)
        ),
        _ => format!(
            "><title>{}</title>{}",
            escape_xml(name),
            escape_xml(&truncate(name, 11))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::{axis, dependencies_title, lane_label};

    /// The tick labels of an axis from `start` to `end`.
    fn tick_labels(start: u64, end: u64) -> Vec<String> {
        let mut svg = String::new();
        axis(&mut svg, start, end, 0.0, &|time| time as f64);
        svg.split("font-size=\"10\">")
            .skip(1)
            .map(|rest| rest.split('<').next().unwrap_or_default().to_string())
            .collect()
    }

    /// Two lanes of one rank's GPU are told apart: cut at 11 columns, `dev:r0 gpu0:s0` and
    /// `dev:r0 gpu0:s1` both read `dev:r0 gpu…`.
    #[test]
    fn a_lanes_name_is_whole_or_its_tooltip_is() {
        assert_eq!(lane_label("cpu:0"), ">cpu:0");
        assert_eq!(lane_label("dev:gpu0:s0"), ">dev:gpu0:s0");
        assert_eq!(
            lane_label("dev:r0 gpu0:s1"),
            r#" textLength="72.6" lengthAdjust="spacingAndGlyphs">dev:r0 gpu0:s1"#
        );
        assert_eq!(
            lane_label("dev:r12 gpu10->gpu11"),
            "><title>dev:r12 gpu10-&gt;gpu11</title>dev:r12 gp…"
        );
    }

    /// A run of no ops lasted no time: its axis says `0`, not `0` to `1 ns`.
    #[test]
    fn an_empty_runs_axis_has_one_tick() {
        assert_eq!(tick_labels(5, 5), ["0"]);
        assert_eq!(tick_labels(0, 1).last().map(String::as_str), Some("1 ns"));
        let labels = tick_labels(1_000, 1_000 + 8_000_000);
        assert_eq!(labels.first().map(String::as_str), Some("0"));
        assert_eq!(labels.last().map(String::as_str), Some("8 ms"));
    }

    #[test]
    fn an_arrows_tooltip_names_its_dependencies_and_counts_the_rest() {
        let names = |names: &[(&str, usize)]| -> Vec<(String, usize)> {
            names
                .iter()
                .map(|(name, count)| (name.to_string(), *count))
                .collect()
        };
        assert_eq!(dependencies_title(&names(&[("RAW x", 1)]), 1), "RAW x");
        assert_eq!(
            dependencies_title(&names(&[("RAW lr", 2)]), 2),
            "2 dependencies: RAW lr ×2"
        );
        assert_eq!(
            dependencies_title(&names(&[("RAW lr", 2), ("WAR dH", 1), ("RAW W1", 1)]), 6),
            "6 dependencies: RAW lr ×2, WAR dH, RAW W1, 2 more"
        );
    }
}
