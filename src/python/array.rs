//! Ownership glue between blockmap buffers and numpy arrays.
//!
//! Going to Python, an [`Array`] becomes a numpy array viewing the buffer's
//! memory; its base object is a frozen [`BufferOwner`] holding a clone of the
//! buffer, so the memory lives as long as any view. Coming from Python, an
//! array-like becomes an [`Array`] whose buffer holds the array's buffer
//! export, which pins the memory and keeps the Python object alive.
//!
//! Every `unsafe` block of the binding that touches memory is in this file
//! (`shm.rs` has one more: taking ownership of received file descriptors).

use std::any::Any;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::os::raw::c_int;
use std::ptr::NonNull;

use numpy::npyffi::{self, npy_intp, PY_ARRAY_API};
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyBytesMethods, PyDict, PyMemoryView};

use super::errors::{from_callee, internal, invalid, type_name, wrong_type};
use crate::array::{byte_len, Array};
use crate::buffer::{Buffer, PieceMemory, PiecedWriter};
use crate::dtype::{ByteOrder, DType};
use crate::limits::MAX_NDIM;

/// Keeps a buffer's memory alive for the numpy arrays viewing it, and
/// exports it through the buffer protocol as flat bytes (format `B`),
/// writable exactly when the buffer is.
#[pyclass(frozen, module = "blockmap", name = "_BufferOwner")]
#[derive(Debug)]
pub struct BufferOwner {
    buffer: Buffer,
}

impl BufferOwner {
    pub fn new(buffer: Buffer) -> Self {
        BufferOwner { buffer }
    }
}

#[pymethods]
impl BufferOwner {
    /// Export the memory as flat, C-contiguous bytes.
    ///
    /// # Safety
    ///
    /// `view` must point to a `Py_buffer` to fill, as Python guarantees when
    /// it calls `bf_getbuffer`.
    unsafe fn __getbuffer__(
        slf: &Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let buffer = &slf.get().buffer;
        let readonly = c_int::from(!buffer.is_writable());
        let len = ffi::Py_ssize_t::try_from(buffer.len())
            .map_err(|_| invalid(slf.py(), "buffer too large to export"))?;
        // SAFETY: `view` is valid (caller contract); pointer and length describe memory that
        // `buffer` (owned by `slf`) keeps alive, and FillInfo stores a new reference to `slf` in
        // `view.obj`, so it outlives the export; FillInfo refuses writable requests if readonly.
        let status = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                buffer.as_ptr().cast_mut().cast::<c_void>(),
                len,
                readonly,
                flags,
            )
        };
        if status < 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!(
            "_BufferOwner({} bytes, {}, {:?} owner)",
            self.buffer.len(),
            if self.buffer.is_writable() {
                "writable"
            } else {
                "read-only"
            },
            self.buffer.owner_kind()
        )
    }
}

/// The numpy descrs of the native-endian dtypes, made once (formatting
/// and parsing a descr string on every view was half of a view's cost).
static DESCRS: PyOnceLock<Vec<Py<PyArrayDescr>>> = PyOnceLock::new();

