//! Broadcast columns: a value every instance shares is stored once, and the column becomes
//! per-instance only when an instance is given a value of its own.
//!
//! Most of a study's template values (gravity, mass properties, a plane frame, a radius, a
//! Baumgarte time constant) are the same for every instance; storing them N times would make
//! them most of a batch's memory. A [`Broadcast`] column holds `width` values while shared and
//! `len · width` once expanded; writing an instance the value it already shares (bit for bit)
//! leaves it shared, and a bulk write of identical rows shares them again. Readers index it
//! per instance ([`row`](Broadcast::row), `column[i]`) without caring which form it has;
//! [`as_slice`](Broadcast::as_slice), for callers that want one entry per instance, expands a
//! shared column into a read-side copy kept until the next write.

use std::sync::OnceLock;

use bytemuck::Pod;

use crate::error::{Error, Result};

/// Names a column in an error, formatted only when an error is made: a write of one instance
/// does not format the column's name (with the eigen solve twice, that made a study's batch
/// setters three times as costly).
pub type What<'a> = &'a dyn Fn() -> String;

/// A per-instance column whose entries may all be one shared row (module doc).
pub struct Broadcast<T: Pod> {
    len: usize,
    width: usize,
    /// `width` values while shared, `len · width` once expanded (a volatile column shared
    /// again keeps the room of the expanded one).
    data: Vec<T>,
    shared: bool,
    /// Shared again by [`share_if_uniform`](Broadcast::share_if_uniform) at least once.
    reshared: bool,
    /// Expanded again after being shared again: a column written per instance at every step
    /// (a motion law's start time), which keeps its room when shared again.
    volatile: bool,
    /// `as_slice`'s expansion of a shared column (empty until asked for).
    expanded: OnceLock<Vec<T>>,
}

fn same_bits<T: Pod>(a: &[T], b: &[T]) -> bool {
    bytemuck::cast_slice::<T, u8>(a) == bytemuck::cast_slice::<T, u8>(b)
}

impl<T: Pod> Broadcast<T> {
    /// `len` instances sharing `row` (`row.len()` values per instance, at least one).
    pub fn shared(len: usize, row: &[T]) -> Self {
        Self {
            len,
            width: row.len().max(1),
            data: row.to_vec(),
            shared: true,
            reshared: false,
            volatile: false,
            expanded: OnceLock::new(),
        }
    }

    /// Number of instances.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the column has no instance.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Values per instance.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Whether every instance shares one stored row.
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// The stored values: one row while shared, every instance's row otherwise.
    pub fn stored(&self) -> &[T] {
        &self.data
    }

    /// The values of instance `i` (`width` of them). Panics when `i` is out of range, as slice
    /// indexing does.
    #[inline(always)]
    pub fn row(&self, i: usize) -> &[T] {
        assert!(i < self.len, "instance {i} of a column of {}", self.len);
        if self.shared {
            &self.data
        } else {
            &self.data[i * self.width..(i + 1) * self.width]
        }
    }

    /// One entry per instance (`len · width` values). A shared column is expanded into a copy
    /// kept for later reads until the next write, so prefer [`row`](Self::row) in loops.
    pub fn as_slice(&self) -> &[T] {
        if !self.shared {
            return &self.data;
        }
        self.expanded.get_or_init(|| {
            let mut v = Vec::with_capacity(self.len * self.width);
            for _ in 0..self.len {
                v.extend_from_slice(&self.data);
            }
            v
        })
    }

    /// Bytes held: the stored values (with the room a column shared again keeps) and any
    /// read-side expansion.
    pub fn bytes(&self) -> usize {
        (self.data.capacity() + self.expanded.get().map_or(0, Vec::capacity))
            * std::mem::size_of::<T>()
    }

