//! `TensorBlock`: a labeled N-d array with optional gradient blocks.

use std::collections::BTreeMap;

use crate::array::Array;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::labels::{Interner, Labels, Names};
use crate::limits::{MAX_GRADIENT_DEPTH, MAX_GRADIENT_NAME};

/// A labeled N-d array: axes `[samples, *components, properties]`, each
/// described by [`Labels`]; plus gradient blocks keyed by parameter name.
///
/// Cloning a block clones its metadata and shares its array memory.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorBlock {
    values: Array,
    samples: Labels,
    components: Vec<Labels>,
    properties: Labels,
    gradients: BTreeMap<String, TensorBlock>,
}

impl TensorBlock {
    /// A block without gradients, checking the shape of `values` against
    /// the labels: `[samples.count(), *components.count(), properties.count()]`.
    pub fn new(
        values: Array,
        samples: Labels,
        components: Vec<Labels>,
        properties: Labels,
    ) -> Result<Self> {
        let shape = values.shape();
        if shape.len() > crate::limits::MAX_NDIM {
            return Err(Error::invalid(format!(
                "values have {} dimensions, more than the {} an array may have",
                shape.len(),
                crate::limits::MAX_NDIM
            )));
        }
        if shape.len() != components.len() + 2 {
            return Err(Error::invalid(format!(
                "values of shape {shape:?} have {} dimensions, but {} component(s) \
                 need {} (samples, components, properties)",
                shape.len(),
                components.len(),
                components.len() + 2
            )));
        }
        if shape[0] != samples.count() {
            return Err(Error::invalid(format!(
                "values of shape {shape:?} have {} samples, but the sample labels {} \
                 have {} entries",
                shape[0],
                Names(samples.names()),
                samples.count()
            )));
        }
        for (i, component) in components.iter().enumerate() {
            if component.size() == 1
                && components[..i]
                    .iter()
                    .any(|c| c.names() == component.names())
            {
                return Err(Error::invalid(format!(
                    "the component dimension '{}' appears twice: each component must \
                     have its own name",
                    component.names()[0]
                )));
            }
            if component.size() != 1 {
                return Err(Error::invalid(format!(
                    "component {i} must have exactly one dimension, got {}",
                    Names(component.names())
                )));
            }
            if shape[i + 1] != component.count() {
                return Err(Error::invalid(format!(
                    "values of shape {shape:?} have {} entries along component {i}, but \
                     the component labels {} have {}",
                    shape[i + 1],
                    Names(component.names()),
                    component.count()
                )));
            }
        }
        let last = shape[shape.len() - 1];
        if last != properties.count() {
            return Err(Error::invalid(format!(
                "values of shape {shape:?} have {last} properties, but the property \
                 labels {} have {} entries",
                Names(properties.names()),
                properties.count()
            )));
        }
        Ok(TensorBlock {
            values,
            samples,
            components,
            properties,
            gradients: BTreeMap::new(),
        })
    }

    /// The values.
    pub fn values(&self) -> &Array {
        &self.values
    }

    /// The sample labels (first axis).
    pub fn samples(&self) -> &Labels {
        &self.samples
    }

    /// The component labels (middle axes), one dimension each.
    pub fn components(&self) -> &[Labels] {
        &self.components
    }

    /// The property labels (last axis).
    pub fn properties(&self) -> &Labels {
        &self.properties
    }

    /// Element type of the values.
    pub fn dtype(&self) -> DType {
        self.values.dtype()
    }

    /// Names of the components' dimensions, one per component.
    pub fn component_names(&self) -> Vec<String> {
        self.components
            .iter()
            .flat_map(|c| c.names().to_vec())
            .collect()
    }

    /// The gradient blocks, sorted by parameter.
    pub fn gradients(&self) -> &BTreeMap<String, TensorBlock> {
        &self.gradients
    }

    /// The gradient with respect to `parameter`.
    pub fn gradient(&self, parameter: &str) -> Result<&TensorBlock> {
        self.gradients.get(parameter).ok_or_else(|| {
            Error::invalid(format!(
                "this block has no gradient with respect to '{parameter}' (it has {})",
                Names(&self.gradients.keys().cloned().collect::<Vec<_>>())
            ))
        })
    }

