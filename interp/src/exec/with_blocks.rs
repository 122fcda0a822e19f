//! `with` blocks: the device ops run on (`with gpu0 { ... }`), their priority
//! (`priority auto` included) and how graphs replay.

use dep_engine as engine;
use dep_grammar as grammar;
use grammar::Span;

use std::sync::Arc;

use super::{Binding, Flow, Runner};
use crate::error::RunError;
use crate::graph::{RecordedBlock, MAX_BULK};

/// The fields of `device NAME = sim(...)`: name, lowest and highest value, whether whole.
const DEVICE_FIELDS: [(&str, f64, f64, bool); 8] = [
    ("tflops", 1e-6, 1e6, false),
    ("gflops", 1e-3, 1e9, false),
    ("gbps", 1e-6, 1e6, false),
    ("latency_us", 0.0, 1e9, false),
    ("launch_us", 0.0, 1e9, false),
    ("sync", 0.0, 1.0, true),
    ("streams", 1.0, 64.0, true),
    ("lanes", 1.0, 64.0, true),
];

impl Runner<'_> {
    pub(super) fn exec_with(
        &mut self,
        settings: &[grammar::WithSetting],
        body: &grammar::Block,
    ) -> Result<Flow, RunError> {
        let saved_priority = self.priority;
        let saved_options = self.replay_options;
        let saved_device = self.device;
        let n_placed_by = self.placed_by.len();
        let mut runs_here = true;
        for setting in settings {
            match setting {
                grammar::WithSetting::Value { key, value }
                    if matches!(key.text.as_str(), "lazy" | "recycle" | "share") =>
                {
                    let enabled = self.host_int(value)? != 0;
                    match key.text.as_str() {
                        "lazy" => self.replay_options.lazy = enabled,
                        "recycle" => self.replay_options.recycle = enabled,
                        _ => self.replay_options.share = enabled,
                    }
                }
                grammar::WithSetting::Value { key, value } if key.text == "bulk" => {
                    let n_ops = self.host_int(value)?;
                    self.replay_options.bulk = usize::try_from(n_ops)
                        .ok()
                        .filter(|n_ops| (1..=MAX_BULK).contains(n_ops))
                        .ok_or_else(|| {
                            self.error(
                                value.span,
                                format!("bulk = {n_ops}: a bulk holds 1 to {MAX_BULK} ops"),
                                "this size",
                            )
                        })?;
                }
                grammar::WithSetting::Value { key, value } if key.text == "recycle_from" => {
                    let bytes = self.host_int(value)?;
                    self.replay_options.recycle_from = u64::try_from(bytes).map_err(|_| {
                        self.error(
                            value.span,
                            format!("recycle_from = {bytes}: a size in bytes is at least 0"),
                            "this size",
                        )
                    })?;
                }
                grammar::WithSetting::Value { key, value } if key.text == "priority" => {
                    self.note_placed_by(value);
                    let priority = self.host_int(value)?;
                    self.priority = i32::try_from(priority).map_err(|_| {
                        self.error(
                            value.span,
                            format!("priority {priority} is out of range"),
                            "this priority",
                        )
                    })?;
                }
                grammar::WithSetting::Value { key, value } if key.text == "gpu" => {
                    self.note_placed_by(value);
                    let index = self.host_int(value)?;
                    let device = u16::try_from(index)
                        .ok()
                        .filter(|index| *index < engine::MAX_GPUS)
                        .map(engine::Device::Gpu)
                        .ok_or_else(|| {
                            self.error(
                                value.span,
                                format!("gpu {index} is not a GPU index"),
                                "this index",
                            )
                        })?;
                    self.device = self.placement(device, value.span)?;
                }
                grammar::WithSetting::Value { key, value } if key.text == "rank" => {
                    runs_here &= self.runs_on_rank(value)?;
                }
                grammar::WithSetting::Value { key, .. } => {
                    return Err(self.error(
                        key.span,
                        format!(
                            "unknown setting `{}` (expected `priority = N`, `bulk = N`, `lazy`, `recycle` or `share = 0|1`, `recycle_from = BYTES`, `rank = K`, or a device)",
                            key.text
                        ),
                        "here",
                    ));
                }
                grammar::WithSetting::Device(name) => {
                    let device = self.device_named(name)?;
                    self.device = self.placement(device, name.span)?;
                }
            }
        }
        let flow = if runs_here {
            self.exec_block(&body.statements)
        } else {
            Ok(Flow::Normal)
        };
        self.priority = saved_priority;
        self.replay_options = saved_options;
        self.device = saved_device;
        self.placed_by.truncate(n_placed_by);
        flow
    }

    /// Notes `value`, a `with` setting that places the block's ops, when it reads a loop
    /// counter (see `placed_by`).
    fn note_placed_by(&mut self, value: &grammar::Expr) {
        let text = self.text(value.span);
        let reads_a_counter = crate::labels::identifiers(text)
            .any(|name| matches!(self.lookup(name), Some((Binding::Counter(_), _))));
        if reads_a_counter {
            self.placed_by.push(Arc::from(text));
        }
    }

    /// The device a name in `with NAME` or `to(X, NAME)` means.
    pub(super) fn device_named(&self, name: &grammar::Name) -> Result<engine::Device, RunError> {
        match name.text.parse::<engine::Device>() {
            Ok(device) => Ok(device),
            Err(message) => Err(self.error(name.span, message, "this device")),
        }
    }

    /// Checks that ops may run on `device`: any device under the simulated engine; otherwise the
    /// CPU, or a GPU that is really there, which is opened here if no op has opened it yet.
    pub(super) fn placement(
        &self,
        device: engine::Device,
        span: Span,
    ) -> Result<engine::Device, RunError> {
        if self.scope.engine.policy() == engine::Policy::Sim {
            return Ok(device);
        }
        match device {
            engine::Device::Gpu(index) => {
                if let Some(message) = crate::gpu::placement_error(index, crate::gpu::detect()) {
                    return Err(self.error(span, message, "this device"));
                }
                self.open_gpu(index, span)?;
                Ok(device)
            }
            _ => Ok(device),
        }
    }

    /// Opens GPU `index` (its context, streams, cuBLAS handles and kernels) on the interpreter's
    /// thread, before any op placed on it is pushed: opening takes from a third of a second to
    /// seconds, and inside the first op placed there it showed in every view as that op's time
    /// (an H200's `x = randn(1024, 1024)` took 359 ms, its kernel 12.5 ms). A device already
    /// open costs a lookup; one that cannot open is an error at the place that names it.
    fn open_gpu(&self, index: u16, span: Span) -> Result<(), RunError> {
        if crate::gpu::is_open(index) {
            return Ok(());
        }
        let config = crate::gpu::GpuConfig::from_env(self.scope.engine.gpu_streams());
        crate::gpu::GpuRuntime::get(config)
            .and_then(|runtime| runtime.device(index).map(|_| ()))
            .map_err(|error| self.error(span, error.to_string(), "this device"))
    }

    /// `device gpu1 = sim(tflops=100, gbps=2000, latency_us=5, launch_us=5, sync=1)`: the
    /// simulated model of a device
    /// (or of every GPU with `gpu`, of links with `pcie` / `nvlink`, of the copy lane with
    /// `copy`). Fields not given keep their defaults; real engines ignore the models, except
    /// a GPU's `sync`, which they honour.
    pub(super) fn exec_device(
        &mut self,
        name: &grammar::Name,
        constructor: &grammar::Name,
        args: &[grammar::KeywordArg],
    ) -> Result<(), RunError> {
        if constructor.text != "sim" {
            return Err(self.error(
                constructor.span,
                format!(
                    "unknown device model `{}` (expected sim(...))",
                    constructor.text
                ),
                "here",
            ));
        }
        let Some(mut model) = engine::sim::default_model(&name.text) else {
            return Err(self.error(name.span, format!("`{}` is not a device to simulate (expected cpu, gpu, gpu0, ..., copy, pcie, nvlink or net)", name.text), "this name"));
        };
        let mut sync_chosen = None;
        for arg in args {
            let value = self.host_number(&arg.value)?;
            let field = arg.name.text.as_str();
            let Some(&(_, low, high, whole)) =
                DEVICE_FIELDS.iter().find(|(name, ..)| *name == field)
            else {
                return Err(self.error(arg.name.span, format!("unknown field `{field}` (expected tflops, gflops, gbps, latency_us, launch_us, sync, or a whole number of streams)"), "this field"));
            };
            // Bounded so that every simulated duration fits the clock (the ranges span far
            // more than real devices do).
            if !(value >= low && value <= high && (!whole || value.fract() == 0.0)) {
                let what = if whole { "a whole number" } else { "a number" };
                return Err(self.error(
                    arg.value.span,
                    format!("{field} must be {what} from {low} to {high}, got {value}"),
                    "this value",
                ));
            }
            match field {
                "tflops" => model.flops_per_s = value * 1e12,
                "gflops" => model.flops_per_s = value * 1e9,
                "gbps" => model.bytes_per_s = value * 1e9,
                "latency_us" => model.latency_ns = (value * 1e3).round() as u64,
                "launch_us" => model.launch_ns = (value * 1e3).round() as u64,
                "sync" => {
                    model.sync = value != 0.0;
                    sync_chosen = Some(model.sync);
                }
                _ => model.lanes = value as usize,
            }
        }
        self.scope.engine.set_sim_device(&name.text, model);
        match sync_chosen {
            Some(on) if self.scope.engine.policy() != engine::Policy::Sim => {
                self.choose_real_gpu_sync(name, on)
            }
            _ => Ok(()),
        }
    }

    /// On a real engine, `sync=` of a GPU's model is the one field honoured: the GPU's ops
    /// synchronize their stream at their end (the pre-RFC mode) or not, from the next op on,
    /// once the ops already pushed have ended. Nothing to do without a GPU.
    fn choose_real_gpu_sync(&mut self, name: &grammar::Name, on: bool) -> Result<(), RunError> {
        let index = match name.text.as_str() {
            "gpu" => None,
            text => match text.strip_prefix("gpu").and_then(|n| n.parse::<u16>().ok()) {
                Some(index) => Some(index),
                None => return Ok(()),
            },
        };
        if crate::gpu::detect().n_devices() == 0 {
            return Ok(());
        }
        self.wait_all(name.span)?;
        crate::gpu::choose_sync_every_op(index, on)
            .map_err(|error| self.error(name.span, error.to_string(), "this device"))
    }

    /// `priority auto { ... }`: records the block, ranks its ops by HEFT's upward rank (the
    /// longest path of estimated costs from the op to the end, seed 004), and pushes them once
    /// with those ranks as priorities, so ops on the critical path go first.
    pub(super) fn exec_priority_auto(
        &mut self,
        stmt: &grammar::Stmt,
        body: &grammar::Block,
    ) -> Result<(), RunError> {
        let graph = self.record(stmt, body, RecordedBlock::PriorityAuto)?;
        graph.run_with_upward_ranks(self.scope.engine, self.scope.comm_counters);
        Ok(())
    }
}
