//! Row kernels: where each gene of a row lands once the row is put in
//! column order (a corpus member's genes mapped into the vocabulary, whose
//! order is not the member's), and a row's transformed values.
//!
//! # Placing
//!
//! A row's output columns are marked in a bitmap, a bit per column;
//! [`RowKernels::place`] then counts, for each column, the marked columns
//! before it (the bits of the words before its word, a running count over
//! the words, plus the bits below it in its own word) and writes the column
//! and its count there. That is a fixed amount of work per gene and per 64
//! columns, with no branch on the data, and almost all of it is counting
//! the bits of a word.
//!
//! # Values
//!
//! A normalized or log-transformed row's value depends only on the count
//! and the row's total, and most counts are small: [`RowKernels::scan`]
//! sums a row and marks which small counts occur, the caller computes the
//! value of each marked count once (a logarithm each), and
//! [`RowKernels::lookup`] writes every count's value from that memo, with
//! no branch per count. A row holding larger counts goes through
//! [`RowKernels::values_in_place`] instead, which looks up a register of
//! counts at a time and computes the value of each larger count where it
//! meets one, in the same pass; it writes over the counts, so a transformed
//! row decoded in place becomes its values without a copy. Both look up a
//! register of counts at once (the vector vocabulary's `lookup_64`): on
//! AVX-512 the memo's 64 values lie in four registers and two lane
//! permutes read them, with no memory access per count; on AVX2 two lane
//! permutes read a register of counts below 16 (most of them) from the
//! memo's first two registers, and a gather the others; on NEON a gather.
//!
//! # Tallying
//!
//! scGPT bins a cell's values by their quantiles, so it orders the cell's
//! counts, most of which are 1 or 2: [`RowKernels::tally`] counts how many
//! of each value below [`TALLY_SLOTS`] a row holds and hands the larger
//! ones back apart, for the caller to count in a table. A vector table
//! sums `min(c, k)` per lane for each `k` and takes differences, so no
//! count waits on the increment of the one before it.
//!
//! [`RowKernels::starts`] turns a counting sort's bucket counts into where
//! each bucket starts (Geneformer's order counts thousands of buckets a
//! cell): a scan across each register's lanes plus the total before it,
//! where the reference adds one count after another. The sort's keys are
//! classes of `(count, median)` pairs: [`RowKernels::classify`] looks a
//! register of genes' classes up, a gather of the columns' words (token and
//! where the column's run of classes starts) and a gather of the classes,
//! and lists the genes of the class the sort leaves apart (counts past
//! the runs).
//!
//! # Selecting
//!
//! A gene selection (or a tokenizer's table) keeps the genes of a row that
//! a per-column table gives a value: [`RowKernels::select`] gathers a
//! register of genes' values from the table and compresses the kept ones,
//! with their counts, to the front of its outputs, where scalar code loads
//! one gene's value at a time and writes it whether kept or not.
//! [`RowKernels::compress`] is the same without the table: it keeps the
//! values of an array already gathered that a byte per value marks
//! (scGPT's tokens of the genes a long cell keeps).
//!
//! A gather costs about a load per lane, however few cache lines its lanes
//! touch, and a row's ascending genes are close together (16 of a cell of
//! 2,100 genes out of 36,000 span about 9 words of a bitmap), so a bitmap
//! with a bit per gene is read a register at a time by one lane permute of
//! the words from the register's first gene on (the vector vocabulary's
//! `permute_window`), a gather only where the register's genes spread
//! wider. [`RowKernels::count_marked`] counts a row's genes that a bitmap
//! marks (a selection's kept genes, an output row's length) that way, and
//! [`RowKernels::select_marked`] keeps them: the marked genes first, then
//! only their values gathered from the table, for selections that keep a
//! few of a row's genes (a vocabulary of 2,000 genes).
//! [`RowKernels::marked`] is its first pass alone, for a dense row that
//! looks each kept gene's column up as it stores its value.
//!
//! # Quotients
//!
//! Geneformer orders a cell's genes by `x / m` (a scaled count over the
//! gene's median) decreasing: [`RowKernels::quotient_keys`] divides a row's
//! arrays, a vector of divisions at a time where scalar code divides one
//! value in several cycles, and writes each quotient's complemented bits,
//! which order positive quotients decreasing. IEEE division is correctly
//! rounded in every instruction set, so the keys are the same bits on every
//! backend.
//!
//! # Streaming
//!
//! A row composed in the cache (a dense row, a token row, a transformed
//! CSR row) is copied into an output that nobody reads before the output
//! is handed out: [`RowKernels::stream`] copies it with non-temporal stores
//! where the ISA has them, so the output's lines, long out of the cache,
//! are written without first being read from memory.
//!
//! # Backends
//!
//! Most kernels are written once over the vector vocabulary, with the
//! reference's loop for registers that reach outside the table or the memo
//! and for the tail, in a module per family: `values` (`lookup`,
//! `values_in_place`, `scatter_values`), `select` (`select`,
//! `select_marked`, `marked`, `compress`, `count_marked`), `order`
//! (`tally`, `starts`, `classify`, `order_by_class`) and `stream`. The
//! others (`compiled`: `place`, `scan`, `draws`, `quotient_keys`) run the
//! reference's own code, compiled for the table's instruction set: on
//! x86-64 that brings `popcnt` (a word's bits counted in one instruction,
//! where the portable build spends a dozen) and lets the compiler widen
//! the scan (variable shifts), on AArch64 the NEON bit count. Places, sums
//! and looked-up values involve no rounding, so every table gives the
//! reference's result; the property tests check it anyway, as for every
//! family.
//!
//! The reference is [`crate::kernels::reference::rows`].

