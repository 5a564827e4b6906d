use std::arch::x86_64::{
    __m256d, __m512d, _mm_load_sd, _mm_loadh_pd, _mm_loadu_pd, _mm_storeu_pd, _mm_stream_pd,
    _mm256_castpd128_pd256, _mm256_insertf128_pd, _mm256_unpackhi_pd, _mm256_unpacklo_pd,
    _mm512_castpd256_pd512, _mm512_extractf64x2_pd, _mm512_insertf64x4, _mm512_unpackhi_pd,
    _mm512_unpacklo_pd,
};

use super::{LANES, Lane, splat, values};
use crate::math::lanes::wide8::Lane8;

/// An AVX-512 value as a lane value (the same 64 bytes).
#[inline(always)]
fn lane(x: __m512d) -> Lane {
    // SAFETY: `wide::f64x8` in a build with AVX-512F is one `__m512d` (64 bytes, any bits
    // valid).
    Lane8(unsafe { std::mem::transmute::<__m512d, wide::f64x8>(x) })
}

/// A lane value as an AVX-512 value.
#[inline(always)]
fn raw(x: Lane) -> __m512d {
    // SAFETY: as [`lane`], the other way.
    unsafe { std::mem::transmute::<wide::f64x8, __m512d>(x.0) }
}

/// Two four-lane halves as one value: `lo` in lanes 0–3, `hi` in 4–7.
#[inline(always)]
fn join(lo: __m256d, hi: __m256d) -> Lane {
    // SAFETY: register moves only; AVX-512F is enabled at compile time (the module's cfg).
    lane(unsafe { _mm512_insertf64x4::<1>(_mm512_castpd256_pd512(lo), hi) })
}

/// Values `j` and `j + 1` of rows `4 h..4 h + 4`, each row's pair by one 128-bit load
/// (the four-lane `avx::pair`). The caller checks that every row holds `j + 2` values.
#[inline(always)]
unsafe fn half_pair(rows: &[&[f64]; LANES], h: usize, j: usize) -> (__m256d, __m256d) {
    let row = |k: usize| rows[4 * h + k].as_ptr();
    // SAFETY: every row holds `j + 2` values (the caller's check), so each 16-byte load
    // reads values `j` and `j + 1` of its row; unaligned loads accept any address.
    unsafe {
        let ac = _mm256_insertf128_pd::<1>(
            _mm256_castpd128_pd256(_mm_loadu_pd(row(0).add(j))),
            _mm_loadu_pd(row(2).add(j)),
        );
        let bd = _mm256_insertf128_pd::<1>(
            _mm256_castpd128_pd256(_mm_loadu_pd(row(1).add(j))),
            _mm_loadu_pd(row(3).add(j)),
        );
        (_mm256_unpacklo_pd(ac, bd), _mm256_unpackhi_pd(ac, bd))
    }
}

/// Four `f64` held in memory as a 256-bit value, built in registers.
#[inline(always)]
fn quarter(a: &f64, b: &f64, c: &f64, d: &f64) -> __m256d {
    // SAFETY: each pointer comes from a reference to one f64 and each load reads that one.
    unsafe {
        let ab = _mm_loadh_pd(_mm_load_sd(a), b);
        let cd = _mm_loadh_pd(_mm_load_sd(c), d);
        _mm256_insertf128_pd::<1>(_mm256_castpd128_pd256(ab), cd)
    }
}

/// Eight `f64` held in memory as a lane value, built in registers (not by eight stores a
/// 64-byte load then reads back, which stalls store-to-load forwarding).
#[inline(always)]
pub(super) fn gather(v: [&f64; LANES]) -> Lane {
    join(
        quarter(v[0], v[1], v[2], v[3]),
        quarter(v[4], v[5], v[6], v[7]),
    )
}

/// Values `0..N` of eight rows, one row per lane, as `N` lane values (`transpose_rows`).
#[inline(always)]
pub(super) fn transpose<const N: usize>(rows: [&[f64]; LANES]) -> [Lane; N] {
    for row in rows {
        if row.len() < N {
            panic!("a row of {} values read as {N}", row.len());
        }
    }
    let mut out = [splat(0.0); N];
    let mut j = 0;
    while j + 2 <= N {
        // SAFETY: every row holds `N ≥ j + 2` values (checked above).
        let ((a0, b0), (a1, b1)) = unsafe { (half_pair(&rows, 0, j), half_pair(&rows, 1, j)) };
        out[j] = join(a0, a1);
        out[j + 1] = join(b0, b1);
        j += 2;
    }
    if j < N {
        let r = |l: usize| &rows[l][j];
        out[j] = gather([r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7)]);
    }
    out
}

