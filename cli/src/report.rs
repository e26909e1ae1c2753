//! `deltacells bench --report DIR`: the bench's figures as a Markdown report
//! with PNG charts, plus the same figures as JSON, so a throughput study can
//! be read, compared across machines and pasted into an issue.
//!
//! Everything is drawn from the JSON document the bench builds, so the
//! report, the charts and `--json` always agree.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use deltacells::measure::Ratio;
use deltacells::{Error, Result};
use serde_json::Value;

fn io(what: &str, path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Config(format!("{what} {}: {e}", path.display()))
}

/// Writes `report.md`, `report.json` and the charts into `dir` (created if
/// needed); returns the files written.
pub fn write(dir: &Path, report: &Value) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| io("creating", dir, e))?;
    let mut written = Vec::new();
    let json = dir.join("report.json");
    let text = serde_json::to_string_pretty(report).map_err(|e| io("encoding", &json, e))?;
    std::fs::write(&json, text + "\n").map_err(|e| io("writing", &json, e))?;
    written.push(json);
    let charts = charts::draw(dir, report);
    let md = dir.join("report.md");
    std::fs::write(&md, markdown(report, &charts)).map_err(|e| io("writing", &md, e))?;
    written.push(md);
    written.extend(charts.iter().filter_map(|c| c.as_ref().ok().cloned()));
    Ok(written)
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn rows(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

/// The least and greatest ratio of one round of a row's ratio `key`
/// (under `{key}_each_round`), as the bench prints them.
fn each_round(row: &Value, key: &str) -> String {
    match rows(&row[format!("{key}_each_round")]) {
        [lo, hi] => Ratio {
            best: num(&row[key]),
            range: [num(lo), num(hi)],
        }
        .range_text(),
        _ => "?".into(),
    }
}

/// The report's text: what was measured where, then one table per section.
fn markdown(r: &Value, charts: &[std::result::Result<PathBuf, String>]) -> String {
    let mut s = String::new();
    let d = &r["dataset"];
    let b = &r["build"];
    let m = &r["machine"];
    let _ = writeln!(
        s,
        "# deltacells bench: {}\n",
        d["location"].as_str().unwrap_or("?")
    );
    let _ = writeln!(
        s,
        "- dataset: {} cells x {} genes, {} nonzeros, {} tiles, {:.1} MiB",
        d["cells"],
        d["genes"],
        d["nonzeros"],
        d["tiles"],
        num(&d["bytes"]) / (1 << 20) as f64
    );
    let _ = writeln!(
        s,
        "- machine: {} ({} cores, {} {})",
        m["cpu"].as_str().unwrap_or("unknown CPU"),
        m["cores"],
        m["os"].as_str().unwrap_or("?"),
        m["arch"].as_str().unwrap_or("?")
    );
    let _ = writeln!(
        s,
        "- build: deltacells {} ({}), {}, zstd {}, kernel {}\n",
        b["deltacells"].as_str().unwrap_or("?"),
        b["revision"].as_str().unwrap_or("?"),
        b["rustc"].as_str().unwrap_or("?"),
        b["zstd"].as_str().unwrap_or("?"),
        b["kernel"].as_str().unwrap_or("?")
    );
    let _ = writeln!(
        s,
        "Ratios compare figures measured in this one run; absolute rates move with the machine's load.\n"
    );

    let _ = writeln!(s, "## Single-thread tile decode by backend\n");
    let _ = writeln!(
        s,
        "| path | Mnnz/s | kcells/s | vs zstd-only | (each round) |\n|---|---|---|---|---|"
    );
    for row in rows(&r["tile_decode"]) {
        let _ = writeln!(
            s,
            "| {} | {:.1} | {:.1} | {:.2} | {} |",
            row["path"].as_str().unwrap_or("?"),
            num(&row["nnz_per_s"]) / 1e6,
            num(&row["cells_per_s"]) / 1e3,
            num(&row["vs_zstd_only"]),
            each_round(row, "vs_zstd_only")
        );
    }
    let _ = writeln!(
        s,
        "\n## Full scan (fetch, CRC, decode into one reused buffer)\n"
    );
    let _ = writeln!(
        s,
        "| threads | cells/s | Mnnz/s | zstd-only Mnnz/s | vs zstd-only | (each round) | scaling |\n|---|---|---|---|---|---|---|"
    );
    for row in rows(&r["full_scan"]) {
        let scaling = row
            .get("scaling")
            .map_or(String::new(), |v| format!("{:.2}x", num(v)));
        let _ = writeln!(
            s,
            "| {} | {:.0} | {:.1} | {:.1} | {:.2} | {} | {scaling} |",
            row["threads"],
            num(&row["cells_per_s"]),
            num(&row["nnz_per_s"]) / 1e6,
            num(&row["zstd_only_nnz_per_s"]) / 1e6,
            num(&row["vs_zstd_only"]),
            each_round(row, "vs_zstd_only")
        );
    }
    let bt = &r["batches"];
    let _ = writeln!(s, "\n## Reads by path\n");
    let _ = writeln!(s, "| path | cells/s | note |\n|---|---|---|");
    let _ = writeln!(
        s,
        "| training batches ({} cells, windows of {} tiles, {} threads), best of {} later epochs | {:.0} | {:.2} of the full scan at the same thread count (first epoch, in fresh buffers: {:.2}); {:.2} chunks decoded per batch; peak RSS {:.0} MiB, {:.0} MiB over the process before the epochs (bound {} MiB) |",
        bt["batch_size"],
        bt["window_tiles"],
        bt["threads"],
        bt["later_epochs"],
        num(&bt["cells_per_s"]),
        num(&bt["vs_full_scan"]),
        num(&bt["first_epoch_vs_full_scan"]),
        num(&bt["chunks_decoded_per_batch"]),
        num(&bt["peak_rss_bytes"]) / (1 << 20) as f64,
        (num(&bt["peak_rss_bytes"]) - num(&bt["rss_before_bytes"])) / (1 << 20) as f64,
        bt["cache_bytes"].as_u64().unwrap_or(0) >> 20
    );
    for row in rows(&r["concurrent_readers"]) {
        let _ = writeln!(
            s,
            "| concurrent readers: {} thread(s) calling read_cells on one Dataset | {:.0} | {:.2}x one thread |",
            row["threads"],
            num(&row["cells_per_s"]),
            num(&row["scaling"])
        );
    }
    if let Some(rb) = r.get("random_batches") {
        let _ = writeln!(
            s,
            "| uniformly random batches ({} cells) | {:.0} | {:.1} chunks decoded per batch; bytes requested {:.2}x the chunks' compressed bytes |",
            rb["batch_size"],
            num(&rb["cells_per_s"]),
            num(&rb["chunks_decoded_per_batch"]),
            num(&rb["bytes_requested_vs_chunk_bytes"])
        );
    }
    let mb = &r["model_batches"];
    let kinds = rows(&mb["kinds"]);
    if !kinds.is_empty() {
        let _ = writeln!(s, "\n## Model-ready batches\n");
        let _ = writeln!(
            s,
            "Each kind's rate as a ratio of plain CSR batches ({:.0} cells/s), every kind timed in turn in each round.\n",
            num(&mb["plain_csr_cells_per_s"])
        );
        let _ = writeln!(
            s,
            "| kind | cells/s | vs plain CSR | (each round) |\n|---|---|---|---|"
        );
        for row in kinds {
            let _ = writeln!(
                s,
                "| {} | {:.0} | {:.2} | {} |",
                row["kind"].as_str().unwrap_or("?"),
                num(&row["cells_per_s"]),
                num(&row["vs_plain_csr"]),
                each_round(row, "vs_plain_csr")
            );
        }
        if let Some(column) = mb["balance_column"].as_str() {
            let _ = writeln!(s, "\nBalanced on the obs column `{column}`.");
        }
    }
    let _ = writeln!(s, "\n## Charts\n");
    for chart in charts {
        match chart {
            Ok(path) => {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("?");
                let _ = writeln!(s, "![{name}]({name})\n");
            }
            Err(why) => {
                let _ = writeln!(s, "- chart not drawn: {why}");
            }
        }
    }
    s
}

#[cfg(feature = "charts")]
mod charts {
    //! Bar charts drawn with plotters into PNG files.

    use std::path::{Path, PathBuf};

    use plotters::prelude::*;
    use serde_json::Value;

    use super::{num, rows};

    type Drawn = std::result::Result<PathBuf, String>;

    /// One series of a grouped bar chart: its name, one value per group, its colour.
    struct Series<'a> {
        name: &'a str,
        values: Vec<f64>,
        color: RGBColor,
    }

    /// Draws grouped vertical bars: one group per label, one bar per series.
    fn grouped_bars(
        path: &Path,
        title: &str,
        y_desc: &str,
        groups: &[String],
        series: &[Series<'_>],
    ) -> Drawn {
        let max = series
            .iter()
            .flat_map(|s| s.values.iter().copied())
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max);
        let top = if max > 0.0 { max * 1.15 } else { 1.0 };
        let n = groups.len().max(1) as f64;
        let root = BitMapBackend::new(path, (960, 540)).into_drawing_area();
        let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 26))
            .margin(16)
            .x_label_area_size(56)
            .y_label_area_size(90)
            .build_cartesian_2d(-0.5f64..n - 0.5, 0f64..top)
            .map_err(|e| fail(&e))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(y_desc)
            .y_label_formatter(&|v| {
                if top >= 1e4 {
                    format!("{:.0}k", v / 1e3)
                } else {
                    format!("{v:.2}")
                }
            })
            .label_style(("sans-serif", 16))
            .draw()
            .map_err(|e| fail(&e))?;
        let width = 0.8 / series.len().max(1) as f64;
        for (k, s) in series.iter().enumerate() {
            let offset = -0.4 + width * k as f64;
            let color = s.color;
            chart
                .draw_series(
                    s.values
                        .iter()
                        .enumerate()
                        .filter(|(_, v)| v.is_finite())
                        .map(|(i, &v)| {
                            let x = i as f64 + offset;
                            Rectangle::new([(x + 0.02, 0.0), (x + width - 0.02, v)], color.filled())
                        }),
                )
                .map_err(|e| fail(&e))?
                .label(s.name)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled())
                });
        }
        chart
            .draw_series(groups.iter().enumerate().map(|(i, g)| {
                EmptyElement::at((i as f64, 0.0))
                    + Text::new(
                        g.clone(),
                        (0, 10),
                        ("sans-serif", 17).into_font().color(&BLACK).pos(
                            plotters::style::text_anchor::Pos::new(
                                plotters::style::text_anchor::HPos::Center,
                                plotters::style::text_anchor::VPos::Top,
                            ),
                        ),
                    )
            }))
            .map_err(|e| fail(&e))?;
        if series.len() > 1 {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK)
                .label_font(("sans-serif", 16))
                .position(SeriesLabelPosition::UpperRight)
                .draw()
                .map_err(|e| fail(&e))?;
        }
        root.present().map_err(|e| fail(&e))?;
        Ok(path.to_path_buf())
    }

    /// The charts: decode per backend, full scan per thread count, reads by path.
    pub fn draw(dir: &Path, r: &Value) -> Vec<Drawn> {
        if let Err(e) = deltacells_chart_font::register() {
            return vec![Err(e)];
        }
        let mut drawn = Vec::new();

        let decode = rows(&r["tile_decode"]);
        drawn.push(grouped_bars(
            &dir.join("tile_decode_by_backend.png"),
            "Single-thread tile decode, vs zstd-only on the same frames",
            "throughput / zstd-only",
            &decode
                .iter()
                .map(|row| row["path"].as_str().unwrap_or("?").to_string())
                .collect::<Vec<_>>(),
            &[Series {
                name: "vs zstd-only",
                values: decode.iter().map(|row| num(&row["vs_zstd_only"])).collect(),
                color: RGBColor(60, 110, 180),
            }],
        ));

        let scans = rows(&r["full_scan"]);
        let cells = num(&r["dataset"]["cells"]);
        let nnz = num(&r["dataset"]["nonzeros"]);
        drawn.push(grouped_bars(
            &dir.join("full_scan_by_threads.png"),
            "Full scan by thread count: decode and zstd-only",
            "cells/s",
            &scans
                .iter()
                .map(|row| format!("{} threads", row["threads"]))
                .collect::<Vec<_>>(),
            &[
                Series {
                    name: "decode",
                    values: scans.iter().map(|row| num(&row["cells_per_s"])).collect(),
                    color: RGBColor(60, 110, 180),
                },
                Series {
                    name: "zstd-only",
                    values: scans
                        .iter()
                        .map(|row| num(&row["zstd_only_nnz_per_s"]) * cells / nnz)
                        .collect(),
                    color: RGBColor(200, 200, 200),
                },
            ],
        ));

        let mut paths = Vec::new();
        if let Some(best) = scans.last() {
            paths.push((
                format!("scan, {} thr", best["threads"]),
                num(&best["cells_per_s"]),
            ));
            paths.push((
                "zstd-only scan".to_string(),
                num(&best["zstd_only_nnz_per_s"]) * cells / nnz,
            ));
        }
        paths.push(("batches".to_string(), num(&r["batches"]["cells_per_s"])));
        for row in rows(&r["concurrent_readers"]) {
            paths.push((
                format!("{} readers", row["threads"]),
                num(&row["cells_per_s"]),
            ));
        }
        if let Some(rb) = r.get("random_batches") {
            paths.push(("random".to_string(), num(&rb["cells_per_s"])));
        }
        drawn.push(grouped_bars(
            &dir.join("reads_by_path.png"),
            "Reads by path: scan, training batches, concurrent readers, random",
            "cells/s",
            &paths.iter().map(|p| p.0.clone()).collect::<Vec<_>>(),
            &[Series {
                name: "cells/s",
                values: paths.iter().map(|p| p.1).collect(),
                color: RGBColor(60, 110, 180),
            }],
        ));
        drawn
    }
}

#[cfg(not(feature = "charts"))]
mod charts {
    //! Built without the `charts` feature: the report has tables only.

    use std::path::{Path, PathBuf};

    use serde_json::Value;

    pub fn draw(_dir: &Path, _r: &Value) -> Vec<std::result::Result<PathBuf, String>> {
        vec![Err("this build has no charts (feature `charts`)".into())]
    }
}
