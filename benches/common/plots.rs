//! Criterion's HTML reports keep their plots only where their text can be
//! drawn: plotters draws text from a registered TrueType font (see
//! `deltacells_chart_font`, which turns on plotters' ab_glyph text for
//! criterion too), and criterion would panic at its first plot without one.

use criterion::Criterion;

/// `c` with plots when their text can be drawn, without them otherwise.
pub fn plots(c: Criterion) -> Criterion {
    if let Err(why) = deltacells_chart_font::register() {
        eprintln!("criterion reports without plots: {why}");
        return c.without_plots();
    }
    c
}
