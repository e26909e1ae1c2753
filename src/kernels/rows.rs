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
//! Apart from `lookup`, `values_in_place`, `scatter_values`, `select`, `select_marked`,
//! `marked`, `compress`, `count_marked`, `tally`, `starts`, `classify`,
//! `order_by_class` and `stream` (written once over the vector vocabulary, with the reference's loop for
//! registers that reach outside the table or the memo and for the tail),
//! the vector tables run the reference's own code, compiled for their
//! instruction set: on x86-64 that brings `popcnt` (a word's bits counted
//! in one instruction, where the portable build spends a dozen) and lets
//! the compiler widen the scan (variable shifts), on AArch64 the NEON bit
//! count. Places, sums and
//! looked-up values involve no rounding, so every table gives the
//! reference's result; the property tests check it anyway, as for every
//! family.
//!
//! The reference is [`crate::kernels::reference::rows`].

use super::dispatch::{kernel_entry, kernel_tables, Isa, Level};
use super::reference::rows as scalar;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
use super::vector::{Vector, MAX_LANES};

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

/// The reference's code, compiled for the ISA of the token (unused but for
/// its type: holding one proves the CPU runs the ISA).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn place<S>(
    _: S,
    marks: &[u64],
    before: &mut [u32],
    columns: (&[u32], &[u32]),
    out: (&mut [i32], &mut [u32]),
) {
    scalar::place(marks, before, columns, out)
}

/// [`scalar::scan`] compiled for the token's ISA.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn scan<S>(_: S, counts: &[u32]) -> (u64, u64) {
    scalar::scan(counts)
}

/// [`scalar::lookup`] a register of counts at a time, each looked up in the
/// memo by [`Vector::lookup_64`]; the tail through the reference's loop.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn lookup<V: Vector>(v: V, memo: &[f32; MEMO_SLOTS], counts: &[u32], out: &mut [f32]) {
    scalar::check_lookup(counts, out);
    let table = bytemuck::cast_ref(memo);
    let last = v.splat(MEMO_SLOTS as u32 - 1);
    let mut i = 0;
    while i + V::LANES <= counts.len() {
        // SAFETY: `i + LANES <= counts.len() == out.len()`; every lane of
        // the index is at most `MEMO_SLOTS - 1`, within the memo.
        unsafe {
            let c = v.min(v.load_u32(counts.as_ptr().add(i)), last);
            let values = v.lookup_64(table, c);
            v.store_u32(out.as_mut_ptr().add(i).cast(), values);
        }
        i += V::LANES;
    }
    scalar::lookup(memo, &counts[i..], &mut out[i..])
}

/// [`scalar::values_in_place`] a register of counts at a time: a register
/// whose counts all have a memo slot of their own is one lookup in the
/// memo ([`Vector::lookup_64`]), stored over the counts; one holding a
/// larger count goes through the reference's loop, as does the tail. (The
/// reference's loop over blocks of 16 counts, compiled as it was, came out
/// as half-width gathers with scalar code between them: three times this
/// kernel's share of a profile of normalized batches.)
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn values_in_place<V: Vector>(
    v: V,
    memo: &[f32; MEMO_SLOTS],
    slots: &mut [u32],
    larger: &dyn Fn(u32) -> f32,
) {
    let top = v.splat(MEMO_SLOTS as u32 - 2);
    let mut i = 0;
    while i + V::LANES <= slots.len() {
        // SAFETY: `i + LANES <= slots.len()`.
        let c = unsafe { v.load_u32(slots.as_ptr().add(i)) };
        if any_above(v, c, top) {
            scalar::values_in_place(memo, &mut slots[i..i + V::LANES], larger);
        } else {
            // SAFETY: every lane of `c` is at most `MEMO_SLOTS - 2`, within
            // the memo; `i + LANES <= slots.len()`.
            unsafe {
                let values = v.lookup_64(bytemuck::cast_ref(memo), c);
                v.store_u32(slots.as_mut_ptr().add(i), values);
            }
        }
        i += V::LANES;
    }
    scalar::values_in_place(memo, &mut slots[i..], larger)
}

