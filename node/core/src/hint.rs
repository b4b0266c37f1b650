//! CPU hints that change no state: the hot paths ask for memory they will touch a few steps
//! ahead (a journal slot, an account, a filter block), so the miss overlaps other work.

/// Asks the CPU to bring the cache line at `p` close (a hint: it never faults, whatever the
/// address, and does nothing on targets without one).
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
