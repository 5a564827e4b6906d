//! Moving values between per-instance columns and lanes: the transposes that gather a chunk's
//! inputs (`N` values of [`LANES`] rows as `N` lane values) and scatter its outputs back, with
//! AVX shuffles in registers where the build has AVX (four lanes: `avx.rs`; eight, in a build
//! for AVX-512: `avx8.rs`). Bit moves only: a value has the same bits whichever route moved it.
//!
//! **Streaming stores.** The scatters can write with non-temporal stores instead
//! (`streaming: true`, x86-64 only; elsewhere the same stores as without). An ordinary store
//! to a line not in cache first reads the line from memory (a read for ownership), so writing
//! outputs that do not fit the caches moves each byte twice; a non-temporal store writes
//! around the caches and skips the read. On the Zen 5 VM an every-output evaluation of 10⁵
//! rolling spheres (35 MB of outputs) ran 1.5× as fast with them, but 10⁴ (3.5 MB, which the
//! caches hold) 0.97×: the caller chooses by the size of what it writes, and by the CPU
//! ([`streaming_pays`]: on a Xeon VM they ran 0.33× at any size). Rows that start
//! 16-byte aligned (whole rows of one or three values, or an even count at an even place, in
//! a column the allocator aligned: the usual case) take 16-byte `movntpd`, two values a store,
//! the rest one 8-byte `movnti` a value; halving the stores ran 10⁵ and 10⁶ rolling spheres,
//! every output, one thread, 1.05–1.09× as fast (2026-11-27 20:40). After streaming
//! stores, and before anything reads or writes what they wrote, the writing thread must call
//! `streaming_fence` (the stores are weakly ordered; `core::arch`'s rule for them), which is
//! why the streaming variants are the crate's own, not public: every caller fences.

#[cfg(not(all(target_arch = "x86_64", target_feature = "avx")))]
use super::lanes;
use super::{LANES, Lane, splat, values};

/// Values `0..N` of [`LANES`] rows, one row per lane, as `N` lane values: the transpose that gathers
/// a chunk's per-instance columns. One bounds check per row; with AVX the values move by
/// shuffles in registers (`avx::pair`), two values of each row at a time, never read past a
/// row's end.
#[inline(always)]
pub fn transpose_rows<const N: usize>(rows: [&[f64]; LANES]) -> [Lane; N] {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    return avx8::transpose(rows);
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
    transpose_four(rows)
}

/// [`transpose_rows`] of four lanes.
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
#[inline(always)]
fn transpose_four<const N: usize>(rows: [&[f64]; LANES]) -> [Lane; N] {
    let [a, b, c, d] = rows;
    let (a, b, c, d): (&[f64; N], &[f64; N], &[f64; N], &[f64; N]) =
        (first(a), first(b), first(c), first(d));
    let mut out = [splat(0.0); N];
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx",
        not(target_feature = "avx512f")
    ))]
    {
        let mut j = 0;
        while j + 2 <= N {
            (out[j], out[j + 1]) = avx::pair(a, b, c, d, j);
            j += 2;
        }
        if j < N {
            out[j] = avx::single(&a[j], &b[j], &c[j], &d[j]);
        }
    }
    #[cfg(not(all(
        target_arch = "x86_64",
        target_feature = "avx",
        not(target_feature = "avx512f")
    )))]
    for j in 0..N {
        out[j] = lanes([a[j], b[j], c[j], d[j]]);
    }
    out
}

/// The first `N` values of `row` (panics, as indexing does, when it is shorter).
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
#[inline(always)]
fn first<const N: usize>(row: &[f64]) -> &[f64; N] {
    match row.first_chunk() {
        Some(values) => values,
        None => panic!("a row of {} values read as {N}", row.len()),
    }
}

/// Entry `i` of `column` for each instance `i` of `instances`, one per lane.
#[inline(always)]
pub fn gather_values(column: &[f64], instances: &[usize; LANES]) -> Lane {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    return avx8::gather(lane_array!(|l| &column[instances[l]]));
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
    {
        let [a, b, c, d] = *instances;
        four(&column[a], &column[b], &column[c], &column[d])
    }
}

