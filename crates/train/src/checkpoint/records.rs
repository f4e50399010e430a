//! A check of Burn's record files (`model.mpk`, `optimizer.mpk`) before Burn parses them.
//!
//! Burn's named MessagePack recorder trusts the file: a tensor whose `shape` disagrees with its
//! `bytes`, or with the model it is loaded into, panics deep inside the backend, reads out of
//! bounds, or asks for terabytes. So the file is walked here first, without building anything:
//! the MessagePack must be well formed (every length within the file, nesting at most
//! [`MAX_DEPTH`], nothing after the value); every tensor record (a map with `bytes`, `shape`
//! and `dtype`) must have exactly `product(shape) × size(dtype)` bytes and, inside a `RankN`
//! variant, N dimensions (found by fuzzing: Burn panics otherwise); and the caller compares
//! the tensors found, by path, with the model the config builds ([`Tensors`]).
//!
//! Record layout (Burn 0.21): `{metadata, item}`; a parameter is `{id, param: {bytes, shape,
//! dtype}}`; an enum module's record is a one-key map named after its variant (`Gpt`); the
//! optimizer's item maps each parameter's id to `{V1: {Rank2: {momentum: {moment_1, …}}}}`.

/// Deeper nesting than any of our records has is refused (a stack guard).
pub const MAX_DEPTH: usize = 64;

/// One tensor record found in a file.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorRecord {
    /// The path of the record, dotted, without `item`, enum variants and the `param` level
    /// (`layers.0.feed_forward.w_1.weight`; in an optimizer file `<param id>.momentum.moment_1`).
    pub path: String,
    /// The parameter id beside it (`{id, param}`), if any.
    pub id: Option<String>,
    pub shape: Vec<usize>,
    pub dtype: String,
    /// The first element that is NaN or infinite (float records only).
    pub first_non_finite: Option<usize>,
}

/// The tensors of one file, in file order.
pub type Tensors = Vec<TensorRecord>;

/// Walks `bytes` (a whole `.mpk` file); an error says what is wrong and at which byte or path.
pub fn scan(bytes: &[u8]) -> Result<Tensors, String> {
    let mut walker = Walker { bytes, at: 0, path: Vec::new(), ranks: Vec::new(), found: Vec::new() };
    walker.value(0)?;
    if walker.at != bytes.len() {
        return Err(format!("{} bytes after the record's end (byte {})", bytes.len() - walker.at, walker.at));
    }
    Ok(walker.found)
}

