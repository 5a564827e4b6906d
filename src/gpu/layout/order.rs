//! Where the evaluation kernel puts each value of an output column: the one description the
//! kernel's `store` (through the generated `OUTPUT_VALUE_MAJOR` constant) and the host's
//! readback ([`OutputOrder::index`]) both follow.
//!
//! Both orders keep every column's values together, in the slice's range `prefix · n ..
//! (prefix + width) · n` for a slice of `n` instances, so a readback copies the same ranges
//! whichever the order; they differ within a column. Columns of width 1 (the status, the
//! power, the stepping kernels' carry columns) are the same in both.

use std::str::FromStr;

use crate::error::{Error, Result};

/// The order of an output column's values (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputOrder {
    /// Value `k` of instance `i` at `prefix · n + i · width + k`: an instance's values side by
    /// side. The faster order on CPU Vulkan drivers (lavapipe ran the value-major stores 0.68×
    /// as fast, `docs/performance-log.md`), where one invocation's stores stream through one
    /// cache line.
    InstanceMajor,
    /// Value `k` of instance `i` at `(prefix + k) · n + i`: the instances' values of one kind
    /// side by side, so that the 32 stores of a warp fill whole cache lines. The faster order
    /// on GPUs: on an H100 the evaluation kernel ran 1.7–2.8× as fast so
    /// (`docs/performance-log.md`, 2026-11-26).
    ValueMajor,
}

/// The names [`OutputOrder::from_str`] accepts.
pub const OUTPUT_ORDERS: &str = "instance-major, value-major";

impl OutputOrder {
    /// The order for an adapter of this type: instance-major on CPU drivers (lavapipe and
    /// other software adapters), value-major on GPUs.
    pub fn for_adapter(device_type: wgpu::DeviceType) -> Self {
        match device_type {
            wgpu::DeviceType::Cpu => Self::InstanceMajor,
            _ => Self::ValueMajor,
        }
    }

    /// Where value `k` of instance `i` of the column `(prefix, width)` lies in a slice of `n`
    /// instances (the kernel's `store`).
    #[inline]
    pub fn index(self, prefix: usize, width: usize, n: usize, i: usize, k: usize) -> usize {
        match self {
            Self::InstanceMajor => prefix * n + i * width + k,
            Self::ValueMajor => (prefix + k) * n + i,
        }
    }

    /// The WGSL constant that selects the order in the kernels' `store`.
    pub fn wgsl_constant(self) -> String {
        format!(
            "const OUTPUT_VALUE_MAJOR: bool = {};\n",
            self == Self::ValueMajor
        )
    }

    /// Its name, as [`OutputOrder::from_str`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Self::InstanceMajor => "instance-major",
            Self::ValueMajor => "value-major",
        }
    }
}

impl FromStr for OutputOrder {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "instance-major" => Ok(Self::InstanceMajor),
            "value-major" => Ok(Self::ValueMajor),
            _ => Err(Error::BadChoice {
                what: "output order",
                value: s.to_string(),
                accepted: OUTPUT_ORDERS,
            }),
        }
    }
}

/// One column of a slice read back, values in the kernel's precision: value `k` of instance
/// `i` through [`OutputOrder::index`], without copying the column — or a [`part`](Self::part)
/// of its instances, which the host converts on several threads at once.
#[derive(Debug, Clone, Copy)]
pub struct OutputColumn<'a, T> {
    /// The whole column: `width · n` values.
    values: &'a [T],
    width: usize,
    n: usize,
    /// The instances `first .. first + count` of the slice's `n`.
    first: usize,
    count: usize,
    order: OutputOrder,
}