/// [`scalar::scatter_values`] a register of kept genes at a time: their
/// columns gathered from the table, their values looked up in the memo
/// ([`Vector::lookup_64`]) and scattered to the row
/// ([`Vector::scatter_u32`]). A register with an offset past the table, a
/// column past the row or a count without a memo slot of its own goes
/// through the reference's loop, as does the tail.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn scatter_values<V: Vector>(
    v: V,
    memo: &[f32; MEMO_SLOTS],
    (table, offsets): (&[i32], &[i32]),
    counts: &[u32],
    out: &mut [f32],
    larger: &dyn Fn(u32) -> f32,
) {
    scalar::check_scatter(offsets, counts);
    let (Some(last_offset), Some(last_column)) =
        (last_gathered(table.len()), last_gathered(out.len()))
    else {
        return scalar::scatter_values(memo, (table, offsets), counts, out, larger);
    };
    let (last_offset, last_column) = (v.splat(last_offset), v.splat(last_column));
    let top = v.splat(MEMO_SLOTS as u32 - 2);
    let lanes = V::LANES;
    let mut i = 0;
    while i + lanes <= offsets.len() {
        // SAFETY: `i + LANES <= offsets.len() == counts.len()`.
        let (o, c) = unsafe {
            (
                v.load_u32(offsets.as_ptr().add(i).cast()),
                v.load_u32(counts.as_ptr().add(i)),
            )
        };
        let register = i..i + lanes;
        i += lanes;
        if !any_above(v, o, last_offset) && !any_above(v, c, top) {
            // SAFETY: every offset is at most the table's last.
            let columns = unsafe { v.gather_u32(table.as_ptr().cast(), o) };
            if !any_above(v, columns, last_column) {
                // SAFETY: every count is at most `MEMO_SLOTS - 2`, within
                // the memo; every column is at most the row's last.
                unsafe {
                    let values = v.lookup_64(bytemuck::cast_ref(memo), c);
                    v.scatter_u32(out.as_mut_ptr().cast(), columns, values);
                }
                continue;
            }
        }
        let (o, c) = (&offsets[register.clone()], &counts[register]);
        scalar::scatter_values(memo, (table, o), c, out, larger);
    }
    scalar::scatter_values(memo, (table, &offsets[i..]), &counts[i..], out, larger)
}

/// [`scalar::draws`] compiled for the token's ISA: the compiler makes
/// the draws a register at a time where the ISA multiplies 64-bit lanes.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn draws<S>(_: S, state: u64, first: u32, out: &mut [u32]) {
    scalar::draws(state, first, out)
}

/// [`scalar::quotient_keys`] compiled for the token's ISA.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn quotient_keys<S>(_: S, x: &[f64], m: &[f64], out: &mut [u64]) -> (u64, u64) {
    scalar::quotient_keys(x, m, out)
}

/// [`scalar::select`] a register of genes at a time: their values
/// gathered from the table and the kept ones (and their counts) compressed
/// to the outputs, where the reference takes a gene at a time with a load
/// that depends on it. A register with a gene outside the table (its
/// value none) goes through the reference's loop, as does the tail.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn select<V: Vector>(
    v: V,
    table: &[i32],
    first: u32,
    genes: &[i32],
    counts: &[u32],
    (out, out_counts): (&mut [i32], &mut [u32]),
) -> usize {
    scalar::check_select(genes, counts, out, out_counts);
    let lanes = V::LANES;
    let (mut n, mut i) = (0, 0);
    if let Some(last) = last_gathered(table.len()) {
        let (first_v, last_v) = (v.splat(first), v.splat(last));
        while i + lanes <= genes.len() {
            // SAFETY: `i + LANES <= genes.len() == counts.len()`.
            let g = unsafe { v.load_u32(genes.as_ptr().add(i).cast()) };
            let at = v.sub(g, first_v);
            if any_above(v, at, last_v) {
                n = scalar::select_from(
                    table,
                    first,
                    &genes[i..i + lanes],
                    &counts[i..i + lanes],
                    (&mut *out, &mut *out_counts),
                    n,
                );
            } else {
                // SAFETY: every lane of `at` is at most `last`, within the
                // table; `n <= i`, so `n + LANES <= genes.len()`, which
                // both outputs hold (checked above), and the counts are
                // readable for `LANES` values at `i`.
                unsafe {
                    let values = v.gather_u32(table.as_ptr().cast(), at);
                    let keep = !v.sign_bits(values) & all_lanes::<V>();
                    n = keep_register(v, values, keep, counts, i, (out, out_counts), n);
                }
            }
            i += lanes;
        }
    }
    scalar::select_from(
        table,
        first,
        &genes[i..],
        &counts[i..],
        (out, out_counts),
        n,
    )
}