    /// Makes the column per-instance (fallibly: the size comes from the user).
    fn expand(&mut self, what: What<'_>) -> Result<()> {
        if !self.shared {
            return Ok(());
        }
        let total = self.len * self.width;
        self.volatile |= self.reshared;
        // In place: a volatile column shared again still has its room (no allocation then).
        self.data
            .try_reserve_exact(total.saturating_sub(self.data.len()))
            .map_err(|_| Error::OutOfMemory {
                what: what(),
                count: self.len.to_string(),
                bytes: total as u128 * std::mem::size_of::<T>() as u128,
                where_: "host",
            })?;
        for _ in 1..self.len {
            self.data.extend_from_within(..self.width);
        }
        self.shared = false;
        Ok(())
    }

    /// Writes instance `i`'s row (`width` values, already validated). A shared column stays
    /// shared when the row is the one it shares, bit for bit; otherwise it is expanded first
    /// (`what` names the column in an out-of-memory error).
    pub fn set_row(&mut self, i: usize, row: &[T], what: What<'_>) -> Result<()> {
        debug_assert_eq!(row.len(), self.width);
        if self.shared && same_bits(&self.data, row) {
            return Ok(());
        }
        self.expand(what)?;
        self.expanded = OnceLock::new();
        self.data[i * self.width..(i + 1) * self.width].copy_from_slice(row);
        Ok(())
    }

    /// Writes the rows of the instances `apply` selects (every instance when `None`), instance
    /// `i`'s from `row(i)` (`width` values, already validated): the column that
    /// [`set_row`](Self::set_row) for each such instance in turn leaves, bit for bit, in one pass
    /// (a shared column stays shared when every row written is the one it shares; otherwise it is
    /// expanded once).
    pub fn set_rows<'r>(
        &mut self,
        apply: Option<&[bool]>,
        row: impl Fn(usize) -> &'r [T],
        what: What<'_>,
    ) -> Result<()>
    where
        T: 'r,
    {
        self.set_rows_with(apply, |i, out| out.copy_from_slice(row(i)), what)
    }

    /// [`set_rows`](Self::set_rows) with instance `i`'s row written by `fill(i, row)` into
    /// `width` values (what a caller computes from its input, a normalised quaternion, without
    /// a copy of every row first). `fill` must give the same row every time it is called for an
    /// instance: it is called twice for some while the column is shared.
    pub fn set_rows_with(
        &mut self,
        apply: Option<&[bool]>,
        fill: impl Fn(usize, &mut [T]),
        what: What<'_>,
    ) -> Result<()> {
        let selected = |i: usize| apply.is_none_or(|a| a[i]);
        let w = self.width;
        if self.shared {
            let mut row = self.data[..w].to_vec();
            let unchanged = (0..self.len).all(|i| {
                !selected(i) || {
                    fill(i, &mut row);
                    same_bits(&self.data[..w], &row)
                }
            });
            if unchanged {
                return Ok(());
            }
        }
        self.expand(what)?;
        self.expanded = OnceLock::new();
        for (i, stored) in self.data.chunks_exact_mut(w).enumerate() {
            if selected(i) {
                fill(i, stored);
            }
        }
        Ok(())
    }

    /// Shares the column again when every instance holds the same row, bit for bit (a scan
    /// that stops at the first differing row); returns whether it is shared now. The expanded
    /// storage is released, unless the column proved volatile: expanded again after an earlier
    /// sharing, as a column written per instance at every step is (a motion law's start time,
    /// set by an environment each control step, shared again between steps by the stepper).
    /// Such a column keeps its room (counted by [`bytes`](Self::bytes)) and expands in place,
    /// so a step allocates nothing for it.
    pub fn share_if_uniform(&mut self) -> bool {
        if self.shared || self.len == 0 {
            return self.shared;
        }
        let w = self.width;
        if self.data.chunks(w).all(|r| same_bits(r, &self.data[..w])) {
            if self.volatile {
                self.data.truncate(w);
            } else {
                self.data = self.data[..w].to_vec();
            }
            self.shared = true;
            self.reshared = true;
            self.expanded = OnceLock::new();
        }
        self.shared
    }

    /// Replaces every row at once with `values` (`len · width`, already validated), shared
    /// again when all rows are equal bit for bit; returns the previous column.
    pub fn replace_all(&mut self, values: Vec<T>) -> Self {
        debug_assert_eq!(values.len(), self.len * self.width);
        let w = self.width;
        let all_equal = values.len() >= w && values.chunks(w).all(|r| same_bits(r, &values[..w]));
        let replacement = if all_equal && self.len > 0 {
            Self::shared(self.len, &values[..w])
        } else {
            Self {
                len: self.len,
                width: w,
                data: values,
                shared: false,
                reshared: false,
                volatile: false,
                expanded: OnceLock::new(),
            }
        };
        std::mem::replace(self, replacement)
    }
}

