//! Finding out at run time whether this process can use NVIDIA GPUs, without ever panicking.
//!
//! cudarc loads libcuda lazily and panics when it is absent (or lacks a symbol it expects), so
//! [`detect`] first opens the driver library itself with `libloading` and checks the symbols this
//! crate relies on; only then does it ask the driver for the device count, and even that call
//! runs under `catch_unwind` as a last line of defence. The answer is computed once per process.

use std::sync::OnceLock;

/// Whether GPUs can be used in this process, and if not, why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuAvailability {
    /// The driver is loaded and reports this many devices (at least one).
    Available {
        /// The number of CUDA devices (`gpu0` .. `gpu{n-1}`).
        n_devices: usize,
    },
    /// No GPU can be used; the reason is a short lowercase phrase such as `libcuda not found`
    /// or `driver reports 0 devices`.
    Unavailable {
        /// Why not, for messages.
        reason: String,
    },
}

impl GpuAvailability {
    /// The number of usable devices (0 when unavailable).
    pub fn n_devices(&self) -> usize {
        match self {
            GpuAvailability::Available { n_devices } => *n_devices,
            GpuAvailability::Unavailable { .. } => 0,
        }
    }
}

/// The environment variable that hides every GPU (`DEP_GPU_DISABLE=1`), for tests and for
/// running a GPU script's CPU fallback on a GPU machine.
pub const DISABLE_ENV: &str = "DEP_GPU_DISABLE";

/// Detects the GPUs once per process (later calls return the first answer). Never panics.
pub fn detect() -> &'static GpuAvailability {
    static AVAILABILITY: OnceLock<GpuAvailability> = OnceLock::new();
    AVAILABILITY.get_or_init(detect_uncached)
}

/// The message for a script that places work on `gpu{device_index}` when that GPU does not
/// exist, or `None` when it does. The message says how many GPUs there are and how to run on the
/// CPU instead.
pub fn placement_error(device_index: u16, availability: &GpuAvailability) -> Option<String> {
    let device = format!("gpu{device_index}");
    match availability {
        GpuAvailability::Available { n_devices } if usize::from(device_index) < *n_devices => None,
        GpuAvailability::Available { n_devices } => {
            let names: Vec<String> = (0..*n_devices).map(|index| format!("gpu{index}")).collect();
            let (count, list) = if *n_devices == 1 {
                ("1 GPU".to_string(), names[0].clone())
            } else {
                (format!("{n_devices} GPUs"), names.join(", "))
            };
            Some(format!(
                "`{device}` does not exist: this machine has {count} ({list}); \
                 use one of those, or remove `with {device}` to run on the CPU"
            ))
        }
        GpuAvailability::Unavailable { reason } => Some(format!(
            "`{device}` is not available: this machine has 0 GPUs ({reason}); \
             to run on the CPU, remove `with {device}` (or `to(..., {device})`), \
             or simulate GPUs with the sim engine (`dep run --engine sim`, `:engine sim` in the \
             REPL, `%engine sim` in a notebook)"
        )),
    }
}

/// The file names under which a CUDA library may be installed, in the order cudarc tries them
/// (CUDA 13's and CUDA 12's names among them), so that a probe opens the very file cudarc will.
pub(crate) fn library_candidates(name: &str) -> Vec<String> {
    cudarc::get_lib_name_candidates(name)
}

/// Opens the first loadable candidate of library `name` and checks that it exports `symbols`.
/// Returns a lowercase reason when it cannot.
pub(crate) fn probe_library(name: &str, symbols: &[&str]) -> Result<(), String> {
    for candidate in library_candidates(name) {
        // SAFETY: loading a shared library runs its initialisers; the CUDA libraries probed here
        // (the driver, NVRTC, cuBLAS) are made to be loaded by any process, and cudarc loads the
        // very same files right after this probe.
        let Ok(library) = (unsafe { libloading::Library::new(&candidate) }) else {
            continue;
        };
        for symbol in symbols {
            // SAFETY: the symbol is only looked up, never called or dereferenced, so its type
            // (a unit pointer here) does not matter.
            let found = unsafe { library.get::<*const ()>(*symbol) }.is_ok();
            if !found {
                return Err(format!(
                    "{candidate} lacks {symbol} (the installed CUDA is too old)"
                ));
            }
        }
        return Ok(());
    }
    Err(format!("lib{name} not found"))
}

