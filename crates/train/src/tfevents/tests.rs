use super::*;
use serde_json::json;

#[test]
fn crc32c_gives_the_castagnoli_check_value() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
}

#[test]
fn records_are_byte_identical_to_tensorboards_own_writer() {
    // tests/fixtures/tfevents/make.py writes these five events with TensorBoard's RecordWriter.
    let expected = include_bytes!("../../tests/fixtures/tfevents/expected.tfevents");
    let wall = 1_700_000_000.25;
    let s = |pairs: &[(&str, f32)]| pairs.iter().map(|(t, v)| (t.to_string(), *v)).collect::<Vec<_>>();
    let mut ours = record(&file_version_event(wall));
    ours.extend(record(&scalars_event(wall, 0, &s(&[("train/loss", 4.25)]))));
    let train = s(&[("train/loss", 4.1875), ("train/lr", 0.001), ("train/tokens_per_s", 12345.5)]);
    ours.extend(record(&scalars_event(wall, 1, &train)));
    ours.extend(record(&scalars_event(wall, 300, &s(&[("valid/loss", 1.5), ("valid/ppl", 4.481689)]))));
    ours.extend(record(&scalars_event(wall, 1 << 40, &s(&[("summary/valid_loss", -0.0)]))));
    assert_eq!(ours, expected.as_slice());
}

#[test]
fn metrics_events_become_tagged_scalars_and_lists_are_left_out() {
    let train = json!({"event": "train", "step": 7, "loss": 2.5, "lr": 0.01, "tokens_per_s": 100.0});
    let mut tags: Vec<String> = scalars_of(&train).into_iter().map(|(t, _)| t).collect();
    tags.sort();
    assert_eq!(tags, ["train/loss", "train/lr", "train/tokens_per_s"]);
    let eval = json!({"event": "eval", "step": 7, "split": "valid-averaged", "loss": 1.0, "averaged_steps": [5, 6]});
    assert_eq!(scalars_of(&eval), [("valid-averaged/loss".to_string(), 1.0)]);
}

fn steps_in(path: &Path) -> Vec<Option<u64>> {
    let bytes = std::fs::read(path).unwrap();
    let mut at = 0;
    let mut steps = Vec::new();
    while at < bytes.len() {
        let len = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        let data = &bytes[at + 12..at + 12 + len];
        steps.push(if data[9] == 0x1a { None } else { step_of(data) });
        at += 16 + len;
    }
    steps
}

#[test]
fn cutting_keeps_whole_records_up_to_the_step_and_drops_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    for step in 1..=5u64 {
        append(&path, &json!({"event": "train", "step": step * 100, "loss": 1.0})).unwrap();
    }
    let mut torn = record(&scalars_event(0.0, 600, &[("train/loss".into(), 1.0)]));
    torn.truncate(torn.len() - 3);
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&torn).unwrap();
    cut_to_step(&path, 300).unwrap();
    assert_eq!(steps_in(&path), [None, Some(100), Some(200), Some(300)]);
    // Appending after the cut continues the same file.
    append(&path, &json!({"event": "train", "step": 400, "loss": 1.0})).unwrap();
    assert_eq!(steps_in(&path), [None, Some(100), Some(200), Some(300), Some(400)]);
}

#[test]
fn a_record_with_a_wrong_checksum_ends_what_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    for step in 1..=3u64 {
        append(&path, &json!({"event": "train", "step": step, "loss": 1.0})).unwrap();
    }
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 6;
    bytes[last] ^= 1; // inside the step-3 record's data
    std::fs::write(&path, bytes).unwrap();
    cut_to_step(&path, 10).unwrap();
    assert_eq!(steps_in(&path), [None, Some(1), Some(2)]);
}

#[test]
fn reading_back_tensorboards_file_gives_every_scalar_with_its_step() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.tfevents");
    std::fs::write(&path, include_bytes!("../../tests/fixtures/tfevents/expected.tfevents")).unwrap();
    let scalars = read_scalars(&path).unwrap();
    let tags: Vec<(u64, &str)> = scalars.iter().map(|(s, t, _)| (*s, t.as_str())).collect();
    assert_eq!(
        tags,
        [
            (0, "train/loss"),
            (1, "train/loss"),
            (1, "train/lr"),
            (1, "train/tokens_per_s"),
            (300, "valid/loss"),
            (300, "valid/ppl"),
            (1 << 40, "summary/valid_loss")
        ]
    );
    assert_eq!(scalars[3].2, 12345.5);
}
