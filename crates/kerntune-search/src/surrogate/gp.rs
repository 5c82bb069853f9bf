//! A Gaussian process over unit-cube coordinates with a Matérn 5/2 kernel.
//!
//! Targets are standardised; the length scale is chosen from a short list by the marginal
//! likelihood at every fit, which is all the tuning a model refitted after each evaluation
//! of a few hundred points can afford, and all a discrete search needs.

/// Variance added to the diagonal: measured kernel times are noisy, and it keeps the
/// Cholesky factorisation stable when two configurations sit close together.
const NOISE: f64 = 1e-3;

#[derive(Debug, Clone)]
pub(crate) struct Gp {
    points: Vec<Vec<f64>>,
    /// Lower-triangular Cholesky factor of the kernel matrix, row-major.
    factor: Vec<f64>,
    /// The kernel matrix's inverse times the standardised targets.
    weights: Vec<f64>,
    length: f64,
    offset: f64,
    scale: f64,
}

fn matern(a: &[f64], b: &[f64], length: f64) -> f64 {
    let distance = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>().sqrt() / length;
    let s = 5f64.sqrt() * distance;
    (1.0 + s + s * s / 3.0) * (-s).exp()
}

/// Cholesky factor of a symmetric positive definite `n × n` matrix; `None` if it is not.
fn cholesky(matrix: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut factor = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let dot: f64 = (0..j).map(|k| factor[i * n + k] * factor[j * n + k]).sum();
            let value = matrix[i * n + j] - dot;
            if i == j {
                if value <= 0.0 {
                    return None;
                }
                factor[i * n + i] = value.sqrt();
            } else {
                factor[i * n + j] = value / factor[j * n + j];
            }
        }
    }
    Some(factor)
}

/// Solves `L x = b` for lower-triangular `L`.
fn forward(factor: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let mut x = vec![0.0; n];
    for i in 0..n {
        let dot: f64 = (0..i).map(|k| factor[i * n + k] * x[k]).sum();
        x[i] = (b[i] - dot) / factor[i * n + i];
    }
    x
}

/// Solves `Lᵀ x = b` for lower-triangular `L`.
fn backward(factor: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let dot: f64 = (i + 1..n).map(|k| factor[k * n + i] * x[k]).sum();
        x[i] = (b[i] - dot) / factor[i * n + i];
    }
    x
}

impl Gp {
    /// Fits the process to `points` and `targets`, with the length scale among `lengths`
    /// that makes the data most likely. `None` only for no data.
    pub(crate) fn fit(points: Vec<Vec<f64>>, targets: &[f64], lengths: &[f64]) -> Option<Gp> {
        let n = targets.len();
        if n == 0 {
            return None;
        }
        let offset = targets.iter().sum::<f64>() / n as f64;
        let spread = (targets.iter().map(|t| (t - offset).powi(2)).sum::<f64>() / n as f64).sqrt();
        let scale = if spread > 1e-12 { spread } else { 1.0 };
        let standard: Vec<f64> = targets.iter().map(|t| (t - offset) / scale).collect();
        let mut best: Option<(f64, Gp)> = None;
        for &length in lengths {
            let mut matrix = vec![0.0; n * n];
            for i in 0..n {
                for j in 0..=i {
                    let k = matern(&points[i], &points[j], length) + if i == j { NOISE } else { 0.0 };
                    matrix[i * n + j] = k;
                    matrix[j * n + i] = k;
                }
            }
            let Some(factor) = cholesky(&matrix, n) else { continue };
            let weights = backward(&factor, n, &forward(&factor, n, &standard));
            let fit: f64 = standard.iter().zip(&weights).map(|(y, w)| y * w).sum();
            let log_det: f64 = (0..n).map(|i| factor[i * n + i].ln()).sum::<f64>() * 2.0;
            let likelihood = -0.5 * fit - 0.5 * log_det;
            if best.as_ref().is_none_or(|(l, _)| likelihood > *l) {
                best = Some((likelihood, Gp { points: Vec::new(), factor, weights, length, offset, scale }));
            }
        }
        best.map(|(_, mut gp)| {
            gp.points = points;
            gp
        })
    }

    /// The length scale the fit chose.
    pub(crate) fn length(&self) -> f64 {
        self.length
    }

    /// Predicted mean and standard deviation of the target at `point`.
    pub(crate) fn predict(&self, point: &[f64]) -> (f64, f64) {
        let n = self.points.len();
        let k: Vec<f64> = self.points.iter().map(|p| matern(p, point, self.length)).collect();
        let mean: f64 = k.iter().zip(&self.weights).map(|(a, b)| a * b).sum();
        let v = forward(&self.factor, n, &k);
        let variance = (1.0 - v.iter().map(|x| x * x).sum::<f64>()).max(0.0);
        (self.offset + self.scale * mean, self.scale * variance.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_its_data_and_is_unsure_far_from_it() {
        let points: Vec<Vec<f64>> = (0..6).map(|i| vec![i as f64 / 10.0]).collect();
        let targets: Vec<f64> = points.iter().map(|p| (6.0 * p[0]).sin()).collect();
        let gp = Gp::fit(points.clone(), &targets, &[0.1, 0.3, 1.0]).expect("fits");
        for (p, t) in points.iter().zip(&targets) {
            let (mean, deviation) = gp.predict(p);
            assert!((mean - t).abs() < 0.05 && deviation < 0.1, "{p:?}: {mean} ± {deviation} for {t}");
        }
        let (near, far) = (gp.predict(&[0.25]).1, gp.predict(&[1.0]).1);
        assert!(far > 2.0 * near, "deviation {far} far from the data, {near} between two points");
    }
}
