//! `loss.svg`: the training loss (each step, faint, and its moving average) and the
//! validation loss (each evaluation) against the step, drawn from `metrics.jsonl`. A plain
//! SVG line chart written by hand: no plotting dependency, opens in any browser.

use std::fmt::Write as _;
use std::path::Path;

/// Points of one series: (step, loss).
type Series = Vec<(f64, f64)>;

/// The train and validation losses of a `metrics.jsonl`.
pub fn read_losses(metrics: &str) -> (Series, Series) {
    let (mut train, mut valid) = (Vec::new(), Vec::new());
    for line in metrics.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let (Some(step), Some(loss)) = (v["step"].as_f64(), v["loss"].as_f64()) else { continue };
        if !loss.is_finite() {
            continue;
        }
        match (v["event"].as_str(), v["split"].as_str()) {
            (Some("train"), _) => train.push((step, loss)),
            (Some("eval"), Some("valid")) => valid.push((step, loss)),
            _ => {}
        }
    }
    (train, valid)
}

/// Reads `metrics` and writes the chart to `out` (atomically: a temporary file, then rename).
pub fn plot_losses(metrics: &Path, out: &Path) -> std::io::Result<()> {
    let text = std::fs::read_to_string(metrics)?;
    let (train, valid) = read_losses(&text);
    let svg = chart(
        &train,
        &valid,
        &format!("{}", metrics.parent().and_then(|p| p.file_name()).map(|n| n.to_string_lossy()).unwrap_or_default()),
    );
    let tmp = out.with_extension("svg.tmp");
    std::fs::write(&tmp, svg)?;
    std::fs::rename(&tmp, out)
}

