use std::arch::x86_64::{
    __m128d, __m256d, _mm_load_sd, _mm_loadh_pd, _mm_loadu_pd, _mm_storeu_pd, _mm_stream_pd,
    _mm256_blend_pd, _mm256_castpd128_pd256, _mm256_castpd256_pd128, _mm256_extractf128_pd,
    _mm256_insertf128_pd, _mm256_permute2f128_pd, _mm256_setzero_pd, _mm256_shuffle_pd,
    _mm256_storeu_pd, _mm256_unpackhi_pd, _mm256_unpacklo_pd,
};

use super::{Lane, tiles, values};

/// An AVX value as a lane value (the same 32 bytes).
#[inline(always)]
fn lane(x: __m256d) -> Lane {
    Lane::from(bytemuck::cast::<__m256d, [f64; 4]>(x))
}

/// Values `j` and `j + 1` of four rows: a 128-bit load per row, two inserts and two
/// unpacks.
#[inline(always)]
pub(super) fn pair<const N: usize>(
    a: &[f64; N],
    b: &[f64; N],
    c: &[f64; N],
    d: &[f64; N],
    j: usize,
) -> (Lane, Lane) {
    assert!(j + 2 <= N, "values {j} and {} of rows of {N}", j + 1);
    // SAFETY: `j + 2 <= N` (asserted; a constant check once inlined), so each 16-byte
    // load reads values `j` and `j + 1` of its row, in bounds; unaligned loads accept any
    // address. AVX is enabled at compile time (the module's cfg).
    unsafe {
        let ac = _mm256_insertf128_pd::<1>(
            _mm256_castpd128_pd256(_mm_loadu_pd(a.as_ptr().add(j))),
            _mm_loadu_pd(c.as_ptr().add(j)),
        );
        let bd = _mm256_insertf128_pd::<1>(
            _mm256_castpd128_pd256(_mm_loadu_pd(b.as_ptr().add(j))),
            _mm_loadu_pd(d.as_ptr().add(j)),
        );
        (
            lane(_mm256_unpacklo_pd(ac, bd)),
            lane(_mm256_unpackhi_pd(ac, bd)),
        )
    }
}

/// `[a, b, c, d]` as a lane value, built in registers.
#[inline(always)]
pub(super) fn single(a: &f64, b: &f64, c: &f64, d: &f64) -> Lane {
    // SAFETY: each pointer comes from a reference to one f64 and each load reads that one
    // f64. AVX is enabled at compile time (the module's cfg).
    unsafe {
        let ab = _mm_loadh_pd(_mm_load_sd(a), b);
        let cd = _mm_loadh_pd(_mm_load_sd(c), d);
        lane(_mm256_insertf128_pd::<1>(_mm256_castpd128_pd256(ab), cd))
    }
}

/// `x` (one or three lane values) as the `x.len()` 32-byte pieces (the first `x.len()` of
/// three) of the four rows of `x.len()` values held one after another (lane `l` into row
/// `l`), in the rows' order:
/// for one value a row, the value itself; for three (`[x0 y0 z0 x1] [y1 z1 x2 y2] [z2 x3 y3
/// z3]`), two unpacks, a shuffle, two permutes and a blend. [`tile`] and
/// [`tile_streaming`] store them.
#[inline(always)]
fn tile_pieces(x: &[Lane]) -> [__m256d; 3] {
    let raw = |v: &Lane| bytemuck::cast::<[f64; 4], __m256d>(values(*v));
    // SAFETY: register shuffles only. AVX is enabled at compile time (the module's cfg).
    unsafe {
        match *x {
            [x0] => [raw(&x0); 3],
            [x0, y0, z0] => {
                let (x, y, z) = (raw(&x0), raw(&y0), raw(&z0));
                let xy = _mm256_unpacklo_pd(x, y); // [x0 y0 | x2 y2]
                let zx = _mm256_shuffle_pd::<0b1010>(z, x); // [z0 x1 | z2 x3]
                let yz = _mm256_unpackhi_pd(y, z); // [y1 z1 | y3 z3]
                [
                    _mm256_permute2f128_pd::<0x20>(xy, zx),
                    _mm256_blend_pd::<0b1100>(yz, xy),
                    _mm256_permute2f128_pd::<0x31>(zx, yz),
                ]
            }
            _ => [_mm256_setzero_pd(); 3], // Not reached: callers assert `tiles`.
        }
    }
}

/// `x` (one or three lane values) into the four rows of `x.len()` values held one after
/// another in `run` (lane `l` into row `l`), by `x.len()` 32-byte stores of
/// [`tile_pieces`]. (The pairwise [`scatter`] spends as many instructions as a whole-row
/// tile on each pair of values; its odd value is what costs, a trip through memory and four
/// 8-byte stores.)
#[inline(always)]
pub(super) fn tile(run: &mut [f64], x: &[Lane]) {
    let n = x.len();
    assert!(tiles(n) && run.len() == 4 * n);
    let pieces = tile_pieces(x);
    let p = run.as_mut_ptr();
    for (k, piece) in pieces.iter().take(n).enumerate() {
        // SAFETY: `run` holds `4 n` values (asserted) and `k < n`, so the 32-byte store at
        // value `4 k` writes values `4 k..4 k + 4` of it, in bounds; unaligned stores
        // accept any address. AVX is enabled at compile time (the module's cfg).
        unsafe { _mm256_storeu_pd(p.add(4 * k), *piece) };
    }
}

