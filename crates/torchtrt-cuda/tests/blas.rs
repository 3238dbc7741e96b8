//! cuBLAS GEMM against a plain f64 reference on random matrices, every type and transpose,
//! and its speed on 8192³ (printed). Skips without a GPU.

mod common;

use common::{device_or_skip, random_f32};
use half::{bf16, f16};
use torchtrt_cuda::{Blas, Event, Gemm, GemmType};

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

fn decode(b: &[u8], ty: GemmType) -> Vec<f64> {
    match ty {
        GemmType::F16 => b
            .chunks_exact(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        GemmType::Bf16 => b
            .chunks_exact(2)
            .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        _ => b
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
    }
}

/// The values a type actually holds (what the GPU multiplies).
fn rounded(v: &[f32], ty: GemmType) -> Vec<f64> {
    decode(&encode(v, ty), ty)
}

#[test]
fn gemm_matches_reference_in_every_type_and_layout() {
    let Some(dev) = device_or_skip() else { return };
    let blas = Blas::new(&dev).expect("cublas");
    let stream = dev.new_stream().unwrap();
    for ty in [GemmType::F32, GemmType::Tf32, GemmType::F16, GemmType::Bf16] {
        for (trans_a, trans_b) in [(false, false), (true, false), (false, true), (true, true)] {
            let (m, n, k) = (65, 33, 70);
            let g = Gemm {
                m,
                n,
                k,
                trans_a,
                trans_b,
                ty,
            };
            let (a, b) = (random_f32(m * k, 1), random_f32(k * n, 2));
            let (ra, rb) = (rounded(&a, ty), rounded(&b, ty));
            let at = |i: usize, p: usize| {
                if trans_a {
                    ra[p * m + i]
                } else {
                    ra[i * k + p]
                }
            };
            let bt = |p: usize, j: usize| {
                if trans_b {
                    rb[j * k + p]
                } else {
                    rb[p * n + j]
                }
            };
            let alloc = |len| dev.allocator().alloc(len).unwrap();
            let (da, db, dc) = (alloc(a.len() * 4), alloc(b.len() * 4), alloc(m * n * 4));
            stream.upload(&encode(&a, ty), &da).unwrap();
            stream.upload(&encode(&b, ty), &db).unwrap();
            // SAFETY: buffers of the right sizes, alive until the download below.
            unsafe { blas.gemm(&stream, &g, da.ptr(), db.ptr(), dc.ptr()) }.unwrap();
            let mut out = vec![0u8; m * n * ty.size()];
            stream.download(&dc, &mut out).unwrap();
            let got = decode(&out, ty);
            let tol = match ty {
                GemmType::F32 => 1e-4,
                GemmType::Tf32 => 2e-2,
                GemmType::F16 => 3e-2,
                GemmType::Bf16 => 2e-1,
            };
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k).map(|p| at(i, p) * bt(p, j)).sum();
                    let e = (got[i * n + j] - want).abs();
                    assert!(
                        e <= tol * (1.0 + want.abs()),
                        "{g:?} [{i},{j}]: {} vs {want}",
                        got[i * n + j]
                    );
                }
            }
        }
    }
}

#[test]
fn gemm_speed_8192() {
    let Some(dev) = device_or_skip() else { return };
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
