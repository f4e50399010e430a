//! `loss.svg`: the training loss (each step, faint, and its moving average) and the
//! validation loss (each evaluation) against the step, drawn from `metrics.jsonl`, with
//! `plotters`' SVG backend (no font library: the viewer draws the text; opens in any browser).

use std::path::Path;

use plotters::prelude::*;

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
    let title = metrics.parent().and_then(|p| p.file_name()).map(|n| n.to_string_lossy()).unwrap_or_default();
    let svg = chart(&train, &valid, &title)?;
    crate::whole_file::write_whole(out, svg)
}

const W: u32 = 720;
const H: u32 = 440;
const TRAIN_RAW: RGBColor = RGBColor(0x9e, 0xca, 0xe1);
const TRAIN_MEAN: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const VALID: RGBColor = RGBColor(0xd6, 0x27, 0x28);

/// The SVG document of the chart. Drawing into a string fails only on a plotters bug; the
/// error is passed on, never a panic.
pub fn chart(train: &Series, valid: &Series, title: &str) -> std::io::Result<String> {
    let mut out = String::new();
    draw(&mut out, train, valid, title).map_err(|e| std::io::Error::other(format!("drawing the loss chart: {e}")))?;
    Ok(out)
}

fn draw(
    out: &mut String,
    train: &Series,
    valid: &Series,
    title: &str,
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    let (mut x_max, mut y_min, mut y_max) = (1.0f64, f64::INFINITY, f64::NEG_INFINITY);
    for &(x, y) in train.iter().chain(valid) {
        x_max = x_max.max(x);
        y_min = y_min.min(y);
        y_max = y_max.max(y);
    }
    if !y_min.is_finite() {
        (y_min, y_max) = (0.0, 1.0);
    }
    let pad = ((y_max - y_min) * 0.05).max(1e-3);
    let root = SVGBackend::with_string(out, (W, H)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, (y_min - pad)..(y_max + pad))?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc("loss (nats/token)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .light_line_style(WHITE)
        .draw()?;
    if !train.is_empty() {
        chart.draw_series(LineSeries::new(train.iter().copied(), TRAIN_RAW.stroke_width(1)))?;
        chart
            .draw_series(LineSeries::new(moving_average(train, 50), TRAIN_MEAN.stroke_width(2)))?
            .label("train (moving average)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], TRAIN_MEAN.stroke_width(2)));
    }
    if !valid.is_empty() {
        chart
            .draw_series(LineSeries::new(valid.iter().copied(), VALID.stroke_width(2)))?
            .label("validation")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], VALID.stroke_width(2)));
        chart.draw_series(valid.iter().map(|&p| Circle::new(p, 3, VALID.filled())))?;
    }
    chart.configure_series_labels().background_style(WHITE).border_style(BLACK).draw()?;
    root.present()
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
        let svg = chart(&train, &valid, "run <1>").unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let lines: Vec<&str> = svg.lines().filter(|l| l.starts_with("<polyline") && l.contains("#9ECAE1")).collect();
        assert_eq!(lines.len(), 1, "one raw training curve");
        assert_eq!(lines[0].matches(',').count(), 120);
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(svg.contains("run &lt;1&gt;"));
    }

    #[test]
    fn moving_average_is_the_mean_of_the_last_window_points_and_of_a_constant_that_constant() {
        let points: Series = (0..10).map(|i| (i as f64, 2.5)).collect();
        let flat = moving_average(&points, 4);
        assert_eq!(flat.len(), 10);
        assert!(flat.iter().all(|p| (p.1 - 2.5).abs() < 1e-12));
        // The first points average what there is so far; then the last two, at the same steps.
        let ramp: Series = [0.0, 4.0, 8.0, 12.0].iter().enumerate().map(|(i, &y)| (i as f64, y)).collect();
        assert_eq!(moving_average(&ramp, 2), vec![(0.0, 0.0), (1.0, 2.0), (2.0, 6.0), (3.0, 10.0)]);
    }
}