/// numpy's descr of `dtype` in native byte order (a new reference).
fn native_descr(py: Python<'_>, dtype: DType) -> PyResult<Bound<'_, PyArrayDescr>> {
    let descrs = DESCRS.get_or_try_init(py, || {
        DType::ALL
            .iter()
            .map(|d| PyArrayDescr::new(py, d.native_descr()).map(Bound::unbind))
            .collect::<PyResult<Vec<_>>>()
    })?;
    let at = DType::ALL
        .iter()
        .position(|&d| d == dtype)
        .ok_or_else(|| internal(py, "a dtype missing from DType::ALL"))?;
    Ok(descrs[at].bind(py).clone())
}

/// A numpy array of `dtype` and `shape` viewing `buffer` (C order, no copy).
///
/// The caller guarantees that `buffer` holds exactly the bytes of such an
/// array and is aligned for `dtype`, as [`Array`] does.
fn view<'py>(
    py: Python<'py>,
    dtype: DType,
    shape: &[usize],
    buffer: Buffer,
) -> PyResult<Bound<'py, PyAny>> {
    let expected = byte_len(dtype, shape)?;
    if expected != buffer.len() || !buffer.is_aligned_to(dtype.alignment()) {
        return Err(internal(py, "a buffer does not match its array"));
    }
    // on the stack: a view is made on every `block.values`
    let mut dims: [npy_intp; MAX_NDIM] = [0; MAX_NDIM];
    if shape.len() > MAX_NDIM {
        return Err(invalid(
            py,
            format!("{} dimensions are too many for numpy", shape.len()),
        ));
    }
    for (dim, &d) in dims.iter_mut().zip(shape) {
        *dim = npy_intp::try_from(d)
            .map_err(|_| invalid(py, format!("shape {shape:?} is too large for numpy")))?;
    }
    let ndim =
        c_int::try_from(shape.len()).map_err(|_| internal(py, "more dimensions than MAX_NDIM"))?;
    let mut flags = npyffi::NPY_ARRAY_C_CONTIGUOUS | npyffi::NPY_ARRAY_ALIGNED;
    if buffer.is_writable() {
        flags |= npyffi::NPY_ARRAY_WRITEABLE;
    }
    let data = buffer.as_ptr().cast_mut().cast::<c_void>();
    let descr = native_descr(py, dtype)?;
    let owner = Bound::new(py, BufferOwner { buffer })?;

    // SAFETY: ndarray type; the new descr reference is stolen; `dims` has `ndim` entries; null
    // strides = C order; `data` holds `expected` bytes aligned for `dtype` (checked above), alive
    // while `owner` is, which becomes the array's base below before Python can see the array.
    let array = unsafe {
        PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type),
            descr.into_dtype_ptr(),
            ndim,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            data,
            flags,
            std::ptr::null_mut(),
        )
    };
    if array.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `array` is a new, owned, non-null reference to an ndarray.
    let array = unsafe { Bound::from_owned_ptr(py, array) };
    // SAFETY: `array` is an ndarray without a base; PyArray_SetBaseObject
    // steals the reference `into_ptr` gives, also when it fails.
    let status = unsafe {
        PY_ARRAY_API.PyArray_SetBaseObject(
            py,
            array.as_ptr().cast::<npyffi::PyArrayObject>(),
            owner.into_ptr(),
        )
    };
    if status < 0 {
        return Err(PyErr::fetch(py));
    }
    Ok(array)
}

/// A numpy array viewing `array`'s memory, writable when the memory is.
pub fn to_numpy<'py>(py: Python<'py>, array: &Array) -> PyResult<Bound<'py, PyAny>> {
    view(py, array.dtype(), array.shape(), array.buffer().clone())
}

/// A read-only numpy array viewing `array`'s memory.
pub fn to_numpy_read_only<'py>(py: Python<'py>, array: &Array) -> PyResult<Bound<'py, PyAny>> {
    view(
        py,
        array.dtype(),
        array.shape(),
        array.buffer().clone().into_read_only(),
    )
}

/// A read-only 1-D numpy array of `len` int32 values starting at element
/// `start` of `array` (which must be int32).
pub fn int32_row<'py>(
    py: Python<'py>,
    array: &Array,
    start: usize,
    len: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let size = DType::I4.size();
    let buffer = array
        .buffer()
        .slice(start * size, len * size)?
        .into_read_only();
    view(py, DType::I4, &[len], buffer)
}

static AS_ARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static NEW_ARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `numpy.asarray(obj)`.
pub fn as_ndarray<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let asarray = AS_ARRAY.import(py, "numpy", "asarray")?;
    asarray
        .call1((obj,))
        .map_err(|error| from_callee(py, error))
}

/// `numpy.array(obj, dtype=descr, order="C", copy=True)`: a new C-ordered,
/// aligned, native array.
fn copy_to_native<'py>(obj: &Bound<'py, PyAny>, descr: &str) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let array = NEW_ARRAY.import(py, "numpy", "array")?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("dtype", descr)?;
    kwargs.set_item("order", "C")?;
    kwargs.set_item("copy", true)?;
    array
        .call((obj,), Some(&kwargs))
        .map_err(|error| from_callee(py, error))
}

/// The element type and byte order of a numpy array, or a type error.
fn numpy_dtype(array: &Bound<'_, PyAny>, what: &str) -> PyResult<(DType, ByteOrder)> {
    let descr: String = array.getattr("dtype")?.getattr("str")?.extract()?;
    DType::parse_descr(&descr).map_err(|e| {
        let name = array
            .getattr("dtype")
            .and_then(|d| d.str())
            .map_or(descr, |s| s.to_string());
        wrong_type(array.py(), format!("{what}: unsupported dtype {name}: {e}"))
    })
}

