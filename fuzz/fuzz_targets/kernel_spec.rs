#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| torchtrt_fuzz::kernel_spec(data));
