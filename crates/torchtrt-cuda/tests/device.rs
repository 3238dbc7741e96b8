//! The CUDA foundation on a real GPU: memory, copies, the caching allocator, events, NVRTC
//! images loaded from bytes. Each test prints "skipped: no CUDA device" and passes on
//! machines without one.

mod common;

use common::{device_or_skip, from_bytes, random_f32, to_bytes};
use torchtrt_cuda::{
    Arch, CudaError, DeviceBuffer, Event, KernelArgs, KernelImage, Module, compile, probe,
};

const SAXPY: &str = r#"
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"#;

#[test]
fn no_device_is_a_clear_error_not_a_panic() {
    match probe::driver() {
        Ok(()) => assert!(probe::device_count().unwrap() >= 1),
        Err(e) => {
            assert!(matches!(e, CudaError::NoDevice(_)));
            assert!(e.to_string().starts_with("no CUDA device"), "{e}");
            assert!(torchtrt_cuda::CudaDevice::open(0).is_err());
        }
    }
}

#[test]
fn ordinal_past_the_count_is_refused() {
    let Some(_dev) = device_or_skip() else { return };
    let n = probe::device_count().unwrap();
    let err = torchtrt_cuda::CudaDevice::open(n).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[test]
fn upload_copy_download_round_trip() {
    let Some(dev) = device_or_skip() else { return };
    let stream = dev.new_stream().unwrap();
    let host = to_bytes(&random_f32(1 << 20, 1));
    let a = DeviceBuffer::alloc(&dev, host.len()).unwrap();
    let b = dev.allocator().alloc(host.len()).unwrap();
    stream.upload(&host, &a).unwrap();
    stream.copy(&a, &b, host.len()).unwrap();
    let mut back = vec![0u8; host.len()];
    stream.download(&b, &mut back).unwrap();
    assert_eq!(back, host);
    let small = DeviceBuffer::alloc(&dev, 16).unwrap();
    assert!(stream.upload(&host, &small).is_err());
}

#[test]
fn caching_allocator_reuses_blocks() {
    let Some(dev) = device_or_skip() else { return };
    let alloc = torchtrt_cuda::CachingAllocator::new(&dev);
    let first = alloc.alloc(1000).unwrap();
    let ptr = first.ptr();
    assert_eq!(first.capacity(), 1024);
    drop(first);
    assert_eq!(alloc.held_bytes(), 1024);
    let again = alloc.alloc(900).unwrap();
    assert_eq!(again.ptr(), ptr);
    assert_eq!(alloc.driver_allocations(), 1);
    let other = alloc.alloc(5000).unwrap();
    assert_ne!(other.ptr(), ptr);
    assert_eq!(alloc.driver_allocations(), 2);
    drop((again, other));
    alloc.empty_cache().unwrap();
    assert_eq!(alloc.held_bytes(), 0);
}

fn run_saxpy(dev: &torchtrt_cuda::CudaDevice, image: &KernelImage) {
    let module = Module::load(dev, image).unwrap();
    let f = module.function("saxpy").unwrap();
    assert!(module.function("nope").is_err());
    let stream = dev.new_stream().unwrap();
    let n = 100_003;
    let (x, y) = (random_f32(n, 2), random_f32(n, 3));
    let (dx, dy) = (
        dev.allocator().alloc(n * 4).unwrap(),
        dev.allocator().alloc(n * 4).unwrap(),
    );
    stream.upload(&to_bytes(&x), &dx).unwrap();
    stream.upload(&to_bytes(&y), &dy).unwrap();
    let mut args = KernelArgs::new()
        .f32(1.5)
        .ptr(dx.ptr())
        .ptr(dy.ptr())
        .i32(n as i32);
    // SAFETY: the arguments match `saxpy`'s parameters; buffers outlive the sync below.
    unsafe {
        f.launch(
            &stream,
            ((n as u32).div_ceil(256), 1, 1),
            (256, 1, 1),
            0,
            &mut args,
        )
        .unwrap()
    };
    let mut out = vec![0u8; n * 4];
    stream.download(&dy, &mut out).unwrap();
    let out = from_bytes(&out);
    for i in 0..n {
        assert!((out[i] - (1.5 * x[i] + y[i])).abs() < 1e-6, "{i}");
    }
}

#[test]
fn nvrtc_image_loads_from_cubin_and_from_ptx() {
    let Some(dev) = device_or_skip() else { return };
    let arch = Arch::new(dev.compute_capability());
    let image = compile("saxpy", SAXPY, arch, &[]).unwrap();
    assert!(!image.cubin.is_empty());
    assert!(String::from_utf8_lossy(&image.ptx).contains(".entry saxpy"));
    run_saxpy(&dev, &image);
    let ptx_only = KernelImage {
        cubin: Vec::new(),
        ..image.clone()
    };
    run_saxpy(&dev, &ptx_only);
    let older = compile("saxpy", SAXPY, Arch { major: 8, minor: 0 }, &[]).unwrap();
    run_saxpy(&dev, &older);
    let future = KernelImage {
        arch: Arch {
            major: 99,
            minor: 0,
        },
        ..image
    };
    assert!(Module::load(&dev, &future).is_err());
}

#[test]
fn compile_errors_carry_the_log() {
    if let Err(e) = probe::nvrtc() {
        let required = std::env::var("TORCHTRT_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "NVRTC not found but TORCHTRT_REQUIRE_NVRTC=1: {e}"
        );
        println!("skipped: no NVRTC ({e})");
        return;
    }
    for arch in [(7, 5), (8, 0), (9, 0)] {
        let err = compile(
            "broken",
            "extern \"C\" __global__ void k() { undefined_thing(); }",
            Arch::new(arch),
            &[],
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("broken") && text.contains("undefined_thing"),
            "sm_{}{}: {text}",
            arch.0,
            arch.1
        );
    }
}

#[test]
fn events_time_device_work() {
    let Some(dev) = device_or_skip() else { return };
    let stream = dev.new_stream().unwrap();
    let bytes = 256 << 20;
    let (a, b) = (
        dev.allocator().alloc(bytes).unwrap(),
        dev.allocator().alloc(bytes).unwrap(),
    );
    stream.memset(&a, 7, bytes).unwrap();
    let (start, end) = (Event::new(&dev).unwrap(), Event::new(&dev).unwrap());
    start.record(&stream).unwrap();
    stream.copy(&a, &b, bytes).unwrap();
    end.record(&stream).unwrap();
    let ms = start.elapsed_ms(&end).unwrap();
    assert!(ms > 0.0, "{ms}");
    println!(
        "copy of {} MiB: {ms:.3} ms = {:.0} GB/s",
        bytes >> 20,
        2.0 * bytes as f64 / (ms as f64 * 1e6)
    );
    let mut probe_bytes = vec![0u8; 64];
    let head = DeviceBuffer::alloc(&dev, 64).unwrap();
    stream.copy(&b, &head, 64).unwrap();
    stream.download(&head, &mut probe_bytes).unwrap();
    assert!(probe_bytes.iter().all(|&x| x == 7));
}