/// Bring an array-like into blockmap.
///
/// A C-contiguous, aligned, native-byte-order numpy array is kept without a
/// copy: the result holds a buffer export of it, writable when the array is.
/// Anything else is converted with `numpy.asarray` and, when it is not such
/// an array, copied once into one.
pub fn from_python(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Array> {
    let py = obj.py();
    let mut array = as_ndarray(obj)?;
    let (dtype, order) = numpy_dtype(&array, what)?;
    if array.getattr("ndim")?.extract::<usize>()? == 0 {
        return Err(invalid(
            py,
            format!("{what}: got a 0-dimensional array (a scalar)"),
        ));
    }
    let flags = array.getattr("flags")?;
    let behaved = flags.getattr("c_contiguous")?.extract::<bool>()?
        && flags.getattr("aligned")?.extract::<bool>()?
        && order == ByteOrder::NATIVE;
    if !behaved {
        array = copy_to_native(&array, &dtype.native_descr())?;
    }
    from_python_array(&array, what, |export, _| Box::new(export))
}

/// The [`Array`] viewing a C-contiguous, aligned, native numpy `array`,
/// whose buffer export `owner` wraps into what keeps the memory alive
/// (given the export and the shape).
pub fn from_python_array(
    array: &Bound<'_, PyAny>,
    what: &str,
    owner: impl FnOnce(PyUntypedBuffer, &[usize]) -> Box<dyn Any + Send + Sync>,
) -> PyResult<Array> {
    let py = array.py();
    let (dtype, _) = numpy_dtype(array, what)?;
    let export = PyUntypedBuffer::get(array)?;
    let shape = export.shape().to_vec();
    let len = byte_len(dtype, &shape)?;
    if !export.is_c_contiguous()
        || export.len_bytes() != len
        || export.item_size() != dtype.size()
        || !(export.buf_ptr() as usize).is_multiple_of(dtype.alignment())
    {
        return Err(invalid(
            py,
            format!("{what}: the array's buffer export does not match its dtype and shape"),
        ));
    }
    let writable = !export.readonly();
    let Some(ptr) = NonNull::new(export.buf_ptr().cast::<u8>()) else {
        return Ok(Array::new(dtype, shape, Buffer::empty())?);
    };
    let owner = owner(export, &shape);
    // SAFETY: an export keeps its `len` contiguous bytes valid, in place, and writable iff
    // not read-only, until released: when `owner`, which holds it, drops with the buffer.
    let buffer = unsafe { Buffer::from_foreign(ptr, len, writable, owner) };
    Ok(Array::new(dtype, shape, buffer)?)
}

/// A [`Buffer`] over a C-contiguous buffer export, holding the export: the
/// memory stays valid and in place while the buffer (or any clone) lives,
/// writable exactly when the export is.
fn hold(py: Python<'_>, export: PyUntypedBuffer) -> PyResult<Buffer> {
    debug_assert!(export.is_c_contiguous());
    let len = export.len_bytes();
    let writable = !export.readonly();
    match NonNull::new(export.buf_ptr().cast::<u8>()) {
        // SAFETY: an export keeps its `len` contiguous bytes valid, in place, and writable iff
        // not read-only, until released: when `export`, moved into the buffer as its owner, drops.
        Some(ptr) => Ok(unsafe { Buffer::from_foreign(ptr, len, writable, Box::new(export)) }),
        None if len == 0 => Ok(Buffer::empty()),
        None => Err(invalid(py, "the buffer export has no memory")),
    }
}

/// A [`Buffer`] over the export of a `bytes` object (exactly `bytes`, not a
/// subclass), holding the export: private (see "Aliasing" in
/// `buffer/mod.rs`), so that it is read in place (a CRC straight over it).
/// A `bytes` object is immutable once made; the one exception blockmap
/// makes, the new `bytes` objects pickle gives the reconstructor
/// (`buffer_from_pickled_bytes`), are referenced by nothing Python code can
/// reach to pass here.
fn hold_bytes(py: Python<'_>, export: PyUntypedBuffer) -> PyResult<Buffer> {
    let len = export.len_bytes();
    match NonNull::new(export.buf_ptr().cast::<u8>()) {
        // SAFETY: the export of a `bytes` object keeps its `len` contiguous
        // bytes valid and in place until released (when `export`, moved
        // into the buffer as its owner, drops), and nobody writes the bytes
        // of a `bytes` object once made (see above): the aliasing rule,
        // buffer/mod.rs.
        Some(ptr) => Ok(unsafe { Buffer::from_immutable_foreign(ptr, len, Box::new(export)) }),
        None if len == 0 => Ok(Buffer::empty()),
        None => Err(invalid(py, "the buffer export has no memory")),
    }
}

/// The bytes of any object exporting a buffer, as a [`Buffer`] holding the
/// export: no copy when the export is C-contiguous (any format, any shape:
/// only the bytes matter), read-only when it is. A non-contiguous export is
/// copied once into memory blockmap owns.
pub fn buffer_from_python(obj: &Bound<'_, PyAny>) -> PyResult<Buffer> {
    let py = obj.py();
    let export = PyUntypedBuffer::get(obj).map_err(|_| {
        wrong_type(
            py,
            format!(
                "expected a bytes-like object (bytes, bytearray, memoryview, numpy array), got {}",
                type_name(obj)
            ),
        )
    })?;
    if obj.is_exact_instance_of::<PyBytes>() {
        return hold_bytes(py, export);
    }
    if export.is_c_contiguous() {
        return hold(py, export);
    }
    // made contiguous by the buffer protocol, then copied into 64-byte aligned
    // memory; a copy of read-only memory stays read-only
    let contiguous = PyMemoryView::from(obj)?.call_method0("tobytes")?;
    let copy = Buffer::copy_from(contiguous.cast::<PyBytes>()?.as_bytes())?;
    Ok(if export.readonly() {
        copy.into_read_only()
    } else {
        copy
    })
}

extern "C" {
    /// `CPython`'s resize of a `bytes` object that nothing else references
    /// yet (it is exported by the interpreter; `pyo3-ffi` keeps it private).
    fn _PyBytes_Resize(bytes: *mut *mut ffi::PyObject, size: ffi::Py_ssize_t) -> c_int;
}

/// Write a stream into new `bytes` objects of about `target` bytes each,
/// with the GIL released (taken back only to create each object): `write`
/// gets a [`PiecedWriter`] over them, and the objects come back trimmed to
/// the bytes written into each. `bound` is an upper bound of the stream's
/// length (see [`PiecedWriter::new`]).
pub fn pieces_with<'py, W>(
    py: Python<'py>,
    target: usize,
    bound: usize,
    write: W,
) -> PyResult<Vec<Bound<'py, PyBytes>>>
where
    W: for<'a> FnOnce(&mut PiecedWriter<'a, PieceAllocator<'a>>) -> crate::Result<()> + Send,
{
    let mut objects: Vec<Py<PyBytes>> = Vec::new();
    let lengths = {
        let objects = &mut objects;
        super::gil::detached(py, move || {
            let mut writer = PiecedWriter::new(PieceAllocator { objects }, target, bound);
            write(&mut writer)?;
            Ok(writer.lengths())
        })?
    };
    if lengths.len() != objects.len() {
        return Err(internal(py, "a piece was allocated but not written"));
    }
    let mut pieces = Vec::with_capacity(objects.len());
    for (object, len) in objects.into_iter().zip(lengths) {
        let mut object = object.into_ptr();
        let len = ffi::Py_ssize_t::try_from(len)
            .map_err(|_| invalid(py, "the data is too large for a bytes object"))?;
        // SAFETY: `object` is an owned reference to a bytes object that no
        // one else references (it was created by `PieceAllocator` and never
        // handed out), as _PyBytes_Resize requires; `len` is at most its
        // size. On failure it releases the object and sets it to null.
        if unsafe { _PyBytes_Resize(&raw mut object, len) } < 0 {
            return Err(PyErr::fetch(py));
        }
        // SAFETY: `object` is an owned, non-null reference to a bytes object.
        pieces.push(unsafe { Bound::from_owned_ptr(py, object) }.cast_into()?);
    }
    Ok(pieces)
}