/// [`scalar::select_marked`] a register of genes at a time, in two
/// passes: [`marked`], then the kept offsets replaced by their values, a
/// register gathered at a time. A gather costs about a load per lane, so
/// where [`select`] pays one per gene, this pays one per kept gene (a
/// 2,000-gene vocabulary keeps about two in five of a cell's genes); the
/// tail goes through the reference's loop.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn select_marked<V: Vector>(
    v: V,
    table: &[i32],
    marks: &[u32],
    first: u32,
    genes: &[i32],
    counts: &[u32],
    (out, out_counts): (&mut [i32], &mut [u32]),
) -> usize {
    let lanes = V::LANES;
    let n = marked(
        v,
        table.len(),
        marks,
        first,
        genes,
        counts,
        (&mut *out, out_counts),
    );
    let mut j = 0;
    if last_gathered(table.len()).is_some() {
        while j + lanes <= n {
            // SAFETY: `j + LANES <= n <= out.len()`; every kept offset lies
            // within the table, whose offsets fit `i32` lanes.
            unsafe {
                let offsets = out.as_mut_ptr().add(j).cast::<u32>();
                let values = v.gather_u32(table.as_ptr().cast(), v.load_u32(offsets));
                v.store_u32(offsets, values);
            }
            j += lanes;
        }
    }
    scalar::look_up_in_place(table, &mut out[j..n]);
    n
}

/// [`scalar::marked`] a register of genes at a time: each register's bits
/// read by a [`MarkReader`], the marked genes' offsets and counts
/// compressed to the outputs; the tail through the reference's loop.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn marked<V: Vector>(
    v: V,
    table_len: usize,
    marks: &[u32],
    first: u32,
    genes: &[i32],
    counts: &[u32],
    (out, out_counts): (&mut [i32], &mut [u32]),
) -> usize {
    scalar::check_select(genes, counts, out, out_counts);
    let lanes = V::LANES;
    // The offsets within both the table and the marks.
    let Some(last) = last_gathered(table_len.min(marks.len().saturating_mul(32))) else {
        return scalar::marked(table_len, marks, first, genes, counts, (out, out_counts));
    };
    let reader = MarkReader::new(v, marks, first, last);
    let zero = v.splat(0);
    let (mut n, mut i) = (0, 0);
    while i + lanes <= genes.len() {
        let (within, bit) = reader.read(v, genes, i);
        let kept = v.sign_bits(v.sub(zero, bit)) & all_lanes::<V>();
        // SAFETY: `i + LANES <= genes.len() == counts.len()`; `n <= i`, so
        // `n + LANES` is within both outputs (checked above).
        n = unsafe { keep_register(v, within, kept, counts, i, (&mut *out, &mut *out_counts), n) };
        i += lanes;
    }
    scalar::marked_from(
        table_len,
        marks,
        first,
        &genes[i..],
        &counts[i..],
        (out, out_counts),
        n,
    )
}

/// Zero bytes: the high plane under a register of marks, which
/// [`Vector::load_planes`] widens to `u32` lanes.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
static NO_HIGH_BYTES: [u8; MAX_LANES] = [0; MAX_LANES];

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

/// [`scalar::compress`] a register of values at a time: the register's
/// marks widened to lanes, and the values (and counts) of the marked lanes
/// compressed to the outputs; the tail through the reference's loop.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn compress<V: Vector>(
    v: V,
    values: &[i32],
    marks: &[u8],
    counts: &[u32],
    (out, out_counts): (&mut [i32], &mut [u32]),
) -> usize {
    scalar::check_compress(values, marks, counts, out, out_counts);
    let zero = v.splat(0);
    let (mut n, mut i) = (0, 0);
    while i + V::LANES <= values.len() {
        // SAFETY: `i + LANES <= values.len()`, which `marks` and `counts`
        // are as long as, and `NO_HIGH_BYTES` holds `MAX_LANES >= LANES`
        // bytes; `n <= i`, so `n + LANES` is within both outputs (checked
        // above).
        unsafe {
            let register = v.load_u32(values.as_ptr().add(i).cast());
            let m = v.load_planes(marks.as_ptr().add(i), NO_HIGH_BYTES.as_ptr());
            // A mark (at most 255) negated is negative; 0 stays 0.
            let keep = v.sign_bits(v.sub(zero, m)) & all_lanes::<V>();
            n = keep_register(v, register, keep, counts, i, (out, out_counts), n);
        }
        i += V::LANES;
    }
    scalar::compress_from(
        &values[i..],
        &marks[i..],
        &counts[i..],
        (out, out_counts),
        n,
    )
}

