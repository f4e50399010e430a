//! The runner's memory allocator.
//!
//! A training step allocates and frees the same large tensors over and over (the logits of a
//! Multi30k batch alone are 3,000 tokens × 8,000 entries × 4 bytes = 96 MB). glibc's malloc
//! hands blocks that large back to the kernel on every free, and every new one comes back as
//! fresh pages that the kernel must zero: on the Multi30k model a quarter of the time went to
//! page clearing. mimalloc, told never to purge freed memory, reuses it instead; measured on
//! that model, 363 → 1,090 training tokens/s (docs/benchmarks.md). The price is memory: what
//! was freed stays with the process, so peak RSS on that model was 10.4 GB after 25 steps
//! against 5.0 GB with mimalloc's default purging (which ran at a third of the speed). Set
//! `MIMALLOC_PURGE_DELAY` (milliseconds; mimalloc's default is 1000) to trade speed for memory.

/// mimalloc serves every allocation of the runner.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_e` (include/mimalloc.h, the C sources
/// of `libmimalloc-sys` 0.1.49, which the lock file pins): the milliseconds before freed
/// memory is returned to the kernel; -1 never returns it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Tells mimalloc to keep freed memory for reuse for the rest of the process, unless the user
/// chose otherwise through mimalloc's own `MIMALLOC_PURGE_DELAY` variable.
pub fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one integer option of the allocator; valid at any time, from any thread.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The option number is mimalloc's purge delay: its default (1,000 ms in mimalloc 3) is
    /// what we read before setting it, and -1 after. A wrong number would read another option.
    #[test]
    fn purge_delay_option_is_mimallocs_and_becomes_never() {
        // SAFETY: reads and sets one integer option of the allocator.
        let before = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(before, 1000, "mimalloc 3's default purge delay");
        }
        keep_freed_memory();
        let after = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(after, -1);
        }
    }
}
