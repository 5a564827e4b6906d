//! The lane helpers against the scalar functions, bit for bit, and the transposes that move
//! values into and out of lanes (bit moves only).

use super::*;

#[test]
fn lane_rotation_and_rate_equal_the_scalar_functions_bit_for_bit() {
    let qs = [
        [0.6, 0.2, -0.5, 0.4],
        [1.0, 0.0, 0.0, 0.0],
        [0.1, -0.7, 0.3, 0.2],
        [2.0, 1.0, -1.0, 0.5],
    ];
    let q: [Lane; 4] = std::array::from_fn(|k| from_fn(|l| qs[l % 4][k]));
    let w = vec3_from_fn(|l| [0.3 * l as f64, -1.2, 0.7 + l as f64]);
    let r = rotation_from_quaternion(&q);
    let rate = quaternion_rate(&q, &w);
    for l in 0..LANES {
        let q = &qs[l % 4];
        let scalar = crate::math::rotation_from_quaternion(q).unwrap();
        assert_eq!(mat3_lane(&r, l), scalar);
        let scalar_rate = crate::math::quaternion_rate(q, &vec3_lane(&w, l));
        assert_eq!(rate.map(|x| x.extract(l)), scalar_rate);
    }
    // Lane 0 a zero quaternion, lane 3 a NaN: refused; the others normalised.
    let mut bad = [splat(0.0), splat(0.0), splat(0.0), from_fn(|l| l as f64)];
    bad[0].replace(3, f64::NAN);
    let all = (1u32 << LANES) - 1;
    assert_eq!(bits(normalize_quaternion(&mut bad)), all & !0b1001);
    let mixed = [1.0, f64::INFINITY, f64::NAN, -3.0];
    let finite = (0..LANES).filter(|l| l % 4 == 0 || l % 4 == 3);
    assert_eq!(
        bits(is_finite(from_fn(|l| mixed[l % 4]))),
        finite.fold(0, |m, l| m | 1 << l)
    );
}

#[test]
fn fused_products_are_the_lane_by_lane_fused_formulas() {
    // What a fused multiply-add gives where the build has FMA, a product and a sum where
    // it has not: the lane helpers must be that, lane by lane and bit for bit.
    let fused = |a: f64, b: f64, c: f64| {
        // wide fuses with x86's FMA and with aarch64's NEON.
        if cfg!(any(
            target_feature = "fma",
            all(target_arch = "aarch64", target_feature = "neon")
        )) {
            a.mul_add(b, c)
        } else {
            a * b + c
        }
    };
    // Values of mixed signs and magnitudes, so that every rounding shows.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
        (unit - 0.5) * 10f64.powi((state % 7) as i32 - 3)
    };
    let same = |x: Lane, expected: [f64; LANES]| {
        assert_eq!(values(x).map(f64::to_bits), expected.map(f64::to_bits));
    };
    for _ in 0..50 {
        let a = LaneMat3::from_fn(|_, _| from_fn(|_| next()));
        let b = LaneMat3::from_fn(|_, _| from_fn(|_| next()));
        let v = LaneVec3::from_fn(|_, _| from_fn(|_| next()));
        let w = LaneVec3::from_fn(|_, _| from_fn(|_| next()));
        let at = |m: &LaneMat3, i: usize, j: usize, l: usize| m[(i, j)].extract(l);
        let row_dot = |m: &LaneMat3, i: usize, x: &LaneVec3, l: usize| {
            let x = vec3_lane(x, l);
            fused(
                at(m, i, 2, l),
                x.z,
                fused(at(m, i, 1, l), x.y, at(m, i, 0, l) * x.x),
            )
        };
        let (av, atv, ab) = (mul_vec(&a, &v), tr_mul_vec(&a, &v), mul_mat(&a, &b));
        let (d, c) = (dot3(&v, &w), cross(&v, &w));
        for i in 0..3 {
            same(av[i], std::array::from_fn(|l| row_dot(&a, i, &v, l)));
            let at_lane = |l| mat3_lane(&a, l).transpose();
            same(
                atv[i],
                std::array::from_fn(|l| {
                    let (m, x) = (at_lane(l), vec3_lane(&v, l));
                    fused(m[(i, 2)], x.z, fused(m[(i, 1)], x.y, m[(i, 0)] * x.x))
                }),
            );
            for j in 0..3 {
                let bj = LaneVec3::new(b[(0, j)], b[(1, j)], b[(2, j)]);
                same(ab[(i, j)], std::array::from_fn(|l| row_dot(&a, i, &bj, l)));
            }
        }
        same(
            d,
            std::array::from_fn(|l| {
                let (x, y) = (vec3_lane(&v, l), vec3_lane(&w, l));
                fused(x.z, y.z, fused(x.y, y.y, x.x * y.x))
            }),
        );
        for l in 0..LANES {
            let (x, y) = (vec3_lane(&v, l), vec3_lane(&w, l));
            let expected = [
                fused(x.y, y.z, -(x.z * y.y)),
                fused(x.z, y.x, -(x.x * y.z)),
                fused(x.x, y.y, -(x.y * y.x)),
            ];
            let got: [f64; 3] = vec3_lane(&c, l).into();
            assert_eq!(got.map(f64::to_bits), expected.map(f64::to_bits));
            // And within rounding of the exact cross product.
            let exact = x.cross(&y);
            assert!((vec3_lane(&c, l) - exact).norm() <= 1e-15 * (x.norm() * y.norm()));
        }
    }
}

