//! Criterion benchmarks of every built-in plugin on the CPU benchmark table (f32, two
//! threads), next to a plain copy of the same bytes. `cargo bench -p torchtrt-plugins`.

#[path = "common/cases.rs"]
mod cases;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const THREADS: usize = 2;

fn plugins(c: &mut Criterion) {
    let mut group = c.benchmark_group("cpu_plugins");
    group.sample_size(30);
    for case in cases::cases() {
        let mut prepared = match cases::Prepared::new(&case) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("skipping {}: {e}", case.name);
                continue;
            }
        };
        let (bytes_in, bytes_out) = prepared.bytes();
        group.throughput(Throughput::Bytes((bytes_in + bytes_out) as u64));
        group.bench_function(case.name, |b| {
            b.iter(|| {
                if let Err(e) = prepared.run(THREADS) {
                    panic!("{}: {e}", case.name);
                }
            })
        });
        let src = cases::random_values((bytes_in + bytes_out) / 8, 7);
        let mut dst = vec![0f32; src.len()];
        group.bench_function(format!("{}/memcpy", case.name), |b| {
            b.iter(|| dst.copy_from_slice(std::hint::black_box(&src)))
        });
    }
    group.finish();
}

criterion_group!(benches, plugins);
criterion_main!(benches);
