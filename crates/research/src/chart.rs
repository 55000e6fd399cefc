//! Charts as PNG images: the lines drawn with plotters on an RGB buffer, the labels
//! with the DejaVu Sans font the crate bundles (so a fresh machine needs no system
//! font), encoded with the `png` crate.

// Pixel arithmetic: coordinates are small, checked against the image's bounds.
#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use plotters::prelude::*;

/// DejaVu Sans (Bitstream Vera license, in `assets/DejaVuSans-LICENSE.txt`).
const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

pub const WIDTH: u32 = 800;
pub const HEIGHT: u32 = 400;
const LEFT: u32 = 80;
const RIGHT: u32 = 20;
const TOP: u32 = 40;
const BOTTOM: u32 = 40;

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Line<'a> {
    pub label: &'a str,
    pub points: &'a [(f64, f64)],
    pub color: (u8, u8, u8),
}

/// The font, parsed once per process.
static PARSED: std::sync::LazyLock<Option<FontRef<'static>>> =
    std::sync::LazyLock::new(|| FontRef::try_from_slice(FONT).ok());

/// Draws `text` into an RGB buffer with its top-left corner at (x, y).
fn text(buf: &mut [u8], x: i32, y: i32, size: f32, s: &str, color: (u8, u8, u8)) {
    let Some(font) = PARSED.as_ref() else {
        return;
    };
    let scaled = font.as_scaled(PxScale::from(size));
    let mut caret = x as f32;
    let baseline = y as f32 + scaled.ascent();
    for ch in s.chars() {
        let glyph = scaled.scaled_glyph(ch);
        let advance = scaled.h_advance(glyph.id);
        let glyph = glyph
            .id
            .with_scale_and_position(PxScale::from(size), point(caret, baseline));
        if let Some(outlined) = font.outline_glyph(glyph) {
            let bounds = outlined.px_bounds();
            outlined.draw(|gx, gy, coverage| {
                let px = bounds.min.x as i32 + i32::try_from(gx).unwrap_or(0);
                let py = bounds.min.y as i32 + i32::try_from(gy).unwrap_or(0);
                if px < 0 || py < 0 || px >= WIDTH as i32 || py >= HEIGHT as i32 {
                    return;
                }
                let at = (usize::try_from(py).unwrap_or(0) * WIDTH as usize
                    + usize::try_from(px).unwrap_or(0))
                    * 3;
                for (k, c) in [color.0, color.1, color.2].into_iter().enumerate() {
                    let old = f32::from(buf[at + k]);
                    let new = old + (f32::from(c) - old) * coverage.clamp(0.0, 1.0);
                    buf[at + k] = new.round().clamp(0.0, 255.0) as u8;
                }
            });
        }
        caret += advance;
    }
}

