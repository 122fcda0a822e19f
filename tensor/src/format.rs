//! NumPy-like printing of tensors (`impl Display for Tensor`).
//!
//! This follows NumPy's default `str()` of a `float32` array: the shortest
//! digits that identify each value, at most 8 after the point; integer
//! values as `1.`; one width for every element; scientific notation when
//! the non-zero magnitudes span more than 1000x or leave `[1e-4, 1e6)`;
//! lines wrapped at 75 characters; and arrays of more than 1000 elements
//! summarised with `...` around 3 edge items per axis. A 0-d tensor prints
//! like a NumPy `float32` scalar (`3.5`, `1.0`, `1e-05`).

use std::fmt;

use super::Tensor;

const PRECISION: usize = 8;
const LINE_WIDTH: usize = 75;
const THRESHOLD: usize = 1000;
const EDGE_ITEMS: usize = 3;

/// A value for an error message: Rust's shortest digits, lowercase
/// `nan`/`inf`.
pub(crate) fn plain(v: f32) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v < 0.0 { "-inf" } else { "inf" }.into()
    } else {
        v.to_string()
    }
}

/// `v`'s shortest positional digits that identify it, a tie between two as short broken
/// half to even as NumPy does (433975.625 is `433975.62`; Rust's shortest digits say `.63`).
fn shortest_positional(v: f32) -> String {
    let shortest = v.to_string();
    match shortest.split_once('.') {
        // The exact value rounded to as many digits is the nearest of them: the shortest digits
        // themselves, but where two are equally near.
        Some((_, frac)) => format!("{:.*}", frac.len(), f64::from(v)),
        None => shortest,
    }
}

/// `v`'s shortest scientific digits, a tie broken as [`shortest_positional`] breaks it.
fn shortest_scientific(v: f32) -> String {
    let shortest = format!("{v:e}");
    match shortest
        .split_once('e')
        .and_then(|(m, _)| m.split_once('.'))
    {
        Some((_, frac)) => format!("{:.*e}", frac.len(), f64::from(v)),
        None => shortest,
    }
}

/// Splits `v`'s shortest positional digits into integer and fraction
/// parts, keeping at most [`PRECISION`] fraction digits (rounded).
fn positional_parts(v: f32) -> (String, String) {
    let mut s = shortest_positional(v);
    if s.split_once('.').is_some_and(|(_, f)| f.len() > PRECISION) {
        s = format!("{v:.PRECISION$}");
        while s.ends_with('0') {
            s.pop();
        }
    }
    match s.split_once('.') {
        Some((i, f)) => (i.to_string(), f.to_string()),
        None => (s, String::new()),
    }
}

/// Splits `v`'s shortest scientific digits into mantissa integer part,
/// mantissa fraction digits and the exponent.
fn scientific_parts(v: f32) -> (String, String, i32) {
    let mut s = shortest_scientific(v);
    if s.split_once('e')
        .and_then(|(m, _)| m.split_once('.'))
        .is_some_and(|(_, f)| f.len() > PRECISION)
    {
        s = format!("{v:.PRECISION$e}");
    }
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let frac = frac.trim_end_matches('0');
    (int.to_string(), frac.to_string(), exp)
}

/// `v`'s scientific digits with `precision` fraction digits, as NumPy prints an element of an
/// array whose longest shortest mantissa has that many (no element has more): the value's own
/// digits to that length, rounded half to even, never zeros added (`1e-05` beside
/// `3.3333334e-01` is `9.9999997e-06`, the float32 nearest 1e-5; 2818778.25 is
/// `2.8187782e+06`).
fn scientific_parts_with(v: f32, precision: usize) -> (String, String, i32) {
    // Exact: a float32 is an f64, whose formatting rounds its exact value.
    let s = format!("{:.precision$e}", f64::from(v));
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    (int.to_string(), frac.to_string(), exp)
}

fn exponent(exp: i32, digits: usize) -> String {
    let sign = if exp < 0 { '-' } else { '+' };
    format!("e{sign}{:0digits$}", exp.unsigned_abs())
}