    /// Add the gradient of the values with respect to `parameter`.
    ///
    /// The parameter is any string, as in metatensor-core (`"positions"`,
    /// `"grad-of-grad"`, even `""`); what a file cannot hold is refused when
    /// saving (see `io`). The gradient's first sample dimension is `sample`, an index into this
    /// block's samples; its components are extra leading components followed
    /// by this block's components; its properties are this block's; its
    /// element type is this block's.
    pub fn add_gradient(&mut self, parameter: &str, gradient: TensorBlock) -> Result<()> {
        if self.gradients.contains_key(parameter) {
            return Err(Error::invalid(format!(
                "this block already has a gradient with respect to '{parameter}'"
            )));
        }
        check_gradient_limits(parameter, &gradient)?;
        let context = |what: String| Error::invalid(format!("gradient '{parameter}': {what}"));
        if gradient.dtype() != self.dtype() {
            return Err(context(format!(
                "values are {}, the block's are {}",
                gradient.dtype(),
                self.dtype()
            )));
        }
        let samples = &gradient.samples;
        if samples.names().first().map(String::as_str) != Some("sample") {
            return Err(context(format!(
                "the first sample dimension must be 'sample', got {}",
                Names(samples.names())
            )));
        }
        let n_parent = self.samples.count();
        let size = samples.size();
        let column = || samples.raw().chunks_exact(size).map(|row| row[0]);
        // the range first (a branch-free pass), the culprit only when there
        // is one
        let (low, high) = column().fold((i32::MAX, i32::MIN), |(low, high), s| {
            (low.min(s), high.max(s))
        });
        let inside = |s: i32| usize::try_from(s).is_ok_and(|s| s < n_parent);
        if samples.count() > 0 && !(inside(low) && inside(high)) {
            let bad = column().find(|&s| !inside(s)).unwrap_or(low);
            return Err(context(format!(
                "'sample' value {bad} is outside the block's {n_parent} samples"
            )));
        }
        let extra = gradient.components.len().checked_sub(self.components.len());
        if extra.is_none_or(|extra| gradient.components[extra..] != self.components[..]) {
            let names = |c: &[Labels]| c.iter().map(|l| l.names()[0].clone()).collect::<Vec<_>>();
            return Err(context(format!(
                "components {} must end with the block's components {}, with the \
                 same entries",
                Names(&names(&gradient.components)),
                Names(&names(&self.components))
            )));
        }
        if gradient.properties != self.properties {
            return Err(context(format!(
                "properties {} ({} entries) must be the block's properties {} ({} entries)",
                Names(gradient.properties.names()),
                gradient.properties.count(),
                Names(self.properties.names()),
                self.properties.count()
            )));
        }
        let mut gradient = gradient;
        // equal: the gradient holds the block's own properties object
        gradient.properties = self.properties.clone();
        self.gradients.insert(parameter.to_string(), gradient);
        Ok(())
    }

    /// Replace the labels of the block and of its gradients by equal ones
    /// the `interner` met before (see [`Interner`]); nothing observable
    /// changes but identity and memory.
    pub(crate) fn share_labels(&mut self, interner: &mut Interner) -> Result<()> {
        interner.share(&mut self.samples)?;
        for component in &mut self.components {
            interner.share(component)?;
        }
        interner.share(&mut self.properties)?;
        for gradient in self.gradients.values_mut() {
            gradient.share_labels(interner)?;
            gradient.properties = self.properties.clone();
        }
        Ok(())
    }

    /// How deeply gradients nest under this block: 0 without gradients, 1
    /// with gradients that have none of their own, ...
    pub fn gradient_depth(&self) -> usize {
        self.gradients
            .values()
            .map(|gradient| 1 + gradient.gradient_depth())
            .max()
            .unwrap_or(0)
    }

    /// A deep copy: values and gradient values in new memory. Labels are
    /// immutable, so they are shared.
    pub fn deep_copy(&self) -> Result<Self> {
        let mut gradients = BTreeMap::new();
        for (parameter, gradient) in &self.gradients {
            gradients.insert(parameter.clone(), gradient.deep_copy()?);
        }
        Ok(TensorBlock {
            values: self.values.deep_copy()?,
            samples: self.samples.clone(),
            components: self.components.clone(),
            properties: self.properties.clone(),
            gradients,
        })
    }

    /// This block with values and gradient values of `dtype`, converted as
    /// numpy's `astype` converts them (see [`Array::cast_to`]); arrays
    /// already of `dtype`, and labels, are shared.
    pub fn to_dtype(&self, dtype: DType) -> Result<Self> {
        self.map_arrays(&mut |array| array.cast_to(dtype))
    }