/// Creates the `bytes` objects of [`pieces_with`] (taking the GIL for it),
/// keeping them, and hands out their storage.
pub struct PieceAllocator<'a> {
    objects: &'a mut Vec<Py<PyBytes>>,
}

impl<'a> crate::buffer::Allocate<'a> for PieceAllocator<'a> {
    fn allocate(&mut self, capacity: usize) -> std::io::Result<PieceMemory<'a>> {
        let size = ffi::Py_ssize_t::try_from(capacity)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        Python::attach(|py| {
            self.objects
                .try_reserve(1)
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
            // SAFETY: with a null pointer, PyBytes_FromStringAndSize returns
            // a new, owned bytes object of `size` uninitialised bytes (or
            // null, with an exception set, on failure).
            let object = unsafe { ffi::PyBytes_FromStringAndSize(std::ptr::null(), size) };
            if object.is_null() {
                // a MemoryError (the only way it fails for a valid size)
                drop(PyErr::fetch(py));
                return Err(std::io::Error::from(std::io::ErrorKind::OutOfMemory));
            }
            // SAFETY: `object` is the owned, non-null bytes object just made.
            let bytes: Py<PyBytes> = unsafe { Bound::from_owned_ptr(py, object) }
                .cast_into::<PyBytes>()
                .map_err(|_| std::io::Error::other("not a bytes object"))?
                .unbind();
            // SAFETY: the bytes object holds `capacity` bytes (possibly
            // uninitialised, hence `MaybeUninit`) at a fixed address for its
            // whole life; it is kept in `objects`, which outlives 'a, and
            // nothing else reads or writes its storage until `pieces_with`
            // gets it back after the writer (the only user of this slice)
            // is gone.
            let memory = unsafe {
                std::slice::from_raw_parts_mut(
                    ffi::PyBytes_AsString(object).cast::<MaybeUninit<u8>>(),
                    capacity,
                )
            };
            self.objects.push(bytes);
            crate::buffer::prefault(memory);
            Ok(memory)
        })
    }
}