/// How a NumPy `float32` scalar prints: positional for 0 and magnitudes in
/// `[1e-4, 1e6)` (NumPy 2.3's cutoffs for `float32`), keeping one zero after
/// the point (`1.0`); scientific otherwise, without a bare point (`1e-05`).
pub fn format_scalar(v: f32) -> String {
    if !v.is_finite() {
        return plain(v);
    }
    // Compared as NumPy's scalar printing compares, in double precision: the float32 nearest
    // 1e-4 is below 1e-4 (`1e-04`).
    let a = f64::from(v.abs());
    if a == 0.0 || (1e-4..1e6).contains(&a) {
        let (int, frac) = positional_parts_unbounded(v);
        let frac = if frac.is_empty() {
            "0".to_string()
        } else {
            frac
        };
        format!("{int}.{frac}")
    } else {
        let (int, frac, exp) = scientific_parts(v);
        let exp = exponent(exp, 2);
        if frac.is_empty() {
            format!("{int}{exp}")
        } else {
            format!("{int}.{frac}{exp}")
        }
    }
}

/// A number as a sentence shows it (`print "bubble", b`): a whole number without a point
/// (`30`, `2359296`), others to three significant digits and at least one decimal (`0.333`,
/// `-1.85`, `123.5`), scientific below 0.001 or from 10^16 (`1.23e-05`); trailing zeros
/// dropped. Exact digits are what `print X` alone shows ([`format_scalar`]).
pub fn format_for_reading(v: f32) -> String {
    if !v.is_finite() {
        return plain(v);
    }
    let a = f64::from(v.abs());
    if a >= 1e16 || (a > 0.0 && a < 1e-3) {
        let s = format!("{:.2e}", f64::from(v));
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
        let exp: i32 = exp.parse().unwrap_or(0);
        return format!("{mantissa}{}", exponent(exp, 2));
    }
    if v == 0.0 {
        // Also -0.0: a student reads 0.
        return "0".to_string();
    }
    if v.fract() == 0.0 {
        return format!("{v:.0}");
    }
    let int_digits = if a < 1.0 {
        0
    } else {
        a.log10().floor() as usize + 1
    };
    let decimals = if a < 1.0 {
        // Three significant digits after the leading zeros: 0.0123.
        (2 - a.log10().floor() as i64) as usize
    } else {
        3usize.saturating_sub(int_digits).max(1)
    };
    let s = format!("{:.*}", decimals, f64::from(v));
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// Like [`positional_parts`] but without the precision cut (scalars print
/// every digit needed to identify them).
fn positional_parts_unbounded(v: f32) -> (String, String) {
    let s = shortest_positional(v);
    match s.split_once('.') {
        Some((i, f)) => (i.to_string(), f.to_string()),
        None => (s, String::new()),
    }
}

/// The layout shared by every element of one printed array.
struct FloatFormat {
    scientific: bool,
    /// Fraction digits of every mantissa (scientific mode).
    precision: usize,
    /// Characters left of the point.
    pad_left: usize,
    /// Characters right of the point (positional), or the width of the
    /// fraction and exponent (scientific; used to size `nan`/`inf`).
    pad_right: usize,
    /// Exponent digits (scientific mode).
    exp_digits: usize,
}

impl FloatFormat {
    /// Chooses the layout from the values that will be shown.
    fn new(values: &[f32]) -> FloatFormat {
        let finite: Vec<f32> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let mut scientific = false;
        let non_zero = finite.iter().map(|v| v.abs()).filter(|&a| a != 0.0);
        let (mut lo, mut hi) = (f32::INFINITY, 0.0f32);
        for a in non_zero {
            lo = lo.min(a);
            hi = hi.max(a);
        }
        // NumPy's cutoff for a `float32` array: 10 to the power of its 6 decimal digits.
        if hi > 0.0 && (hi >= 1e6 || lo < 1e-4 || hi / lo > 1000.0) {
            scientific = true;
        }
        let mut f = FloatFormat {
            scientific,
            precision: 0,
            pad_left: 0,
            pad_right: 0,
            exp_digits: 0,
        };
        if finite.is_empty() {
            f.scientific = false;
        } else if scientific {
            for &v in &finite {
                let (int, frac, exp) = scientific_parts(v);
                f.pad_left = f.pad_left.max(int.len());
                f.precision = f.precision.max(frac.len());
                f.exp_digits = f
                    .exp_digits
                    .max(exp.unsigned_abs().to_string().len().max(2));
            }
            f.pad_right = f.exp_digits + 2 + f.precision;
        } else {
            for &v in &finite {
                let (int, frac) = positional_parts(v);
                f.pad_left = f.pad_left.max(int.len());
                f.pad_right = f.pad_right.max(frac.len());
            }
        }
        if finite.len() != values.len() {
            let neg_inf = values.contains(&f32::NEG_INFINITY);
            let offset = f.pad_right + 1;
            let inf_len = 3 + usize::from(neg_inf);
            f.pad_left = f.pad_left.max(3usize.saturating_sub(offset));
            f.pad_left = f.pad_left.max(inf_len.saturating_sub(offset));
        }
        f
    }

    /// One element, padded to the common width.
    fn format(&self, v: f32) -> String {
        if !v.is_finite() {
            let width = self.pad_left + self.pad_right + 1;
            return format!("{:>width$}", plain(v));
        }
        let pl = self.pad_left;
        if self.scientific {
            let prec = self.precision;
            let (int, frac, exp) = scientific_parts_with(v, prec);
            format!(
                "{int:>pl$}.{frac:0<prec$}{}",
                exponent(exp, self.exp_digits)
            )
        } else {
            let (int, frac) = positional_parts(v);
            let pr = self.pad_right;
            format!("{int:>pl$}.{frac:<pr$}")
        }
    }
}

/// The positions shown along an axis of length `n`: all of them, or the
/// first and last [`EDGE_ITEMS`] when summarising.
fn shown(n: usize, summarise: bool) -> Vec<usize> {
    if summarise && n > 2 * EDGE_ITEMS {
        (0..EDGE_ITEMS).chain(n - EDGE_ITEMS..n).collect()
    } else {
        (0..n).collect()
    }
}

/// Prints one tensor, mirroring NumPy's `_formatArray`.
struct Printer<'a> {
    data: &'a [f32],
    shape: &'a [usize],
    strides: Vec<usize>,
    summarise: bool,
    format: FloatFormat,
}