    /// This block with each array replaced by what `f` gives for it, in
    /// the order of [`deep_copy_except`](Self::deep_copy_except): values
    /// first, then each gradient's, recursively, in parameter order. The
    /// labels are shared; the new arrays are checked against them as
    /// [`TensorBlock::new`] and [`add_gradient`](Self::add_gradient) check.
    pub fn map_arrays<E: From<Error>>(
        &self,
        f: &mut dyn FnMut(&Array) -> std::result::Result<Array, E>,
    ) -> std::result::Result<Self, E> {
        let mut mapped = TensorBlock::new(
            f(&self.values)?,
            self.samples.clone(),
            self.components.clone(),
            self.properties.clone(),
        )?;
        for (parameter, gradient) in &self.gradients {
            mapped.add_gradient(parameter, gradient.map_arrays(f)?)?;
        }
        Ok(mapped)
    }

    /// [`deep_copy`](Self::deep_copy), except that the arrays at the
    /// positions `shared` are shared with this block instead of copied.
    /// Arrays are numbered values first, then each gradient's (recursively,
    /// in parameter order), starting at `first`.
    pub fn deep_copy_except(&self, shared: &[usize], first: usize) -> Result<Self> {
        fn copy(block: &TensorBlock, shared: &[usize], next: &mut usize) -> Result<TensorBlock> {
            let values = if shared.contains(next) {
                block.values.clone()
            } else {
                block.values.deep_copy()?
            };
            *next += 1;
            let mut gradients = BTreeMap::new();
            for (parameter, gradient) in &block.gradients {
                gradients.insert(parameter.clone(), copy(gradient, shared, next)?);
            }
            Ok(TensorBlock {
                values,
                samples: block.samples.clone(),
                components: block.components.clone(),
                properties: block.properties.clone(),
                gradients,
            })
        }
        if shared.is_empty() {
            return self.deep_copy();
        }
        copy(self, shared, &mut { first })
    }

    /// Bytes of array data held by this block and its gradients (values
    /// and labels).
    pub fn nbytes(&self) -> usize {
        let labels = std::iter::once(&self.samples)
            .chain(&self.components)
            .chain(std::iter::once(&self.properties))
            .map(|l| l.values().bytes().len())
            .sum::<usize>();
        let gradients = self
            .gradients
            .values()
            .map(TensorBlock::nbytes)
            .sum::<usize>();
        self.values.bytes().len() + labels + gradients
    }

    /// Check that `other` has the same label names and the same gradient
    /// structure as `self` (recursively), as blocks of one map must.
    pub(crate) fn check_same_structure(&self, other: &TensorBlock) -> Result<(), String> {
        if self.samples.names() != other.samples.names() {
            return Err(format!(
                "sample names {} differ from {}",
                Names(other.samples.names()),
                Names(self.samples.names())
            ));
        }
        // compared without allocating: this runs for every block of every
        // map made (the names are collected only for the error)
        if !self
            .components
            .iter()
            .flat_map(Labels::names)
            .eq(other.components.iter().flat_map(Labels::names))
        {
            return Err(format!(
                "component names {} differ from {}",
                Names(&other.component_names()),
                Names(&self.component_names())
            ));
        }
        if self.properties.names() != other.properties.names() {
            return Err(format!(
                "property names {} differ from {}",
                Names(other.properties.names()),
                Names(self.properties.names())
            ));
        }
        if !self.gradients.keys().eq(other.gradients.keys()) {
            return Err(format!(
                "gradients {} differ from {}",
                Names(&other.gradients.keys().cloned().collect::<Vec<_>>()),
                Names(&self.gradients.keys().cloned().collect::<Vec<_>>())
            ));
        }
        for (parameter, gradient) in &self.gradients {
            gradient
                .check_same_structure(&other.gradients[parameter])
                .map_err(|e| format!("in gradient '{parameter}': {e}"))?;
        }
        Ok(())
    }
}