/// The lane value of four `f64` held in memory. With AVX it is built in registers (two
/// 128-bit halves), not by four 8-byte stores that a 32-byte load then reads back, which
/// stalls store-to-load forwarding on x86 cores.
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
#[inline(always)]
pub fn four(a: &f64, b: &f64, c: &f64, d: &f64) -> Lane {
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx",
        not(target_feature = "avx512f")
    ))]
    {
        avx::single(a, b, c, d)
    }
    #[cfg(not(all(
        target_arch = "x86_64",
        target_feature = "avx",
        not(target_feature = "avx512f")
    )))]
    {
        lanes([*a, *b, *c, *d])
    }
}

/// Writes the lane values `x` into four rows of `width` values held one after another in
/// `block` (lane `l` into row `l`), at values `offset..offset + x.len()` of each row: the
/// transpose that writes a chunk's outputs into per-instance columns. With AVX the values move
/// by shuffles in registers, two values of each row at a time.
///
/// Panics when the rows do not hold `offset + x.len()` values or `block` does not hold four
/// rows.
#[inline(always)]
pub fn scatter_rows(block: &mut [f64], width: usize, offset: usize, x: &[Lane]) {
    scatter_rows_with(block, width, offset, x, false);
}

/// [`scatter_rows`], with streaming stores when `streaming` says so (module doc).
#[inline(always)]
pub(crate) fn scatter_rows_with(
    block: &mut [f64],
    width: usize,
    offset: usize,
    x: &[Lane],
    streaming: bool,
) {
    let n = x.len();
    assert!(
        offset + n <= width && block.len() >= LANES * width,
        "{n} values at {offset} of four rows of {width} in {} values",
        block.len()
    );
    let (a, rest) = block.split_at_mut(width);
    let (b, rest) = rest.split_at_mut(width);
    let (c, rest) = rest.split_at_mut(width);
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
    let rows = [a, b, c, rest];
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    let rows = {
        let (d, rest) = rest.split_at_mut(width);
        let (e, rest) = rest.split_at_mut(width);
        let (f, rest) = rest.split_at_mut(width);
        let (g, h) = rest.split_at_mut(width);
        [a, b, c, d, e, f, g, h]
    };
    scatter_into(rows, offset, x, streaming);
}

/// [`scatter_rows`] into rows `at..at + LANES` of a column of `W`-value rows held as `&mut
/// [f64]`: with the width a constant, the rows' bounds are one check on the column and the rest
/// fold away once inlined, so a chunk's write is the transpose's shuffles and stores (a runtime
/// width costs a score of address computations and checks per write).
///
/// Panics when the column does not hold rows `at..at + LANES` or a row does not hold
/// `offset + x.len()` values.
#[inline(always)]
pub fn scatter_fixed<const W: usize>(column: &mut [f64], offset: usize, at: usize, x: &[Lane]) {
    scatter_fixed_with::<W>(column, offset, at, x, false);
}

/// [`scatter_fixed`], with streaming stores when `streaming` says so (module doc).
#[inline(always)]
pub(crate) fn scatter_fixed_with<const W: usize>(
    column: &mut [f64],
    offset: usize,
    at: usize,
    x: &[Lane],
    streaming: bool,
) {
    let n = x.len();
    assert!(offset + n <= W, "{n} values at {offset} of rows of {W}");
    let (rows, _) = column.as_chunks_mut::<W>();
    let Some(tile) = rows
        .get_mut(at..)
        .and_then(|r| r.first_chunk_mut::<LANES>())
    else {
        panic!(
            "rows {at}..{} of a column of {} rows",
            at + LANES,
            rows.len()
        );
    };
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx",
        not(target_feature = "avx512f")
    ))]
    if offset == 0 && n == W && tiles(W) {
        // Whole rows: the four rows are one run of `4 W` values, written by `W` full-width
        // stores (`avx::tile`).
        let run = tile.as_flattened_mut();
        if !streaming {
            return avx::tile(run, x);
        }
        if run.as_ptr().cast::<u8>().align_offset(16) == 0 {
            // Streamed, 16 bytes a store (the allocator's alignment makes this the usual case).
            return avx::tile_streaming(run, x);
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
    {
        let [a, b, c, d] = tile;
        scatter_into([a, b, c, d], offset, x, streaming);
    }
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    {
        let [a, b, c, d, e, f, g, h] = tile;
        scatter_into([a, b, c, d, e, f, g, h], offset, x, streaming);
    }
}

/// Whether the whole-row scatter (`avx::tile`) takes rows of `n` values: one or three.
#[cfg(all(
    target_arch = "x86_64",
    target_feature = "avx",
    not(target_feature = "avx512f")
))]
#[inline(always)]
const fn tiles(n: usize) -> bool {
    n == 1 || n == 3
}