use super::dispatch::{kernel_entry, kernel_tables, Isa, Level};
use super::reference::rows as scalar;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
use super::vector::Vector;

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod compiled;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod order;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod select;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod stream;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod values;

/// The row kernels of one [`Isa`]; reach one through
/// [`KernelTable`](super::KernelTable).
#[derive(Debug)]
pub struct RowKernels {
    isa: Isa,
    place: Place,
    scan: fn(&[u32]) -> (u64, u64),
    lookup: Lookup,
    values_in_place: ValuesInPlace,
    scatter_values: ScatterValues,
    quotient_keys: QuotientKeys,
    select: Select,
    select_marked: SelectMarked,
    marked: Marked,
    compress: Compress,
    count_marked: fn(&[u32], u32, &[i32]) -> usize,
    stream: Stream,
    draws: fn(u64, u32, &mut [u32]),
    tally: Tally,
    starts: fn(&mut [u32]) -> u32,
    classify: Classify,
    order_by_class: OrderByClass,
}

/// The signature of [`RowKernels::order_by_class`]: it returns where the
/// classes' ends begin in its scratch.
type OrderByClass = fn(&[u32], &[i32], usize, &mut Vec<u32>, &mut [i32]) -> usize;

/// Where each class's tokens end after [`RowKernels::order_by_class`]: a
/// counter a class, which a table leaves either at the class (its start
/// moved past its tokens) or one past it (the next class's start, where
/// the placing pass moves no start).
#[derive(Clone, Copy, Debug)]
pub struct ClassEnds<'a> {
    ends: &'a [u32],
}

impl ClassEnds<'_> {
    /// Where class `k`'s tokens end among the placed tokens: where the next
    /// class's start.
    ///
    /// # Panics
    ///
    /// If `k` is not below the width the tokens were ordered over.
    pub fn end(&self, k: usize) -> usize {
        self.ends[k] as usize
    }
}

