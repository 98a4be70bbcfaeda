//! The figures of a benchmark: every value measured per run, by scenario, comparator and
//! name, and the summaries the report prints (median, min–max, percentiles).

/// One figure and its value in every run, in run order.
#[derive(Clone, Debug)]
pub struct Figure {
    pub scenario: &'static str,
    pub comparator: String,
    pub name: String,
    pub unit: &'static str,
    pub runs: Vec<f64>,
}

impl Figure {
    pub fn median(&self) -> f64 {
        median(&self.runs)
    }

    pub fn min(&self) -> f64 {
        self.runs.iter().copied().fold(f64::INFINITY, f64::min)
    }

    pub fn max(&self) -> f64 {
        self.runs.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    }
}

/// Every figure, in the order they were first recorded.
#[derive(Default, Debug)]
pub struct Figures {
    pub list: Vec<Figure>,
}

impl Figures {
    /// Appends this run's value of a figure.
    pub fn push(
        &mut self,
        scenario: &'static str,
        comparator: &str,
        name: &str,
        unit: &'static str,
        value: f64,
    ) {
        let found = self
            .list
            .iter_mut()
            .find(|f| f.scenario == scenario && f.comparator == comparator && f.name == name);
        match found {
            Some(f) => f.runs.push(value),
            None => self.list.push(Figure {
                scenario,
                comparator: comparator.to_string(),
                name: name.to_string(),
                unit,
                runs: vec![value],
            }),
        }
    }

    pub fn get(&self, scenario: &str, comparator: &str, name: &str) -> Option<&Figure> {
        self.list
            .iter()
            .find(|f| f.scenario == scenario && f.comparator == comparator && f.name == name)
    }
}

/// The median of `values` (mean of the middle two for an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// The `q` quantile (0..=1) of sorted values, nearest rank; NaN when empty.
pub fn quantile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64
}

/// Least-squares slope of `(x, y)` points; 0 with fewer than two.
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}