/// Distinct values, NaNs and signed zeros among them, so that a moved bit shows.
fn value(row: usize, j: usize) -> f64 {
    match (row + 3 * j) % 7 {
        0 => -0.0,
        1 => f64::from_bits(0x7ff8_0000_0000_0001 + j as u64),
        _ => row as f64 * 100.0 + j as f64 + 0.25,
    }
}

/// `four` repeated over the lanes (lane `l` takes `four[l mod 4]`).
fn pattern(four: [usize; 4]) -> [usize; LANES] {
    std::array::from_fn(|l| four[l % 4])
}

fn transposed<const N: usize>() {
    // Rows at the very end of their slices: a read past a row would panic or show.
    let rows: Vec<Vec<f64>> = (0..LANES)
        .map(|r| (0..N).map(|j| value(r, j)).collect())
        .collect();
    let out: [Lane; N] = transpose_rows(std::array::from_fn(|l| &rows[l][..]));
    for (j, x) in out.iter().enumerate() {
        let got = values(*x).map(f64::to_bits);
        let want: [u64; LANES] = std::array::from_fn(|l| value(l, j).to_bits());
        assert_eq!(got, want, "value {j} of rows of {N}");
    }
    let column: Vec<[f64; N]> = (0..LANES)
        .map(|r| std::array::from_fn(|j| value(r, j)))
        .collect();
    let picked = pattern([3, 1, 1, 0]);
    let gathered: [Lane; N] = gather_rows(&column, &picked);
    for (j, x) in gathered.iter().enumerate() {
        let want = picked.map(|r| value(r, j).to_bits());
        assert_eq!(values(*x).map(f64::to_bits), want);
    }
}

/// A chunk's instances gather the same bits whether they are consecutive (one bounds
/// check, one load for a column of single values) or not, from every form of column.
#[test]
fn lane_instances_gather_the_same_bits_by_either_route() {
    let rows = LANES + 5;
    let column: Vec<[f64; 7]> = (0..rows)
        .map(|r| std::array::from_fn(|j| value(r, j)))
        .collect();
    let flat: Vec<f64> = column.as_flattened().to_vec();
    let single: Vec<f64> = (0..rows).map(|r| value(r, 2)).collect();
    let bits = |x: &[Lane]| -> Vec<[u64; LANES]> {
        x.iter().map(|v| values(*v).map(f64::to_bits)).collect()
    };
    let last = rows - 1;
    for lanes in [
        std::array::from_fn(|l| l),
        std::array::from_fn(|l| rows - LANES + l),
        pattern([3, 1, 1, 0]),
        std::array::from_fn(|l| (last - 1 + l).min(last)),
        std::array::from_fn(|l| (2 + l).min(4)),
    ] {
        let instances = LaneInstances::new(lanes);
        let consecutive = lanes.iter().enumerate().all(|(l, &i)| i == lanes[0] + l);
        assert_eq!(instances.is_run(), consecutive, "{lanes:?}");
        assert_eq!(instances.lanes(), lanes);
        assert_eq!(instances[3], lanes[3]);
        let want: [Lane; 7] = gather_rows(&column, &lanes);
        assert_eq!(bits(&instances.rows(&column)), bits(&want), "{lanes:?}");
        assert_eq!(
            bits(&instances.strided::<7>(&flat, 7)),
            bits(&want),
            "{lanes:?}"
        );
        assert_eq!(
            bits(&instances.strided::<4>(&flat, 7)),
            bits(&want[..4]),
            "{lanes:?}"
        );
        for j in 0..7 {
            let got = instances.strided_value(&flat, 7, j);
            assert_eq!(bits(&[got]), bits(&want[j..=j]), "{lanes:?} value {j}");
        }
        let one = gather_values(&single, &lanes);
        assert_eq!(
            bits(&[instances.values(&single)]),
            bits(&[one]),
            "{lanes:?}"
        );
        assert_eq!(
            bits(&[instances.strided_value(&single, 1, 0)]),
            bits(&[one])
        );
    }
}

