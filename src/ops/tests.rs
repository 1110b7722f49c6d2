//! The operations on a small map whose expected results were read off
//! metatensor-core 0.2.6 (the Python tests compare with it directly, on
//! many more maps).

use super::*;
use crate::array::Array;
use crate::dtype::DType;
use crate::fixtures::labels;

/// A block of `samples` (dimension `s`) and `properties` (`p`) whose value
/// at (sample `s`, property `p`) is `base + 10 * s + p`, with a
/// `positions` gradient of samples `gradient` (`sample`, `atom`) whose
/// values are `-(base + 10 * sample + atom)` for every property.
fn make(base: f64, samples: &[i32], properties: &[i32], gradient: &[i32]) -> TensorBlock {
    let mut values = Vec::new();
    for &s in samples {
        for &p in properties {
            values.push(base + 10.0 * f64::from(s) + f64::from(p));
        }
    }
    let mut block = TensorBlock::new(
        Array::from_slice(vec![samples.len(), properties.len()], &values).unwrap(),
        labels(&["s"], samples),
        vec![],
        labels(&["p"], properties),
    )
    .unwrap();
    let mut gradient_values = Vec::new();
    for row in gradient.chunks_exact(2) {
        for _ in properties {
            gradient_values.push(-(base + 10.0 * f64::from(row[0]) + f64::from(row[1])));
        }
    }
    let gradient = TensorBlock::new(
        Array::from_slice(vec![gradient.len() / 2, properties.len()], &gradient_values).unwrap(),
        labels(&["sample", "atom"], gradient),
        vec![],
        labels(&["p"], properties),
    )
    .unwrap();
    block.add_gradient("positions", gradient).unwrap();
    block
}

/// keys (a, b) = (0, 0), (1, 0), (0, 1), (2, 1)
fn map() -> TensorMap {
    let mut map = TensorMap::new(
        labels(&["a", "b"], &[0, 0, 1, 0, 0, 1, 2, 1]),
        vec![
            make(100.0, &[3, 1], &[0, 1], &[1, 0, 0, 5]),
            make(200.0, &[2, 1], &[1, 3], &[0, 1]),
            make(300.0, &[0], &[0, 1], &[0, 0]),
            make(400.0, &[5, 4], &[2], &[1, 2]),
        ],
    )
    .unwrap();
    map.set_info("origin".into(), "test".into()).unwrap();
    map
}

fn floats(array: &Array) -> Vec<f64> {
    array.to_vec::<f64>().unwrap()
}

const FILL: [u8; 8] = (-1.0f64).to_ne_bytes();
const NAN: f64 = -1.0;

fn names(names: &[&str]) -> Vec<String> {
    names.iter().map(ToString::to_string).collect()
}

#[test]
fn keys_to_properties_by_name() {
    let moved = Labels::empty(vec!["a"]).unwrap();
    let result = keys_to_properties(&map(), &moved, &FILL, true).unwrap();
    assert_eq!(result.keys(), &labels(&["b"], &[0, 1]));
    assert_eq!(result.info()["origin"], "test");
    let block = &result.blocks()[0];
    assert_eq!(block.samples(), &labels(&["s"], &[1, 2, 3]));
    assert_eq!(
        block.properties(),
        &labels(&["a", "p"], &[0, 0, 0, 1, 1, 1, 1, 3])
    );
    #[rustfmt::skip]
    let expected = [
        110.0, 111.0, 211.0, 213.0,
        NAN, NAN, 221.0, 223.0,
        130.0, 131.0, NAN, NAN,
    ];
    assert_eq!(floats(block.values()), expected);
    let gradient = block.gradient("positions").unwrap();
    assert_eq!(
        gradient.samples(),
        &labels(&["sample", "atom"], &[0, 0, 1, 1, 2, 5])
    );
    #[rustfmt::skip]
    let expected = [
        -110.0, -110.0, NAN, NAN,
        NAN, NAN, -201.0, -201.0,
        -105.0, -105.0, NAN, NAN,
    ];
    assert_eq!(floats(gradient.values()), expected);

    // unsorted: samples in order of appearance, gradient samples sorted
    let result = keys_to_properties(&map(), &moved, &FILL, false).unwrap();
    let block = &result.blocks()[0];
    assert_eq!(block.samples(), &labels(&["s"], &[3, 1, 2]));
    assert_eq!(
        block.gradient("positions").unwrap().samples(),
        &labels(&["sample", "atom"], &[0, 5, 1, 0, 2, 1])
    );
}

