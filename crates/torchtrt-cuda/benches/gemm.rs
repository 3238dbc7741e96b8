//! cuBLAS GEMM speed on 8192³ in every type (printed as ms and TFLOP/s). Skips without a GPU.

use half::{bf16, f16};
use torchtrt_cuda::{Blas, CudaDevice, Event, Gemm, GemmType};

fn encode(v: &[f32], ty: GemmType) -> Vec<u8> {
    match ty {
        GemmType::F16 => v
            .iter()
            .flat_map(|&x| f16::from_f32(x).to_le_bytes())
            .collect(),
        GemmType::Bf16 => v
            .iter()
            .flat_map(|&x| bf16::from_f32(x).to_le_bytes())
            .collect(),
        _ => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

/// `n` pseudo-random floats in [-2, 2) from `seed` (xorshift).
fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    torchtrt_testing::uniform(n, seed, -2.0, 2.0)
}

fn main() {
    let dev = match CudaDevice::open(0) {
        Ok(d) => d,
        Err(e) => {
            println!("gemm bench skipped: {e}");
            return;
        }
    };
    let blas = Blas::new(&dev).expect("cublas");
    let stream = dev.new_stream().unwrap();
    let s = 8192;
    for ty in [GemmType::F32, GemmType::Tf32, GemmType::F16, GemmType::Bf16] {
        let g = Gemm {
            m: s,
            n: s,
            k: s,
            trans_a: false,
            trans_b: false,
            ty,
        };
        let bytes = s * s * ty.size();
        let bufs: Vec<_> = (0..3)
            .map(|_| dev.allocator().alloc(bytes).unwrap())
            .collect();
        for b in &bufs[..2] {
            stream
                .upload(&encode(&random_f32(s * s, 3), ty), b)
                .unwrap();
        }
        let run = || {
            // SAFETY: three s×s buffers of the type, alive through the sync below.
            unsafe { blas.gemm(&stream, &g, bufs[0].ptr(), bufs[1].ptr(), bufs[2].ptr()) }.unwrap()
        };
        for _ in 0..3 {
            run();
        }
        let (a, b) = (Event::new(&dev).unwrap(), Event::new(&dev).unwrap());
        a.record(&stream).unwrap();
        for _ in 0..10 {
            run();
        }
        b.record(&stream).unwrap();
        let ms = f64::from(a.elapsed_ms(&b).unwrap()) / 10.0;
        println!(
            "gemm {ty:?} {s}^3: {ms:.3} ms = {:.0} TFLOP/s",
            2.0 * (s as f64).powi(3) / ms / 1e9
        );
    }
}