/// The signature of [`RowKernels::classify`].
type Classify =
    fn(&ClassLookup<'_>, &[i32], &[u32], (&mut [u32], &mut [i32]), &mut Vec<u32>) -> bool;

/// The signature of [`RowKernels::stream_parts`].
type Stream = fn(&mut [(&[u8], &mut [u8])]);

/// The signature of [`RowKernels::tally`].
type Tally = fn(&[u32], &mut [usize; TALLY_SLOTS], &mut [u32]) -> usize;

/// The signature of [`RowKernels::place`].
type Place = fn(&[u64], &mut [u32], (&[u32], &[u32]), (&mut [i32], &mut [u32]));

/// The signature of [`RowKernels::select`].
type Select = fn(&[i32], u32, &[i32], &[u32], (&mut [i32], &mut [u32])) -> usize;

/// The signature of [`RowKernels::select_marked`].
type SelectMarked = fn(&[i32], &[u32], u32, &[i32], &[u32], (&mut [i32], &mut [u32])) -> usize;

/// The signature of [`RowKernels::marked`].
type Marked = fn(usize, &[u32], u32, &[i32], &[u32], (&mut [i32], &mut [u32])) -> usize;

/// The signature of [`RowKernels::quotient_keys`].
type QuotientKeys = fn(&[f64], &[f64], &mut [u64]) -> (u64, u64);

/// The signature of [`RowKernels::compress`].
type Compress = fn(&[i32], &[u8], &[u32], (&mut [i32], &mut [u32])) -> usize;

/// The signature of [`RowKernels::lookup`].
type Lookup = fn(&[f32; MEMO_SLOTS], &[u32], &mut [f32]);

/// The signature of [`RowKernels::scatter_values`].
type ScatterValues =
    fn(&[f32; MEMO_SLOTS], (&[i32], &[i32]), &[u32], &mut [f32], &dyn Fn(u32) -> f32);

/// The signature of [`RowKernels::values_in_place`].
type ValuesInPlace = fn(&[f32; MEMO_SLOTS], &mut [u32], &dyn Fn(u32) -> f32);

pub use scalar::{class_start, ClassLookup, CLASS_START_BITS, MEMO_SLOTS, TALLY_SLOTS};

impl RowKernels {
    /// Writes `columns` (distinct, with `counts`: the bits of each count)
    /// in increasing order to `out_columns` (and their counts, in the same
    /// order, to `out_counts`): column `columns[i]` goes to the place
    /// counted by the bits of `marks` (a bit per column, exactly those of
    /// `columns` set) below its own. `before[w]` is left holding the bits of
    /// the words before word `w`.
    ///
    /// # Panics
    ///
    /// If `before` is not as long as `marks`, the four slices of columns
    /// and counts are not all as long, or a column lies past the bits of
    /// `marks` or is not marked (on every backend alike).
    pub fn place(
        &self,
        marks: &[u64],
        before: &mut [u32],
        columns: (&[u32], &[u32]),
        out: (&mut [i32], &mut [u32]),
    ) {
        (self.place)(marks, before, columns, out)
    }

    /// A row's total (summed exactly) and which counts it holds below
    /// [`MEMO_SLOTS`]` - 1`: bit `c` of the mask is set when some count is
    /// `c`, and the last bit when some count is at least `MEMO_SLOTS - 1`.
    pub fn scan(&self, counts: &[u32]) -> (u64, u64) {
        (self.scan)(counts)
    }

    /// Adds to `small[c]` the number of counts equal to `c`, for every `c`
    /// below [`TALLY_SLOTS`]; writes the other counts to `rest`, in order,
    /// and returns their number (what `rest` holds past them is
    /// unspecified). What orders a row's counts (scGPT's bins), where most
    /// counts are 1 or 2.
    ///
    /// # Panics
    ///
    /// If `rest` is shorter than `counts` (on every backend alike).
    pub fn tally(
        &self,
        counts: &[u32],
        small: &mut [usize; TALLY_SLOTS],
        rest: &mut [u32],
    ) -> usize {
        (self.tally)(counts, small, rest)
    }

    /// Turns bucket counts into where each bucket starts: each count is
    /// replaced by the sum of those before it (an exclusive prefix sum,
    /// wrapping at `2^32`), and the total is returned. What a counting
    /// sort's pass does between counting and placing (Geneformer's order,
    /// over thousands of buckets a cell).
    pub fn starts(&self, counts: &mut [u32]) -> u32 {
        (self.starts)(counts)
    }

    /// Each gene's class and token, looked up in `lookup` by its column and
    /// count ([`ClassLookup::of`]), into `out.0` and `out.1`; the positions
    /// of the genes whose class is `lookup.stray` appended to `strays`, in
    /// order. Returns whether the genes increase strictly (and are not
    /// negative). Geneformer's counting pass by classes of `(count,
    /// median)` takes its classes and tokens here: a register of genes at
    /// a time, with gathers, where a gene at a time takes two loads that
    /// depend on it and a branch.
    ///
    /// # Panics
    ///
    /// If `genes`, `counts` and both outputs are not all as long, or
    /// longer than `2^32`, or a gene or its class lies outside `lookup` (on
    /// every backend alike, at the same gene).
    pub fn classify(
        &self,
        lookup: &ClassLookup<'_>,
        genes: &[i32],
        counts: &[u32],
        out: (&mut [u32], &mut [i32]),
        strays: &mut Vec<u32>,
    ) -> bool {
        (self.classify)(lookup, genes, counts, out, strays)
    }

    /// Writes `tokens` to `placed` ordered by their `classes` (each below
    /// `width`), stably: a counting sort's count, starts and placing pass.
    /// Returns where each class's tokens end in `placed`, read from `ends`
    /// (scratch: what it held before does not matter). Geneformer's order
    /// by classes of `(count, median)` ([`RowKernels::classify`]'s).
    ///
    /// # Panics
    ///
    /// If `classes`, `tokens` and `placed` are not all as long, or longer
    /// than `2^32`, or a class is not below `width` (on every backend
    /// alike, before anything is written).
    pub fn order_by_class<'e>(
        &self,
        classes: &[u32],
        tokens: &[i32],
        width: usize,
        ends: &'e mut Vec<u32>,
        placed: &mut [i32],
    ) -> ClassEnds<'e> {
        let first = (self.order_by_class)(classes, tokens, width, ends, placed);
        ClassEnds {
            ends: &ends[first..first + width],
        }
    }

    /// Writes `memo[min(c, MEMO_SLOTS - 1)]` for every count `c`.
    ///
    /// # Panics
    ///
    /// If `counts` and `out` are not as long (on every backend alike).
    pub fn lookup(&self, memo: &[f32; MEMO_SLOTS], counts: &[u32], out: &mut [f32]) {
        (self.lookup)(memo, counts, out)
    }

    /// Writes over each count `c` of `slots` the bits of its value:
    /// `memo[c]` below `MEMO_SLOTS - 1`, else `larger(c)` (the memo's last
    /// slot is not read).
    pub fn values_in_place(
        &self,
        memo: &[f32; MEMO_SLOTS],
        slots: &mut [u32],
        larger: &dyn Fn(u32) -> f32,
    ) {
        (self.values_in_place)(memo, slots, larger)
    }

    /// Stores the value of each of `counts` (as
    /// [`RowKernels::values_in_place`] gives it) at `out[table[o]]`, `o`
    /// its offset in `offsets`, one count after another (where two share a
    /// column, the later one's value stays): a dense row's kept genes,
    /// their columns looked up, valued and stored in one pass.
    ///
    /// # Panics
    ///
    /// If `offsets` and `counts` are not as long, an offset lies past
    /// `table` or a column past `out` (on every backend alike).
    pub fn scatter_values(
        &self,
        memo: &[f32; MEMO_SLOTS],
        (table, offsets): (&[i32], &[i32]),
        counts: &[u32],
        out: &mut [f32],
        larger: &dyn Fn(u32) -> f32,
    ) {
        (self.scatter_values)(memo, (table, offsets), counts, out, larger)
    }

    /// Every count's value, as [`RowKernels::values_in_place`] gives it,
    /// written to `out`: for rows with larger counts (others take
    /// [`RowKernels::lookup`]).
    ///
    /// # Panics
    ///
    /// If `counts` and `out` are not as long (on every backend alike).
    pub fn lookup_or(
        &self,
        memo: &[f32; MEMO_SLOTS],
        counts: &[u32],
        out: &mut [f32],
        larger: impl Fn(u32) -> f32,
    ) {
        let slots: &mut [u32] = bytemuck::cast_slice_mut(out);
        slots.copy_from_slice(counts);
        self.values_in_place(memo, slots, &larger);
    }

    /// Writes `!(x[i] / m[i]).to_bits()` for every `i`: for positive
    /// quotients, keys that increase as the quotients decrease. Returns the
    /// least and the greatest key (`(u64::MAX, 0)` for none): a sort by the
    /// keys' bits needs them, and found while the keys are written, in
    /// vectors, they cost no pass of their own.
    ///
    /// # Panics
    ///
    /// If `x`, `m` and `out` are not all as long (on every backend alike).
    pub fn quotient_keys(&self, x: &[f64], m: &[f64], out: &mut [u64]) -> (u64, u64) {
        (self.quotient_keys)(x, m, out)
    }

    /// Keeps the genes that `table` gives a value: gene `g`'s value is
    /// `table[g - first]` (none outside the table, or when negative). The
    /// values of the kept genes go to `out.0` and their counts to `out.1`,
    /// in the genes' order, and their number is returned; what the outputs
    /// hold past them is unspecified.
    ///
    /// # Panics
    ///
    /// If `genes` and `counts` are not as long, or an output is shorter
    /// (on every backend alike).
    pub fn select(
        &self,
        table: &[i32],
        first: u32,
        genes: &[i32],
        counts: &[u32],
        out: (&mut [i32], &mut [u32]),
    ) -> usize {
        (self.select)(table, first, genes, counts, out)
    }

    /// [`RowKernels::select`] of the genes that `marks` also marks (bit
    /// `g - first` of the bitmap, as [`RowKernels::count_marked`] reads it):
    /// a gene is kept when it is marked and within the table, and its
    /// value is `table[g - first]`, whatever its sign. With marks set
    /// exactly where the table holds a value (a gene selection's), the
    /// result is `select`'s. For tables that keep few of a row's genes: the
    /// marks are read by lane permutes and only the kept genes' values
    /// gathered (see the module docs).
    ///
    /// # Panics
    ///
    /// As [`RowKernels::select`].
    pub fn select_marked(
        &self,
        table: &[i32],
        marks: &[u32],
        first: u32,
        genes: &[i32],
        counts: &[u32],
        out: (&mut [i32], &mut [u32]),
    ) -> usize {
        (self.select_marked)(table, marks, first, genes, counts, out)
    }

    /// [`RowKernels::select_marked`]'s first pass alone: the offsets
    /// `g - first` of the genes that `marks` marks and that lie within a
    /// table of `table_len` values go to `out.0` (as `u32` bits), their
    /// counts to `out.1`, in order; returns their number. For a caller that
    /// looks each offset up as it uses it (a dense row's scatter).
    ///
    /// # Panics
    ///
    /// As [`RowKernels::select`].
    pub fn marked(
        &self,
        table_len: usize,
        marks: &[u32],
        first: u32,
        genes: &[i32],
        counts: &[u32],
        out: (&mut [i32], &mut [u32]),
    ) -> usize {
        (self.marked)(table_len, marks, first, genes, counts, out)
    }

    /// Whether [`RowKernels::select_marked`] beats [`RowKernels::select`]
    /// on a table that keeps a few of a row's genes: on the vector tables,
    /// which read a register's marks by one permute (the portable one reads
    /// them a gene at a time and pays a second pass: 1.2 ns a gene against
    /// `select`'s 0.8, where the vector tables take 0.33-0.41 against
    /// 0.42-0.52).
    pub fn selects_by_marks(&self) -> bool {
        self.isa != Isa::PORTABLE
    }

    /// Keeps the `values` whose mark is not 0: they go to `out.0` and
    /// their counts to `out.1`, in order, and their number is returned;
    /// what the outputs hold past them is unspecified.
    ///
    /// # Panics
    ///
    /// If `values`, `marks` and `counts` are not all as long, or an output
    /// is shorter (on every backend alike).
    pub fn compress(
        &self,
        values: &[i32],
        marks: &[u8],
        counts: &[u32],
        out: (&mut [i32], &mut [u32]),
    ) -> usize {
        (self.compress)(values, marks, counts, out)
    }

    /// How many `genes` are marked: gene `g` is when `g - first` (as
    /// `u32`, wrapping) is below `32 * marks.len()` and bit `(g - first) %
    /// 32` of `marks[(g - first) / 32]` is set. What sizes a row over a
    /// gene selection (its kept genes), from marks that stay in L1 where
    /// the selection's table of columns does not.
    pub fn count_marked(&self, marks: &[u32], first: u32, genes: &[i32]) -> usize {
        (self.count_marked)(marks, first, genes)
    }

    /// Writes to `out` the positions of a run of Floyd's draws (scGPT's
    /// sampling of a long cell's genes): draw `i` is a position in
    /// `0..first + i + 1`, `(r * (first + i + 1)) >> 64` for the SplitMix64
    /// output `r` of `state` advanced `i + 1` times. The draws do not depend
    /// on one another (only what is done with them does), so they are made
    /// a register at a time.
    ///
    /// # Panics
    ///
    /// If `first + out.len()` is `2^32` or more (on every backend alike).
    pub fn draws(&self, state: u64, first: u32, out: &mut [u32]) {
        assert!(
            u64::from(first) + (out.len() as u64) < 1 << 32,
            "draws: positions past 2^32 - 1"
        );
        (self.draws)(state, first, out)
    }

    /// Copies `src` to `dst` past the caches where the ISA can (see the
    /// module docs), for output read only after it is handed out: the
    /// whole cache lines of `dst` by non-temporal stores, fenced before
    /// the kernel returns, and its partial lines (at either end) plainly.
    ///
    /// # Panics
    ///
    /// If `src` and `dst` are not as long (on every backend alike).
    pub fn stream<T: bytemuck::Pod>(&self, src: &[T], dst: &mut [T]) {
        self.stream_parts(&mut [stream_part(src, dst)])
    }

    /// Copies each part's source to its destination as
    /// [`RowKernels::stream`] does, with one fence after the last: the
    /// parts of one row (an scGPT row's tokens, values and mask) pay for
    /// one wait on their streaming stores rather than one each.
    ///
    /// # Panics
    ///
    /// If a part's source and destination are not as long (on every
    /// backend alike, before anything is copied).
    pub fn stream_parts(&self, parts: &mut [(&[u8], &mut [u8])]) {
        assert!(
            parts.iter().all(|(src, dst)| src.len() == dst.len()),
            "stream: the source and the destination must be as long"
        );
        (self.stream)(parts)
    }
}

