//! TensorBoard event files: the run's scalars (loss, lr, tokens/s, evaluation figures) in the
//! format `tensorboard --logdir runs` reads, written beside `metrics.jsonl` as
//! `events.out.tfevents.attend`.
//!
//! The format is TensorFlow's TFRecord framing around `tensorflow.Event` protocol buffers:
//! each record is `len: u64 LE`, `masked_crc32c(len)`, `data`, `masked_crc32c(data)`, where
//! `masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8`. The first event carries
//! `file_version = "brain.Event:2"`; each later one a `wall_time`, a `step` and a `Summary` of
//! `simple_value`s. No maintained Rust crate writes these (`tensorboard-rs` was last released
//! in 2021, on protobuf 2), and the four message fields we need are a few lines of varints,
//! so the encoding is here. A test compares our bytes with TensorBoard's own writer's
//! (`tests/fixtures/tfevents/make.py`).
//!
//! The events file follows `metrics.jsonl`: a resumed run cuts both back to its checkpoint's
//! step (here by re-reading our records and keeping those of earlier steps).

use std::io::Write;
use std::path::Path;

/// The events file's name inside the run directory ("tfevents" is what TensorBoard looks for).
pub const FILE_NAME: &str = "events.out.tfevents.attend";

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses.
pub fn crc32c(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 { 0x82F6_3B78 ^ (c >> 1) } else { c >> 1 };
                k += 1;
            }
            table[i] = c;
            i += 1;
        }
        table
    };
    let mut crc = !0u32;
    for &b in data {
        crc = TABLE[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

fn masked_crc(data: &[u8]) -> u32 {
    let c = crc32c(data);
    c.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// One TFRecord around `data`.
pub fn record(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
    out
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    varint(out, ((field << 3) | 2) as u64);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// `Event { wall_time: 1, step: 2, file_version: 3 }` (fields TensorBoard's writer sets first).
pub fn file_version_event(wall_time: f64) -> Vec<u8> {
    let mut out = vec![0x09];
    out.extend_from_slice(&wall_time.to_le_bytes());
    bytes_field(&mut out, 3, b"brain.Event:2");
    out
}

/// `Event { wall_time, step, summary: Summary { value: [Value { tag, simple_value }] } }`.
pub fn scalars_event(wall_time: f64, step: u64, scalars: &[(String, f32)]) -> Vec<u8> {
    let mut summary = Vec::new();
    for (tag, value) in scalars {
        let mut v = Vec::new();
        bytes_field(&mut v, 1, tag.as_bytes());
        v.push(0x15); // field 2, fixed32
        v.extend_from_slice(&value.to_le_bytes());
        bytes_field(&mut summary, 1, &v);
    }
    let mut out = vec![0x09];
    out.extend_from_slice(&wall_time.to_le_bytes());
    if step != 0 {
        out.push(0x10); // field 2, varint (proto3 leaves a zero out)
        varint(&mut out, step);
    }
    bytes_field(&mut out, 5, &summary);
    out
}

/// The scalars of one `metrics.jsonl` event: `train/loss`, `train/lr`, `train/tokens_per_s`;
/// `valid/loss`, `valid/ppl`, `valid/bleu`, … (`{split}/{field}` for evaluations); `summary/…`.
/// Non-numeric fields (and the lists of averaged steps) are left out.
pub fn scalars_of(event: &serde_json::Value) -> Vec<(String, f32)> {
    let Some(object) = event.as_object() else { return Vec::new() };
    let group = match (event["event"].as_str(), event["split"].as_str()) {
        (Some("eval"), Some(split)) => split.to_string(),
        (Some(name), _) => name.to_string(),
        _ => return Vec::new(),
    };
    object
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "event" | "step" | "split"))
        .filter_map(|(key, value)| value.as_f64().map(|v| (format!("{group}/{key}"), v as f32)))
        .collect()
}

/// Appends one `metrics.jsonl` event to the events file at `path` (starting the file with its
/// version record if it is new). Events with no numeric field write nothing.
pub fn append(path: &Path, event: &serde_json::Value) -> std::io::Result<()> {
    let scalars = scalars_of(event);
    if scalars.is_empty() {
        return Ok(());
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let mut bytes = Vec::new();
    if !path.exists() {
        bytes.extend(record(&file_version_event(now)));
    }
    bytes.extend(record(&scalars_event(now, event["step"].as_u64().unwrap_or(0), &scalars)));
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(&bytes)
}

/// The step of one of our events (`None` for the version record or anything unreadable).
fn step_of(data: &[u8]) -> Option<u64> {
    // Our events start with wall_time (9 bytes); a step follows as field 2, or is absent (0).
    let rest = data.strip_prefix(&[0x09])?.get(8..)?;
    match rest.first()? {
        0x10 => {
            let mut step = 0u64;
            for (i, &b) in rest[1..].iter().enumerate().take(10) {
                step |= ((b & 0x7f) as u64) << (7 * i);
                if b & 0x80 == 0 {
                    return Some(step);
                }
            }
            None
        }
        0x2a => Some(0),
        _ => None,
    }
}

/// The data of each whole, intact record of `bytes`, with its end offset, up to the first
/// record that is torn or fails its checksum.
fn records(bytes: &[u8]) -> impl Iterator<Item = (&[u8], usize)> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let head = bytes.get(at..at + 12)?;
        let len = u64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
        let intact = u32::from_le_bytes(head[8..].try_into().expect("4 bytes")) == masked_crc(&head[..8]);
        let len = usize::try_from(len).ok().filter(|_| intact)?;
        let data = bytes.get(at + 12..(at + 12).checked_add(len)?)?;
        let crc = bytes.get(at + 12 + len..at + 16 + len)?;
        (u32::from_le_bytes(crc.try_into().expect("4 bytes")) == masked_crc(data)).then(|| {
            at += 16 + len;
            (data, at)
        })
    })
}

