#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    attend_fuzz::metrics_log(data);
});
