//! Eight lanes: the lane types of a build for AVX-512 (`-C target-cpu=x86-64-v4`, or any target
//! with `avx512f` enabled when compiling), where [`LANES`](super::LANES) is 8.
//!
//! simba wraps `wide::f64x4` for four lanes but has no eight-lane type, so [`Lane8`] wraps
//! `wide::f64x8` — one `__m512d` when the build enables `avx512f` — with what the lane formulas
//! ask of a lane value: arithmetic, nalgebra's scalar traits (`Zero`, `One`) and simba's
//! `SimdValue` and `SimdPartialOrd`; [`Mask8`] is its comparisons' mask. Every operation is the
//! IEEE operation on each lane, as for four lanes, so a lane's result is the same bits in
//! either width (the default study writes the same result files from either build;
//! `docs/performance-log.md`, 2026-11-28 15:40).

use simba::simd::{SimdBool, SimdPartialOrd, SimdValue};
use std::ops::{
    Add, AddAssign, BitAnd, BitOr, BitXor, Div, DivAssign, Mul, MulAssign, Neg, Not, Sub, SubAssign,
};
use wide::f64x8;

/// Eight f64, one per instance.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
#[repr(transparent)]
pub struct Lane8(pub f64x8);

/// Per-lane booleans of [`Lane8`] comparisons: all bits set where true, as `wide` keeps them.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
#[repr(transparent)]
pub struct Mask8(pub f64x8);

macro_rules! binop {
    ($tr:ident, $f:ident, $tra:ident, $fa:ident, $op:tt) => {
        impl $tr for Lane8 {
            type Output = Lane8;
            #[inline(always)]
            fn $f(self, o: Lane8) -> Lane8 { Lane8(self.0 $op o.0) }
        }
        impl $tra for Lane8 {
            #[inline(always)]
            fn $fa(&mut self, o: Lane8) { self.0 = self.0 $op o.0 }
        }
    };
}
binop!(Add, add, AddAssign, add_assign, +);
binop!(Sub, sub, SubAssign, sub_assign, -);
binop!(Mul, mul, MulAssign, mul_assign, *);
binop!(Div, div, DivAssign, div_assign, /);

impl Neg for Lane8 {
    type Output = Lane8;
    #[inline(always)]
    fn neg(self) -> Lane8 {
        Lane8(-self.0)
    }
}

impl num_traits::Zero for Lane8 {
    #[inline(always)]
    fn zero() -> Self {
        Lane8(f64x8::ZERO)
    }

    /// Whether every lane is ±0.
    #[inline(always)]
    fn is_zero(&self) -> bool {
        self.0.simd_eq(f64x8::ZERO).all()
    }
}
impl num_traits::One for Lane8 {
    #[inline(always)]
    fn one() -> Self {
        Lane8(f64x8::ONE)
    }
}

impl From<[f64; 8]> for Lane8 {
    #[inline(always)]
    fn from(a: [f64; 8]) -> Self {
        Lane8(f64x8::new(a))
    }
}
impl From<Lane8> for [f64; 8] {
    #[inline(always)]
    fn from(x: Lane8) -> Self {
        x.0.to_array()
    }
}
impl From<[bool; 8]> for Mask8 {
    #[inline(always)]
    fn from(a: [bool; 8]) -> Self {
        Mask8(f64x8::new(
            a.map(|b| if b { f64::from_bits(u64::MAX) } else { 0.0 }),
        ))
    }
}

impl Lane8 {
    /// `|x|` per lane.
    #[inline(always)]
    pub fn abs(self) -> Self {
        Lane8(self.0.abs())
    }

    /// `√x` per lane (IEEE, correctly rounded).
    #[inline(always)]
    pub fn sqrt(self) -> Self {
        Lane8(self.0.sqrt())
    }

    /// `self b + c` per lane, one fused multiply-add (the build has FMA with AVX-512).
    #[inline(always)]
    pub fn mul_add(self, b: Lane8, c: Lane8) -> Lane8 {
        Lane8(self.0.mul_add(b.0, c.0))
    }
}

impl SimdValue for Lane8 {
    const LANES: usize = 8;
    type Element = f64;
    type SimdBool = Mask8;
    #[inline(always)]
    fn splat(val: f64) -> Self {
        Lane8(f64x8::splat(val))
    }
    #[inline(always)]
    fn extract(&self, i: usize) -> f64 {
        self.0.to_array()[i]
    }
    #[inline(always)]
    unsafe fn extract_unchecked(&self, i: usize) -> f64 {
        self.0.to_array()[i]
    }
    #[inline(always)]
    fn replace(&mut self, i: usize, val: f64) {
        let mut a = self.0.to_array();
        a[i] = val;
        self.0 = f64x8::new(a);
    }
    #[inline(always)]
    unsafe fn replace_unchecked(&mut self, i: usize, val: f64) {
        self.replace(i, val)
    }
    #[inline(always)]
    fn select(self, cond: Mask8, other: Self) -> Self {
        Lane8(cond.0.select(self.0, other.0))
    }
}

