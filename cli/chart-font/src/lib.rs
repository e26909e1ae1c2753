//! The TrueType font charts draw their text with: the PNG charts of
//! `deltacells bench --report` and criterion's HTML report plots of the
//! library's benches (`cargo bench`).
//!
//! plotters draws text with ab_glyph from fonts registered at run time, so a
//! chart (criterion's too, since plotters' features are unified) fails
//! without one. [`register`] finds one and registers it as the sans-serif
//! family both use.

#![warn(missing_docs)]

use std::path::{Path, PathBuf};

use plotters::style::FontStyle;

/// Registers a TrueType font as plotters' sans-serif: `DELTACELLS_FONT`, else
/// a sans font from the usual system font directories. An error says why
/// none could be.
pub fn register() -> Result<(), String> {
    let font = font().ok_or("no TrueType font found; set DELTACELLS_FONT to a .ttf file")?;
    plotters::style::register_font("sans-serif", FontStyle::Normal, font)
        .map_err(|_| "the TrueType font found could not be read".to_string())
}

/// A TrueType font for the charts' text: `DELTACELLS_FONT`, else a sans
/// font from the usual system font directories.
fn font() -> Option<&'static [u8]> {
    if let Some(path) = std::env::var_os("DELTACELLS_FONT") {
        return std::fs::read(path)
            .ok()
            .map(|b| &*Box::leak(b.into_boxed_slice()));
    }
    let mut dirs: Vec<PathBuf> = [
        "/usr/share/fonts",
        "/usr/local/share/fonts",
        "/Library/Fonts",
        "/System/Library/Fonts",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".fonts"));
        dirs.push(Path::new(&home).join(".local/share/fonts"));
    }
    let mut found = Vec::new();
    for dir in dirs {
        collect_ttf(&dir, 4, &mut found);
    }
    let preferred = [
        "DejaVuSans.ttf",
        "LiberationSans-Regular.ttf",
        "Arial.ttf",
        "Helvetica.ttf",
    ];
    let pick = preferred
        .iter()
        .find_map(|name| {
            found
                .iter()
                .find(|p| p.file_name().is_some_and(|n| n == *name))
        })
        .or_else(|| found.first())?;
    std::fs::read(pick)
        .ok()
        .map(|b| &*Box::leak(b.into_boxed_slice()))
}

fn collect_ttf(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && depth > 0 {
            collect_ttf(&path, depth - 1, out);
        } else if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("ttf"))
        {
            out.push(path);
        }
    }
}