/// Whether streaming stores (module doc) pay on this CPU, as far as measured: on AMD's Zen 5
/// and later (x86-64 family 0x1A and up), yes; elsewhere no. An every-output evaluation of 10⁵
/// rolling spheres, one thread, ran 1.5× as fast streamed on a Zen 5 VM but 0.33× on a Xeon
/// VM (2026-11-28, 260 MB of last-level cache): there the core's dozen write-combining
/// buffers, which gather a line's streaming stores, are evicted half written when a chunk
/// writes a few values into each of a dozen columns, and a partial line goes out as slow
/// partial writes (whole lines streamed 22 GB/s in a test, 32-byte pieces into 16 columns
/// 0.4 GB/s, ordinary stores 8–12 GB/s). Staging a block and streaming whole lines did not
/// pay there either (0.90–0.93× ordinary stores, at 10⁵ to 3·10⁶ instances). On a Zen 3 VM
/// (family 0x19, AMD EPYC, 2026-12-07, three rounds alternated) streamed stores ran 0.55–0.85×
/// ordinary ones on one thread (every output of 10⁵ and 10⁶ rolling spheres 3.2–5.1e6
/// evaluations/s against 5.9–7.0e6, u̇ and λ 5.5–9.5e6 against 0.98–1.29e7), so the older
/// families (Zen 1–4, Hygon's Zen 1) write ordinary stores; Zen 4 is not measured and shares
/// Zen 3's family. Read once (CPUID leaves 0 and 1).
pub(crate) fn streaming_pays() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static PAYS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *PAYS.get_or_init(|| {
            // Leaf 0: the vendor string in EBX, EDX, ECX.
            #[allow(unused_unsafe)]
            // SAFETY: CPUID leaf 0 exists on every x86-64 CPU and only reads identification.
            let id = unsafe { std::arch::x86_64::__cpuid(0) };
            let mut vendor = [0u8; 12];
            vendor[..4].copy_from_slice(&id.ebx.to_le_bytes());
            vendor[4..8].copy_from_slice(&id.edx.to_le_bytes());
            vendor[8..].copy_from_slice(&id.ecx.to_le_bytes());
            // Leaf 1 (every x86-64 CPU has it): the family in EAX.
            #[allow(unused_unsafe)]
            // SAFETY: as above; leaf 1 only reads identification.
            let signature = unsafe { std::arch::x86_64::__cpuid(1) }.eax;
            streaming_pays_on(&vendor, cpu_family(signature))
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The x86 family of a CPUID leaf 1 signature (EAX): the base family, plus the extended family
/// when the base is 0xF (as every AMD family since the K8's is).
#[cfg(any(target_arch = "x86_64", test))]
fn cpu_family(signature: u32) -> u32 {
    let base = (signature >> 8) & 0xF;
    if base == 0xF {
        base + ((signature >> 20) & 0xFF)
    } else {
        base
    }
}

/// [`streaming_pays`] for a vendor string and family: AMD from family 0x1A (Zen 5) on.
#[cfg(any(target_arch = "x86_64", test))]
fn streaming_pays_on(vendor: &[u8; 12], family: u32) -> bool {
    vendor == b"AuthenticAMD" && family >= 0x1A
}

#[cfg(test)]
mod family_tests {
    use super::{cpu_family, streaming_pays_on};

    /// Signatures of the CPUs measured (Zen 3 EPYC 7003, Zen 5 EPYC 9005, an Emerald Rapids
    /// Xeon) and a Zen 4's, decoded and decided.
    #[test]
    fn streaming_pays_on_zen_5_and_later_only() {
        let (zen3, zen4, zen5, xeon) = (0x00A0_0F11, 0x00A1_0F11, 0x00B0_0F21, 0x000C_06F2);
        assert_eq!(cpu_family(zen3), 0x19);
        assert_eq!(cpu_family(zen4), 0x19);
        assert_eq!(cpu_family(zen5), 0x1A);
        assert_eq!(cpu_family(xeon), 6);
        let amd = b"AuthenticAMD";
        assert!(!streaming_pays_on(amd, cpu_family(zen3)));
        assert!(!streaming_pays_on(amd, cpu_family(zen4)));
        assert!(streaming_pays_on(amd, cpu_family(zen5)));
        assert!(streaming_pays_on(amd, 0x1B));
        assert!(!streaming_pays_on(b"GenuineIntel", cpu_family(xeon)));
        assert!(!streaming_pays_on(b"HygonGenuine", 0x18));
    }
}

/// Makes this thread's streaming stores (module doc) ordered before whatever it does next;
/// nothing where the scatters do not stream.
#[inline(always)]
pub(crate) fn streaming_fence() {
    // SAFETY: `sfence` only orders this thread's stores; SSE is part of x86-64.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// `x` into values `offset..offset + x.len()` of four rows, lane `l` into row `l`; with
/// streaming stores when `streaming` says so and the target has them.
#[inline(always)]
fn scatter_into(rows: [&mut [f64]; LANES], offset: usize, x: &[Lane], streaming: bool) {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    avx8::scatter(rows, offset, x, streaming);
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
    scatter_four(rows, offset, x, streaming);
}

/// [`scatter_into`] for four lanes.
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
#[inline(always)]
fn scatter_four(rows: [&mut [f64]; LANES], offset: usize, x: &[Lane], streaming: bool) {
    let n = x.len();
    #[allow(unused_mut)]
    let mut rows = rows.map(|row| &mut row[offset..offset + n]);
    #[cfg(target_arch = "x86_64")]
    if streaming {
        // Pairs of values 16 bytes a store where every row starts 16-byte aligned (rows of an
        // even width at an even offset, in a column the allocator aligned).
        #[cfg(target_feature = "avx")]
        if n.is_multiple_of(2)
            && rows
                .iter()
                .all(|r| r.as_ptr().cast::<u8>().align_offset(16) == 0)
        {
            return avx::scatter_streaming(rows, x);
        }
        return stream::scatter(rows, x);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = streaming;
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx",
        not(target_feature = "avx512f")
    ))]
    avx::scatter(rows, x);
    #[cfg(not(all(
        target_arch = "x86_64",
        target_feature = "avx",
        not(target_feature = "avx512f")
    )))]
    for (j, value) in x.iter().enumerate() {
        for (row, v) in rows.iter_mut().zip(values(*value)) {
            row[j] = v;
        }
    }
}