/// What the batch's field accessors need of a width-1 column, per-instance (`Vec`) or
/// [`Broadcast`], so one accessor macro serves both.
pub(crate) trait InstanceColumn<T: Pod>: Sized {
    /// One entry per instance.
    fn entries(&self) -> &[T];
    /// Instance `i`'s entry.
    fn get(&self, i: usize) -> T;
    /// Writes instance `i`'s entry (`what` names the column in an out-of-memory error).
    fn put(&mut self, i: usize, value: T, what: What<'_>) -> Result<()>;
    /// Replaces every entry; returns the previous column.
    fn swap_all(&mut self, values: Vec<T>) -> Self;
    /// Stores a uniform column once again where the column type can (a write undone).
    fn compact(&mut self) {}
}

impl<T: Pod> InstanceColumn<T> for Vec<T> {
    fn entries(&self) -> &[T] {
        self
    }
    fn get(&self, i: usize) -> T {
        self[i]
    }
    fn put(&mut self, i: usize, value: T, _what: What<'_>) -> Result<()> {
        self[i] = value;
        Ok(())
    }
    fn swap_all(&mut self, values: Vec<T>) -> Self {
        std::mem::replace(self, values)
    }
}

impl<T: Pod> InstanceColumn<T> for Broadcast<T> {
    fn entries(&self) -> &[T] {
        self.as_slice()
    }
    fn get(&self, i: usize) -> T {
        self[i]
    }
    fn put(&mut self, i: usize, value: T, what: What<'_>) -> Result<()> {
        self.set_row(i, std::slice::from_ref(&value), what)
    }
    fn swap_all(&mut self, values: Vec<T>) -> Self {
        self.replace_all(values)
    }
    fn compact(&mut self) {
        self.share_if_uniform();
    }
}

impl<T: Pod> std::ops::Index<usize> for Broadcast<T> {
    type Output = T;

    /// The entry of instance `i` of a width-1 column.
    #[inline(always)]
    fn index(&self, i: usize) -> &T {
        &self.row(i)[0]
    }
}

impl<T: Pod> Clone for Broadcast<T> {
    fn clone(&self) -> Self {
        Self {
            len: self.len,
            width: self.width,
            data: self.data.clone(),
            shared: self.shared,
            reshared: self.reshared,
            volatile: self.volatile,
            expanded: OnceLock::new(),
        }
    }
}

impl<T: Pod + PartialEq> PartialEq for Broadcast<T> {
    /// Equal when every instance has the same values, whichever form each column has.
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self.width == other.width
            && (0..self.len).all(|i| self.row(i) == other.row(i))
    }
}