/// Writes the lanes of `values` (the values at `i`) whose bit is set in
/// `keep`, and the counts at `i` of the same lanes, to the outputs at `n`;
/// returns `n` past them.
///
/// # Safety
///
/// `counts` holds `LANES` values at `i`, and both outputs `LANES` at `n`.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
unsafe fn keep_register<V: Vector>(
    v: V,
    values: V::U32,
    keep: u32,
    counts: &[u32],
    i: usize,
    (out, out_counts): (&mut [i32], &mut [u32]),
    n: usize,
) -> usize {
    // SAFETY: the caller's contract: `LANES` counts at `i`, and room for
    // `LANES` values in each output at `n`.
    unsafe {
        let c = v.load_u32(counts.as_ptr().add(i));
        v.compress_store_u32(out.as_mut_ptr().add(n).cast(), values, keep);
        v.compress_store_u32(out_counts.as_mut_ptr().add(n), c, keep);
    }
    n + keep.count_ones() as usize
}

/// [`scalar::count_marked`] a register of genes at a time: each gene's bit
/// read by a [`MarkReader`], the bits summed per lane; the tail through
/// the reference's loop. Marks of `2^32` bits or more keep the reference.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn count_marked<V: Vector>(v: V, marks: &[u32], first: u32, genes: &[i32]) -> usize {
    let Some(last) = u32::try_from(marks.len())
        .ok()
        .and_then(|w| w.checked_mul(32))
        .and_then(|bits| bits.checked_sub(1))
    else {
        return scalar::count_marked(marks, first, genes);
    };
    let reader = MarkReader::new(v, marks, first, last);
    let mut sums = v.splat(0);
    let mut i = 0;
    while i + V::LANES <= genes.len() {
        let (_, bit) = reader.read(v, genes, i);
        sums = v.add(sums, bit);
        i += V::LANES;
    }
    v.sum_lanes(sums) + scalar::count_marked(marks, first, &genes[i..])
}

/// Reads the bit of each gene of a register in a bitmap: bit `g - first`
/// (as `u32`, wrapping) of `marks`, none past `last`. The register's words
/// come from one lane permute of the `LANES` words from its first gene's
/// word on, where every lane's word falls within them (a row's genes
/// ascend, about 17 columns apart in a cell of 2,100 genes out of 36,000,
/// so 16 of them span about 9 words of 32 bits); else from a gather.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
struct MarkReader<'m, V: Vector> {
    marks: &'m [u32],
    first: u32,
    last: u32,
    first_v: V::U32,
    last_v: V::U32,
    /// The largest index into a window of words: `LANES - 1`.
    widest: V::U32,
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
impl<'m, V: Vector> MarkReader<'m, V> {
    /// A reader of `marks` from `first` on, up to bit `last`, which lies
    /// within the marks.
    #[inline(always)]
    fn new(v: V, marks: &'m [u32], first: u32, last: u32) -> Self {
        assert!(
            (last as usize >> 5) < marks.len(),
            "MarkReader: the last bit lies past the marks"
        );
        MarkReader {
            marks,
            first,
            last,
            first_v: v.splat(first),
            last_v: v.splat(last),
            widest: v.splat(V::LANES as u32 - 1),
        }
    }

    /// The genes `genes[i..i + LANES]`' offsets from `first`, each at most
    /// `last`, and their bits (1 or 0, 0 past `last`).
    ///
    /// # Panics
    ///
    /// If `genes` holds fewer than `i + LANES` values.
    #[inline(always)]
    fn read(&self, v: V, genes: &[i32], i: usize) -> (V::U32, V::U32) {
        let lanes = &genes[i..i + V::LANES];
        let base = ((lanes[0] as u32).wrapping_sub(self.first).min(self.last) >> 5) as usize;
        // SAFETY: `lanes` holds `LANES` values; every word index is at most
        // `last / 32`, below `marks.len()` (checked when made); the window's
        // `LANES` words from `base` lie within the marks and every lane's
        // index into it is below `LANES` (both checked).
        unsafe {
            let at = v.sub(v.load_u32(lanes.as_ptr().cast()), self.first_v);
            let within = v.min(at, self.last_v);
            let words = v.shr_each(within, v.splat(5));
            let index = v.sub(words, v.splat(base as u32));
            let in_window = !any_above(v, index, self.widest);
            let word = if in_window && base + V::LANES <= self.marks.len() {
                v.permute_window(self.marks.as_ptr().add(base), index)
            } else {
                v.gather_u32(self.marks.as_ptr(), words)
            };
            let one = v.splat(1);
            let bit = v.and(v.shr_each(word, v.and(at, v.splat(31))), one);
            // 1 in the lanes past `last`, whose bit is then dropped.
            let past = v.min(v.sub(at, within), one);
            (within, v.andnot(past, bit))
        }
    }
}