#[test]
fn keys_to_properties_with_entries() {
    // a = 5 (no block), 1, 0; the block with a = 2 gives no data
    let moved = labels(&["a"], &[5, 1, 0]);
    let map = TensorMap::new(
        labels(&["a", "b"], &[0, 0, 1, 0, 2, 0]),
        vec![
            make(100.0, &[0], &[0, 1], &[0, 0]),
            make(200.0, &[0, 1], &[0, 1], &[1, 0]),
            make(300.0, &[0, 1, 2], &[0, 1], &[2, 0]),
        ],
    )
    .unwrap();
    let result = keys_to_properties(&map, &moved, &FILL, true).unwrap();
    let block = &result.blocks()[0];
    assert_eq!(block.samples(), &labels(&["s"], &[0, 1, 2]));
    assert_eq!(
        block.properties().raw(),
        &[5, 0, 5, 1, 1, 0, 1, 1, 0, 0, 0, 1]
    );
    #[rustfmt::skip]
    let expected = [
        NAN, NAN, 200.0, 201.0, 100.0, 101.0,
        NAN, NAN, 210.0, 211.0, NAN, NAN,
        NAN, NAN, NAN, NAN, NAN, NAN,
    ];
    assert_eq!(floats(block.values()), expected);

    let different = TensorMap::new(
        labels(&["a"], &[0, 1]),
        vec![make(0.0, &[0], &[0], &[]), make(0.0, &[0], &[1], &[])],
    )
    .unwrap();
    let error = keys_to_properties(&different, &labels(&["a"], &[0]), &FILL, true).unwrap_err();
    assert!(error.to_string().contains("different property labels"));
}

#[test]
fn keys_to_samples_by_name() {
    let result = keys_to_samples(&map(), &names(&["a"]), &FILL, true).unwrap();
    let block = &result.blocks()[0];
    assert_eq!(
        block.samples(),
        &labels(&["s", "a"], &[1, 0, 1, 1, 2, 1, 3, 0])
    );
    assert_eq!(block.properties(), &labels(&["p"], &[0, 1, 3]));
    #[rustfmt::skip]
    let expected = [
        110.0, 111.0, NAN,
        NAN, 211.0, 213.0,
        NAN, 221.0, 223.0,
        130.0, 131.0, NAN,
    ];
    assert_eq!(floats(block.values()), expected);
    let gradient = block.gradient("positions").unwrap();
    assert_eq!(gradient.samples().raw(), &[0, 0, 2, 1, 3, 5]);
    #[rustfmt::skip]
    let expected = [
        -110.0, -110.0, NAN,
        NAN, -201.0, -201.0,
        -105.0, -105.0, NAN,
    ];
    assert_eq!(floats(gradient.values()), expected);

    let second = &result.blocks()[1];
    assert_eq!(second.samples().raw(), &[0, 0, 4, 2, 5, 2]);
    assert_eq!(second.properties().raw(), &[0, 1, 2]);

    let unsorted = keys_to_samples(&map(), &names(&["a"]), &FILL, false).unwrap();
    assert_eq!(
        unsorted.blocks()[0].samples().raw(),
        &[3, 0, 1, 0, 2, 1, 1, 1]
    );

    // every key moved: one block, keys `_ = 0`
    let all = keys_to_samples(&map(), &names(&["b", "a"]), &FILL, true).unwrap();
    assert_eq!(all.keys(), &Labels::single());
    assert_eq!(all.blocks()[0].samples().names(), &["s", "b", "a"]);
    assert_eq!(all.blocks()[0].samples().count(), 7);

    let error = keys_to_samples(&map(), &names(&["c"]), &FILL, true).unwrap_err();
    assert!(error.to_string().contains("'c' is not part of the keys"));
    let error = keys_to_samples(&map(), &names(&["a"]), &[0; 4], true).unwrap_err();
    assert!(error.to_string().contains("fill value"));
}

