//! A second copy of the hottest lane code compiled for AVX-512, chosen at run time.
//!
//! The build targets x86-64-v3 (AVX2, FMA: `.cargo/config.toml`), whose 16 vector registers
//! cannot hold the one-constraint evaluation kernel's values: about a fifth of an every-output
//! rolling-sphere evaluation's instructions were spills to the stack and loads back. AVX-512
//! (x86-64-v4) gives the same four-lane code 32 registers. A whole x86-64-v4 build does not
//! start on CPUs without AVX-512, so instead the kernel (`cpu::lanes::single`'s evaluation
//! loop) and the built-in kinds' lane methods (`constraints::avx512_lane_methods!`) are
//! compiled twice, and [`enabled`] picks the AVX-512 copies once per process where the CPU has
//! it. On the 2-core Zen 5 VM that made the every-output rolling-sphere evaluation 1.04–1.09×
//! as fast, about what a whole x86-64-v4 build gives (`docs/performance-log.md`, 2026-11-27
//! 15:45–16:05).
//!
//! Both copies run the same IEEE operations in the same order — the lane values are still
//! four f64, only more of them stay in registers — so they give the same bits
//! (`cpu::lanes::tests::avx512_copies_give_the_same_bits`, on a CPU with AVX-512; in the
//! default build and in a baseline x86-64 one, whose narrow copies run SSE2).
//! `SIMBATCH_NO_AVX512` in the environment, or [`set_allowed`]`(false)`, keeps a process on the
//! x86-64-v3 copy (to measure what the copy gains).
//!
//! The copies want AVX-512's registers, not its width: `.cargo/config.toml` sets LLVM's
//! `prefer-256-bit`, without which LLVM zeroed and copied the kernels' arrays and merged
//! shuffles in 512-bit registers. On Intel cores a 512-bit operation in flight takes one of the
//! three vector ports away, and on an Intel Xeon VM the copy evaluated 1.05–1.2× faster
//! without them (`docs/performance-log.md`, 2026-11-29 10:20–11:00).

use std::sync::atomic::{AtomicU8, Ordering};

/// The choice: not yet made, the x86-64-v3 copy, the AVX-512 copy.
static CHOICE: AtomicU8 = AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
const NARROW: u8 = 1;
const WIDE: u8 = 2;

/// Whether the CPU has every AVX-512 subset of x86-64-v4 (F, VL, BW, DQ, CD).
fn cpu_has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512cd");
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}

/// Whether the lane code takes its AVX-512 copies: the CPU has AVX-512 and neither
/// `SIMBATCH_NO_AVX512` (read once, at the first call) nor [`set_allowed`] said no. One relaxed
/// load once decided, so it is asked once per call of a copied function.
#[inline(always)]
pub fn enabled() -> bool {
    match CHOICE.load(Ordering::Relaxed) {
        NARROW => false,
        WIDE => true,
        _ => decide(std::env::var_os("SIMBATCH_NO_AVX512").is_none()),
    }
}

/// Allows the AVX-512 copies (where the CPU has AVX-512) or keeps every thread of the process
/// on the x86-64-v3 copies, from the next call on. Either gives the same results (module doc);
/// this is for measuring the copies and for testing that.
pub fn set_allowed(allowed: bool) {
    decide(allowed);
}

/// Records the choice for `allowed` and returns it.
#[cold]
fn decide(allowed: bool) -> bool {
    let wide = allowed && cpu_has_avx512();
    CHOICE.store(if wide { WIDE } else { NARROW }, Ordering::Relaxed);
    wide
}

/// A constraint kind's trait method `fn $name(&self, args…) -> ret` that runs the kind's
/// `#[inline(always)]` inherent method `$body` (same arguments), in a copy compiled for AVX-512
/// when [`enabled`] says so (module doc). `$kind` names the implementing type (a function
/// nested in a method cannot name `Self`).
macro_rules! avx512_method {
    (fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) $(-> $ret:ty)? => $kind:ty, $body:ident) => {
        fn $name(&self $(, $arg: $ty)*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            if $crate::math::lanes::avx512::enabled() {
                #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx512cd")]
                fn wide(this: &$kind $(, $arg: $ty)*) $(-> $ret)? {
                    this.$body($($arg),*)
                }
                // SAFETY: `enabled` is true only where the CPU has every feature `wide` is
                // compiled for.
                return unsafe { wide(self $(, $arg)*) };
            }
            self.$body($($arg),*)
        }
    };
}

pub(crate) use avx512_method;