/// Registers [`tally`] sums before it empties its lane sums (each lane
/// grows by at most [`TALLY_SLOTS`] a register, far from `u32`'s end).
const TALLY_BLOCK: usize = 1 << 16;

/// [`scalar::tally`] a register of counts at a time. With `m_k` the sum of
/// `min(c, k)` over the counts, `m_k - m_(k-1)` is the number of counts of
/// at least `k`, so the tally of the small values takes a minimum and an
/// addition per value below [`TALLY_SLOTS`] and register, with no store
/// per count (the reference's increments of a table wait on each other
/// when consecutive counts are equal, as most are). The larger counts of a
/// register are compressed to `rest`; the tail goes through the
/// reference's loop.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn tally<V: Vector>(
    v: V,
    counts: &[u32],
    small: &mut [usize; TALLY_SLOTS],
    rest: &mut [u32],
) -> usize {
    scalar::check_tally(counts, rest);
    let lanes = V::LANES;
    let all = all_lanes::<V>();
    let (top, below_top) = (v.splat(TALLY_SLOTS as u32), v.splat(TALLY_SLOTS as u32 - 1));
    let (mut n, mut i) = (0, 0);
    while i + lanes <= counts.len() {
        let end = counts.len().min(i + TALLY_BLOCK * lanes);
        let (start, rest_before) = (i, n);
        // `mins[k - 1]`: the lanes' sums of `min(c, k)`.
        let mut mins = [v.splat(0); TALLY_SLOTS];
        while i + lanes <= end {
            // SAFETY: `i + LANES <= counts.len()`; `n <= i`, so `n + LANES`
            // is within `rest` (at least as long as `counts`, checked).
            unsafe {
                let c = v.load_u32(counts.as_ptr().add(i));
                for (k, m) in mins.iter_mut().enumerate() {
                    *m = v.add(*m, v.min(c, v.splat(k as u32 + 1)));
                }
                // -1 in the lanes of `TALLY_SLOTS` or more.
                let larger = v.sign_bits(v.sub(below_top, v.min(c, top))) & all;
                v.compress_store_u32(rest.as_mut_ptr().add(n), c, larger);
                n += larger.count_ones() as usize;
            }
            i += lanes;
        }
        // `at_least[k]`: the counts of at least `k`.
        let mut at_least = [0usize; TALLY_SLOTS + 1];
        at_least[0] = i - start;
        let mut before = 0;
        for (k, &m) in mins.iter().enumerate() {
            let total = v.sum_lanes(m);
            at_least[k + 1] = total - before;
            before = total;
        }
        debug_assert_eq!(at_least[TALLY_SLOTS], n - rest_before);
        for (k, slot) in small.iter_mut().enumerate() {
            *slot += at_least[k] - at_least[k + 1];
        }
    }
    scalar::tally_from(&counts[i..], small, rest, n)
}

/// [`scalar::starts`] a register of counts at a time: each register's
/// inclusive sums across its lanes, less its own counts, plus the total
/// before it; the total carried to the next register in every lane. The
/// register's own total is broadcast apart from the running one, so the
/// chain from register to register is one addition (where the reference's
/// is an addition per count); broadcasting the running total after adding
/// it made each register's lane permute wait on the addition before, and
/// starts took 0.55 cycles a count. Additions wrap alike in any order.
/// The tail through the reference's loop.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn starts<V: Vector>(v: V, counts: &mut [u32]) -> u32 {
    let mut total = v.splat(0);
    let mut i = 0;
    while i + V::LANES <= counts.len() {
        // SAFETY: `i + LANES <= counts.len()`.
        unsafe {
            let at = counts.as_mut_ptr().add(i);
            let c = v.load_u32(at);
            let sums = v.prefix_sum(c);
            v.store_u32(at, v.add(v.sub(sums, c), total));
            total = v.add(total, v.broadcast_last(sums));
        }
        i += V::LANES;
    }
    scalar::starts_from(&mut counts[i..], v.lanes(total)[0])
}