/// One part for [`RowKernels::stream_parts`]: `src` to be copied to `dst`,
/// both as bytes.
pub fn stream_part<'a, T: bytemuck::Pod>(
    src: &'a [T],
    dst: &'a mut [T],
) -> (&'a [u8], &'a mut [u8]) {
    (bytemuck::cast_slice(src), bytemuck::cast_slice_mut(dst))
}

/// The reference table.
static SCALAR: RowKernels = RowKernels {
    isa: Isa::PORTABLE,
    place: scalar::place,
    scan: scalar::scan,
    lookup: scalar::lookup,
    values_in_place: scalar::values_in_place,
    scatter_values: scalar::scatter_values,
    quotient_keys: scalar::quotient_keys,
    select: scalar::select,
    select_marked: scalar::select_marked,
    marked: scalar::marked,
    compress: scalar::compress,
    count_marked: scalar::count_marked,
    stream: scalar::stream,
    draws: scalar::draws,
    tally: scalar::tally,
    starts: scalar::starts,
    classify: scalar::classify,
    order_by_class: scalar::order_by_class,
};

/// Registers the vector `tally` sums before it empties its lane sums (each lane
/// grows by at most [`TALLY_SLOTS`] a register, far from `u32`'s end).
const TALLY_BLOCK: usize = 1 << 16;