/// [`tile`] with streaming stores, for a `run` that starts 16-byte aligned (panics
/// otherwise): the same pieces, each written by two 16-byte `movntpd`, half as many stores
/// as one `movnti` per value.
#[inline(always)]
pub(super) fn tile_streaming(run: &mut [f64], x: &[Lane]) {
    let n = x.len();
    assert!(tiles(n) && run.len() == 4 * n);
    assert!(run.as_ptr().cast::<u8>().align_offset(16) == 0);
    let pieces = tile_pieces(x);
    let p = run.as_mut_ptr();
    for (k, piece) in pieces.iter().take(n).enumerate() {
        // SAFETY: `run` holds `4 n` values (asserted) and `k < n`, so the stores write
        // values `4 k..4 k + 4` of it, in bounds; `run` starts 16-byte aligned (asserted)
        // and each store starts an even number of values on, so each is 16-byte aligned,
        // as `movntpd` needs. AVX is enabled at compile time (the module's cfg).
        unsafe {
            _mm_stream_pd(p.add(4 * k), _mm256_castpd256_pd128(*piece));
            _mm_stream_pd(p.add(4 * k + 2), _mm256_extractf128_pd::<1>(*piece));
        }
    }
}

/// Values `j` and `j + 1` of the four rows from the lane values `xj`, `xk`: the rows'
/// 16-byte pieces `[a, b, c, d]`, by two unpacks. [`scatter`] and [`scatter_streaming`]
/// store them.
#[inline(always)]
fn pair_pieces(xj: &Lane, xk: &Lane) -> [__m128d; 4] {
    let raw = |v: &Lane| bytemuck::cast::<[f64; 4], __m256d>(values(*v));
    // SAFETY: register shuffles only. AVX is enabled at compile time (the module's cfg).
    unsafe {
        let ac = _mm256_unpacklo_pd(raw(xj), raw(xk));
        let bd = _mm256_unpackhi_pd(raw(xj), raw(xk));
        [
            _mm256_castpd256_pd128(ac),
            _mm256_castpd256_pd128(bd),
            _mm256_extractf128_pd::<1>(ac),
            _mm256_extractf128_pd::<1>(bd),
        ]
    }
}

/// `x` into four rows of an even number of values with streaming stores, for rows that
/// start 16-byte aligned (panics otherwise): [`pair_pieces`], each by one 16-byte
/// `movntpd`.
#[inline(always)]
pub(super) fn scatter_streaming(mut rows: [&mut [f64]; 4], x: &[Lane]) {
    let n = x.len();
    assert!(n.is_multiple_of(2));
    assert!(
        rows.iter()
            .all(|row| row.len() == n && row.as_ptr().cast::<u8>().align_offset(16) == 0)
    );
    for j in (0..n).step_by(2) {
        for (row, piece) in rows.iter_mut().zip(pair_pieces(&x[j], &x[j + 1])) {
            // SAFETY: every row holds `n` values (asserted) and `j + 2 <= n` (`n` even), so
            // the store writes values `j` and `j + 1` of its row, in bounds; the row starts
            // 16-byte aligned (asserted) and `j` is even, so the store is 16-byte aligned,
            // as `movntpd` needs. AVX is enabled at compile time (the module's cfg).
            unsafe { _mm_stream_pd(row.as_mut_ptr().add(j), piece) };
        }
    }
}

/// `x` into four rows of `x.len()` values, lane `l` into row `l`: [`pair_pieces`] and four
/// 128-bit stores per pair of values, the last odd value by 64-bit stores.
#[inline(always)]
pub(super) fn scatter(rows: [&mut [f64]; 4], x: &[Lane]) {
    let [a, b, c, d] = rows;
    let n = x.len();
    assert!(a.len() == n && b.len() == n && c.len() == n && d.len() == n);
    let mut j = 0;
    while j + 2 <= n {
        for (row, piece) in [&mut *a, &mut *b, &mut *c, &mut *d]
            .into_iter()
            .zip(pair_pieces(&x[j], &x[j + 1]))
        {
            // SAFETY: every row holds `n` values (asserted) and `j + 2 <= n`, so the
            // 16-byte store writes values `j` and `j + 1` of its row, in bounds; unaligned
            // stores accept any address. AVX is enabled at compile time (the module's cfg).
            unsafe { _mm_storeu_pd(row.as_mut_ptr().add(j), piece) };
        }
        j += 2;
    }
    if j < n {
        let [va, vb, vc, vd] = values(x[j]);
        (a[j], b[j], c[j], d[j]) = (va, vb, vc, vd);
    }
}
