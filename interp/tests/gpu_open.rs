//! A GPU opens where a statement first places ops on it, on the interpreter's thread, not
//! inside the first op (whose time it would take, in every view). A file of its own: the GPU
//! runtime is the process's, and another test would have opened the device first.
//! Prints `skipped: no GPU (...)` and passes on a machine without a GPU; `scripts/gpu-check`
//! runs it on one.

use dep_interp::gpu::{self, GpuAvailability};

#[test]
fn a_gpu_opens_where_a_statement_places_ops_on_it_before_any_op() {
    if let GpuAvailability::Unavailable { reason } = gpu::detect() {
        println!("skipped: no GPU ({reason})");
        return;
    }
    let mut session = dep_interp::Session::new(dep_interp::SessionConfig {
        policy: dep_engine::Policy::PerDevice,
        threads: 2,
        observe: true,
        ..dep_interp::SessionConfig::default()
    });
    assert!(!gpu::is_open(0), "nothing has opened gpu0 yet");
    let mut out = Vec::new();
    // A block placed on gpu0 with no statement in it: no op is pushed, and gpu0 is open.
    session
        .run_source("open.dep", "with gpu0 {\n}\n", &mut out)
        .unwrap();
    assert!(gpu::is_open(0), "the `with gpu0` opened gpu0");
    let log = session.event_log().expect("an observed session");
    assert!(
        !log.events()
            .iter()
            .any(|event| matches!(event.kind, dep_engine::EventKind::Pushed { .. })),
        "no op was pushed"
    );
    session.finish().unwrap();
}
