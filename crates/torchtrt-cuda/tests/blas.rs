//! cuBLAS GEMM against a plain f64 reference on random matrices, every type and transpose,
//! within bounds derived from the rounding each type does. Skips without a GPU. (Its speed
//! on 8192³ is `cargo bench -p torchtrt-cuda --bench gemm`.)

mod common;

use common::{device_or_skip, random_f32};
use half::{bf16, f16};
use torchtrt_cuda::{Blas, Gemm, GemmType};

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

/// Unit roundoffs of a type's GEMM: of its output, and of the operands as the product rounds
/// them (TF32 keeps 10 mantissa bits; the reference already holds the other types' inputs
/// rounded). Every type accumulates in f32, which adds `k · 2⁻²⁴` of `Σ|a·b|`.
fn rounding(ty: GemmType) -> (f64, f64) {
    match ty {
        GemmType::F32 => (2f64.powi(-24), 0.0),
        GemmType::Tf32 => (2f64.powi(-24), 2f64.powi(-11)),
        GemmType::F16 => (2f64.powi(-11), 0.0),
        GemmType::Bf16 => (2f64.powi(-8), 0.0),
    }
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
            let mut out = torchtrt_testing::sentinel::filled(m * n * ty.size(), true);
            stream.upload(&out, &dc).unwrap();
            // SAFETY: buffers of the right sizes, alive until the download below.
            unsafe { blas.gemm(&stream, &g, da.ptr(), db.ptr(), dc.ptr()) }.unwrap();
            stream.download(&dc, &mut out).unwrap();
            let got = decode(&out, ty);
            let mut want = vec![0.0f64; m * n];
            let mut terms = vec![0.0f64; m * n];
            for i in 0..m {
                for j in 0..n {
                    want[i * n + j] = (0..k).map(|p| at(i, p) * bt(p, j)).sum();
                    terms[i * n + j] = (0..k).map(|p| (at(i, p) * bt(p, j)).abs()).sum();
                }
            }
            let (out_unit, in_unit) = rounding(ty);
            let acc = k as f64 * 2f64.powi(-24);
            torchtrt_testing::check_floats_by(&got, &want, |e| {
                torchtrt_testing::Tol::new(2.0 * out_unit, 2.0 * (2.0 * in_unit + acc) * terms[e])
            })
            .unwrap_or_else(|e| panic!("{g:?}: {}", e.in_shape(&[m, n])));
        }
    }
}