impl<T: Pod + std::fmt::Debug> std::fmt::Debug for Broadcast<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.shared {
            write!(f, "Broadcast::shared({} × {:?})", self.len, self.data)
        } else {
            f.debug_list().entries(&self.data).finish()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_set_at_once_leave_what_rows_set_one_at_a_time_leave() {
        let what = || "c".to_string();
        let rows: Vec<[f64; 2]> = (0..6).map(|i| [i as f64, -(i as f64)]).collect();
        let apply = [true, false, true, true, false, true];
        for start in [Broadcast::shared(6, &[9.0, 9.0]), {
            let mut c = Broadcast::shared(6, &[9.0, 9.0]);
            c.set_row(4, &[1.5, 2.5], &what).unwrap();
            c
        }] {
            for mask in [None, Some(&apply[..])] {
                let mut one = start.clone();
                for (i, row) in rows.iter().enumerate() {
                    if mask.is_none_or(|m| m[i]) {
                        one.set_row(i, row, &what).unwrap();
                    }
                }
                let mut all = start.clone();
                all.set_rows(mask, |i| &rows[i][..], &what).unwrap();
                assert_eq!(all, one);
                assert_eq!(all.is_shared(), one.is_shared());
                assert_eq!(all.row(1), one.row(1));
                if mask.is_some() {
                    assert_eq!(all.row(1), start.row(1), "a row not selected is kept");
                }
            }
        }
        // The value it shares, written to every selected row, leaves it shared.
        let mut c = Broadcast::shared(6, &[9.0, 9.0]);
        c.set_rows(Some(&apply[..]), |_| &[9.0, 9.0][..], &what)
            .unwrap();
        assert!(c.is_shared());
        // Another value in a row not selected does not expand it either.
        c.set_rows(
            Some(&apply[..]),
            |i| {
                if apply[i] {
                    &[9.0, 9.0][..]
                } else {
                    &[1.0, 1.0][..]
                }
            },
            &what,
        )
        .unwrap();
        assert!(c.is_shared());
    }

    #[test]
    fn shared_until_an_instance_differs_and_shared_again_on_equal_rows() {
        let mut c = Broadcast::shared(4, &[1.0, 2.0]);
        assert!(c.is_shared());
        assert_eq!(c.bytes(), 16);
        c.set_row(2, &[1.0, 2.0], &|| "c".into()).unwrap();
        assert!(c.is_shared(), "the value it shares leaves it shared");
        assert_eq!(c.as_slice(), &[1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0]);
        assert_eq!(c.bytes(), 16 + 64, "the read-side copy is counted");
        c.set_row(2, &[3.0, 4.0], &|| "c".into()).unwrap();
        assert!(!c.is_shared());
        assert_eq!(c.row(1), &[1.0, 2.0]);
        assert_eq!(c.row(2), &[3.0, 4.0]);
        assert_eq!(c.bytes(), 64, "expanded, the copy dropped");
        let old = c.replace_all(vec![5.0, 6.0, 5.0, 6.0, 5.0, 6.0, 5.0, 6.0]);
        assert!(c.is_shared());
        assert_eq!(old.row(2), &[3.0, 4.0]);
        assert_eq!(c, Broadcast::shared(4, &[5.0, 6.0]));
        // Written one instance at a time to one new value: expanded, then shared again.
        for i in 0..4 {
            c.set_row(i, &[7.0, 8.0], &|| "c".into()).unwrap();
        }
        assert!(!c.is_shared());
        assert!(c.share_if_uniform());
        assert_eq!(c.stored(), &[7.0, 8.0]);
        assert_eq!(
            c.bytes(),
            16,
            "shared again: the expanded storage is released"
        );
        c.set_row(0, &[1.0, 8.0], &|| "c".into()).unwrap();
        assert!(!c.share_if_uniform());
        // Expanded again after sharing: volatile, it keeps its room when shared again and
        // expands in place.
        c.set_row(0, &[7.0, 8.0], &|| "c".into()).unwrap();
        assert!(c.share_if_uniform());
        assert_eq!(c.bytes(), 64, "a volatile column keeps its room");
        let room = c.stored().as_ptr();
        c.set_row(0, &[1.0, 8.0], &|| "c".into()).unwrap();
        assert_eq!(c.stored().as_ptr(), room, "expanded in place");
        assert_eq!((c.row(0), c.row(3)), (&[1.0, 8.0][..], &[7.0, 8.0][..]));
        // -0.0 == 0.0 numerically, but a different bit pattern is a different value.
        let mut z = Broadcast::shared(2, &[0.0f64]);
        z.set_row(0, &[-0.0], &|| "z".into()).unwrap();
        assert!(!z.is_shared());
        assert_eq!(z[0].to_bits(), (-0.0f64).to_bits());
        assert_eq!(z[1].to_bits(), 0.0f64.to_bits());
    }
}
