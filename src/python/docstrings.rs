//! Docstring text that several members share, written once: the sections
//! of the save and load functions and methods (`functions.rs` and the
//! classes' `serde.rs`), pieced together with `#[doc = docstring!(name)]`
//! between `///` lines. Each piece is numpydoc lines without a trailing
//! line break, as pyo3 and rustdoc join doc attributes with one.

/// The text of a shared docstring piece (see the module's documentation).
macro_rules! docstring {
    // ---- Parameters
    (save_file) => {
        "file : str, os.PathLike or binary file object\n    \
         The path (``.mts`` appended when missing) or a writable file object."
    };
    (load_file) => {
        "file : str, os.PathLike or binary file object\n    \
         The path, or a readable binary file object."
    };
    (load_buffer) => {
        "buffer : bytes-like object\n    \
         The archive: ``bytes``, ``bytearray``, ``memoryview``, a numpy array, ..."
    };
    (use_numpy) => {
        "use_numpy : bool, optional\n    \
         metatensor-core's argument, accepted and ignored."
    };
    (durable) => {
        "durable : bool, optional\n    \
         For a path: sync the data and the rename to disk before returning\n    \
         (the default)."
    };
    (mmap) => {
        "mmap : bool or {\"r\", \"c\"}, optional\n    \
         Map the file instead of reading it (paths only): read-only views\n    \
         (``True`` or ``\"r\"``) or copy-on-write views (``\"c\"``)."
    };
    (arrays) => {
        "arrays : {\"numpy\", \"torch\"}, optional\n    \
         The array type of the result (numpy arrays by default); torch\n    \
         tensors share the same memory."
    };
    (keys) => {
        "keys : Labels, optional\n    \
         Load only the blocks whose keys match these entries."
    };
    // ---- Raises, one class each
    (write_failed) => {
        "BlockMapIOError\n    \
         If the operating system refuses the write, the file object fails or\n    \
         holds data after its position that it cannot cut off, or mapped data\n    \
         was lost (its file truncated by another program)."
    };
    (read_failed) => {
        "BlockMapIOError\n    \
         If the operating system refuses the read, or the file object fails."
    };
    (mapped_lost) => {
        "BlockMapIOError\n    \
         If mapped data was lost (its file truncated by another program)."
    };
    (missing_file) => {
        "MissingFileError\n    \
         If ``file`` is a path that does not exist."
    };
    (not_an_archive) => {
        "FormatError\n    \
         If the data is not a valid archive of the expected kind."
    };
    (invalid) => {
        "ValidationError\n    \
         If an argument has an invalid value."
    };
    (wrong_type) => {
        "BlockMapTypeError\n    \
         If an argument has the wrong type."
    };
    (no_memory) => {
        "BlockMapMemoryError\n    \
         If memory for the result cannot be allocated."
    };
    (no_torch) => {
        "ModuleNotFoundError\n    \
         If ``arrays=\"torch\"`` and torch is not installed."
    };
    // ---- Raises, whole sections
    (raises_save) => {
        concat!(
            "Raises\n------\n",
            $crate::python::docstrings::docstring!(write_failed),
            "\n",
            $crate::python::docstrings::docstring!(invalid),
            "\n",
            $crate::python::docstrings::docstring!(wrong_type),
            "\n",
            $crate::python::docstrings::docstring!(no_memory)
        )
    };
    (raises_load) => {
        concat!(
            "Raises\n------\n",
            $crate::python::docstrings::docstring!(missing_file),
            "\n",
            $crate::python::docstrings::docstring!(read_failed),
            "\n",
            $crate::python::docstrings::docstring!(not_an_archive),
            "\n",
            $crate::python::docstrings::docstring!(invalid),
            "\n",
            $crate::python::docstrings::docstring!(wrong_type),
            "\n",
            $crate::python::docstrings::docstring!(no_memory)
        )
    };
    (raises_load_buffer) => {
        concat!(
            "Raises\n------\n",
            $crate::python::docstrings::docstring!(not_an_archive),
            "\n",
            $crate::python::docstrings::docstring!(invalid),
            "\n",
            $crate::python::docstrings::docstring!(wrong_type),
            "\n",
            $crate::python::docstrings::docstring!(no_memory)
        )
    };
}

pub(crate) use docstring;