/// Streaming (non-temporal) stores of lanes into rows: one 8-byte `movnti` per value, which
/// needs only the values' own alignment (a pair of values may straddle 16 bytes: the columns
/// are `f64` slices of any width). Where the build has AVX, rows that start 16-byte aligned
/// take `avx::tile_streaming` and `avx::scatter_streaming` instead: 16-byte `movntpd`, half
/// the stores.
#[cfg(target_arch = "x86_64")]
mod stream {
    use std::arch::x86_64::_mm_stream_si64;

    use super::{LANES, Lane, values};

    /// `x` into four rows of `x.len()` values, lane `l` into row `l`.
    #[inline(always)]
    pub(super) fn scatter(mut rows: [&mut [f64]; LANES], x: &[Lane]) {
        let n = x.len();
        assert!(rows.iter().all(|row| row.len() == n));
        for (j, value) in x.iter().enumerate() {
            for (row, v) in rows.iter_mut().zip(values(*value)) {
                // SAFETY: every row holds `n` values (asserted) and `j < n`, so the store
                // writes value `j` of its row, in bounds and 8-byte aligned (an `f64`'s
                // alignment); SSE2 is part of x86-64. The bits are the value's own.
                unsafe { _mm_stream_si64(row.as_mut_ptr().add(j).cast(), v.to_bits() as i64) };
            }
        }
    }
}

/// Moving values into and out of lanes with AVX loads, shuffles and stores: bit moves only, so a value has the
/// same bits whichever route built it.
#[cfg(all(
    target_arch = "x86_64",
    target_feature = "avx",
    not(target_feature = "avx512f")
))]
mod avx;

/// The instances a chunk's lanes hold — lane `l` holds instance `lanes()[l]` (`self[l]`) —
/// and whether they are consecutive, `first + l`, as every full chunk of a block is. The
/// gathers then check their bounds once for the four rows instead of once per row, and a
/// column of one value per instance is one load: about a tenth of an every-output rolling-sphere
/// evaluation's instructions were those per-row checks and index computations
/// (`docs/performance-log.md`). Either route moves the same bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneInstances {
    lanes: [usize; LANES],
    run: bool,
}