/// `x` into values `offset..offset + x.len()` of eight rows, lane `l` into row `l`: per
/// pair of values two 512-bit unpacks and one 128-bit store a row; with streaming stores
/// when `streaming` says so — 16-byte `movntpd` where every row starts 16-byte aligned (and
/// one run of eight values, for rows of one value laid end to end), else one `movnti` a
/// value (`stream::scatter`).
#[inline(always)]
pub(super) fn scatter(rows: [&mut [f64]; LANES], offset: usize, x: &[Lane], streaming: bool) {
    let n = x.len();
    let [a, b, c, d, e, f, g, h] = rows;
    let end = offset + n;
    let mut rows = [
        &mut a[offset..end],
        &mut b[offset..end],
        &mut c[offset..end],
        &mut d[offset..end],
        &mut e[offset..end],
        &mut f[offset..end],
        &mut g[offset..end],
        &mut h[offset..end],
    ];
    let aligned = |rows: &[&mut [f64]; LANES]| {
        rows.iter()
            .all(|r| r.as_ptr().cast::<u8>().align_offset(16) == 0)
    };
    if streaming {
        let first = rows[0].as_mut_ptr();
        // One value a row, the rows laid end to end: one run of eight values.
        // SAFETY (the pointer arithmetic): only compared, never dereferenced here.
        let run =
            n == 1 && (1..LANES).all(|l| std::ptr::eq(rows[l].as_ptr(), first.wrapping_add(l)));
        if run && first.cast::<u8>().align_offset(16) == 0 {
            let v = raw(x[0]);
            // SAFETY: the eight rows are eight consecutive values from `first` (checked),
            // 16-byte aligned (checked), so each store writes two of them, as `movntpd`
            // needs; AVX-512F is enabled at compile time.
            unsafe {
                _mm_stream_pd(first, _mm512_extractf64x2_pd::<0>(v));
                _mm_stream_pd(first.add(2), _mm512_extractf64x2_pd::<1>(v));
                _mm_stream_pd(first.add(4), _mm512_extractf64x2_pd::<2>(v));
                _mm_stream_pd(first.add(6), _mm512_extractf64x2_pd::<3>(v));
            }
            return;
        }
        if !(n.is_multiple_of(2) && aligned(&rows)) {
            return super::stream::scatter(rows, x);
        }
    }
    let mut j = 0;
    while j + 2 <= n {
        let (xj, xk) = (raw(x[j]), raw(x[j + 1]));
        // SAFETY: register shuffles only; AVX-512F is enabled at compile time.
        let pieces = unsafe {
            // Per 128-bit lane k: rows 2k (lo) and 2k + 1 (hi), values j and j + 1.
            let lo = _mm512_unpacklo_pd(xj, xk);
            let hi = _mm512_unpackhi_pd(xj, xk);
            [
                _mm512_extractf64x2_pd::<0>(lo),
                _mm512_extractf64x2_pd::<0>(hi),
                _mm512_extractf64x2_pd::<1>(lo),
                _mm512_extractf64x2_pd::<1>(hi),
                _mm512_extractf64x2_pd::<2>(lo),
                _mm512_extractf64x2_pd::<2>(hi),
                _mm512_extractf64x2_pd::<3>(lo),
                _mm512_extractf64x2_pd::<3>(hi),
            ]
        };
        for (row, piece) in rows.iter_mut().zip(pieces) {
            // SAFETY: every row holds `n ≥ j + 2` values (sliced above), so the store
            // writes values `j` and `j + 1` of its row; streamed only where every row
            // starts 16-byte aligned and `j` is even (checked above), as `movntpd` needs.
            unsafe {
                let p = row.as_mut_ptr().add(j);
                if streaming {
                    _mm_stream_pd(p, piece);
                } else {
                    _mm_storeu_pd(p, piece);
                }
            }
        }
        j += 2;
    }
    if j < n {
        for (row, v) in rows.iter_mut().zip(values(x[j])) {
            row[j] = v;
        }
    }
}
