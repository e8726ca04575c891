//! A reader of GGUF files (llama.cpp's model format), enough to convert an encoder stored in
//! one: the header, the metadata key/value pairs, the tensor directory and the tensors' data.
//!
//! Layout (version 2 and 3, little-endian): magic `GGUF`, u32 version, u64 tensor count, u64
//! metadata count; each metadata entry a string key, a u32 value type and the value (strings
//! are a u64 length and UTF-8 bytes; arrays a u32 element type, a u64 count and the elements);
//! each tensor a string name, u32 dimension count, u64 dimensions (innermost first, so a
//! PyTorch `[outputs][inputs]` matrix is `[inputs, outputs]` here), u32 ggml type and a u64
//! offset into the data section, which starts at the next multiple of `general.alignment`
//! (32 when absent) after the directory. Only F32 and F16 tensors are read.
//!
//! Every count and offset is checked against the file's length before anything is allocated,
//! so a truncated or hostile file is an error, never a panic or a huge allocation.

use std::collections::BTreeMap;

use crate::EmbedError;

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Int(i64),
    Uint(u64),
    Float(f64),
    Bool(bool),
    Str(&'a str),
    Array(Vec<Value<'a>>),
}

impl<'a> Value<'a> {
    pub fn as_usize(&self) -> Option<usize> {
        match *self {
            Value::Uint(v) => usize::try_from(v).ok(),
            Value::Int(v) => usize::try_from(v).ok(),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Float(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&'a str> {
        match *self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value<'a>]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }
}

/// The element types of a tensor this reader returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    F32,
    F16,
}

impl Dtype {
    pub fn width(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 => 2,
        }
    }
}

/// One tensor: its PyTorch-order shape (outermost first), element type and raw
/// little-endian bytes.
#[derive(Debug, Clone, Copy)]
pub struct Tensor<'a> {
    pub dtype: Dtype,
    pub bytes: &'a [u8],
}

#[derive(Debug, Clone)]
struct Entry {
    /// Outermost first (the reverse of the file's order).
    shape: Vec<usize>,
    ggml_type: u32,
    offset: u64,
}

/// A parsed GGUF file, borrowing its bytes.
pub struct Gguf<'a> {
    /// The whole file (not shown by `Debug`).
    bytes: &'a [u8],
    pub metadata: BTreeMap<&'a str, Value<'a>>,
    /// Tensor names in the file's order, with their entries.
    tensors: Vec<(&'a str, Entry)>,
    data_start: usize,
}

impl std::fmt::Debug for Gguf<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gguf").field("tensors", &self.tensors.len()).field("metadata", &self.metadata.len()).finish()
    }
}

const GGML_F32: u32 = 0;
const GGML_F16: u32 = 1;
const DEFAULT_ALIGNMENT: usize = 32;
/// Arrays nest at most this deep (GGUF has no use for more; a bound keeps recursion finite).
const MAX_DEPTH: usize = 4;

fn invalid(why: impl std::fmt::Display) -> EmbedError {
    EmbedError::ModelInvalid(format!("GGUF: {why}"))
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], EmbedError> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.bytes.len()).ok_or_else(|| {
            invalid(format!(
                "truncated: {what} needs {n} bytes at offset {}, the file has {}",
                self.at,
                self.bytes.len()
            ))
        })?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], EmbedError> {
        Ok(self.take(N, what)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self, what: &str) -> Result<u32, EmbedError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, EmbedError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count of items of at least `min_bytes` each, refused when the rest of the file cannot
    /// hold that many (before anything is allocated for them).
    fn count(&mut self, min_bytes: usize, what: &str) -> Result<usize, EmbedError> {
        let n = self.u64(what)?;
        let left = (self.bytes.len() - self.at) as u64;
        if n.saturating_mul(min_bytes.max(1) as u64) > left {
            return Err(invalid(format!("{what} {n} does not fit in the {left} bytes left (truncated?)")));
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &str) -> Result<&'a str, EmbedError> {
        let len = self.count(1, what)?;
        std::str::from_utf8(self.take(len, what)?).map_err(|_| invalid(format!("{what} is not UTF-8")))
    }

    fn value(&mut self, kind: u32, what: &str, depth: usize) -> Result<Value<'a>, EmbedError> {
        Ok(match kind {
            0 => Value::Uint(u64::from(self.array::<1>(what)?[0])),
            1 => Value::Int(i64::from(i8::from_le_bytes(self.array(what)?))),
            2 => Value::Uint(u64::from(u16::from_le_bytes(self.array(what)?))),
            3 => Value::Int(i64::from(i16::from_le_bytes(self.array(what)?))),
            4 => Value::Uint(u64::from(self.u32(what)?)),
            5 => Value::Int(i64::from(i32::from_le_bytes(self.array(what)?))),
            6 => Value::Float(f64::from(f32::from_le_bytes(self.array(what)?))),
            7 => Value::Bool(self.array::<1>(what)?[0] != 0),
            8 => Value::Str(self.string(what)?),
            9 if depth < MAX_DEPTH => {
                let element = self.u32(what)?;
                let n = self.count(1, what)?;
                let items = (0..n).map(|_| self.value(element, what, depth + 1)).collect::<Result<_, _>>()?;
                Value::Array(items)
            }
            10 => Value::Uint(self.u64(what)?),
            11 => Value::Int(i64::from_le_bytes(self.array(what)?)),
            12 => Value::Float(f64::from_le_bytes(self.array(what)?)),
            other => return Err(invalid(format!("{what}: value type {other} is not one GGUF defines"))),
        })
    }
}

