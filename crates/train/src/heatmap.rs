//! Heat maps drawn with `plotters`' SVG backend (default features off: no font library; text
//! is left to the viewer's sans-serif): panels side by side, each a grid of coloured cells
//! with labelled rows and columns, and a colour bar with the scale's end values. Attention
//! weights use a white-to-blue scale over [0, 1]; signed values (positional encodings) a
//! blue-white-red scale over [−m, m], m the largest magnitude.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One grid of values, `rows.len() × cols.len()`, row-major.
#[derive(Clone, Debug)]
pub struct Panel {
    pub title: String,
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    pub values: Vec<f32>,
}

/// How values map to colours.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// [0, 1]: white to dark blue (attention weights).
    Unit,
    /// [−m, m] with m the largest magnitude: blue, white at 0, red.
    Signed,
}

/// The colour of `v` on `scale` (`max`: the largest magnitude, for [`Scale::Signed`]).
fn colour(v: f32, scale: Scale, max: f32) -> RGBColor {
    let mix = |t: f32, to: (f32, f32, f32)| {
        let t = t.clamp(0.0, 1.0);
        let c = |x: f32| (255.0 + (x - 255.0) * t).round() as u8;
        RGBColor(c(to.0), c(to.1), c(to.2))
    };
    match scale {
        Scale::Unit => mix(v, (8.0, 48.0, 107.0)),
        Scale::Signed if v >= 0.0 => mix(v / max.max(1e-12), (178.0, 24.0, 43.0)),
        Scale::Signed => mix(-v / max.max(1e-12), (33.0, 102.0, 172.0)),
    }
}

/// A token as a label: whitespace made visible, long ones shortened.
pub fn token_label(token: &str) -> String {
    let shown: String = token
        .chars()
        .map(|c| match c {
            '\n' => '⏎',
            ' ' => '␣',
            '\t' => '⇥',
            c => c,
        })
        .collect();
    if shown.chars().count() > 12 {
        shown.chars().take(11).chain(['…']).collect()
    } else {
        shown
    }
}

const LABEL_SPACE: i32 = 90;
const GAP: i32 = 30;
const TOP: i32 = 40;
const BAR: i32 = 60;

/// The SVG of `panels` side by side under `title`, cells of `cell` pixels (at least 1; labels
/// on every `k`-th row and column when rows are too thin for 9-pixel text). Drawing into a
/// string fails only on a plotters bug; the error is passed on, never a panic.
pub fn svg(title: &str, panels: &[Panel], scale: Scale, cell: f32) -> std::io::Result<String> {
    let cell = cell.round().max(1.0) as i32;
    let max = panels.iter().flat_map(|p| &p.values).fold(0.0f32, |m, v| m.max(v.abs()));
    let height = panels.iter().map(|p| p.rows.len()).max().unwrap_or(0) as i32 * cell;
    let widths: Vec<i32> = panels.iter().map(|p| p.cols.len() as i32 * cell).collect();
    let total_w = LABEL_SPACE + widths.iter().sum::<i32>() + GAP * panels.len() as i32 + BAR;
    let total_h = TOP + height.max(120) + LABEL_SPACE;
    let mut out = String::new();
    draw(&mut out, (total_w as u32, total_h as u32), title, panels, &widths, scale, max, cell)
        .map_err(|e| std::io::Error::other(format!("drawing the heat map: {e}")))?;
    Ok(out)
}

type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

#[allow(clippy::too_many_arguments)]
fn draw(
    out: &mut String,
    size: (u32, u32),
    title: &str,
    panels: &[Panel],
    widths: &[i32],
    scale: Scale,
    max: f32,
    cell: i32,
) -> DrawResult {
    let root = SVGBackend::with_string(out, size).into_drawing_area();
    root.fill(&WHITE)?;
    let text = |size: f64| ("sans-serif", size).into_font().color(&BLACK);
    root.draw_text(title, &text(16.0), (10, 8))?;
    let labels = text(11.0);
    let every = ((11.0 / cell as f32).ceil() as usize).max(1);
    let mut x0 = LABEL_SPACE;
    for (panel, width) in panels.iter().zip(widths) {
        let cols = panel.cols.len();
        root.draw_text(&panel.title, &text(13.0), (x0, TOP - 16))?;
        for (i, &v) in panel.values.iter().enumerate() {
            let (r, c) = ((i / cols.max(1)) as i32, (i % cols.max(1)) as i32);
            let (x, y) = (x0 + c * cell, TOP + r * cell);
            root.draw(&Rectangle::new([(x, y), (x + cell, y + cell)], colour(v, scale, max).filled()))?;
        }
        let right_centre = labels.pos(Pos::new(HPos::Right, VPos::Center));
        for (r, label) in panel.rows.iter().enumerate().step_by(every) {
            root.draw_text(label, &right_centre, (x0 - 3, TOP + r as i32 * cell + cell / 2))?;
        }
        let down = labels.pos(Pos::new(HPos::Left, VPos::Center)).transform(FontTransform::Rotate90);
        let bottom = TOP + panel.rows.len() as i32 * cell + 4;
        for (c, label) in panel.cols.iter().enumerate().step_by(every) {
            root.draw_text(label, &down, (x0 + c as i32 * cell + cell / 2, bottom))?;
        }
        x0 += width + GAP;
    }
    colour_bar(&root, x0, scale, max)
}

