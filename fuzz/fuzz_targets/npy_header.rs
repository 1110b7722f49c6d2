//! The NPY header parser (`blockmap::io::npy`), on whole NPY files: the
//! preamble and header are parsed, and what parses is written back and
//! parsed again; then the file is loaded as bare Labels.

#![no_main]

use blockmap::io::load_buffer;
use blockmap::io::npy::{self, Descr};
use blockmap::labels::is_valid_name;
use blockmap::{ByteOrder, DType};
use blockmap::{Data, Kind};
use blockmap_fuzz::{aligned, assert_round_trip, assert_same_outcome, misaligned_read_only};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(header) = npy::read_header(data) {
        assert!(header.len <= data.len(), "the header lies inside the input");
        let _ = header.data_len();
        // written back (C order, native byte order), it reads the same
        let descr = match &header.descr {
            Descr::Simple(dtype, _) => Some(npy::simple_descr(*dtype)),
            // labels_descr quotes names as they are: only for valid names
            Descr::Fields(fields)
                if fields
                    .iter()
                    .all(|(n, d, _)| *d == DType::I4 && is_valid_name(n)) =>
            {
                let names: Vec<String> = fields.iter().map(|(n, _, _)| n.clone()).collect();
                Some(npy::labels_descr(&names))
            }
            Descr::Fields(_) => None,
        };
        if let Some(descr) = descr {
            // a header that was read fits in the 1 MiB the reader allows, so it
            // can be written
            let written = npy::write_header(&descr, &header.shape)
                .expect("a header that was read can be written");
            assert_eq!(written.len() % npy::HEADER_ALIGNMENT, 0);
            let again = npy::read_header(&written).expect("a written header parses");
            assert_eq!(again.shape, header.shape);
            assert_eq!(again.len, written.len());
            assert!(!again.fortran_order);
            match (&header.descr, &again.descr) {
                (Descr::Simple(a, _), Descr::Simple(b, order)) => {
                    assert_eq!(a, b);
                    assert_eq!(*order, ByteOrder::NATIVE);
                }
                (Descr::Fields(a), Descr::Fields(b)) => {
                    assert_eq!(a.len(), b.len());
                    for ((name_a, _, _), (name_b, _, _)) in a.iter().zip(b) {
                        assert_eq!(name_a, name_b);
                    }
                }
                _ => panic!("the written descr changed kind"),
            }
        }
    }

    // the same bytes as a bare NPY file of Labels, viewed in aligned memory
    // and copied from misaligned read-only memory
    let viewed = load_buffer(aligned(data), Kind::Labels);
    let copied = load_buffer(misaligned_read_only(data), Kind::Labels);
    assert_same_outcome(&viewed, &copied, "labels");
    if let Ok(loaded @ Data::Labels(_)) = &viewed {
        assert_round_trip(loaded, Kind::Labels);
    }
});
