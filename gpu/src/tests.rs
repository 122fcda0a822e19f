//! Tests of the kernels' compilation (with NVRTC, which needs no GPU), of the CUBIN file the
//! driver loads, and of what needs no GPU at all. A test that needs what this machine lacks
//! prints `skipped: ...` and returns; `scripts/gpu-check` runs them on a GPU machine. The GPU
//! tests of plan evaluation are dep-interp's (`src/gpu_tests.rs`).

use super::*;

/// NVRTC is a compiler: it needs no GPU, so wherever libnvrtc is installed the kernels are
/// compiled for real to what `GpuDevice::open` loads first, a CUBIN (an ELF image of machine
/// code) for the device's compute capability, here sm_90 (H100); a capability NVRTC does not
/// know is an error (the device then loads PTX), not a panic.
#[test]
fn the_kernels_compile_to_a_cubin_when_nvrtc_is_installed() {
    if let Err(reason) = detect::probe_library("nvrtc", &["nvrtcGetCUBIN"]) {
        println!("skipped: no NVRTC ({reason})");
        return;
    }
    let source = source::kernel_source();
    let image = std::panic::catch_unwind(|| runtime::compile_cubin(&source, (9, 0)))
        .expect("NVRTC loads")
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(&image[..4], b"\x7fELF", "a CUBIN is an ELF image");
    assert_eq!(image[4], 2, "64-bit");
    const EM_CUDA: u16 = 190;
    assert_eq!(u16::from_le_bytes([image[18], image[19]]), EM_CUDA);
    for name in source::kernel_names() {
        assert!(
            image
                .windows(name.len() + 1)
                .any(|window| &window[..name.len()] == name.as_bytes() && window[name.len()] == 0),
            "{name} is not in the CUBIN"
        );
    }
    let unknown = runtime::compile_cubin(&source, (1, 0)).unwrap_err();
    assert!(unknown.contains("sm_10"), "{unknown}");
}

/// The CUBIN goes to the driver through a file: a new one per load, under the temporary
/// directory, named with the process id, holding the image.
#[test]
fn a_cubin_file_is_new_and_named_for_the_process() {
    let image = b"\x7fELF not really a cubin";
    let first = runtime::write_cubin_file(image, (9, 0)).unwrap();
    let second = runtime::write_cubin_file(image, (9, 0)).unwrap();
    assert_ne!(first, second);
    for path in [&first, &second] {
        assert_eq!(path.parent(), Some(std::env::temp_dir().as_path()));
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with(&format!("dep-kernels-{}-", std::process::id())),
            "{name}"
        );
        assert!(name.ends_with("-sm_90.cubin"), "{name}");
        assert_eq!(std::fs::read(path).unwrap(), image);
        std::fs::remove_file(path).unwrap();
    }
}

/// A script may choose the sync mode of gpu0 to gpu63; beyond, an error says so (no GPU needed:
/// nothing is changed).
#[test]
fn the_sync_mode_is_chosen_only_for_devices_it_has_room_for() {
    let error = runtime::choose_sync_every_op(Some(64), true).unwrap_err();
    assert!(error.to_string().contains("gpu0 to gpu63"), "{error}");
}