impl<'a, T: Copy + 'a> OutputColumn<'a, T> {
    /// The column `(prefix, width)` of a slice of `n` instances whose outputs are `slice`
    /// (at least up to the column's end).
    pub fn new(slice: &'a [T], prefix: usize, width: usize, n: usize, order: OutputOrder) -> Self {
        Self {
            values: &slice[prefix * n..(prefix + width) * n],
            width,
            n,
            first: 0,
            count: n,
            order,
        }
    }

    /// The instances `first .. first + count` of this column (clamped to it), numbered from 0.
    pub fn part(self, first: usize, count: usize) -> Self {
        let first = (self.first + first).min(self.first + self.count);
        let count = count.min(self.first + self.count - first);
        Self {
            first,
            count,
            ..self
        }
    }

    /// Instances in the column (or part).
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether it holds no instance.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Value `k` of instance `i`.
    #[inline]
    pub fn get(&self, i: usize, k: usize) -> T {
        self.values[self.order.index(0, self.width, self.n, self.first + i, k)]
    }

    /// Each value's run of the part's instances, when value-major: `W` of them.
    fn runs<const W: usize>(&self) -> [&'a [T]; W] {
        let (values, n, first, count) = (self.values, self.n, self.first, self.count);
        std::array::from_fn(|k| &values[k * n + first..k * n + first + count])
    }

    /// The part's values when instance-major (or of width 1): one run, instance by instance.
    fn rows(&self) -> &'a [T] {
        &self.values[self.first * self.width..(self.first + self.count) * self.width]
    }

    /// Appends every value converted by `f`, instance by instance (each instance's `width`
    /// values in order): the host's instance-major order, whatever the kernel's
    /// ([`write_into`](Self::write_into)).
    pub fn extend_into<U: Copy + Default>(self, dst: &mut Vec<U>, f: impl Fn(T) -> U) {
        let base = dst.len();
        dst.resize(base + self.count * self.width, U::default());
        self.write_into(&mut dst[base..], f);
    }

    /// Writes every value converted by `f` into `dst` (`count · width` long), instance by
    /// instance. Instance-major (and any column of width 1) is one pass over the values;
    /// value-major gathers each instance's values from the value runs, with the width a
    /// constant for the common widths (1.5–1.8× the instance-major cost a value on the Zen 5
    /// VM): the readback's conversion is most of an evaluation's time on the host.
    pub fn write_into<U: Copy>(self, dst: &mut [U], f: impl Fn(T) -> U) {
        let dst = &mut dst[..self.count * self.width];
        if self.count == 0 {
            return;
        }
        if self.order == OutputOrder::InstanceMajor || self.width == 1 {
            for (place, &x) in dst.iter_mut().zip(self.rows()) {
                *place = f(x);
            }
            return;
        }
        // Value-major: each instance's values gathered from the value runs; for the common
        // widths (a triple, a free body's 6 mobilities and their pairs, body forces) with the
        // width a constant, which the compiler turns into shuffles: a plain strided pass ran
        // 4–6× slower than instance-major.
        match self.width {
            2 => transpose(self.runs::<2>(), dst, &f),
            3 => transpose(self.runs::<3>(), dst, &f),
            4 => transpose(self.runs::<4>(), dst, &f),
            6 => transpose(self.runs::<6>(), dst, &f),
            12 => transpose(self.runs::<12>(), dst, &f),
            width => {
                for k in 0..width {
                    let run = &self.values[k * self.n + self.first..][..self.count];
                    for (place, &x) in dst[k..].iter_mut().step_by(width).zip(run) {
                        *place = f(x);
                    }
                }
            }
        }
    }

    /// Calls `g` with each instance's `width` values in order, instance by instance (a
    /// value-major column's gathered first: into a row on the stack for the common widths,
    /// else into one reused buffer).
    pub fn for_each_instance(self, mut g: impl FnMut(&[T])) {
        match self.order {
            _ if self.width == 1 => self.rows().chunks_exact(1).for_each(g),
            OutputOrder::InstanceMajor => {
                self.rows().chunks_exact(self.width.max(1)).for_each(g);
            }
            OutputOrder::ValueMajor => match self.width {
                2 => each_row(self.runs::<2>(), g),
                3 => each_row(self.runs::<3>(), g),
                4 => each_row(self.runs::<4>(), g),
                6 => each_row(self.runs::<6>(), g),
                12 => each_row(self.runs::<12>(), g),
                width => {
                    let mut row = Vec::with_capacity(width);
                    for i in 0..self.count {
                        row.clear();
                        row.extend((0..width).map(|k| self.get(i, k)));
                        g(&row);
                    }
                }
            },
        }
    }
}

/// `g(&[runs[k][i] for k < W])` for each instance i.
#[allow(clippy::needless_range_loop)] // i indexes W runs at once
fn each_row<T: Copy, const W: usize>(runs: [&[T]; W], mut g: impl FnMut(&[T])) {
    let n = runs.iter().map(|r| r.len()).min().unwrap_or(0);
    for i in 0..n {
        let row: [T; W] = std::array::from_fn(|k| runs[k][i]);
        g(&row);
    }
}