/// [`scalar::classify`] a register of genes at a time: each gene's word
/// gathered from the columns, its class gathered from the order, its token
/// shifted out of the word. A register with a gene or a class outside the
/// lookup goes through the reference's loop (which panics there, at the
/// same gene), as do the first gene (the one with no gene before it in the
/// register's loads) and the tail.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn classify<V: Vector>(
    v: V,
    lookup: &ClassLookup<'_>,
    genes: &[i32],
    counts: &[u32],
    (classes, tokens): (&mut [u32], &mut [i32]),
    strays: &mut Vec<u32>,
) -> bool {
    scalar::check_classify(genes, counts, classes, tokens);
    let lanes = V::LANES;
    let reference =
        |from: usize, to: usize, out: (&mut [u32], &mut [i32]), strays: &mut Vec<u32>| {
            let last = from.checked_sub(1).map_or(-1, |l| genes[l]);
            let out = (&mut out.0[from..to], &mut out.1[from..to]);
            scalar::classify_from(
                lookup,
                &genes[from..to],
                &counts[from..to],
                out,
                strays,
                from,
                last,
            )
        };
    let mut increasing = reference(0, genes.len().min(1), (classes, tokens), strays);
    let mut i = 1;
    if let (Some(last_column), Some(last_class)) = (
        last_gathered(lookup.columns.len()),
        last_gathered(lookup.order.len()),
    ) {
        let (last_column, last_class) = (v.splat(last_column), v.splat(last_class));
        let (one, top, stray) = (v.splat(1), v.splat(lookup.top), v.splat(lookup.stray));
        let (start_mask, start_bits) = (
            v.splat((1 << CLASS_START_BITS) - 1),
            v.splat(CLASS_START_BITS),
        );
        let mut descents = v.splat(0);
        while i + lanes <= genes.len() {
            // SAFETY: `1 <= i` and `i + LANES <= genes.len()`, so `LANES`
            // genes are readable at `i - 1` and at `i`, and counts at `i`.
            let (g, before, c) = unsafe {
                let at = genes.as_ptr().add(i).cast::<u32>();
                (
                    v.load_u32(at),
                    v.load_u32(at.sub(1)),
                    v.load_u32(counts.as_ptr().add(i)),
                )
            };
            if any_above(v, g, last_column) {
                increasing &= reference(i, i + lanes, (classes, tokens), strays);
                i += lanes;
                continue;
            }
            // SAFETY: every lane of `g` is at most the last column.
            let word = unsafe { v.gather_u32(lookup.columns.as_ptr(), g) };
            let at = v.add(v.and(word, start_mask), v.min(v.sub(c, one), top));
            if any_above(v, at, last_class) {
                increasing &= reference(i, i + lanes, (classes, tokens), strays);
                i += lanes;
                continue;
            }
            // SAFETY: every lane of `at` is at most the last class; the
            // outputs are as long as the genes, so `LANES` values at `i`.
            let class = unsafe {
                let class = v.gather_u32(lookup.order.as_ptr(), at);
                v.store_u32(classes.as_mut_ptr().add(i), class);
                v.store_u32(
                    tokens.as_mut_ptr().add(i).cast(),
                    v.shr_each(word, start_bits),
                );
                class
            };
            // Genes within the columns lie below `2^31`, so `g - before - 1`
            // is negative exactly where a gene does not exceed the one
            // before it.
            descents = v.or(descents, v.sub(v.sub(g, before), one));
            // `a - b` or `b - a` has its top bit set unless `a == b`.
            let unequal = v.or(v.sub(class, stray), v.sub(stray, class));
            let mut at_stray = !v.sign_bits(unequal) & all_lanes::<V>();
            while at_stray != 0 {
                strays.push((i + at_stray.trailing_zeros() as usize) as u32);
                at_stray &= at_stray - 1;
            }
            i += lanes;
        }
        increasing &= v.sign_bits(descents) == 0;
    }
    increasing & reference(i.min(genes.len()), genes.len(), (classes, tokens), strays)
}