/// A vertical bar of the scale from its top value to its bottom one, with both ends labelled.
fn colour_bar(root: &DrawingArea<SVGBackend, plotters::coord::Shift>, x: i32, scale: Scale, max: f32) -> DrawResult {
    let (lo, hi) = match scale {
        Scale::Unit => (0.0, 1.0),
        Scale::Signed => (-max, max),
    };
    let steps = 50;
    let step_h = 2;
    for s in 0..steps {
        let v = hi - (hi - lo) * s as f32 / (steps - 1) as f32;
        let y = TOP + s * step_h;
        root.draw(&Rectangle::new([(x, y), (x + 12, y + step_h)], colour(v, scale, max).filled()))?;
    }
    root.draw(&Rectangle::new([(x, TOP), (x + 12, TOP + steps * step_h)], BLACK.stroke_width(1)))?;
    let style = ("sans-serif", 11.0).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    root.draw_text(&format!("{hi:.2}"), &style, (x + 16, TOP))?;
    root.draw_text(&format!("{lo:.2}"), &style, (x + 16, TOP + steps * step_h))?;
    root.present()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(c: RGBColor) -> String {
        format!(r##"fill="#{:02X}{:02X}{:02X}""##, c.0, c.1, c.2)
    }

    #[test]
    fn every_cell_is_drawn_in_its_colour_and_labels_are_escaped() {
        let panel = Panel {
            title: "head 1".into(),
            rows: vec!["<a>".into(), "b".into()],
            cols: vec!["x".into(), "y".into(), "z".into()],
            values: vec![1.0, 0.0, 0.5, 0.25, 0.25, 0.5],
        };
        let svg = svg("layer 1", &[panel.clone(), panel], Scale::Unit, 10.0).unwrap();
        // 2 panels of 6 cells, the background, 50 bar steps and the bar's frame.
        assert_eq!(svg.matches("<rect").count(), 12 + 1 + 50 + 1);
        assert!(svg.contains("&lt;a&gt;") && !svg.contains("<a>"));
        assert!(svg.contains(&fill(RGBColor(8, 48, 107))), "weight 1 is the darkest blue");
        let half = colour(0.5, Scale::Unit, 1.0);
        assert!(svg.matches(&fill(half)).count() >= 4, "two cells of each panel");
        assert!(svg.contains(">\nlayer 1\n<") && svg.contains(">\nhead 1\n<"));
    }

    #[test]
    fn cells_sit_in_row_major_order_at_their_grid_positions() {
        let panel = Panel {
            title: String::new(),
            rows: vec!["r0".into(), "r1".into()],
            cols: vec!["c0".into(), "c1".into()],
            values: vec![0.0, 0.0, 0.0, 1.0],
        };
        let svg = svg("", &[panel], Scale::Unit, 10.0).unwrap();
        let dark = svg.lines().find(|l| l.contains("<rect") && l.contains(&fill(RGBColor(8, 48, 107)))).unwrap();
        let (x, y) = (LABEL_SPACE + 10, TOP + 10);
        assert!(dark.contains(&format!(r#"x="{x}" y="{y}" width="10" height="10""#)), "{dark}");
    }

    #[test]
    fn signed_values_go_blue_through_white_to_red() {
        assert_eq!(colour(0.0, Scale::Signed, 1.0), RGBColor(255, 255, 255));
        assert_eq!(colour(1.0, Scale::Signed, 1.0), RGBColor(178, 24, 43));
        assert_eq!(colour(-1.0, Scale::Signed, 1.0), RGBColor(33, 102, 172));
        assert_eq!(colour(0.5, Scale::Signed, 2.0), colour(0.25, Scale::Signed, 1.0));
        assert_eq!(token_label(" a\n"), "␣a⏎");
    }
}
