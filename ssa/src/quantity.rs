//! Resource quantities in the form the API server stores them (apimachinery's
//! `resource.Quantity`): `1000m` is stored as `1`, `0.5Gi` as `512Mi`, `2000` as `2k`;
//! the suffix family (binary, decimal SI, decimal exponent) of the input is kept.

/// The canonical form of `s`, or None when `s` is not a quantity.
pub fn canonical(s: &str) -> Option<String> {
    let (nanos, format) = parse(s.trim())?;
    Some(format_nanos(nanos, format))
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Format {
    Binary,
    DecimalSi,
    DecimalExponent,
}

const DECIMAL: &[(&str, i32)] = &[("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)];
const BINARY: &[(&str, u32)] = &[("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)];

/// The value in units of 10^-9 (rounded up, as the server rounds), and its format.
fn parse(s: &str) -> Option<(i128, Format)> {
    let (neg, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let num_end = body.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(body.len());
    let (num, suffix) = body.split_at(num_end);
    if num.is_empty() || num == "." || num.matches('.').count() > 1 {
        return None;
    }
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return None;
    }
    let mantissa: i128 = if digits.is_empty() { 0 } else { digits.parse().ok()? };
    let frac_len = frac_part.len() as i32;
    // value = mantissa * 10^(exp10 - frac_len) * 2^exp2
    let (exp10, exp2, format) = if let Some(&(_, e)) = DECIMAL.iter().find(|(n, _)| *n == suffix) {
        (e, 0, Format::DecimalSi)
    } else if let Some(&(_, e)) = BINARY.iter().find(|(n, _)| *n == suffix) {
        (0, e, Format::Binary)
    } else if let Some(exp) = suffix.strip_prefix(['e', 'E']) {
        (exp.parse::<i32>().ok().filter(|e| e.abs() <= 30)?, 0, Format::DecimalExponent)
    } else {
        return None;
    };
    let mut scaled = mantissa.checked_mul(1i128.checked_shl(exp2)?)?;
    let shift = exp10 - frac_len + 9;
    if shift >= 0 {
        scaled = scaled.checked_mul(10i128.checked_pow(shift as u32)?)?;
    } else {
        let div = 10i128.checked_pow((-shift) as u32)?;
        scaled = (scaled + div - 1) / div;
    }
    Some((if neg { -scaled } else { scaled }, format))
}

fn format_nanos(nanos: i128, mut format: Format) -> String {
    if nanos == 0 {
        return "0".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.abs();
    const NANO: i128 = 1_000_000_000;
    if format == Format::Binary && (n < 1024 * NANO || n % NANO != 0) {
        format = Format::DecimalSi;
    }
    if format == Format::Binary {
        let int = n / NANO;
        let mut best = (int, "");
        for &(name, e) in BINARY {
            let unit = 1i128 << e;
            if int % unit == 0 {
                best = (int / unit, name);
            }
        }
        return format!("{sign}{}{}", best.0, best.1);
    }
    let mut best = (n, -9);
    for &(_, e) in DECIMAL {
        let unit = 10i128.pow((e + 9) as u32);
        if n % unit == 0 {
            best = (n / unit, e);
        }
    }
    let suffix = match format {
        Format::DecimalExponent if best.1 != 0 => format!("e{}", best.1),
        Format::DecimalExponent => String::new(),
        _ => DECIMAL.iter().find(|(_, e)| *e == best.1).map(|(n, _)| n.to_string()).unwrap_or_default(),
    };
    format!("{sign}{}{suffix}", best.0)
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn the_servers_canonical_forms() {
        for (input, want) in [
            ("1000m", "1"),
            ("100m", "100m"),
            ("0.5", "500m"),
            ("1", "1"),
            ("2000", "2k"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("512", "512"),
            ("1e3", "1e3"),
            ("1.5e3", "1500"),
            ("128974848", "128974848"),
            ("129e6", "129e6"),
            ("123Mi", "123Mi"),
            ("0", "0"),
            ("-1500m", "-1500m"),
            ("1.5", "1500m"),
        ] {
            assert_eq!(canonical(input).as_deref(), Some(want), "{input}");
        }
        assert_eq!(canonical("1x"), None);
        assert_eq!(canonical(""), None);
    }
}