impl LaneInstances {
    /// Lane `l` holding instance `lanes[l]` (a lane may repeat another's instance).
    #[inline(always)]
    pub fn new(lanes: [usize; LANES]) -> Self {
        #[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
        let run = {
            let [a, b, c, d] = lanes;
            b == a.wrapping_add(1) && c == a.wrapping_add(2) && d == a.wrapping_add(3)
        };
        #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
        let run = (1..LANES).all(|l| lanes[l] == lanes[0].wrapping_add(l));
        Self { lanes, run }
    }

    /// The instance of each lane.
    #[inline(always)]
    pub fn lanes(&self) -> [usize; LANES] {
        self.lanes
    }

    /// Whether the lanes hold consecutive instances.
    #[inline(always)]
    pub fn is_run(&self) -> bool {
        self.run
    }

    /// The lanes' rows of a column of `N`-value rows, as `N` lane values ([`gather_rows`]).
    ///
    /// Panics, as indexing does, when a lane's row is not in the column.
    #[inline(always)]
    pub fn rows<const N: usize>(&self, column: &[[f64; N]]) -> [Lane; N] {
        if self.run
            && let Some(rows) = column
                .get(self.lanes[0]..)
                .and_then(|rows| rows.first_chunk::<LANES>())
        {
            return transpose_rows(lane_array!(|l| &rows[l][..]));
        }
        gather_rows(column, &self.lanes)
    }

    /// The lanes' entries of a column of one value per instance ([`gather_values`]).
    ///
    /// Panics, as indexing does, when a lane's entry is not in the column.
    #[inline(always)]
    pub fn values(&self, column: &[f64]) -> Lane {
        if self.run
            && let Some(run) = column
                .get(self.lanes[0]..)
                .and_then(|values| values.first_chunk::<LANES>())
        {
            return Lane::from(*run);
        }
        gather_values(column, &self.lanes)
    }

    /// Values `0..N` of the lanes' rows of a column of `width`-value rows held as one
    /// `&[f64]`, as `N` lane values.
    ///
    /// Panics, as indexing does, when a lane's row is not in the column or `N > width`.
    #[inline(always)]
    pub fn strided<const N: usize>(&self, stored: &[f64], width: usize) -> [Lane; N] {
        if self.run
            && let Some(block) = self.lanes[0]
                .checked_mul(width)
                .and_then(|start| stored.get(start..)?.get(..LANES * width))
        {
            return transpose_rows(lane_array!(|l| &block[l * width..(l + 1) * width]));
        }
        transpose_rows(lane_array!(|l| &stored[self.lanes[l] * width..]))
    }

    /// Value `j` of the lanes' rows of a column of `width`-value rows held as one `&[f64]`.
    ///
    /// Panics, as indexing does, when a lane's row is not in the column or `j >= width`.
    #[inline(always)]
    pub fn strided_value(&self, stored: &[f64], width: usize, j: usize) -> Lane {
        assert!(j < width, "value {j} of rows of {width}");
        if width == 1 {
            return self.values(stored);
        }
        #[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
        {
            let [a, b, c, d] = self.lanes.map(|i| i * width + j);
            four(&stored[a], &stored[b], &stored[c], &stored[d])
        }
        #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
        avx8::gather(lane_array!(|l| &stored[self.lanes[l] * width + j]))
    }
}

impl std::ops::Index<usize> for LaneInstances {
    type Output = usize;

    /// The instance lane `l` holds.
    #[inline(always)]
    fn index(&self, l: usize) -> &usize {
        &self.lanes[l]
    }
}

/// Rows `instances` of a column of `N`-value rows, as `N` lane values.
#[inline(always)]
pub fn gather_rows<const N: usize>(column: &[[f64; N]], instances: &[usize; LANES]) -> [Lane; N] {
    transpose_rows(lane_array!(|l| &column[instances[l]][..]))
}

/// Moving values into and out of eight lanes, in a build for AVX-512: each half of the lanes
/// as the four-lane `avx` module moves them (128-bit loads, inserts and unpacks), joined into
/// one 512-bit value; out, 512-bit unpacks give each row its pairs of values. Bit moves only,
/// as there.
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
mod avx8;