fn label(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A line chart: x is a bar index (labelled with `first` and `last`), y the values.
///
/// # Errors
/// The drawing or the PNG encoding failed (a bug, said as text).
pub fn line_chart(
    title: &str,
    first: &str,
    last: &str,
    lines: &[Line<'_>],
) -> Result<Vec<u8>, String> {
    let mut buf = vec![255u8; (WIDTH * HEIGHT * 3) as usize];
    let (mut xmin, mut xmax, mut ymin, mut ymax) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for l in lines {
        for &(x, y) in l.points {
            if x.is_finite() && y.is_finite() {
                xmin = xmin.min(x);
                xmax = xmax.max(x);
                ymin = ymin.min(y);
                ymax = ymax.max(y);
            }
        }
    }
    if xmin > xmax {
        (xmin, xmax, ymin, ymax) = (0.0, 1.0, 0.0, 1.0);
    }
    if (xmax - xmin).abs() < f64::EPSILON {
        xmax = xmin + 1.0;
    }
    if (ymax - ymin).abs() < f64::EPSILON * ymax.abs().max(1.0) {
        ymin -= 1.0;
        ymax += 1.0;
    }
    let pad = (ymax - ymin) * 0.05;
    let (ylo, yhi) = (ymin - pad, ymax + pad);
    {
        let root = BitMapBackend::with_buffer(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        let plot = root.margin(TOP, BOTTOM, LEFT, RIGHT);
        let mut chart = ChartBuilder::on(&plot)
            .build_cartesian_2d(xmin..xmax, ylo..yhi)
            .map_err(|e| e.to_string())?;
        // Grid: five horizontal lines and the frame.
        let grid = RGBColor(225, 225, 225);
        for k in 0..=4 {
            let y = ylo + (yhi - ylo) * f64::from(k) / 4.0;
            chart
                .draw_series(LineSeries::new([(xmin, y), (xmax, y)], grid))
                .map_err(|e| e.to_string())?;
        }
        for x in [xmin, xmax] {
            chart
                .draw_series(LineSeries::new([(x, ylo), (x, yhi)], grid))
                .map_err(|e| e.to_string())?;
        }
        for l in lines {
            let color = RGBColor(l.color.0, l.color.1, l.color.2);
            chart
                .draw_series(LineSeries::new(
                    l.points
                        .iter()
                        .copied()
                        .filter(|(x, y)| x.is_finite() && y.is_finite()),
                    color.stroke_width(2),
                ))
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    let dark = (40, 40, 40);
    text(&mut buf, LEFT as i32, 10, 18.0, title, dark);
    for k in 0..=4 {
        let v = ylo + (yhi - ylo) * f64::from(k) / 4.0;
        let y = f64::from(TOP) + f64::from(HEIGHT - TOP - BOTTOM) * (1.0 - f64::from(k) / 4.0);
        text(&mut buf, 6, y as i32 - 7, 12.0, &label(v), dark);
    }
    let bottom = (HEIGHT - BOTTOM + 8) as i32;
    // The axis' ends, cut to 30 characters (a time can be long): the last one is set
    // right-aligned at about 7 pixels a character.
    let cut = |s: &str| s.chars().take(30).collect::<String>();
    let (first, last) = (cut(first), cut(last));
    text(&mut buf, LEFT as i32, bottom, 12.0, &first, dark);
    let width = 7 * last.chars().count() as u32;
    text(
        &mut buf,
        (WIDTH - RIGHT).saturating_sub(width) as i32,
        bottom,
        12.0,
        &last,
        dark,
    );
    let mut x = (WIDTH / 2) as i32;
    for l in lines {
        text(
            &mut buf,
            x,
            bottom,
            12.0,
            &format!("— {}", l.label),
            l.color,
        );
        x += 12 + 8 * i32::try_from(l.label.len()).unwrap_or(10);
    }
    encode(&buf)
}

fn encode(rgb: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, WIDTH, HEIGHT);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut writer = enc.write_header().map_err(|e| e.to_string())?;
        writer.write_image_data(rgb).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// An equity chart of `points` from `first` to `last`, checked to be a PNG.
    fn equity(first: &str, last: &str, points: &[(f64, f64)]) -> Vec<u8> {
        let png = line_chart(
            "Equity",
            first,
            last,
            &[Line {
                label: "equity",
                points,
                color: (31, 119, 180),
            }],
        )
        .unwrap();
        assert_eq!(&png[1..4], b"PNG");
        png
    }

    #[test]
    fn a_chart_is_a_png_with_ink_where_the_line_and_the_labels_are() {
        let pts: Vec<(f64, f64)> = (0..50)
            .map(|i| (f64::from(i), 100.0 + f64::from(i)))
            .collect();
        let png = equity("2026-01-01", "2026-02-19", &pts);
        if let Ok(path) = std::env::var("TRADEDESK_CHART_OUT") {
            std::fs::write(path, &png).unwrap();
        }
        let decoder = png::Decoder::new(std::io::Cursor::new(&png));
        let mut reader = decoder.read_info().unwrap();
        let mut img = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut img).unwrap();
        assert_eq!((info.width, info.height), (WIDTH, HEIGHT));
        // The title drew dark pixels in the top band; the line drew blue ones.
        let band = &img[..(WIDTH * 35 * 3) as usize];
        assert!(
            band.chunks(3)
                .any(|p| p[0] < 100 && p[1] < 100 && p[2] < 100)
        );
        assert!(img.chunks(3).any(|p| p == [31, 119, 180]));
    }

    #[test]
    fn axis_labels_of_any_length_are_drawn_without_overflow() {
        let pts = [(0.0, 1.0), (1.0, 2.0)];
        let long = format!("2026-01-01T00:00:00.{}Z", "1".repeat(200));
        for (first, last) in [(long.as_str(), long.as_str()), ("", "")] {
            equity(first, last, &pts);
        }
    }
}