impl SimdPartialOrd for Lane8 {
    #[inline(always)]
    fn simd_gt(self, o: Self) -> Mask8 {
        Mask8(self.0.simd_gt(o.0))
    }
    #[inline(always)]
    fn simd_lt(self, o: Self) -> Mask8 {
        Mask8(self.0.simd_lt(o.0))
    }
    #[inline(always)]
    fn simd_ge(self, o: Self) -> Mask8 {
        Mask8(self.0.simd_ge(o.0))
    }
    #[inline(always)]
    fn simd_le(self, o: Self) -> Mask8 {
        Mask8(self.0.simd_le(o.0))
    }
    #[inline(always)]
    fn simd_eq(self, o: Self) -> Mask8 {
        Mask8(self.0.simd_eq(o.0))
    }
    #[inline(always)]
    fn simd_ne(self, o: Self) -> Mask8 {
        Mask8(self.0.simd_ne(o.0))
    }
    #[inline(always)]
    fn simd_max(self, o: Self) -> Self {
        Lane8(self.0.max(o.0))
    }
    #[inline(always)]
    fn simd_min(self, o: Self) -> Self {
        Lane8(self.0.min(o.0))
    }
    #[inline(always)]
    fn simd_clamp(self, lo: Self, hi: Self) -> Self {
        self.simd_max(lo).simd_min(hi)
    }
    fn simd_horizontal_min(self) -> f64 {
        self.0.to_array().into_iter().fold(f64::INFINITY, f64::min)
    }
    fn simd_horizontal_max(self) -> f64 {
        self.0
            .to_array()
            .into_iter()
            .fold(f64::NEG_INFINITY, f64::max)
    }
}

impl BitAnd for Mask8 {
    type Output = Mask8;
    #[inline(always)]
    fn bitand(self, o: Mask8) -> Mask8 {
        Mask8(self.0 & o.0)
    }
}
impl BitOr for Mask8 {
    type Output = Mask8;
    #[inline(always)]
    fn bitor(self, o: Mask8) -> Mask8 {
        Mask8(self.0 | o.0)
    }
}
impl BitXor for Mask8 {
    type Output = Mask8;
    #[inline(always)]
    fn bitxor(self, o: Mask8) -> Mask8 {
        Mask8(self.0 ^ o.0)
    }
}
impl Not for Mask8 {
    type Output = Mask8;
    #[inline(always)]
    fn not(self) -> Mask8 {
        Mask8(!self.0)
    }
}

impl SimdValue for Mask8 {
    const LANES: usize = 8;
    type Element = bool;
    type SimdBool = Mask8;
    #[inline(always)]
    fn splat(val: bool) -> Self {
        Mask8::from([val; 8])
    }
    #[inline(always)]
    fn extract(&self, i: usize) -> bool {
        self.0.to_bitmask() & (1 << i) != 0
    }
    #[inline(always)]
    unsafe fn extract_unchecked(&self, i: usize) -> bool {
        self.extract(i)
    }
    #[inline(always)]
    fn replace(&mut self, i: usize, val: bool) {
        let mut a = self.0.to_array();
        a[i] = if val { f64::from_bits(u64::MAX) } else { 0.0 };
        self.0 = f64x8::new(a);
    }
    #[inline(always)]
    unsafe fn replace_unchecked(&mut self, i: usize, val: bool) {
        self.replace(i, val)
    }
    #[inline(always)]
    fn select(self, cond: Mask8, other: Self) -> Self {
        Mask8(cond.0.select(self.0, other.0))
    }
}

impl SimdBool for Mask8 {
    #[inline(always)]
    fn bitmask(self) -> u64 {
        self.0.to_bitmask() as u64
    }
    fn and(self) -> bool {
        self.0.to_bitmask() == 0xff
    }
    fn or(self) -> bool {
        self.0.to_bitmask() != 0
    }
    fn xor(self) -> bool {
        self.0.to_bitmask().count_ones() % 2 == 1
    }
    #[inline(always)]
    fn all(self) -> bool {
        self.0.to_bitmask() == 0xff
    }
    #[inline(always)]
    fn any(self) -> bool {
        self.0.to_bitmask() != 0
    }
    #[inline(always)]
    fn none(self) -> bool {
        self.0.to_bitmask() == 0
    }
    fn if_else<Res: SimdValue<SimdBool = Self>>(
        self,
        if_value: impl FnOnce() -> Res,
        else_value: impl FnOnce() -> Res,
    ) -> Res {
        let a = if_value();
        let b = else_value();
        a.select(self, b)
    }
    fn if_else2<Res: SimdValue<SimdBool = Self>>(
        self,
        if_value: impl FnOnce() -> Res,
        else_if: (impl FnOnce() -> Self, impl FnOnce() -> Res),
        else_value: impl FnOnce() -> Res,
    ) -> Res {
        let a = if_value();
        let b = else_if.1();
        let c = else_value();
        a.select(self, b.select(else_if.0(), c))
    }
    fn if_else3<Res: SimdValue<SimdBool = Self>>(
        self,
        if_value: impl FnOnce() -> Res,
        else_if: (impl FnOnce() -> Self, impl FnOnce() -> Res),
        else_else_if: (impl FnOnce() -> Self, impl FnOnce() -> Res),
        else_value: impl FnOnce() -> Res,
    ) -> Res {
        let a = if_value();
        let b = else_if.1();
        let c = else_else_if.1();
        let d = else_value();
        a.select(self, b.select(else_if.0(), c.select(else_else_if.0(), d)))
    }
}
