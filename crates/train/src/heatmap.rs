//! Heat maps as plain SVG written by hand (as `loss.svg`: no plotting dependency, no font
//! library; opens in any browser): panels side by side, each a grid of coloured cells with
//! labelled rows and columns. Attention weights use a white-to-blue scale over [0, 1]; signed
//! values (positional encodings) a blue-white-red scale over [−m, m].

use std::fmt::Write as _;

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

fn colour(v: f32, scale: Scale, max: f32) -> String {
    let mix = |t: f32, to: (f32, f32, f32)| {
        let t = t.clamp(0.0, 1.0);
        let c = |x: f32| (255.0 + (x - 255.0) * t).round() as u8;
        format!("#{:02x}{:02x}{:02x}", c(to.0), c(to.1), c(to.2))
    };
    match scale {
        Scale::Unit => mix(v, (8.0, 48.0, 107.0)),
        Scale::Signed if v >= 0.0 => mix(v / max.max(1e-12), (178.0, 24.0, 43.0)),
        Scale::Signed => mix(-v / max.max(1e-12), (33.0, 102.0, 172.0)),
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
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

/// The SVG of `panels` side by side under `title`; cells of `cell` pixels (labels every
/// `every`-th row and column when there are many).
pub fn svg(title: &str, panels: &[Panel], scale: Scale, cell: f32) -> String {
    let max = panels.iter().flat_map(|p| &p.values).fold(0.0f32, |m, v| m.max(v.abs()));
    let label_space = 90.0;
    let gap = 30.0;
    let widths: Vec<f32> = panels.iter().map(|p| p.cols.len() as f32 * cell).collect();
    let height = panels.iter().map(|p| p.rows.len()).max().unwrap_or(0) as f32 * cell;
    let total_w = label_space + widths.iter().sum::<f32>() + gap * panels.len() as f32 + 10.0;
    let total_h = 40.0 + height + label_space;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0}" height="{total_h:.0}" font-family="sans-serif" font-size="9">"#
    );
    let _ = writeln!(out, r#"<text x="10" y="16" font-size="13">{}</text>"#, escape(title));
    let mut x0 = label_space;
    for (panel, width) in panels.iter().zip(&widths) {
        let (rows, cols) = (panel.rows.len(), panel.cols.len());
        let every = |n: usize| (n as f32 * 9.0 / (n as f32 * cell)).ceil().max(1.0) as usize;
        let y0 = 40.0;
        let _ =
            writeln!(out, r#"<text x="{x0:.1}" y="{:.1}" font-size="11">{}</text>"#, y0 - 6.0, escape(&panel.title));
        for r in 0..rows {
            for c in 0..cols {
                let v = panel.values[r * cols + c];
                let _ = writeln!(
                    out,
                    r#"<rect x="{:.1}" y="{:.1}" width="{cell:.1}" height="{cell:.1}" fill="{}"><title>{}, {}: {v:.3}</title></rect>"#,
                    x0 + c as f32 * cell,
                    y0 + r as f32 * cell,
                    colour(v, scale, max),
                    escape(&panel.rows[r]),
                    escape(&panel.cols[c]),
                );
            }
        }
        for r in (0..rows).step_by(every(rows)) {
            let y = y0 + (r as f32 + 0.7) * cell;
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{y:.1}" text-anchor="end">{}</text>"#,
                x0 - 3.0,
                escape(&panel.rows[r])
            );
        }
        for c in (0..cols).step_by(every(cols)) {
            let (x, y) = (x0 + (c as f32 + 0.7) * cell, y0 + height + 4.0);
            let _ = writeln!(
                out,
                r#"<text x="{x:.1}" y="{y:.1}" transform="rotate(90 {x:.1} {y:.1})">{}</text>"#,
                escape(&panel.cols[c])
            );
        }
        x0 += width + gap;
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell_is_drawn_with_its_value_and_labels_are_escaped() {
        let panel = Panel {
            title: "head 1".into(),
            rows: vec!["<a>".into(), "b".into()],
            cols: vec!["x".into(), "y".into(), "z".into()],
            values: vec![1.0, 0.0, 0.5, 0.25, 0.25, 0.5],
        };
        let svg = svg("layer 1", &[panel.clone(), panel], Scale::Unit, 10.0);
        assert_eq!(svg.matches("<rect").count(), 12);
        assert!(svg.contains("&lt;a&gt;, x: 1.000") && !svg.contains("<a>"));
        assert!(svg.contains(r##"fill="#08306b""##), "weight 1 is the darkest blue");
        assert!(svg.contains(r##"fill="#ffffff""##), "weight 0 is white");
    }

    #[test]
    fn signed_values_go_blue_through_white_to_red() {
        assert_eq!(colour(0.0, Scale::Signed, 1.0), "#ffffff");
        assert_eq!(colour(1.0, Scale::Signed, 1.0), "#b2182b");
        assert_eq!(colour(-1.0, Scale::Signed, 1.0), "#2166ac");
        assert_eq!(token_label(" a\n"), "␣a⏎");
    }
}