/// A decoded MessagePack value, as far as the check needs it (strings and binaries borrowed).
enum Value<'a> {
    Nil,
    Bool,
    Int(i128),
    Float,
    Str(&'a [u8]),
    Bin(&'a [u8]),
    Array(Vec<Value<'a>>),
    /// A map, or a long array: walked in place, nothing kept.
    Walked,
}

struct Walker<'a> {
    bytes: &'a [u8],
    at: usize,
    path: Vec<String>,
    /// The ranks named by enclosing `RankN` variants (an optimizer's state per parameter):
    /// Burn builds the tensor inside with that rank, whatever its shape says.
    ranks: Vec<usize>,
    found: Tensors,
}

/// Whether `id` is a parameter id as Burn 0.21 writes it: a `u64` in lowercase unpadded
/// base32hex, 13 characters, the last one's unused low bit zero. Burn's own parser panics on
/// other strings (found by fuzzing: "Invalid id."), and on longer valid base32 (it copies the
/// decoded bytes into 8).
pub fn is_param_id(id: &[u8]) -> bool {
    let digit = |c: u8| matches!(c, b'0'..=b'9' | b'a'..=b'v');
    let last = id.last().map_or(0, |&c| if c.is_ascii_digit() { c - b'0' } else { c.wrapping_sub(b'a') + 10 });
    id.len() == 13 && id.iter().all(|&c| digit(c)) && last.is_multiple_of(2)
}

fn dtype_size(dtype: &str) -> Option<usize> {
    Some(match dtype {
        "F64" | "I64" | "U64" => 8,
        "F32" | "I32" | "U32" | "Flex32" => 4,
        "F16" | "BF16" | "I16" | "U16" => 2,
        "I8" | "U8" | "Bool" => 1,
        _ => return None,
    })
}

impl<'a> Walker<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end =
            end.ok_or_else(|| format!("truncated: {n} bytes wanted at byte {} of {}", self.at, self.bytes.len()))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn uint(&mut self, n: usize) -> Result<u64, String> {
        Ok(self.take(n)?.iter().fold(0u64, |v, &b| (v << 8) | b as u64))
    }

    /// A count of `len` elements, each at least one byte: more than the bytes left is a lie.
    fn count(&self, len: u64) -> Result<usize, String> {
        let left = (self.bytes.len() - self.at) as u64;
        if len > left {
            return Err(format!("a length of {len} at byte {} with only {left} bytes left", self.at));
        }
        Ok(len as usize)
    }

    fn value(&mut self, depth: usize) -> Result<Value<'a>, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH} levels at byte {}", self.at));
        }
        let tag = self.take(1)?[0];
        let v = match tag {
            0x00..=0x7f => Value::Int(tag as i128),
            0xe0..=0xff => Value::Int((tag as i8) as i128),
            0xc0 => Value::Nil,
            0xc2 | 0xc3 => Value::Bool,
            0xcc..=0xcf => Value::Int(self.uint(1 << (tag - 0xcc))? as i128),
            0xd0..=0xd3 => {
                let n = 1 << (tag - 0xd0);
                let raw = self.uint(n)?;
                let shift = 64 - 8 * n as u32;
                Value::Int((((raw << shift) as i64) >> shift) as i128)
            }
            0xca | 0xcb => {
                self.take(if tag == 0xca { 4 } else { 8 })?;
                Value::Float
            }
            0xa0..=0xbf => Value::Str(self.take((tag & 0x1f) as usize)?),
            0xd9..=0xdb => {
                let len = self.uint(1 << (tag - 0xd9))?;
                Value::Str(self.take(self.count(len)?)?)
            }
            0xc4..=0xc6 => {
                let len = self.uint(1 << (tag - 0xc4))?;
                Value::Bin(self.take(self.count(len)?)?)
            }
            0x90..=0x9f => self.array((tag & 0x0f) as u64, depth)?,
            0xdc | 0xdd => {
                let len = self.uint(if tag == 0xdc { 2 } else { 4 })?;
                self.array(len, depth)?
            }
            0x80..=0x8f => self.map((tag & 0x0f) as u64, depth)?,
            0xde | 0xdf => {
                let len = self.uint(if tag == 0xde { 2 } else { 4 })?;
                self.map(len, depth)?
            }
            _ => {
                return Err(format!(
                    "MessagePack type 0x{tag:02x} at byte {} is not used by Burn's records",
                    self.at - 1
                ))
            }
        };
        Ok(v)
    }

    fn array(&mut self, len: u64, depth: usize) -> Result<Value<'a>, String> {
        let len = self.count(len)?;
        // Small arrays (a shape) come back whole; others are walked with their index as path.
        let mut items = Vec::new();
        for i in 0..len {
            self.path.push(i.to_string());
            let item = self.value(depth + 1)?;
            self.path.pop();
            if len <= 16 {
                items.push(item);
            }
        }
        Ok(if len <= 16 { Value::Array(items) } else { Value::Walked })
    }

    fn map(&mut self, len: u64, depth: usize) -> Result<Value<'a>, String> {
        let len = self.count(len)?;
        let mut entries = Vec::new();
        let start = self.found.len();
        for _ in 0..len {
            let key = self.value(depth + 1)?;
            let name = match &key {
                Value::Str(s) => String::from_utf8_lossy(s).into_owned(),
                _ => format!("#{}", entries.len()),
            };
            // `item`, `param` and an enum variant (a one-key map with a capitalized key) are
            // not levels of a parameter's path.
            let variant = len == 1 && name.starts_with(|c: char| c.is_ascii_uppercase());
            let level = !(variant || (depth == 0 && name == "item") || name == "param");
            let rank = name.strip_prefix("Rank").and_then(|n| n.parse::<usize>().ok()).filter(|_| variant);
            if let Some(rank) = rank {
                self.ranks.push(rank);
            }
            if level {
                self.path.push(name);
            }
            let value = self.value(depth + 1)?;
            if level {
                self.path.pop();
            }
            if rank.is_some() {
                self.ranks.pop();
            }
            entries.push((key, value));
        }
        let field = |name: &str| {
            entries.iter().find(|(k, _)| matches!(k, Value::Str(s) if *s == name.as_bytes())).map(|(_, v)| v)
        };
        if let (Some(Value::Bin(data)), Some(shape), Some(Value::Str(dtype))) =
            (field("bytes"), field("shape"), field("dtype"))
        {
            let record = self.tensor(data, shape, dtype)?;
            self.found.push(record);
        } else if let (Some(Value::Str(id)), Some(_)) = (field("id"), field("param")) {
            if !is_param_id(id) {
                let shown = String::from_utf8_lossy(id);
                return Err(format!("{}: parameter id {shown:?} is not one Burn 0.21 writes", self.path.join(".")));
            }
            // The tensor inside `param` was found just now: give it its id.
            if let Some(record) = self.found[start..].last_mut() {
                record.id = Some(String::from_utf8_lossy(id).into_owned());
            }
        }
        Ok(Value::Walked)
    }

    fn tensor(&self, data: &[u8], shape: &Value, dtype: &[u8]) -> Result<TensorRecord, String> {
        let path = self.path.join(".");
        let dtype = String::from_utf8_lossy(dtype).into_owned();
        let size = dtype_size(&dtype).ok_or_else(|| format!("{path}: unknown dtype {dtype:?}"))?;
        let Value::Array(dims) = shape else { return Err(format!("{path}: the shape is not a short list")) };
        let mut shape = Vec::with_capacity(dims.len());
        for d in dims {
            match d {
                Value::Int(n) if *n >= 0 && *n <= usize::MAX as i128 => shape.push(*n as usize),
                _ => return Err(format!("{path}: a shape entry is not a size")),
            }
        }
        if let Some(&rank) = self.ranks.last() {
            if rank != shape.len() {
                return Err(format!("{path}: a Rank{rank} record holds a tensor of shape {shape:?}"));
            }
        }
        let want = shape.iter().try_fold(size, |acc: usize, &d| acc.checked_mul(d));
        if want != Some(data.len()) {
            let want = want.map_or("more than fits in memory".to_string(), |w| format!("{w}"));
            return Err(format!(
                "{path}: shape {shape:?} of {dtype} needs {want} bytes, but the record holds {}",
                data.len()
            ));
        }
        let first_non_finite = match dtype.as_str() {
            "F32" => data.chunks_exact(4).position(|c| !f32::from_le_bytes(c.try_into().unwrap()).is_finite()),
            "F64" => data.chunks_exact(8).position(|c| !f64::from_le_bytes(c.try_into().unwrap()).is_finite()),
            _ => None,
        };
        Ok(TensorRecord { path, id: None, shape, dtype, first_non_finite })
    }
}

#[cfg(test)]
mod encodings;
#[cfg(test)]
mod tests;