/// The bits of every lane of `V`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn all_lanes<V: Vector>() -> u32 {
    (1u32 << V::LANES) - 1
}

/// Whether some lane of `x` exceeds its lane of `bound` (both unsigned):
/// the test that sends a register to the reference's loop.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn any_above<V: Vector>(v: V, x: V::U32, bound: V::U32) -> bool {
    v.any_nonzero(v.sub(x, v.min(x, bound)))
}

/// The last index a gather can read of a table of `len` values (gathers
/// take their indices as `i32` lanes), or `None` where the table is empty
/// or too long (such tables keep the reference).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn last_gathered(len: usize) -> Option<u32> {
    let last = i32::try_from(len.checked_sub(1)?).ok()?;
    Some(last as u32)
}

/// Defines the table `$name`: the reference compiled for one ISA.
macro_rules! rows_table {
    ($name:ident, $level:ident, $features:literal, $token:ty) => {
        static $name: RowKernels = {
            kernel_entry!($features, $token, fn place_entry(marks: &[u64], before: &mut [u32], columns: (&[u32], &[u32]), out: (&mut [i32], &mut [u32])) = compiled::place);
            kernel_entry!($features, $token, fn scan_entry(counts: &[u32]) -> (u64, u64) = compiled::scan);
            kernel_entry!($features, $token, fn lookup_entry(memo: &[f32; MEMO_SLOTS], counts: &[u32], out: &mut [f32]) = values::lookup);
            kernel_entry!($features, $token, fn values_entry(memo: &[f32; MEMO_SLOTS], slots: &mut [u32], larger: &dyn Fn(u32) -> f32) = values::values_in_place);
            kernel_entry!($features, $token, fn scatter_values_entry(memo: &[f32; MEMO_SLOTS], columns: (&[i32], &[i32]), counts: &[u32], out: &mut [f32], larger: &dyn Fn(u32) -> f32) = values::scatter_values);
            kernel_entry!($features, $token, fn quotient_entry(x: &[f64], m: &[f64], out: &mut [u64]) -> (u64, u64) = compiled::quotient_keys);
            kernel_entry!($features, $token, fn select_entry(table: &[i32], first: u32, genes: &[i32], counts: &[u32], out: (&mut [i32], &mut [u32])) -> usize = select::select);
            kernel_entry!($features, $token, fn select_marked_entry(table: &[i32], marks: &[u32], first: u32, genes: &[i32], counts: &[u32], out: (&mut [i32], &mut [u32])) -> usize = select::select_marked);
            kernel_entry!($features, $token, fn marked_entry(table_len: usize, marks: &[u32], first: u32, genes: &[i32], counts: &[u32], out: (&mut [i32], &mut [u32])) -> usize = select::marked);
            kernel_entry!($features, $token, fn compress_entry(values: &[i32], marks: &[u8], counts: &[u32], out: (&mut [i32], &mut [u32])) -> usize = select::compress);
            kernel_entry!($features, $token, fn count_marked_entry(marks: &[u32], first: u32, genes: &[i32]) -> usize = select::count_marked);
            kernel_entry!($features, $token, fn stream_entry(parts: &mut [(&[u8], &mut [u8])]) = stream::stream);
            kernel_entry!($features, $token, fn draws_entry(state: u64, first: u32, out: &mut [u32]) = compiled::draws);
            kernel_entry!($features, $token, fn starts_entry(counts: &mut [u32]) -> u32 = order::starts);
            kernel_entry!($features, $token, fn order_by_class_entry(classes: &[u32], tokens: &[i32], width: usize, ends: &mut Vec<u32>, placed: &mut [i32]) -> usize = order::order_by_class);
            kernel_entry!($features, $token, fn classify_entry(lookup: &ClassLookup<'_>, genes: &[i32], counts: &[u32], out: (&mut [u32], &mut [i32]), strays: &mut Vec<u32>) -> bool = order::classify);
            kernel_entry!($features, $token, fn tally_entry(counts: &[u32], small: &mut [usize; TALLY_SLOTS], rest: &mut [u32]) -> usize = order::tally);
            RowKernels {
                isa: Isa::compiled_for(Level::$level),
                place: place_entry,
                scan: scan_entry,
                lookup: lookup_entry,
                values_in_place: values_entry,
                scatter_values: scatter_values_entry,
                quotient_keys: quotient_entry,
                select: select_entry,
                select_marked: select_marked_entry,
                marked: marked_entry,
                compress: compress_entry,
                count_marked: count_marked_entry,
                stream: stream_entry,
                draws: draws_entry,
                tally: tally_entry,
                starts: starts_entry,
                classify: classify_entry,
                order_by_class: order_by_class_entry,
            }
        };
    };
}

kernel_tables!(RowKernels, SCALAR, rows_table);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::KernelTable;

    #[test]
    fn lookup_or_writes_the_larger_counts_values_over_the_memo() {
        let memo: [f32; MEMO_SLOTS] = std::array::from_fn(|c| c as f32 / 2.0);
        let last = MEMO_SLOTS as u32 - 1;
        let counts: Vec<u32> = (0..40)
            .map(|i| [1, 0, last - 1, last, last + 1, 9000][i % 6])
            .collect();
        let want: Vec<f32> = counts
            .iter()
            .map(|&c| {
                if c < last {
                    c as f32 / 2.0
                } else {
                    -(c as f32)
                }
            })
            .collect();
        for k in RowKernels::available() {
            let mut out = vec![7.0; counts.len()];
            k.lookup_or(&memo, &counts, &mut out, |c| -(c as f32));
            assert_eq!(out, want, "{}", k.isa());
        }
    }

    #[test]
    fn tallies_span_blocks_of_registers() {
        // Past the registers a vector table sums before emptying its lane
        // sums (on the widest ISA), with a larger count every so often.
        let counts: Vec<u32> = (0..(TALLY_BLOCK * 16 + 100) as u32)
            .map(|i| if i % 1000 == 0 { 9000 + i } else { i % 11 })
            .collect();
        let mut want = [0usize; TALLY_SLOTS];
        for &c in &counts {
            if let Some(k) = want.get_mut(c as usize) {
                *k += 1;
            }
        }
        let larger: Vec<u32> = counts
            .iter()
            .copied()
            .filter(|&c| c as usize >= TALLY_SLOTS)
            .collect();
        for k in RowKernels::available() {
            let (mut small, mut rest) = ([0; TALLY_SLOTS], vec![0; counts.len()]);
            let n = k.tally(&counts, &mut small, &mut rest);
            assert_eq!(small, want, "{}", k.isa());
            assert_eq!(&rest[..n], &larger[..], "{}", k.isa());
        }
    }

    #[test]
    fn columns_are_placed_by_the_marks_before_them() {
        // Columns 3, 64, 70 and 200 marked; given in any order.
        let mut marks = [0u64; 4];
        for c in [3u32, 64, 70, 200] {
            marks[(c >> 6) as usize] |= 1 << (c & 63);
        }
        for k in RowKernels::available() {
            let (mut before, mut columns, mut counts) = ([9u32; 4], [0i32; 4], [0u32; 4]);
            let given = ([200u32, 3, 70, 64], [1u32, 2, 3, 4]);
            k.place(
                &marks,
                &mut before,
                (&given.0, &given.1),
                (&mut columns, &mut counts),
            );
            assert_eq!(
                (columns, counts),
                ([3, 64, 70, 200], [2, 4, 3, 1]),
                "{}",
                k.isa()
            );
            assert_eq!(before, [0, 1, 3, 3], "{}", k.isa());
        }
    }
}
