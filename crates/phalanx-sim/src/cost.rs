//! Per-packet processing costs as a function of packet size, given as
//! measured points (`1500:120,64:90`, nanoseconds) and interpolated.

use core::fmt;

/// A cost curve: time in nanoseconds per packet of `s` bytes, linear
/// between the given points and along the nearest segment beyond them
/// (never below zero). One point means a constant cost.
#[derive(Clone, Debug, PartialEq)]
pub struct CostCurve {
    /// `(size in bytes, nanoseconds)`, ascending by size, sizes distinct.
    points: Vec<(u32, f64)>,
}

/// Why a cost curve was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostError(pub String);

impl fmt::Display for CostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CostError {}

impl CostCurve {
    /// A curve through `points` (any order; at least one; sizes distinct;
    /// costs finite and not negative).
    pub fn new(points: impl IntoIterator<Item = (u32, f64)>) -> Result<CostCurve, CostError> {
        let mut points: Vec<(u32, f64)> = points.into_iter().collect();
        if points.is_empty() {
            return Err(CostError(
                "a cost curve needs at least one size:ns point".into(),
            ));
        }
        if let Some(&(size, ns)) = points.iter().find(|(_, ns)| !ns.is_finite() || *ns < 0.0) {
            return Err(CostError(format!(
                "cost {ns} ns at {size} B is not a duration"
            )));
        }
        points.sort_by_key(|&(size, _)| size);
        if let Some(pair) = points.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(CostError(format!("size {} B given twice", pair[0].0)));
        }
        Ok(CostCurve { points })
    }

    /// The same cost `ns` for every size (0 when `ns` is not a duration).
    pub fn constant(ns: f64) -> CostCurve {
        let ns = if ns.is_finite() { ns.max(0.0) } else { 0.0 };
        CostCurve {
            points: vec![(0, ns)],
        }
    }

    /// The cost of one packet of `size` bytes, in nanoseconds.
    pub fn at(&self, size: u32) -> f64 {
        let segment = match self.points.len() {
            0 => return 0.0,
            1 => return self.points[0].1,
            len => {
                let above = self.points.partition_point(|&(s, _)| s < size);
                let lower = above.clamp(1, len - 1) - 1;
                (self.points[lower], self.points[lower + 1])
            }
        };
        let ((s0, c0), (s1, c1)) = segment;
        let slope = (c1 - c0) / (f64::from(s1) - f64::from(s0));
        (c0 + slope * (f64::from(size) - f64::from(s0))).max(0.0)
    }

    /// The points, ascending by size.
    pub fn points(&self) -> &[(u32, f64)] {
        &self.points
    }
}

impl core::str::FromStr for CostCurve {
    type Err = CostError;

    /// `size:ns[,size:ns...]`, e.g. `1500:120,64:90`.
    fn from_str(text: &str) -> Result<CostCurve, CostError> {
        let point = |item: &str| -> Result<(u32, f64), CostError> {
            let bad = || CostError(format!("`{item}` is not size:ns (e.g. 1500:120)"));
            let (size, ns) = item.trim().split_once(':').ok_or_else(bad)?;
            Ok((
                size.parse().map_err(|_| bad())?,
                ns.parse().map_err(|_| bad())?,
            ))
        };
        CostCurve::new(text.split(',').map(point).collect::<Result<Vec<_>, _>>()?)
    }
}

impl fmt::Display for CostCurve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (size, ns)) in self.points.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(f, "{sep}{size}:{ns}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(text: &str) -> CostCurve {
        match text.parse() {
            Ok(curve) => curve,
            Err(err) => panic!("{text}: {err}"),
        }
    }

    #[test]
    fn one_point_is_constant() {
        let c = curve("1500:120");
        assert_eq!(c.at(64), 120.0);
        assert_eq!(c.at(9000), 120.0);
    }

    #[test]
    fn interpolates_and_extrapolates_linearly() {
        let c = curve("1500:1400,64:300");
        assert_eq!(c.at(64), 300.0);
        assert_eq!(c.at(1500), 1400.0);
        let mid = c.at(782); // halfway in size
        assert!((mid - 850.0).abs() < 1e-9, "{mid}");
        assert!(c.at(3000) > 1400.0);
        assert_eq!(curve("64:10,1500:1000").at(0), 0.0); // clamped at zero
        let three = curve("64:100,512:200,1500:300");
        assert!((three.at(288) - 150.0).abs() < 1e-9);
        assert!((three.at(1006) - 250.0).abs() < 1e-9);
    }

    #[test]
    fn refuses_malformed_curves() {
        for bad in [
            "",
            "1500",
            "1500:",
            "a:1",
            "1500:-1",
            "64:1,64:2",
            "1500:nan",
        ] {
            assert!(bad.parse::<CostCurve>().is_err(), "{bad}");
        }
        assert_eq!(curve("1500:120,64:90").to_string(), "64:90,1500:120");
    }
}