#[test]
#[should_panic]
fn a_run_past_the_column_end_panics() {
    let column: Vec<[f64; 3]> = vec![[1.0; 3]; LANES + 2];
    let _: [Lane; 3] = LaneInstances::new(std::array::from_fn(|l| 3 + l)).rows(&column);
}

/// `scatter_fixed::<W>` of `n` values at `offset` into rows `1..=LANES` of a column of `LANES + 2` rows:
/// exactly those values of those rows change, bit for bit (whole rows of one or three
/// values take the full-width stores of `avx::tile`); and the same with streaming stores,
/// the column starting 16-byte aligned and 8 bytes past that: for each width one of the two
/// puts those rows where the 16-byte stores take them (`avx::tile_streaming` for whole rows
/// of one or three values, `avx::scatter_streaming` for an even count at an even place),
/// the other where one `movnti` a value does.
fn scattered_fixed<const W: usize>(offset: usize, n: usize) {
    for (streaming, shift) in [(false, 0), (true, 0), (true, 1)] {
        scattered_fixed_with::<W>(offset, n, streaming, shift);
    }
}

fn scattered_fixed_with<const W: usize>(offset: usize, n: usize, streaming: bool, shift: usize) {
    let x: Vec<Lane> = (0..n).map(|j| from_fn(|l| value(l, j))).collect();
    // The column from the buffer's first 16-byte aligned value, `shift` values on.
    let mut buffer = vec![1.5; (LANES + 2) * W + 2];
    let aligned = buffer.as_ptr().cast::<u8>().align_offset(16) / 8;
    let column = &mut buffer[aligned + shift..aligned + shift + (LANES + 2) * W];
    assert_eq!(
        column.as_ptr().cast::<u8>().align_offset(16),
        if shift == 0 { 0 } else { 8 }
    );
    scatter_fixed_with::<W>(column, offset, 1, &x, streaming);
    streaming_fence();
    for (r, row) in column.chunks_exact(W).enumerate() {
        for (k, v) in row.iter().enumerate() {
            let written = (1..1 + LANES).contains(&r) && (offset..offset + n).contains(&k);
            let want = if written {
                value(r - 1, k - offset)
            } else {
                1.5
            };
            assert_eq!(
                v.to_bits(),
                want.to_bits(),
                "row {r} value {k} of rows of {W} (streaming {streaming}, shift {shift})"
            );
        }
    }
}

#[test]
fn fixed_scatters_move_bits_only() {
    scattered_fixed::<1>(0, 1);
    scattered_fixed::<2>(0, 2);
    scattered_fixed::<2>(1, 1);
    scattered_fixed::<3>(0, 3);
    scattered_fixed::<3>(0, 2);
    scattered_fixed::<3>(1, 2);
    scattered_fixed::<4>(0, 4);
    scattered_fixed::<6>(0, 6);
    scattered_fixed::<6>(0, 5);
    scattered_fixed::<7>(0, 7);
    scattered_fixed::<12>(0, 12);
    scattered_fixed::<12>(6, 6);
}

#[test]
fn transposes_move_bits_only() {
    transposed::<1>();
    transposed::<2>();
    transposed::<3>();
    transposed::<6>();
    transposed::<7>();
    let column: Vec<f64> = (0..5).map(|r| value(r, 2)).collect();
    let picked = pattern([4, 0, 2, 2]);
    let x = gather_values(&column, &picked);
    assert_eq!(
        values(x).map(f64::to_bits),
        picked.map(|r| value(r, 2).to_bits())
    );
    for (width, offset, n) in [
        (1, 0, 1),
        (3, 0, 3),
        (6, 0, 6),
        (7, 2, 5),
        (7, 1, 4),
        (5, 4, 1),
    ] {
        let x: Vec<Lane> = (0..n).map(|j| from_fn(|l| value(l, j))).collect();
        let mut block = vec![1.5; LANES * width];
        scatter_rows(&mut block, width, offset, &x);
        for (l, row) in block.chunks_exact(width).enumerate() {
            for (k, v) in row.iter().enumerate() {
                let want = if (offset..offset + n).contains(&k) {
                    value(l, k - offset)
                } else {
                    1.5
                };
                assert_eq!(
                    v.to_bits(),
                    want.to_bits(),
                    "row {l} value {k}: width {width}, offset {offset}"
                );
            }
        }
    }
}