/// [`scalar::order_by_class`] a register of classes at a time where the ISA
/// ranks the lanes that share a value ([`Vector::CONFLICTS`]): a lane's
/// place is its class's place gathered plus the lanes before it of the
/// same class, and the class's place moves past the last of them (the
/// scatter writes lanes in order, so the highest lane of a class, the
/// furthest place, is what stays). Counting takes a register the same way,
/// and the ranks (a conflict detection each, the costliest step) are kept
/// from counting to placing, past the counters. Where the ISA has no lane
/// ranks, a gene at a time ([`order_by_class_by_ranks`]).
///
/// Classes follow one another in a row (a third of a cell's genes share the
/// class of the gene before them), so each register's gather waits on the
/// scatter of the one before, through memory; taking the row's halves as
/// two such chains (counters twice as many) measured slower: the second
/// counters' starts and the ends taken from them cost more than the chains.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn order_by_class<V: Vector>(
    v: V,
    classes: &[u32],
    tokens: &[i32],
    width: usize,
    ends: &mut Vec<u32>,
    placed: &mut [i32],
) -> usize {
    scalar::check_order_by_class(classes, tokens, width, placed);
    if !V::CONFLICTS {
        return order_by_class_by_ranks(v, classes, tokens, width, ends, placed);
    }
    let (n, lanes, one) = (classes.len(), V::LANES, v.splat(1));
    let whole = n - n % lanes;
    ends.clear();
    ends.resize(width + whole, 0);
    let (counters, ranks) = ends.split_at_mut(width);
    for i in (0..whole).step_by(lanes) {
        // SAFETY: `i + LANES <= whole <= n`, within the classes and the
        // ranks; every class is below `width` (checked above), within the
        // counters.
        unsafe {
            let k = v.load_u32(classes.as_ptr().add(i));
            let rank = v.equal_before(k);
            v.store_u32(ranks.as_mut_ptr().add(i), rank);
            let counted = v.gather_u32(counters.as_ptr(), k);
            v.scatter_u32(counters.as_mut_ptr(), k, v.add(v.add(counted, rank), one));
        }
    }
    scalar::count_classes(&classes[whole..], counters);
    starts(v, counters);
    for i in (0..whole).step_by(lanes) {
        // SAFETY: as above for the classes, tokens and ranks; each place is
        // its class's start plus the genes of the class before it, below
        // the class's end, so below `n`, within `placed`.
        unsafe {
            let k = v.load_u32(classes.as_ptr().add(i));
            let t = v.load_u32(tokens.as_ptr().add(i).cast());
            let rank = v.load_u32(ranks.as_ptr().add(i));
            let at = v.add(v.gather_u32(counters.as_ptr(), k), rank);
            v.scatter_u32(placed.as_mut_ptr().cast(), at, t);
            v.scatter_u32(counters.as_mut_ptr(), k, v.add(at, one));
        }
    }
    scalar::place_by_class(&classes[whole..], &tokens[whole..], counters, placed);
    ends.truncate(width);
    0
}

/// [`order_by_class`] where the ISA has no lane ranks, a gene at a time:
/// the counting pass keeps each gene's rank among the genes of its class
/// before it (past the counters, as the register loop does), so that the
/// placing pass only reads: a gene's place is its class's start plus its
/// rank. Placing that moved a class's start past each gene (the
/// reference's) made every gene wait on the store of the one before it
/// wherever two genes in a row share a class, a third of a cell's genes;
/// counting the row's halves apart, two such chains side by side, doubled
/// the counters, and on an AVX2 Zen 3 core clearing and summing them cost
/// more than the chains (Geneformer's batches 8-10% slower than one chain).
/// The starts are never moved, so each class's end is the next class's
/// start: the counters are one longer than the classes, and the ends begin
/// at the second.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn order_by_class_by_ranks<V: Vector>(
    v: V,
    classes: &[u32],
    tokens: &[i32],
    width: usize,
    ends: &mut Vec<u32>,
    placed: &mut [i32],
) -> usize {
    ends.clear();
    ends.resize(width + 1 + classes.len(), 0);
    let (counters, ranks) = ends.split_at_mut(width + 1);
    for (&k, rank) in classes.iter().zip(ranks.iter_mut()) {
        let counter = &mut counters[k as usize];
        *rank = *counter;
        *counter += 1;
    }
    starts(v, counters);
    for ((&k, &t), &rank) in classes.iter().zip(tokens).zip(ranks.iter()) {
        placed[(counters[k as usize] + rank) as usize] = t;
    }
    ends.truncate(width + 1);
    1
}

/// A cache line: the unit [`stream_lines`] writes past the cache.
const LINE: usize = 64;

/// [`scalar::stream`] with each part copied by [`stream_lines`], then one
/// fence.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn stream<V: Vector>(v: V, parts: &mut [(&[u8], &mut [u8])]) {
    for (src, dst) in parts.iter_mut() {
        stream_lines(v, src, dst);
    }
    v.fence_streams();
}