impl Printer<'_> {
    fn collect_shown(&self, axis: usize, offset: usize, out: &mut Vec<f32>) {
        if axis == self.shape.len() {
            out.push(self.data[offset]);
            return;
        }
        for i in shown(self.shape[axis], self.summarise) {
            self.collect_shown(axis + 1, offset + i * self.strides[axis], out);
        }
    }

    /// Appends `word` to `line`, first moving `line` into `s` if the word
    /// would pass `width` (and wrapping would help).
    fn extend_line(s: &mut String, line: &mut String, word: &str, width: usize, hanging: &str) {
        let needs_wrap = line.len() + word.len() > width && line.len() > hanging.len();
        if needs_wrap {
            s.push_str(line.trim_end());
            s.push('\n');
            line.clear();
            line.push_str(hanging);
        }
        line.push_str(word);
    }

    fn recurse(&self, axis: usize, offset: usize, hanging: &str, width: usize) -> String {
        if axis == self.shape.len() {
            return self.format.format(self.data[offset]);
        }
        let next_hanging = format!("{hanging} ");
        let next_width = width.saturating_sub(1);
        let n = self.shape[axis];
        let stride = self.strides[axis];
        let summary = self.summarise && 2 * EDGE_ITEMS < n;
        let (leading, trailing) = if summary {
            (EDGE_ITEMS, EDGE_ITEMS)
        } else {
            (0, n)
        };
        let child =
            |i: usize| self.recurse(axis + 1, offset + i * stride, &next_hanging, next_width);
        let mut s = String::new();
        if axis + 1 == self.shape.len() {
            let elem_width = width.saturating_sub(1);
            let mut line = hanging.to_string();
            for i in 0..leading {
                Self::extend_line(&mut s, &mut line, &child(i), elem_width, hanging);
                line.push(' ');
            }
            if summary {
                Self::extend_line(&mut s, &mut line, "...", elem_width, hanging);
                line.push(' ');
            }
            for i in (2..=trailing).rev() {
                Self::extend_line(&mut s, &mut line, &child(n - i), elem_width, hanging);
                line.push(' ');
            }
            Self::extend_line(&mut s, &mut line, &child(n - 1), elem_width, hanging);
            s.push_str(&line);
        } else {
            let line_sep = "\n".repeat(self.shape.len() - axis - 1);
            for i in 0..leading {
                s.push_str(hanging);
                s.push_str(&child(i));
                s.push_str(&line_sep);
            }
            if summary {
                s.push_str(hanging);
                s.push_str("...");
                s.push_str(&line_sep);
            }
            for i in (2..=trailing).rev() {
                s.push_str(hanging);
                s.push_str(&child(n - i));
                s.push_str(&line_sep);
            }
            s.push_str(hanging);
            s.push_str(&child(n - 1));
        }
        format!("[{}]", &s[hanging.len()..])
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ndim() == 0 {
            return f.write_str(&format_scalar(self.data()[0]));
        }
        if self.is_empty() {
            return f.write_str("[]");
        }
        let mut p = Printer {
            data: self.data(),
            shape: self.shape(),
            strides: super::shape::strides(self.shape()),
            summarise: self.len() > THRESHOLD,
            format: FloatFormat::new(&[]),
        };
        let mut values = Vec::new();
        if p.summarise {
            p.collect_shown(0, 0, &mut values);
            p.format = FloatFormat::new(&values);
        } else {
            p.format = FloatFormat::new(self.data());
        }
        f.write_str(&p.recurse(0, 0, " ", LINE_WIDTH))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn numbers_in_a_sentence_read_as_a_student_expects() {
        let cases = [
            (1.0, "1"),
            (30.0, "30"),
            (-4.0, "-4"),
            (0.0, "0"),
            (-0.0, "0"),
            (-0.0004, "-4e-04"),
            (0.9996, "1"),
            (2359296.0, "2359296"),
            (1.0 / 3.0, "0.333"),
            (2.0 / 3.0, "0.667"),
            (0.75, "0.75"),
            (0.2, "0.2"),
            (0.140994, "0.141"),
            (-1.8470602, "-1.85"),
            (19.26, "19.3"),
            (123.456, "123.5"),
            (0.0123456, "0.0123"),
            (0.00001234, "1.23e-05"),
            (-0.0000001, "-1e-07"),
            (3e20, "3e+20"),
            (f32::NAN, "nan"),
            (f32::NEG_INFINITY, "-inf"),
        ];
        for (value, shown) in cases {
            assert_eq!(format_for_reading(value), shown, "{value}");
        }
    }
    use super::*;
    use expect_test::{expect, Expect};

    fn t(shape: &[usize], data: &[f32]) -> Tensor {
        Tensor::from_vec(shape.to_vec(), data.to_vec()).unwrap()
    }

    fn check(x: &Tensor, want: Expect) {
        want.assert_eq(&x.to_string());
    }

    fn range(n: usize) -> Vec<f32> {
        (0..n).map(|i| i as f32).collect()
    }

    #[test]
    fn matrices_and_vectors() {
        check(
            &t(&[2, 2], &[1., 2., 3., 4.]),
            expect![[r#"
            [[1. 2.]
             [3. 4.]]"#]],
        );
        check(&t(&[3], &[0.1, 2.5, -3.]), expect!["[ 0.1  2.5 -3. ]"]);
        check(&t(&[2], &[1., 1. / 3.]), expect!["[1.         0.33333334]"]);
        check(&t(&[0], &[]), expect!["[]"]);
        check(&t(&[2, 0], &[]), expect!["[]"]);
        check(&t(&[1], &[-0.0]), expect!["[-0.]"]);
    }

    #[test]
    fn three_dimensions_have_blank_lines() {
        check(
            &t(&[2, 2, 2], &range(8)),
            expect![[r#"
            [[[0. 1.]
              [2. 3.]]

             [[4. 5.]
              [6. 7.]]]"#]],
        );
    }

    #[test]
    fn scalars_print_like_numpy_scalars() {
        let s = |v: f32| Tensor::scalar(v).to_string();
        assert_eq!(s(3.5), "3.5");
        assert_eq!(s(1.0), "1.0");
        assert_eq!(s(-0.0), "-0.0");
        assert_eq!(s(1.0 / 3.0), "0.33333334");
        assert_eq!(s(1e-5), "1e-05");
        assert_eq!(s(1.5e10), "1.5e+10");
        assert_eq!(s(999999.0), "999999.0");
        assert_eq!(s(-1e6), "-1e+06");
        assert_eq!(s(f32::NAN), "nan");
        assert_eq!(s(f32::NEG_INFINITY), "-inf");
        // The float32 nearest 1e-4 is below 1e-4, as NumPy compares.
        assert_eq!(s(1e-4), "1e-04");
        // Two shortest digits as near: the even one, as NumPy's (433975.625, exact in f32).
        assert_eq!(s(433_975.5 + 0.125), "433975.62");
    }

    /// As NumPy 2.4 prints these float32 arrays (checked against `str(np.array(..., dtype=np.float32))`).
    #[test]
    fn arrays_print_numpys_digits() {
        // A shorter mantissa beside a longer one shows the value's own digits, not zeros.
        check(
            &t(&[2], &[1.0 / 3.0, 1e-5]),
            expect!["[3.3333334e-01 9.9999997e-06]"],
        );
        // Scientific from 1e6 on, the cutoff of a float32 array.
        check(&t(&[1], &[1000000.1]), expect!["[1.0000001e+06]"]);
        check(&t(&[1], &[999999.5]), expect!["[999999.5]"]);
        // Ties broken half to even.
        check(
            &t(&[2], &[2_818_778.0 + 0.25, 1.5e6]),
            expect!["[2.8187782e+06 1.5000000e+06]"],
        );
        check(&t(&[1], &[433_975.5 + 0.125]), expect!["[433975.62]"]);
    }

    #[test]
    fn scientific_when_magnitudes_differ() {
        check(&t(&[2], &[1e-5, 1.0]), expect!["[1.e-05 1.e+00]"]);
        check(&t(&[2], &[1.5e-5, 1.0]), expect!["[1.5e-05 1.0e+00]"]);
        check(
            &t(&[3], &[0.0, -2e9, 1.0]),
            expect!["[ 0.e+00 -2.e+09  1.e+00]"],
        );
        check(&t(&[2], &[1e-5, f32::NAN]), expect!["[1.e-05    nan]"]);
    }

    #[test]
    fn non_finite_values() {
        check(
            &t(&[3], &[f32::NAN, 1.0, f32::NEG_INFINITY]),
            expect!["[ nan   1. -inf]"],
        );
        check(&t(&[2], &[f32::NAN, f32::INFINITY]), expect!["[nan inf]"]);
        check(&t(&[2], &[0.5, f32::INFINITY]), expect!["[0.5 inf]"]);
    }

    #[test]
    fn long_rows_wrap_at_75_columns() {
        check(
            &t(&[30], &range(30)),
            expect![[r#"
            [ 0.  1.  2.  3.  4.  5.  6.  7.  8.  9. 10. 11. 12. 13. 14. 15. 16. 17.
             18. 19. 20. 21. 22. 23. 24. 25. 26. 27. 28. 29.]"#]],
        );
    }

    #[test]
    fn large_tensors_are_summarised() {
        check(
            &t(&[1001], &range(1001)),
            expect![[r#"
            [   0.    1.    2. ...  998.  999. 1000.]"#]],
        );
        check(
            &t(&[2000], &range(2000)),
            expect![[r#"
            [0.000e+00 1.000e+00 2.000e+00 ... 1.997e+03 1.998e+03 1.999e+03]"#]],
        );
        check(
            &t(&[1001, 2], &range(2002)),
            expect![[r#"
            [[0.000e+00 1.000e+00]
             [2.000e+00 3.000e+00]
             [4.000e+00 5.000e+00]
             ...
             [1.996e+03 1.997e+03]
             [1.998e+03 1.999e+03]
             [2.000e+03 2.001e+03]]"#]],
        );
    }

    #[test]
    fn precision_is_capped_at_eight_digits() {
        check(
            &t(&[2], &[0.00012345679, 0.1]),
            expect!["[0.00012346 0.1       ]"],
        );
        check(
            &t(&[2], &[12345.678, 1.0]),
            expect!["[1.2345678e+04 1.0000000e+00]"],
        );
        check(&t(&[2], &[123.456, 1.0]), expect!["[123.456   1.   ]"]);
    }

    #[test]
    fn plain_values_for_messages() {
        assert_eq!(plain(3.0), "3");
        assert_eq!(plain(1.5), "1.5");
        assert_eq!(plain(f32::NAN), "nan");
        assert_eq!(plain(f32::NEG_INFINITY), "-inf");
    }
}