impl<'a> Gguf<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Gguf<'a>, EmbedError> {
        let mut c = Cursor { bytes, at: 0 };
        if c.take(4, "the magic").ok() != Some(b"GGUF".as_slice()) {
            return Err(invalid("not a GGUF file (no GGUF magic)"));
        }
        let version = c.u32("the version")?;
        if !(2..=3).contains(&version) {
            return Err(invalid(format!("version {version} is not supported (2 and 3 are)")));
        }
        // A tensor entry is at least 8 + 4 + 4 + 8 bytes, a metadata entry 8 + 4 + 1.
        let tensor_count = c.count(24, "the tensor count")?;
        let metadata_count = c.count(13, "the metadata count")?;
        let mut metadata = BTreeMap::new();
        for _ in 0..metadata_count {
            let key = c.string("a metadata key")?;
            let kind = c.u32(key)?;
            metadata.insert(key, c.value(kind, key, 0)?);
        }
        let mut tensors = Vec::with_capacity(tensor_count);
        for _ in 0..tensor_count {
            let name = c.string("a tensor name")?;
            let dims = c.u32(name)? as usize;
            if dims > 4 {
                return Err(invalid(format!("tensor {name}: {dims} dimensions (at most 4)")));
            }
            let mut shape = (0..dims)
                .map(|_| c.u64(name).and_then(|d| usize::try_from(d).map_err(|_| invalid(format!("{name}: size")))))
                .collect::<Result<Vec<_>, _>>()?;
            shape.reverse();
            let ggml_type = c.u32(name)?;
            let offset = c.u64(name)?;
            tensors.push((name, Entry { shape, ggml_type, offset }));
        }
        let alignment = match metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(v) => v.as_usize().filter(|a| a.is_power_of_two()).ok_or_else(|| invalid("general.alignment"))?,
        };
        let data_start = c.at.div_ceil(alignment) * alignment;
        Ok(Gguf { bytes, metadata, tensors, data_start })
    }

    /// Tensor names in the file's order.
    pub fn tensor_names(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.tensors.iter().map(|(name, _)| *name)
    }

    /// Metadata `key`, which must be there.
    pub fn get(&self, key: &str) -> Result<&Value<'a>, EmbedError> {
        self.metadata.get(key).ok_or_else(|| invalid(format!("metadata {key} is missing")))
    }

    pub fn usize(&self, key: &str) -> Result<usize, EmbedError> {
        self.get(key)?.as_usize().ok_or_else(|| invalid(format!("metadata {key} is not a count")))
    }

    pub fn f64(&self, key: &str) -> Result<f64, EmbedError> {
        self.get(key)?.as_f64().ok_or_else(|| invalid(format!("metadata {key} is not a number")))
    }

    pub fn str(&self, key: &str) -> Result<&'a str, EmbedError> {
        self.get(key)?.as_str().ok_or_else(|| invalid(format!("metadata {key} is not a string")))
    }

    /// The tensor `name`, checked to have `shape` (PyTorch order) and to lie inside the file.
    pub fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor<'a>, EmbedError> {
        let (_, entry) = self
            .tensors
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| invalid(format!("tensor {name} is missing")))?;
        if entry.shape != shape {
            return Err(invalid(format!("tensor {name}: shape {:?}, expected {shape:?}", entry.shape)));
        }
        let dtype = match entry.ggml_type {
            GGML_F32 => Dtype::F32,
            GGML_F16 => Dtype::F16,
            other => return Err(invalid(format!("tensor {name}: ggml type {other} is not supported (F32, F16 are)"))),
        };
        let len = shape.iter().try_fold(dtype.width(), |acc, &d| acc.checked_mul(d));
        let start = usize::try_from(entry.offset).ok().and_then(|o| o.checked_add(self.data_start));
        let range = start.zip(len).and_then(|(s, l)| Some(s..s.checked_add(l)?)).filter(|r| r.end <= self.bytes.len());
        let range =
            range.ok_or_else(|| invalid(format!("tensor {name} lies past the end of the file (truncated?)")))?;
        Ok(Tensor { dtype, bytes: &self.bytes[range] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }

    /// A small file: a string, a u32, an f32 and an array of strings in the metadata; an F32
    /// `[2, 3]` tensor and an F16 `[2]` one.
    fn sample() -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&2u64.to_le_bytes());
        out.extend_from_slice(&4u64.to_le_bytes());
        string(&mut out, "general.architecture");
        out.extend_from_slice(&8u32.to_le_bytes());
        string(&mut out, "nomic-bert");
        string(&mut out, "n");
        out.extend_from_slice(&4u32.to_le_bytes());
        out.extend_from_slice(&12u32.to_le_bytes());
        string(&mut out, "eps");
        out.extend_from_slice(&6u32.to_le_bytes());
        out.extend_from_slice(&0.5f32.to_le_bytes());
        string(&mut out, "tokens");
        out.extend_from_slice(&9u32.to_le_bytes());
        out.extend_from_slice(&8u32.to_le_bytes());
        out.extend_from_slice(&2u64.to_le_bytes());
        string(&mut out, "[CLS]");
        string(&mut out, "▁hi");
        string(&mut out, "a");
        out.extend_from_slice(&2u32.to_le_bytes());
        out.extend_from_slice(&3u64.to_le_bytes()); // innermost first: PyTorch [2, 3]
        out.extend_from_slice(&2u64.to_le_bytes());
        out.extend_from_slice(&GGML_F32.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        string(&mut out, "b");
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&2u64.to_le_bytes());
        out.extend_from_slice(&GGML_F16.to_le_bytes());
        out.extend_from_slice(&32u64.to_le_bytes());
        out.resize(out.len().div_ceil(32) * 32, 0);
        for v in 0..6 {
            out.extend_from_slice(&(v as f32).to_le_bytes());
        }
        out.resize(out.len() + 8, 0); // to the next multiple of 32 inside the data
        out.extend_from_slice(&0x3c00u16.to_le_bytes());
        out.extend_from_slice(&0xc000u16.to_le_bytes());
        out
    }

    #[test]
    fn reads_metadata_and_tensors() {
        let bytes = sample();
        let file = Gguf::parse(&bytes).unwrap();
        assert_eq!(file.str("general.architecture").unwrap(), "nomic-bert");
        assert_eq!(file.usize("n").unwrap(), 12);
        assert_eq!(file.f64("eps").unwrap(), 0.5);
        let tokens: Vec<_> = file.get("tokens").unwrap().as_array().unwrap().iter().map(super::Value::as_str).collect();
        assert_eq!(tokens, [Some("[CLS]"), Some("▁hi")]);
        assert_eq!(file.tensor_names().collect::<Vec<_>>(), ["a", "b"]);
        let a = file.tensor("a", &[2, 3]).unwrap();
        assert_eq!((a.dtype, a.bytes.len()), (Dtype::F32, 24));
        assert_eq!(&a.bytes[20..], &5f32.to_le_bytes());
        let b = file.tensor("b", &[2]).unwrap();
        assert_eq!((b.dtype, b.bytes), (Dtype::F16, &[0x00, 0x3c, 0x00, 0xc0][..]));
    }

    #[test]
    fn wrong_shapes_missing_tensors_and_keys_are_named() {
        let bytes = sample();
        let file = Gguf::parse(&bytes).unwrap();
        assert!(file.tensor("a", &[3, 2]).unwrap_err().to_string().contains("shape [2, 3], expected [3, 2]"));
        assert!(file.tensor("c", &[1]).unwrap_err().to_string().contains("tensor c is missing"));
        assert!(file.usize("general.architecture").unwrap_err().to_string().contains("not a count"));
        assert!(file.get("absent").unwrap_err().to_string().contains("absent is missing"));
    }

    #[test]
    fn truncated_and_foreign_files_are_errors() {
        let whole = sample();
        for cut in [0, 3, 10, 30, 60, 120, whole.len() - 60] {
            assert!(Gguf::parse(&whole[..cut]).is_err(), "cut at {cut}");
        }
        // Cut inside the data: the directory parses, the tensor past the end does not.
        let cut = &whole[..whole.len() - 1];
        let file = Gguf::parse(cut).unwrap();
        assert!(file.tensor("b", &[2]).unwrap_err().to_string().contains("past the end"));
        assert!(Gguf::parse(b"PK\x03\x04 a zip").unwrap_err().to_string().contains("not a GGUF file"));
        // A count far beyond the file allocates nothing and fails.
        let mut huge = whole.clone();
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(Gguf::parse(&huge).unwrap_err().to_string().contains("does not fit"));
    }
}
