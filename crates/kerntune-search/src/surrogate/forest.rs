//! A random forest of regression trees over value indexes.
//!
//! Features are the value indexes of a configuration, one per parameter: parameter values
//! are listed in order (block sizes, unroll factors), so a split `index <= t` is a split on
//! the value, and no scaling is needed. Because an index takes few distinct values, a
//! split is found by counting into one bucket per value instead of sorting: a forest over a
//! few hundred observations fits in a millisecond or two, cheap enough to refit after
//! every evaluation. The spread of the trees' predictions is the model's uncertainty.

use kerntune_space::Rng;

/// How a forest is grown.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ForestShape {
    pub trees: usize,
    /// Observations a leaf holds at least.
    pub min_leaf: usize,
    /// Share of the features considered at each split (at least one).
    pub feature_fraction: f64,
}

#[derive(Debug, Clone, Copy)]
enum Node {
    /// Observations with `features[feature] <= threshold` go to `left`, others to `left + 1`.
    Split { feature: u32, threshold: u32, left: u32 },
    /// The mean of the leaf's observations and their variance.
    Leaf { value: f64, variance: f64 },
}

#[derive(Debug, Clone)]
struct Tree {
    nodes: Vec<Node>,
}

impl Tree {
    fn predict(&self, features: &[u32]) -> (f64, f64) {
        let mut index = 0;
        loop {
            match self.nodes[index] {
                Node::Leaf { value, variance } => return (value, variance),
                Node::Split { feature, threshold, left } => {
                    index = left as usize + usize::from(features[feature as usize] > threshold);
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Forest {
    trees: Vec<Tree>,
}

/// The training set shared by the trees of one fit.
struct Training<'a> {
    /// Feature-major: `columns[f][r]` is feature `f` of observation `r`, so a split search
    /// reads one contiguous column.
    columns: Vec<Vec<u32>>,
    targets: &'a [f64],
    /// Distinct values of each feature (its parameter's value count).
    cardinality: &'a [usize],
    shape: ForestShape,
}

impl Forest {
    /// Fits a forest to `features` (one row per observation) and `targets`;
    /// `cardinality[f]` bounds the values of feature `f`.
    pub(crate) fn fit(
        features: &[Vec<u32>],
        targets: &[f64],
        cardinality: &[usize],
        shape: ForestShape,
        rng: &mut Rng,
    ) -> Forest {
        let columns = (0..cardinality.len()).map(|f| features.iter().map(|row| row[f]).collect()).collect();
        let training = Training { columns, targets, cardinality, shape };
        let count = targets.len();
        let trees = (0..shape.trees.max(1))
            .map(|_| {
                let sample: Vec<usize> = (0..count).map(|_| rng.below(count.max(1))).collect();
                let mut tree = Tree { nodes: vec![Node::Leaf { value: 0.0, variance: 0.0 }] };
                if count > 0 {
                    training.grow(&mut tree, 0, sample, rng);
                }
                tree
            })
            .collect();
        Forest { trees }
    }

    /// The mean of the trees' predictions and a standard deviation that counts both how
    /// much the trees disagree and how spread the observations in their leaves are (the
    /// law of total variance): a region of scattered outcomes is uncertain even where
    /// every tree agrees on its mean, and such a region is where a fast outlier hides.
    pub(crate) fn predict(&self, features: &[u32]) -> (f64, f64) {
        let count = self.trees.len() as f64;
        let predictions: Vec<(f64, f64)> = self.trees.iter().map(|tree| tree.predict(features)).collect();
        let mean = predictions.iter().map(|p| p.0).sum::<f64>() / count;
        let between = predictions.iter().map(|p| (p.0 - mean).powi(2)).sum::<f64>() / count;
        let within = predictions.iter().map(|p| p.1).sum::<f64>() / count;
        (mean, (between + within).sqrt())
    }
}

impl Training<'_> {
    /// Grows the subtree of `tree.nodes[node]` over the observations in `rows`.
    fn grow(&self, tree: &mut Tree, node: usize, rows: Vec<usize>, rng: &mut Rng) {
        let mean = rows.iter().map(|r| self.targets[*r]).sum::<f64>() / rows.len() as f64;
        let variance = rows.iter().map(|r| (self.targets[*r] - mean).powi(2)).sum::<f64>() / rows.len() as f64;
        tree.nodes[node] = Node::Leaf { value: mean, variance };
        if rows.len() < 2 * self.shape.min_leaf.max(1) {
            return;
        }
        let Some((feature, threshold)) = self.best_split(&rows, rng) else { return };
        let (left_rows, right_rows): (Vec<usize>, Vec<usize>) =
            rows.into_iter().partition(|r| self.columns[feature][*r] <= threshold);
        let left = tree.nodes.len();
        tree.nodes.push(Node::Leaf { value: mean, variance });
        tree.nodes.push(Node::Leaf { value: mean, variance });
        tree.nodes[node] = Node::Split { feature: feature as u32, threshold, left: left as u32 };
        self.grow(tree, left, left_rows, rng);
        self.grow(tree, left + 1, right_rows, rng);
    }

    /// The split of `rows` that most reduces the squared error, among a random share of the
    /// features; `None` when no split leaves `min_leaf` observations on both sides or none
    /// reduces the error.
    fn best_split(&self, rows: &[usize], rng: &mut Rng) -> Option<(usize, u32)> {
        let dimensions = self.cardinality.len();
        let mut features: Vec<usize> = (0..dimensions).filter(|f| self.cardinality[*f] > 1).collect();
        rng.shuffle(&mut features);
        let tried =
            ((self.shape.feature_fraction * features.len() as f64).ceil() as usize).clamp(1, features.len().max(1));
        let total: f64 = rows.iter().map(|r| self.targets[*r]).sum();
        let count = rows.len() as f64;
        let baseline = total * total / count;
        let min_leaf = self.shape.min_leaf.max(1) as f64;
        let mut best: Option<(f64, usize, u32)> = None;
        let widest = self.cardinality.iter().copied().max().unwrap_or(0);
        let (mut counts, mut sums) = (vec![0.0; widest], vec![0.0; widest]);
        for &feature in features.iter().take(tried) {
            let buckets = self.cardinality[feature];
            counts[..buckets].fill(0.0);
            sums[..buckets].fill(0.0);
            let column = &self.columns[feature];
            for &r in rows {
                let value = column[r] as usize;
                counts[value] += 1.0;
                sums[value] += self.targets[r];
            }
            let (mut left_count, mut left_sum) = (0.0, 0.0);
            for value in 0..buckets - 1 {
                left_count += counts[value];
                left_sum += sums[value];
                let right_count = count - left_count;
                if counts[value] == 0.0 || left_count < min_leaf || right_count < min_leaf {
                    continue;
                }
                let right_sum = total - left_sum;
                let gain = left_sum * left_sum / left_count + right_sum * right_sum / right_count - baseline;
                if gain > 1e-12 && best.is_none_or(|b| gain > b.0) {
                    best = Some((gain, feature, value as u32));
                }
            }
        }
        best.map(|(_, feature, threshold)| (feature, threshold))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: ForestShape = ForestShape { trees: 30, min_leaf: 1, feature_fraction: 1.0 };

    #[test]
    fn learns_a_step_in_one_feature_and_ignores_the_other() {
        let mut rng = Rng::seeded(3);
        let features: Vec<Vec<u32>> = (0..60).map(|i| vec![i % 10, (i * 7) % 4]).collect();
        let targets: Vec<f64> = features.iter().map(|f| if f[0] < 5 { 1.0 } else { 3.0 }).collect();
        let forest = Forest::fit(&features, &targets, &[10, 4], SHAPE, &mut rng);
        for other in 0..4 {
            assert!((forest.predict(&[2, other]).0 - 1.0).abs() < 0.1);
            assert!((forest.predict(&[8, other]).0 - 3.0).abs() < 0.1);
        }
    }

    #[test]
    fn is_unsure_where_it_has_seen_nothing() {
        let mut rng = Rng::seeded(4);
        let features: Vec<Vec<u32>> = (0..8).map(|i| vec![i, 0]).collect();
        let targets: Vec<f64> = (0..8).map(|i| (i as f64 - 3.5).powi(2)).collect();
        let forest = Forest::fit(&features, &targets, &[16, 1], SHAPE, &mut rng);
        let (_, seen) = forest.predict(&[3, 0]);
        let (_, unseen) = forest.predict(&[15, 0]);
        assert!(unseen > seen, "spread {unseen} beyond the data, {seen} inside it");
    }
}