#[test]
fn components_move_to_the_front_of_properties() {
    // values [2 samples, c0 = 2, c1 = 3, c2 = 4, 2 properties]
    let shape = vec![2, 2, 3, 4, 2];
    let n: usize = shape.iter().product();
    let values: Vec<f64> = (0..n)
        .map(|i| f64::from(u32::try_from(i).unwrap()))
        .collect();
    let components = vec![
        Labels::range("c0", 2).unwrap(),
        Labels::range("c1", 3).unwrap(),
        Labels::range("c2", 4).unwrap(),
    ];
    let block = TensorBlock::new(
        Array::from_slice(shape, &values).unwrap(),
        labels(&["s"], &[0, 1]),
        components,
        labels(&["p"], &[7, 8]),
    )
    .unwrap();
    let map = TensorMap::new(labels(&["k"], &[0]), vec![block]).unwrap();
    let result = components_to_properties(&map, &names(&["c0", "c2"])).unwrap();
    let moved = &result.blocks()[0];
    assert_eq!(moved.values().shape(), &[2, 3, 16]);
    assert_eq!(moved.component_names(), vec!["c1"]);
    assert_eq!(moved.properties().names(), &["c2", "c0", "p"]);
    assert_eq!(moved.properties().row(3), &[0, 1, 8]);
    let out = floats(moved.values());
    for s in 0..2 {
        for c0 in 0..2 {
            for c1 in 0..3 {
                for c2 in 0..4 {
                    for p in 0..2 {
                        let original = values[(((s * 2 + c0) * 3 + c1) * 4 + c2) * 2 + p];
                        let property = (c2 * 2 + c0) * 2 + p;
                        assert_eq!(
                            out[(s * 3 + c1) * 16 + property].to_bits(),
                            original.to_bits()
                        );
                    }
                }
            }
        }
    }
    let error = components_to_properties(&map, &names(&["c0", "c0"])).unwrap_err();
    assert!(error.to_string().contains("unable to find 'c0'"));
    assert!(components_to_properties(&map, &[]).is_err());
}

#[test]
fn group_rules() {
    let nested = crate::fixtures::tensor(DType::F8);
    let error = keys_to_samples(&nested, &[], &[0; 8], true).unwrap_err();
    assert!(
        error.to_string().contains("gradient of gradients"),
        "{error}"
    );
}

// ------------------------------------------------------------------ join

use super::join::{join, join_blocks, Axis, DifferentKeys};

#[test]
fn join_along_samples_shifts_the_gradient_samples() {
    let a = TensorMap::new(
        labels(&["k"], &[0]),
        vec![make(100.0, &[0, 1], &[0, 1], &[1, 0])],
    )
    .unwrap();
    let b = TensorMap::new(
        labels(&["k"], &[0]),
        vec![make(200.0, &[0], &[0, 1], &[0, 7])],
    )
    .unwrap();
    let joined = join(&[&a, &b], Axis::Samples, DifferentKeys::Error, Some("t")).unwrap();
    let block = &joined.blocks()[0];
    assert_eq!(block.samples(), &labels(&["s", "t"], &[0, 0, 1, 0, 0, 1]));
    assert_eq!(
        floats(block.values()),
        [100.0, 101.0, 110.0, 111.0, 200.0, 201.0]
    );
    let gradient = block.gradient("positions").unwrap();
    // b's gradient row for its sample 0 now points at the joined sample 2
    assert_eq!(
        gradient.samples(),
        &labels(&["sample", "atom"], &[1, 0, 2, 7])
    );
    assert_eq!(floats(gradient.values()), [-110.0, -110.0, -207.0, -207.0]);
    assert!(joined.info().is_empty());
}