/// Keeps the whole, intact records whose step is at most `step` (and the version record, but
/// no summary), dropping everything after the first that is not; rewrites the file whole (synced, then renamed: [`crate::whole_file`]).
pub fn cut_to_step(path: &Path, step: u64) -> std::io::Result<()> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut keep = 0;
    for (data, end) in records(&bytes) {
        // The version record (file_version follows wall_time) stays; like `metrics.jsonl`, the
        // cut drops the end of a run (a resumed run writes it anew).
        let is_version = data.get(9) == Some(&0x1a);
        let is_summary = data.windows(8).any(|w| w == b"summary/") || data.windows(15).any(|w| w == b"valid-averaged/");
        if !is_version && (is_summary || step_of(data).is_none_or(|s| s > step)) {
            break;
        }
        keep = end;
    }
    crate::whole_file::write_whole(path, &bytes[..keep])
}

/// Reads back the scalars of an events file we wrote, as `(step, tag, value)` in file order
/// (for tests and tools; TensorBoard itself reads the file for people).
pub fn read_scalars(path: &Path) -> std::io::Result<Vec<(u64, String, f32)>> {
    let bytes = std::fs::read(path)?;
    let mut out = Vec::new();
    for (data, _) in records(&bytes) {
        let Some(step) = step_of(data) else { continue };
        let mut fields = Fields(data);
        while let Some((field, value)) = fields.next() {
            if field != 5 {
                continue;
            }
            let mut summary = Fields(value);
            while let Some((1, v)) = summary.next() {
                let mut value_fields = Fields(v);
                let (mut tag, mut number) = (String::new(), None);
                while let Some((f, bytes)) = value_fields.next() {
                    match f {
                        1 => tag = String::from_utf8_lossy(bytes).into_owned(),
                        2 => number = bytes.try_into().ok().map(f32::from_le_bytes),
                        _ => {}
                    }
                }
                out.extend(number.map(|n| (step, tag, n)));
            }
        }
    }
    Ok(out)
}

/// The fields of a protocol buffer message, as `(number, payload)` (varints as their bytes).
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let (&b, rest) = self.0.split_first()?;
            self.0 = rest;
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }

    fn next(&mut self) -> Option<(u32, &'a [u8])> {
        let key = self.varint()?;
        let payload = match key & 7 {
            0 => {
                let start = self.0;
                self.varint()?;
                &start[..start.len() - self.0.len()]
            }
            1 => self.take(8)?,
            2 => {
                let len = usize::try_from(self.varint()?).ok()?;
                self.take(len)?
            }
            5 => self.take(4)?,
            _ => return None,
        };
        Some(((key >> 3) as u32, payload))
    }
}

#[cfg(test)]
mod tests;
