//! Criterion's HTML reports keep their plots only where their text can be
//! drawn: with the `charts` feature, plotters draws text from a registered
//! TrueType font (see `deltacells::chart_font`), and criterion would panic
//! at its first plot without one.

use criterion::Criterion;

/// `c` with plots when their text can be drawn, without them otherwise.
pub fn plots(c: Criterion) -> Criterion {
    #[cfg(feature = "charts")]
    if let Err(why) = deltacells::chart_font::register() {
        eprintln!("criterion reports without plots: {why}");
        return c.without_plots();
    }
    c
}