/// `out[i · W + k] = f(runs[k][i])`.
fn transpose<T: Copy, U: Copy, const W: usize>(
    runs: [&[T]; W],
    out: &mut [U],
    f: &impl Fn(T) -> U,
) {
    let n = runs.iter().map(|r| r.len()).min().unwrap_or(0);
    for (i, place) in out.chunks_exact_mut(W).enumerate().take(n) {
        let row: [U; W] = std::array::from_fn(|k| f(runs[k][i]));
        place.copy_from_slice(&row);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_orders_place_every_value_of_a_column_once_inside_its_range() {
        let (prefix, width, n) = (3, 4, 5);
        for order in [OutputOrder::InstanceMajor, OutputOrder::ValueMajor] {
            let mut seen = vec![false; (prefix + width) * n];
            for i in 0..n {
                for k in 0..width {
                    let at = order.index(prefix, width, n, i, k);
                    assert!(
                        (prefix * n..(prefix + width) * n).contains(&at),
                        "{order:?}"
                    );
                    assert!(!seen[at], "{order:?}: ({i}, {k}) lands on a taken place");
                    seen[at] = true;
                }
            }
            // Width 1: both orders agree (the status, the carry columns).
            for i in 0..n {
                assert_eq!(order.index(prefix, 1, n, i, 0), prefix * n + i);
            }
        }
    }

    #[test]
    fn parts_of_a_wide_column_read_the_same_in_both_orders() {
        // Width 5 takes the general (not the constant-width) paths; instance i's value k is
        // 100 i + k, in a slice of 7 instances after a one-value column.
        let (n, width, prefix) = (7, 5, 1);
        let stored = |order: OutputOrder| {
            let mut slice = vec![-1.0f32; (prefix + width) * n];
            for i in 0..n {
                for k in 0..width {
                    slice[order.index(prefix, width, n, i, k)] = (100 * i + k) as f32;
                }
            }
            slice
        };
        let (im, vm) = (
            stored(OutputOrder::InstanceMajor),
            stored(OutputOrder::ValueMajor),
        );
        for (first, count) in [(0, 7), (2, 3), (6, 4), (7, 1)] {
            let read = |slice: &[f32], order| {
                let part = OutputColumn::new(slice, prefix, width, n, order).part(first, count);
                let mut values = vec![0.0; part.len() * width];
                part.write_into(&mut values, |x| x as f64);
                let mut rows = Vec::new();
                part.for_each_instance(|row| rows.extend(row.iter().map(|&x| x as f64)));
                assert_eq!(rows, values, "{order:?} ({first}, {count})");
                values
            };
            let expected: Vec<f64> = (first..(first + count).min(n))
                .flat_map(|i| (0..width).map(move |k| (100 * i + k) as f64))
                .collect();
            assert_eq!(read(&im, OutputOrder::InstanceMajor), expected);
            assert_eq!(read(&vm, OutputOrder::ValueMajor), expected);
        }
    }

    #[test]
    fn a_value_major_column_reads_back_instance_by_instance() {
        // Instance i's value k is 10 i + k, stored value-major after a two-value column.
        let (n, width) = (3, 2);
        let mut slice = vec![-1.0f32; (2 + width) * n];
        for i in 0..n {
            for k in 0..width {
                slice[OutputOrder::ValueMajor.index(2, width, n, i, k)] = (10 * i + k) as f32;
            }
        }
        let column = OutputColumn::new(&slice, 2, width, n, OutputOrder::ValueMajor);
        let mut read = vec![-2.0];
        column.extend_into(&mut read, |x| x as f64);
        assert_eq!(read, [-2.0, 0.0, 1.0, 10.0, 11.0, 20.0, 21.0]);
        let mut rows = Vec::new();
        column.for_each_instance(|row| rows.push(row.to_vec()));
        assert_eq!(rows, [[0.0, 1.0], [10.0, 11.0], [20.0, 21.0]]);
        assert_eq!(column.get(1, 1), 11.0);
        // A part: instances 1 and 2, numbered from 0.
        let part = column.part(1, 5);
        assert_eq!(part.len(), 2);
        let mut two = [0.0; 4];
        part.write_into(&mut two, |x| x as f64);
        assert_eq!(two, [10.0, 11.0, 20.0, 21.0]);
        assert_eq!(part.get(0, 1), 11.0);
        let mut part_rows = Vec::new();
        part.part(1, 1)
            .for_each_instance(|row| part_rows.push(row.to_vec()));
        assert_eq!(part_rows, [[20.0, 21.0]]);
        // The same values stored instance-major read back the same.
        let im: Vec<f32> = [-1.0; 6]
            .into_iter()
            .chain(read[1..].iter().map(|&x| x as f32))
            .collect();
        let column = OutputColumn::new(&im, 2, width, n, OutputOrder::InstanceMajor);
        let mut again = vec![-2.0];
        column.extend_into(&mut again, |x| x as f64);
        assert_eq!(again, read);
        let mut rows_again = Vec::new();
        column.for_each_instance(|row| rows_again.push(row.to_vec()));
        assert_eq!(rows_again, rows);
        let mut two_again = [0.0; 4];
        column.part(1, 2).write_into(&mut two_again, |x| x as f64);
        assert_eq!(two_again, two);
        assert_eq!(
            "value-major".parse::<OutputOrder>().unwrap(),
            OutputOrder::ValueMajor
        );
        assert!("row-major".parse::<OutputOrder>().is_err());
    }
}