const W: f64 = 720.0;
const H: f64 = 440.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// The SVG document of the chart.
pub fn chart(train: &Series, valid: &Series, title: &str) -> String {
    let smooth = moving_average(train, 50);
    let all = train.iter().chain(valid);
    let (mut x_max, mut y_min, mut y_max) = (1.0f64, f64::INFINITY, f64::NEG_INFINITY);
    for &(x, y) in all {
        x_max = x_max.max(x);
        y_min = y_min.min(y);
        y_max = y_max.max(y);
    }
    if !y_min.is_finite() {
        (y_min, y_max) = (0.0, 1.0);
    }
    if y_max - y_min < 1e-9 {
        y_max = y_min + 1.0;
    }
    let y_ticks = nice_ticks(y_min, y_max, 6);
    let x_ticks = nice_ticks(0.0, x_max, 6);
    let (y_lo, y_hi) = (y_ticks[0].min(y_min), y_ticks.last().copied().unwrap_or(y_max).max(y_max));
    let (x_lo, x_hi) = (0.0, x_ticks.last().copied().unwrap_or(x_max).max(x_max));
    let px = |x: f64| LEFT + (x - x_lo) / (x_hi - x_lo) * (W - LEFT - RIGHT);
    let py = |y: f64| H - BOTTOM - (y - y_lo) / (y_hi - y_lo) * (H - TOP - BOTTOM);

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(s, r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#, W / 2.0, escape(title));
    for &t in &y_ticks {
        let y = py(t);
        let _ = writeln!(s, r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/>"##, W - RIGHT);
        let _ = writeln!(s, r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#, LEFT - 6.0, y + 4.0, label(t));
    }
    for &t in &x_ticks {
        let x = px(t);
        let _ = writeln!(s, r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#e5e5e5"/>"##, H - BOTTOM);
        let _ =
            writeln!(s, r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#, H - BOTTOM + 16.0, label(t));
    }
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{:.1}" height="{:.1}" fill="none" stroke="#444"/>"##,
        W - LEFT - RIGHT,
        H - TOP - BOTTOM
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">step</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        H - 12.0
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">loss (nats/token)</text>"#,
        (TOP + H - BOTTOM) / 2.0,
        (TOP + H - BOTTOM) / 2.0
    );
    let path = |points: &Series| {
        points.iter().map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y))).collect::<Vec<_>>().join(" ")
    };
    if !train.is_empty() {
        let _ =
            writeln!(s, r##"<polyline points="{}" fill="none" stroke="#9ecae1" stroke-width="0.8"/>"##, path(train));
        let _ =
            writeln!(s, r##"<polyline points="{}" fill="none" stroke="#1f77b4" stroke-width="1.8"/>"##, path(&smooth));
    }
    if !valid.is_empty() {
        let _ =
            writeln!(s, r##"<polyline points="{}" fill="none" stroke="#d62728" stroke-width="1.8"/>"##, path(valid));
        for &(x, y) in valid {
            let _ = writeln!(s, r##"<circle cx="{:.1}" cy="{:.1}" r="3" fill="#d62728"/>"##, px(x), py(y));
        }
    }
    let lx = W - RIGHT - 190.0;
    let _ = writeln!(
        s,
        r##"<line x1="{lx}" y1="{}" x2="{}" y2="{}" stroke="#1f77b4" stroke-width="1.8"/><text x="{}" y="{}">train (moving average)</text>"##,
        TOP + 16.0,
        lx + 24.0,
        TOP + 16.0,
        lx + 30.0,
        TOP + 20.0
    );
    let _ = writeln!(
        s,
        r##"<line x1="{lx}" y1="{}" x2="{}" y2="{}" stroke="#d62728" stroke-width="1.8"/><text x="{}" y="{}">validation</text>"##,
        TOP + 34.0,
        lx + 24.0,
        TOP + 34.0,
        lx + 30.0,
        TOP + 38.0
    );
    s.push_str("</svg>\n");
    s
}

/// The mean of each point and the `window - 1` before it.
fn moving_average(points: &Series, window: usize) -> Series {
    let mut sum = 0.0;
    let mut out = Vec::with_capacity(points.len());
    for (i, &(x, y)) in points.iter().enumerate() {
        sum += y;
        if i >= window {
            sum -= points[i - window].1;
        }
        out.push((x, sum / (i + 1).min(window) as f64));
    }
    out
}

/// About `count` round tick values covering `[lo, hi]`: steps of 1, 2 or 5 times a power of 10.
fn nice_ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    let raw = (hi - lo) / count.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * magnitude).find(|&s| s >= raw).unwrap_or(10.0 * magnitude);
    let first = (lo / step).floor() * step;
    let mut ticks = Vec::new();
    let mut t = first;
    while t <= hi + step * 0.999 {
        ticks.push(t);
        t += step;
        if ticks.len() > 100 {
            break;
        }
    }
    ticks
}

fn label(v: f64) -> String {
    if v.abs() >= 1000.0 && v.fract() == 0.0 {
        format!("{}", v as i64)
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses_are_read_by_event_and_split_and_malformed_lines_skipped() {
        let text = r#"{"event":"train","step":1,"loss":4.0,"lr":0.1,"tokens_per_s":1}
{"event":"eval","step":1,"split":"valid","loss":3.5,"ppl":33}
{"event":"eval","step":1,"split":"valid-averaged","loss":3.0,"ppl":20}
{"event":"train","step":2,"lo
{"event":"summary","step":2,"valid_loss":3.5}
"#;
        let (train, valid) = read_losses(text);
        assert_eq!(train, vec![(1.0, 4.0)]);
        assert_eq!(valid, vec![(1.0, 3.5)]);
    }

    #[test]
    fn chart_has_one_polyline_point_per_logged_step_and_a_marker_per_evaluation() {
        let train: Series = (1..=120).map(|s| (s as f64, 5.0 / s as f64)).collect();
        let valid: Series = vec![(50.0, 0.3), (100.0, 0.2)];
        let svg = chart(&train, &valid, "run <1>");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let first_line = svg.lines().find(|l| l.starts_with("<polyline")).unwrap();
        assert_eq!(first_line.matches(',').count(), 120);
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains("run &lt;1&gt;"));
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let ticks = nice_ticks(1.37, 4.2, 6);
        assert!(ticks[0] <= 1.37 && *ticks.last().unwrap() >= 4.2, "{ticks:?}");
        for pair in ticks.windows(2) {
            assert!(((pair[1] - pair[0]) - 0.5).abs() < 1e-9, "{ticks:?}");
        }
        assert_eq!(nice_ticks(0.0, 2000.0, 6)[1], 500.0);
    }

    #[test]
    fn moving_average_of_a_constant_is_that_constant() {
        let points: Series = (0..10).map(|i| (i as f64, 2.5)).collect();
        assert!(moving_average(&points, 4).iter().all(|p| (p.1 - 2.5).abs() < 1e-12));
    }
}