/// The limits of gradients (see `limits.rs`): a parameter name of at most
/// [`MAX_GRADIENT_NAME`] bytes, and at most [`MAX_GRADIENT_DEPTH`] levels
/// of gradients under a block once `gradient` is added.
fn check_gradient_limits(parameter: &str, gradient: &TensorBlock) -> Result<()> {
    if parameter.len() > MAX_GRADIENT_NAME {
        return Err(Error::invalid(format!(
            "the gradient parameter name has {} bytes, more than the {MAX_GRADIENT_NAME} \
             allowed",
            parameter.len()
        )));
    }
    let depth = 1 + gradient.gradient_depth();
    if depth > MAX_GRADIENT_DEPTH {
        return Err(Error::invalid(format!(
            "gradient '{parameter}' would nest gradients {depth} levels deep, more than the \
             {MAX_GRADIENT_DEPTH} allowed"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(names: &[&str], values: &[i32]) -> Labels {
        Labels::new(names.to_vec(), values).unwrap()
    }

    fn zeros(shape: &[usize]) -> Array {
        Array::zeros(DType::F8, shape.to_vec()).unwrap()
    }

    /// 3 samples, one component of 2, 4 properties
    fn block() -> TensorBlock {
        TensorBlock::new(
            zeros(&[3, 2, 4]),
            labels(&["s"], &[0, 1, 2]),
            vec![labels(&["c"], &[0, 1])],
            Labels::range("p", 4).unwrap(),
        )
        .unwrap()
    }

    fn gradient(samples: &[i32], extra: bool) -> TensorBlock {
        let n = samples.len();
        let mut rows = Vec::new();
        for (i, s) in samples.iter().enumerate() {
            rows.extend([*s, i32::try_from(i).unwrap()]);
        }
        let mut components = vec![labels(&["c"], &[0, 1])];
        let mut shape = vec![n, 2, 4];
        if extra {
            components.insert(0, labels(&["xyz"], &[0, 1, 2]));
            shape.insert(1, 3);
        }
        TensorBlock::new(
            zeros(&shape),
            labels(&["sample", "atom"], &rows),
            components,
            Labels::range("p", 4).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn shape_is_checked_against_labels() {
        let samples = labels(&["s"], &[0, 1, 2]);
        let component = labels(&["c"], &[0, 1]);
        let properties = Labels::range("p", 4).unwrap();
        let new = |shape: &[usize], components: Vec<Labels>| {
            TensorBlock::new(
                zeros(shape),
                samples.clone(),
                components,
                properties.clone(),
            )
        };
        assert!(new(&[3, 2, 4], vec![component.clone()]).is_ok());
        assert!(new(&[3, 4], vec![]).is_ok());
        let err = new(&[2, 2, 4], vec![component.clone()]).unwrap_err();
        assert!(err.to_string().contains("samples"), "{err}");
        let err = new(&[3, 3, 4], vec![component.clone()]).unwrap_err();
        assert!(err.to_string().contains("component 0"), "{err}");
        let err = new(&[3, 2, 5], vec![component.clone()]).unwrap_err();
        assert!(err.to_string().contains("properties"), "{err}");
        let err = new(&[3, 2, 4], vec![]).unwrap_err();
        assert!(err.to_string().contains("dimensions"), "{err}");
        let err = new(&[3], vec![]).unwrap_err();
        assert!(err.to_string().contains("dimensions"), "{err}");
        let two_dims = labels(&["a", "b"], &[0, 0, 0, 1]);
        let err = new(&[3, 2, 4], vec![two_dims]).unwrap_err();
        assert!(err.to_string().contains("exactly one dimension"), "{err}");
        // metatensor-core refuses two components of the same name
        let err = TensorBlock::new(
            zeros(&[3, 2, 2, 4]),
            samples.clone(),
            vec![component.clone(), component.clone()],
            properties.clone(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("'c' appears twice"), "{err}");
    }

    #[test]
    fn gradients_follow_the_rules() {
        let mut block = block();
        block
            .add_gradient("positions", gradient(&[0, 2], true))
            .unwrap();
        block.add_gradient("cell", gradient(&[1], false)).unwrap();
        assert_eq!(
            block.gradients().keys().collect::<Vec<_>>(),
            vec!["cell", "positions"]
        );
        assert_eq!(
            block.gradient("positions").unwrap().values().shape(),
            &[2, 3, 2, 4]
        );
        assert!(block.gradient("strain").is_err());

        let err = block
            .add_gradient("cell", gradient(&[0], false))
            .unwrap_err();
        assert!(err.to_string().contains("already"), "{err}");
        // any string names a gradient, as in metatensor-core
        for name in ["grad-of-grad", "with space", "", "a/b", "é"] {
            block.add_gradient(name, gradient(&[0], false)).unwrap();
        }
        assert!(block.gradient("").is_ok());
    }

    #[test]
    fn gradient_sample_dimension() {
        let mut block = block();
        let err = block
            .add_gradient("g", gradient(&[0, 3], false))
            .unwrap_err();
        assert!(err.to_string().contains("'sample' value 3"), "{err}");
        let err = block.add_gradient("g", gradient(&[-1], false)).unwrap_err();
        assert!(err.to_string().contains("'sample' value -1"), "{err}");

        let wrong_name = TensorBlock::new(
            zeros(&[1, 2, 4]),
            labels(&["system"], &[0]),
            vec![labels(&["c"], &[0, 1])],
            Labels::range("p", 4).unwrap(),
        )
        .unwrap();
        let err = block.add_gradient("g", wrong_name).unwrap_err();
        assert!(err.to_string().contains("must be 'sample'"), "{err}");
    }

    #[test]
    fn gradient_components_properties_dtype() {
        let mut block = block();
        let no_components = TensorBlock::new(
            zeros(&[1, 4]),
            labels(&["sample"], &[0]),
            vec![],
            Labels::range("p", 4).unwrap(),
        )
        .unwrap();
        let err = block.add_gradient("g", no_components).unwrap_err();
        assert!(err.to_string().contains("must end with"), "{err}");

        let other_component = TensorBlock::new(
            zeros(&[1, 2, 4]),
            labels(&["sample"], &[0]),
            vec![labels(&["c"], &[1, 0])],
            Labels::range("p", 4).unwrap(),
        )
        .unwrap();
        let err = block.add_gradient("g", other_component).unwrap_err();
        assert!(err.to_string().contains("must end with"), "{err}");

        let other_properties = TensorBlock::new(
            zeros(&[1, 2, 4]),
            labels(&["sample"], &[0]),
            vec![labels(&["c"], &[0, 1])],
            labels(&["p"], &[0, 1, 2, 5]),
        )
        .unwrap();
        let err = block.add_gradient("g", other_properties).unwrap_err();
        assert!(err.to_string().contains("properties"), "{err}");

        let float32 = TensorBlock::new(
            Array::zeros(DType::F4, vec![1, 2, 4]).unwrap(),
            labels(&["sample"], &[0]),
            vec![labels(&["c"], &[0, 1])],
            Labels::range("p", 4).unwrap(),
        )
        .unwrap();
        let err = block.add_gradient("g", float32).unwrap_err();
        assert!(err.to_string().contains("float32"), "{err}");
        assert!(block.gradients().is_empty());
    }

    #[test]
    fn nested_gradients_and_deep_copy() {
        let mut inner = gradient(&[0, 1], false);
        let mut grand = gradient(&[1], true);
        grand.add_gradient("h", gradient(&[0], true)).unwrap();
        inner.add_gradient("g2", grand).unwrap();
        let mut block = block();
        block.add_gradient("g", inner).unwrap();
        let g2 = block.gradient("g").unwrap().gradient("g2").unwrap();
        assert!(g2.gradient("h").is_ok());

        let copy = block.deep_copy().unwrap();
        assert_eq!(copy, block);
        let ptr = |b: &TensorBlock| b.values().buffer().as_ptr();
        assert_ne!(ptr(&copy), ptr(&block));
        assert_ne!(
            ptr(copy.gradient("g").unwrap().gradient("g2").unwrap()),
            ptr(g2)
        );
        // a clone shares memory
        assert_eq!(ptr(&block.clone()), ptr(&block));
    }

    #[test]
    fn same_structure() {
        let a = block();
        let mut b = block();
        assert!(a.check_same_structure(&b).is_ok());
        b.add_gradient("g", gradient(&[0], false)).unwrap();
        assert!(a
            .check_same_structure(&b)
            .unwrap_err()
            .contains("gradients"));
        let c = TensorBlock::new(
            zeros(&[3, 4]),
            labels(&["s"], &[0, 1, 2]),
            vec![],
            Labels::range("p", 4).unwrap(),
        )
        .unwrap();
        assert!(a
            .check_same_structure(&c)
            .unwrap_err()
            .contains("component"));
    }

    #[test]
    fn deep_copy_except_shares_the_arrays_at_the_positions() {
        let block = crate::fixtures::block_with_nested_gradients(DType::F8);
        // values, the gradient's values, the gradient of the gradient's
        let arrays = |b: &TensorBlock| {
            let mut out = vec![b.values().buffer().as_ptr()];
            let mut current = b.clone();
            while let Some(next) = current.gradients().values().next().cloned() {
                out.push(next.values().buffer().as_ptr());
                current = next;
            }
            out
        };
        let original = arrays(&block);
        assert!(original.len() >= 2);
        // numbered from 5: positions 5 and 7 shared, 6 copied
        let copy = block.deep_copy_except(&[5, 7], 5).unwrap();
        assert_eq!(copy, block);
        let copied = arrays(&copy);
        for (i, (a, b)) in original.iter().zip(&copied).enumerate() {
            assert_eq!(a == b, i != 1, "array {i}");
        }
        let all = block.deep_copy_except(&[], 0).unwrap();
        assert!(arrays(&all).iter().zip(&original).all(|(a, b)| a != b));
    }
}