#[test]
fn join_along_properties_fills_missing_gradient_rows_with_zeros() {
    let a = make(100.0, &[0, 1], &[0], &[0, 1]);
    let b = make(200.0, &[0, 1], &[1, 2], &[1, 3]);
    let joined = join_blocks(&[&a, &b], Axis::Properties, None).unwrap();
    assert_eq!(joined.properties(), &labels(&["p"], &[0, 1, 2]));
    assert_eq!(
        floats(joined.values()),
        [100.0, 201.0, 202.0, 110.0, 211.0, 212.0]
    );
    let gradient = joined.gradient("positions").unwrap();
    assert_eq!(
        gradient.samples(),
        &labels(&["sample", "atom"], &[0, 1, 1, 3])
    );
    assert_eq!(
        floats(gradient.values()),
        [-101.0, 0.0, 0.0, 0.0, -213.0, -213.0]
    );
}

#[test]
fn join_refuses_what_metatensor_operations_refuses() {
    let a = TensorMap::new(labels(&["k"], &[0]), vec![make(1.0, &[0], &[0], &[])]).unwrap();
    let b = TensorMap::new(labels(&["k"], &[1]), vec![make(2.0, &[1], &[0], &[])]).unwrap();
    let error = join(&[&a, &b], Axis::Samples, DifferentKeys::Error, None).unwrap_err();
    assert!(matches!(error, Error::NotEqual(_)), "{error}");
    // the union keeps both keys, each joined with an empty block
    let union = join(&[&a, &b], Axis::Samples, DifferentKeys::Union, None).unwrap();
    assert_eq!(union.keys(), &labels(&["k"], &[0, 1]));
    assert_eq!(union.blocks()[0].samples(), &labels(&["s"], &[0]));
    let none = join(&[&a, &b], Axis::Samples, DifferentKeys::Intersection, None).unwrap();
    assert_eq!(none.keys().count(), 0);
    assert!(join(&[], Axis::Samples, DifferentKeys::Error, None).is_err());
    // the same samples twice, with nothing to tell them apart
    assert!(join(&[&a, &a], Axis::Samples, DifferentKeys::Error, None).is_err());
}

/// The segment a joined map's first values lie in (its address).
fn segment_of(map: &TensorMap) -> Option<*const u8> {
    let buffer = map.blocks()[0].values().buffer();
    buffer.shared_segment().map(|(segment, _)| segment.as_ptr())
}

#[test]
fn a_nested_join_in_a_segment_gives_the_outer_one_its_segment_back() {
    use super::join::join_in_segment;
    let a = TensorMap::new(
        labels(&["k"], &[0]),
        vec![make(100.0, &[0, 1], &[0, 1], &[1, 0])],
    )
    .unwrap();
    let b = TensorMap::new(
        labels(&["k"], &[0]),
        vec![make(200.0, &[0], &[0, 1], &[0, 7])],
    )
    .unwrap();
    let join_ab = || join(&[&a, &b], Axis::Samples, DifferentKeys::Error, Some("t"));
    // the outer call (a batch being joined) and, inside its work on the
    // same thread, another one (what a signal handler may start between
    // two pieces of the outer work)
    let (first, nested, second) = super::copy::in_segment(1 << 16, || {
        let first = join_ab()?;
        let nested = join_in_segment(&[&a, &b], Axis::Samples, DifferentKeys::Error, Some("t"))?;
        let second = join_ab()?;
        Ok((first, nested, second))
    })
    .unwrap();
    let outer = segment_of(&first).expect("the outer join's values lie in a segment");
    let inner = segment_of(&nested).expect("the nested join's values lie in a segment");
    assert_ne!(outer, inner);
    assert_eq!(
        segment_of(&second),
        Some(outer),
        "after the nested join, the outer work places its arrays in its own segment again"
    );
    assert_eq!(second, first);
    // and once the outer call is over, nothing is placed in a segment
    assert_eq!(segment_of(&join_ab().unwrap()), None);
}