/// A copy of `src` to `dst` (as long) with the whole lines of `dst` written by
/// [`Vector::stream_u32`] from unaligned loads of `src`, a line at a
/// time (two registers on AVX2), and the partial lines before and after
/// them copied plainly: no line is written both ways (a plain store to a
/// line being streamed makes the core read it from memory again).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn stream_lines<V: Vector>(v: V, src: &[u8], dst: &mut [u8]) {
    let n = dst.len();
    let registers = LINE / (4 * V::LANES);
    if !V::STREAMS || n < 2 * LINE || registers == 0 || src.len() != n {
        dst.copy_from_slice(src);
        return;
    }
    let head = (LINE - dst.as_ptr() as usize % LINE) % LINE;
    let lines = (n - head) / LINE;
    let tail = head + lines * LINE;
    dst[..head].copy_from_slice(&src[..head]);
    let (from, to) = (src.as_ptr(), dst.as_mut_ptr());
    for line in 0..lines {
        for r in 0..registers {
            let at = head + line * LINE + r * 4 * V::LANES;
            // SAFETY: `at + 4 * LANES <= tail <= n`, within both slices
            // (as long, checked above); `to + at` lies on a line boundary,
            // so it is aligned to `ALIGN` (at most a line).
            unsafe {
                let x = v.load_u32(from.add(at).cast());
                v.stream_u32(to.add(at).cast(), x);
            }
        }
    }
    dst[tail..].copy_from_slice(&src[tail..]);
}

/// Defines the table `$name`: the reference compiled for one ISA.
macro_rules! rows_table {
    ($name:ident, $level:ident, $features:literal, $token:ty) => {
        static $name: RowKernels = {
            kernel_entry!($features, $token, fn place_entry(marks: &[u64], before: &mut [u32], columns: (&[u32], &[u32]), out: (&mut [i32], &mut [u32])) = place);
            kernel_entry!($features, $token, fn scan_entry(counts: &[u32]) -> (u64, u64) = scan);
            kernel_entry!($features, $token, fn lookup_entry(memo: &[f32; MEMO_SLOTS], counts: &[u32], out: &mut [f32]) = lookup);
            kernel_entry!($features, $token, fn values_entry(memo: &[f32; MEMO_SLOTS], slots: &mut [u32], larger: &dyn Fn(u32) -> f32) = values_in_place);
            kernel_entry!($features, $token, fn scatter_values_entry(memo: &[f32; MEMO_SLOTS], columns: (&[i32], &[i32]), counts: &[u32], out: &mut [f32], larger: &dyn Fn(u32) -> f32) = scatter_values);
            kernel_entry!($features, $token, fn quotient_entry(x: &[f64], m: &[f64], out: &mut [u64]) -> (u64, u64) = quotient_keys);
            kernel_entry!($features, $token, fn select_entry(table: &[i32], first: u32, genes: &[i32], counts: &[u32], out: (&mut [i32], &mut [u32])) -> usize = select);
            kernel_entry!($features, $token, fn select_marked_entry(table: &[i32], marks: &[u32], first: u32, genes: &[i32], counts: &[u32], out: (&mut [i32], &mut [u32])) -> usize = select_marked);
            kernel_entry!($features, $token, fn marked_entry(table_len: usize, marks: &[u32], first: u32, genes: &[i32], counts: &[u32], out: (&mut [i32], &mut [u32])) -> usize = marked);
            kernel_entry!($features, $token, fn compress_entry(values: &[i32], marks: &[u8], counts: &[u32], out: (&mut [i32], &mut [u32])) -> usize = compress);
            kernel_entry!($features, $token, fn count_marked_entry(marks: &[u32], first: u32, genes: &[i32]) -> usize = count_marked);
            kernel_entry!($features, $token, fn stream_entry(parts: &mut [(&[u8], &mut [u8])]) = stream);
            kernel_entry!($features, $token, fn draws_entry(state: u64, first: u32, out: &mut [u32]) = draws);
            kernel_entry!($features, $token, fn starts_entry(counts: &mut [u32]) -> u32 = starts);
            kernel_entry!($features, $token, fn order_by_class_entry(classes: &[u32], tokens: &[i32], width: usize, ends: &mut Vec<u32>, placed: &mut [i32]) -> usize = order_by_class);
            kernel_entry!($features, $token, fn classify_entry(lookup: &ClassLookup<'_>, genes: &[i32], counts: &[u32], out: (&mut [u32], &mut [i32]), strays: &mut Vec<u32>) -> bool = classify);
            kernel_entry!($features, $token, fn tally_entry(counts: &[u32], small: &mut [usize; TALLY_SLOTS], rest: &mut [u32]) -> usize = tally);
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