/// The bytes of a `bytes` object that pickle gave to a reconstructor, as a
/// **writable** buffer. Bytes are immutable by contract; this follows numpy,
/// which unpickles large arrays as writable views of the `bytes` objects
/// pickle creates for them: such an object is new, and referenced only by
/// the reconstructor's arguments, so no one else can see the writes.
pub fn buffer_from_pickled_bytes(bytes: &Bound<'_, PyBytes>) -> Buffer {
    let data = bytes.as_bytes();
    let len = data.len();
    match NonNull::new(data.as_ptr().cast_mut()) {
        // SAFETY: the bytes object (kept alive by the owner) holds `len`
        // bytes at a fixed address for its whole life; writes through views
        // are accepted as explained above.
        Some(ptr) if len > 0 => unsafe {
            Buffer::from_foreign(ptr, len, true, Box::new(bytes.clone().unbind()))
        },
        _ => Buffer::empty(),
    }
}

/// The int32 elements of a 2-D numpy view, row-major, in memory Rust owns
/// (labels from numpy: the copy is what they validate). Read element by
/// element through raw pointers, never a `&[i32]` or `&i32`: other threads
/// (a numpy ufunc with the GIL released, torch) may write the array
/// meanwhile (the aliasing rule, buffer/mod.rs).
pub fn copy_int32_rows(view: &numpy::ndarray::ArrayView2<'_, i32>) -> crate::Result<Vec<i32>> {
    let (rows, columns) = view.dim();
    let count = rows * columns;
    let mut out: Vec<i32> = Vec::new();
    out.try_reserve_exact(count)?;
    let base = view.as_ptr();
    if view.is_standard_layout() {
        // SAFETY: a row-major view holds its `count` elements one after
        // the other from `base` (copied as bytes: it need not be aligned), inside the array it borrows (alive:
        // `view` borrows it); `out` has room for them (reserved above) and
        // is Rust's own memory; a raw copy, no reference to memory others
        // may write (the aliasing rule, buffer/mod.rs).
        unsafe {
            std::ptr::copy_nonoverlapping(
                base.cast::<u8>(),
                out.as_mut_ptr().cast::<u8>(),
                count * std::mem::size_of::<i32>(),
            );
            out.set_len(count);
        }
        return Ok(out);
    }
    let (row_stride, column_stride) = (view.strides()[0], view.strides()[1]);
    for i in 0..rows {
        for j in 0..columns {
            // i < rows, j < columns: the offset of element (i, j) of the view
            let offset = i.cast_signed() * row_stride + j.cast_signed() * column_stride;
            // SAFETY: element (i, j) of a view lies at `base + offset`
            // elements, inside the array the view borrows (alive: `view`
            // borrows it); read by value through a raw pointer, unaligned
            // (numpy arrays need not be aligned), no reference to memory
            // others may write (the aliasing rule, buffer/mod.rs).
            out.push(unsafe { base.offset(offset).read_unaligned() });
        }
    }
    Ok(out)
}