/// Driver functions that must be present, the newest first: cudarc binds CUDA 13's API and loads
/// each function when first called, so a driver older than CUDA 12.8 (without
/// `cuEventElapsedTime_v2`, which GPU op timing calls) is reported here as too old instead of
/// failing in the middle of a run.
const DRIVER_SYMBOLS: &[&str] = &[
    "cuEventElapsedTime_v2",
    "cuInit",
    "cuDeviceGetCount",
    "cuMemFreeAsync",
];

fn detect_uncached() -> GpuAvailability {
    let unavailable = |reason: String| GpuAvailability::Unavailable { reason };
    if std::env::var_os(DISABLE_ENV).is_some_and(|value| !value.is_empty() && value != "0") {
        return unavailable(format!("disabled by {DISABLE_ENV}"));
    }
    if let Err(reason) = probe_library("cuda", DRIVER_SYMBOLS) {
        return unavailable(reason);
    }
    // cudarc panics if a symbol it binds is missing; the probe above makes that unlikely, and
    // catching the unwind turns the rest into a message instead of a crash.
    let counted = std::panic::catch_unwind(|| {
        cudarc::driver::result::init()?;
        cudarc::driver::result::device::get_count()
    });
    match counted {
        Ok(Ok(count)) if count > 0 => GpuAvailability::Available {
            n_devices: count as usize,
        },
        Ok(Ok(_)) => unavailable("driver reports 0 devices".to_string()),
        Ok(Err(error)) => unavailable(describe_init_error(&format!("{error:?}"))),
        Err(_) => unavailable("the CUDA driver library could not be loaded".to_string()),
    }
}

/// A phrase for a failed `cuInit`/`cuDeviceGetCount`, from the driver's error name.
pub(crate) fn describe_init_error(error: &str) -> String {
    if error.contains("NO_DEVICE") {
        "driver reports 0 devices".to_string()
    } else if error.contains("INSUFFICIENT_DRIVER") || error.contains("COMPAT") {
        format!("the NVIDIA driver is too old for this program ({error})")
    } else {
        format!("the CUDA driver failed to start ({error})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_gpu_says_how_many_there_are_and_how_to_run_on_cpu() {
        let none = GpuAvailability::Unavailable {
            reason: "libcuda not found".to_string(),
        };
        expect_test::expect![[r#"`gpu0` is not available: this machine has 0 GPUs (libcuda not found); to run on the CPU, remove `with gpu0` (or `to(..., gpu0)`), or simulate GPUs with the sim engine (`dep run --engine sim`, `:engine sim` in the REPL, `%engine sim` in a notebook)"#]]
        .assert_eq(&placement_error(0, &none).unwrap());
        let two = GpuAvailability::Available { n_devices: 2 };
        assert_eq!(placement_error(1, &two), None);
        expect_test::expect![[r#"`gpu2` does not exist: this machine has 2 GPUs (gpu0, gpu1); use one of those, or remove `with gpu2` to run on the CPU"#]]
        .assert_eq(&placement_error(2, &two).unwrap());
        let one = GpuAvailability::Available { n_devices: 1 };
        expect_test::expect![[r#"`gpu3` does not exist: this machine has 1 GPU (gpu0); use one of those, or remove `with gpu3` to run on the CPU"#]]
        .assert_eq(&placement_error(3, &one).unwrap());
        assert_eq!(two.n_devices(), 2);
        assert_eq!(none.n_devices(), 0);
    }

    #[test]
    fn init_errors_become_phrases() {
        assert_eq!(
            describe_init_error("DriverError(CUDA_ERROR_NO_DEVICE, \"no CUDA-capable device\")"),
            "driver reports 0 devices"
        );
        assert!(describe_init_error("CUDA_ERROR_INSUFFICIENT_DRIVER").contains("too old"));
    }

    #[test]
    fn missing_libraries_are_reported_not_panicked() {
        let reason = probe_library("dep_no_such_library_for_tests", &["x"]).unwrap_err();
        assert_eq!(reason, "libdep_no_such_library_for_tests not found");
        let candidates = library_candidates("nvrtc");
        for name in ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"] {
            assert!(
                candidates.contains(&name.to_string()) || cfg!(windows),
                "{name}"
            );
        }
        assert!(library_candidates("cuda").contains(&"libcuda.so.1".to_string()) || cfg!(windows));
    }

    #[test]
    fn detection_never_panics() {
        // On a machine without a GPU this is `Unavailable`; with one, `Available`. Either way the
        // call returns, and twice gives the same answer.
        let first = detect().clone();
        assert_eq!(&first, detect());
        if let GpuAvailability::Unavailable { reason } = &first {
            assert!(!reason.is_empty());
        }
    }
}
