//! A short run of every fuzz target in the ordinary test suite (CI): each target's seeds from
//! `fuzz/seeds/<target>/`, then deterministic mutations of them (byte flips, cuts, repeats,
//! splices), a few seconds in all. The long coverage-guided runs are `cargo fuzz`'s
//! (docs/reliability.md); every crash they found is a seed here, so it stays fixed.

use std::path::Path;

/// xorshift64*, for reproducible mutations.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut data = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(data.len() + 1);
        let last = at.min(data.len().saturating_sub(1));
        match rng.below(6) {
            0 if !data.is_empty() => data[last] ^= 1 << rng.below(8),
            1 => data.truncate(at),
            2 => {
                let piece: Vec<u8> = data[at..].iter().take(64).copied().collect();
                data.splice(at..at, piece.iter().copied().cycle().take(piece.len() * (1 + rng.below(8))));
            }
            3 => data.splice(at..at, other.iter().take(rng.below(256)).copied()).for_each(drop),
            4 if !data.is_empty() => data[last] = [0x00, 0xff, 0x7f, 0x80, b'\n', b'"'][rng.below(6)],
            _ => data.insert(at, rng.next() as u8),
        }
    }
    data
}

/// How many of `target`'s seeds (sorted by name, `crash-*` last) are valid inputs.
fn valid(target: &str) -> usize {
    seed_files(target).iter().filter(|f| !f.file_name().unwrap().to_string_lossy().starts_with("crash-")).count()
}

fn seed_files(target: &str) -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort_by_key(|f| (f.file_name().unwrap().to_string_lossy().starts_with("crash-"), f.clone()));
    files
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    seed_files(target).iter().map(|f| std::fs::read(f).unwrap()).collect()
}

#[test]
fn every_fuzz_target_survives_its_seeds_and_their_mutations() {
    for (name, target) in attend_fuzz::TARGETS {
        let seeds = seeds(name);
        assert!(!seeds.is_empty(), "{name} has no seeds");
        let runs = if name == "checkpoint" || name == "corpus" { 150 } else { 1500 };
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ name.len() as u64);
        for (i, seed) in seeds.iter().enumerate() {
            // Seeds are valid inputs (crash-* files need only not panic).
            assert!(
                target(seed) || i >= valid(name),
                "{name}: seed {i} is refused; regenerate with fuzz/seeds/make.sh"
            );
        }
        let mut accepted = 0;
        for _ in 0..runs {
            let (a, b) = (&seeds[rng.below(seeds.len())], &seeds[rng.below(seeds.len())]);
            accepted += usize::from(target(&mutate(&mut rng, a, b)));
        }
        assert!(accepted < runs, "{name}: every mutation accepted: the target checks nothing");
    }
}
