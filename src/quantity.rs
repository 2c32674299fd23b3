//! Kubernetes resource quantities ("64", "250m", "256Gi", "1.5", "2e3"): parsed into
//! milli-units so CPU, memory and pods add up exactly, and printed back canonically.

/// A quantity in thousandths of its unit (millicores for CPU, millibytes for memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Milli(pub i128);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {0:?}")]
pub struct InvalidQuantity(pub String);

const BINARY: &[(&str, u32)] = &[
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];
const DECIMAL: &[(&str, i32)] = &[
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

pub fn parse(s: &str) -> Result<Milli, InvalidQuantity> {
    let bad = || InvalidQuantity(s.to_string());
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    if num.is_empty() {
        return Err(bad());
    }
    // Exact decimal: digits scaled to thousandths, then by the suffix.
    let negative = num.starts_with('-');
    let digits = num.trim_start_matches(['-', '+']);
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty()
        || !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit())
    {
        return Err(bad());
    }
    // value = mantissa * 10^(-frac_len)
    let mantissa: i128 = format!("{int}{frac}").parse().map_err(|_| bad())?;
    let mut exp10: i32 = -(frac.len() as i32) + 3; // to milli-units
    let mut mult: i128 = 1;
    if let Some((_, bits)) = BINARY.iter().find(|(suf, _)| *suf == suffix) {
        mult = 1i128 << bits;
    } else if let Some((_, e)) = DECIMAL.iter().find(|(suf, _)| *suf == suffix) {
        exp10 += e;
    } else if let Some(e) = suffix.strip_prefix(['e', 'E']) {
        exp10 += e.parse::<i32>().map_err(|_| bad())?;
    } else if !suffix.is_empty() {
        return Err(bad());
    }
    let scaled = mantissa.checked_mul(mult).ok_or_else(bad)?;
    let value = if exp10 >= 0 {
        scaled
            .checked_mul(10i128.checked_pow(exp10 as u32).ok_or_else(bad)?)
            .ok_or_else(bad)?
    } else {
        // Below a milli-unit: round up, as Kubernetes does for CPU requests.
        let d = 10i128.checked_pow((-exp10) as u32).ok_or_else(bad)?;
        (scaled + d - 1) / d
    };
    Ok(Milli(if negative { -value } else { value }))
}

impl Milli {
    /// CPU-style: whole units when exact, else millis ("64", "12500m").
    pub fn to_decimal(self) -> String {
        if self.0 % 1000 == 0 {
            (self.0 / 1000).to_string()
        } else {
            format!("{}m", self.0)
        }
    }

    /// Memory-style: the largest binary suffix that is exact ("256Gi", "40960Mi").
    pub fn to_binary(self) -> String {
        if self.0 % 1000 != 0 {
            return self.to_decimal();
        }
        let units = self.0 / 1000;
        if units == 0 {
            return "0".into();
        }
        for (suffix, bits) in BINARY.iter().rev() {
            let m = 1i128 << bits;
            if units % m == 0 {
                return format!("{}{suffix}", units / m);
            }
        }
        units.to_string()
    }
}

impl std::ops::Add for Milli {
    type Output = Milli;
    fn add(self, o: Milli) -> Milli {
        Milli(self.0.saturating_add(o.0))
    }
}

impl std::iter::Sum for Milli {
    fn sum<I: Iterator<Item = Milli>>(iter: I) -> Milli {
        iter.fold(Milli(0), |a, b| a + b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_clusters_report() {
        assert_eq!(parse("64").expect("ok"), Milli(64_000));
        assert_eq!(parse("250m").expect("ok"), Milli(250));
        assert_eq!(parse("1.5").expect("ok"), Milli(1500));
        assert_eq!(parse("256Gi").expect("ok"), Milli(256 * (1 << 30) * 1000));
        assert_eq!(parse("2k").expect("ok"), Milli(2_000_000));
        assert_eq!(parse("1e3").expect("ok"), Milli(1_000_000));
        assert_eq!(
            parse("100n").expect("ok"),
            Milli(1),
            "rounds up below a milli-unit"
        );
        for bad in ["", "abc", "12Q", "1.2.3", "Gi"] {
            assert!(parse(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn sums_print_canonically() {
        let cpu: Milli = ["48", "12500m", "500m"]
            .iter()
            .map(|q| parse(q).expect("ok"))
            .sum();
        assert_eq!(cpu.to_decimal(), "61");
        let mem: Milli = ["192Gi", "64Gi", "512Mi"]
            .iter()
            .map(|q| parse(q).expect("ok"))
            .sum();
        assert_eq!(mem.to_binary(), "262656Mi");
        assert_eq!(parse("1Gi").expect("ok").to_binary(), "1Gi");
        assert_eq!(Milli(0).to_binary(), "0");
    }
}
