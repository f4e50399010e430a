//! Classic BPE (Sennrich, Haddow & Birch 2016; `subword-nmt learn-bpe`): words are the
//! whitespace-separated tokens of the text, each a sequence of characters whose last one
//! carries the end-of-word marker `</w>`; the most frequent adjacent pair of symbols, summed
//! over the word counts, is merged, again and again, for a number of merges or until no pair
//! occurs at least `min_frequency` times. Ties go to the largest pair in string order, as
//! subword-nmt's `max(stats, key=lambda x: (stats[x], x))`.
//!
//! The result is written as subword-nmt's codes file (`#version: 0.2`, one `left right` pair
//! per line) and as a HuggingFace `tokenizer.json` (a BPE model with
//! `end_of_word_suffix = "</w>"`, a `WhitespaceSplit` pre-tokenizer and a `BPEDecoder`).
//!
//! The trainer recounts every pair for every merge: simple and exact, O(merges × symbols);
//! fine for the corpora of tests and teaching, not for 100 MB.

use std::collections::{BTreeMap, HashMap};

/// The end-of-word marker.
pub const END_OF_WORD: &str = "</w>";

/// Learned merges, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassicBpe {
    pub merges: Vec<(String, String)>,
    /// The initial symbols (characters, and characters with `</w>`), sorted.
    pub alphabet: Vec<String>,
}

/// Learns at most `merges` merges from `text` (pairs seen fewer than `min_frequency` times
/// are never merged).
pub fn learn(text: &str, merges: usize, min_frequency: u64) -> ClassicBpe {
    let mut counts: HashMap<&str, u64> = HashMap::new();
    for word in text.split_whitespace() {
        *counts.entry(word).or_insert(0) += 1;
    }
    // Word types in a fixed order, as symbol sequences.
    let mut words: Vec<(Vec<String>, u64)> = counts
        .into_iter()
        .map(|(w, n)| {
            let chars: Vec<char> = w.chars().collect();
            let last = chars.len() - 1;
            let symbols = chars
                .iter()
                .enumerate()
                .map(|(i, c)| if i == last { format!("{c}{END_OF_WORD}") } else { c.to_string() })
                .collect();
            (symbols, n)
        })
        .collect();
    words.sort();
    let mut alphabet: Vec<String> = words.iter().flat_map(|(s, _)| s.iter().cloned()).collect();
    alphabet.sort();
    alphabet.dedup();
    let mut learned = Vec::new();
    while learned.len() < merges {
        let mut stats: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        for (symbols, n) in &words {
            for pair in symbols.windows(2) {
                *stats.entry((pair[0].as_str(), pair[1].as_str())).or_insert(0) += n;
            }
        }
        // The highest count; among equal counts the largest pair (the map is in pair order).
        let Some((best, count)) =
            stats.iter().fold(None, |best: Option<((&str, &str), u64)>, (&pair, &count)| match best {
                Some((_, c)) if c > count => best,
                _ => Some((pair, count)),
            })
        else {
            break;
        };
        if count < min_frequency {
            break;
        }
        let (left, right) = (best.0.to_string(), best.1.to_string());
        let joined = format!("{left}{right}");
        for (symbols, _) in &mut words {
            let mut i = 0;
            while i + 1 < symbols.len() {
                if symbols[i] == left && symbols[i + 1] == right {
                    symbols[i] = joined.clone();
                    symbols.remove(i + 1);
                }
                i += 1;
            }
        }
        learned.push((left, right));
    }
    ClassicBpe { merges: learned, alphabet }
}

impl ClassicBpe {
    /// subword-nmt's codes file.
    pub fn codes(&self) -> String {
        let mut out = String::from("#version: 0.2\n");
        for (l, r) in &self.merges {
            out.push_str(&format!("{l} {r}\n"));
        }
        out
    }

    /// The HuggingFace `tokenizer.json`: ids are the alphabet's, then one per merge.
    pub fn tokenizer_json(&self) -> String {
        let mut vocab = serde_json::Map::new();
        for symbol in self.alphabet.iter().cloned().chain(self.merges.iter().map(|(l, r)| format!("{l}{r}"))) {
            let id = vocab.len();
            vocab.entry(symbol).or_insert(serde_json::json!(id));
        }
        let merges: Vec<String> = self.merges.iter().map(|(l, r)| format!("{l} {r}")).collect();
        let json = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": null,
            "decoder": {"type": "BPEDecoder", "suffix": END_OF_WORD},
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                      "end_of_word_suffix": END_OF_WORD, "fuse_unk": false, "byte_fallback": false,
                      "ignore_merges": false, "vocab": vocab, "merges": merges},
        });
        serde_json::to_string_pretty(&json).expect("JSON")
    }

    /// Writes the codes file to `codes` and the `tokenizer.json` to `tokenizer`, each
    /// atomically (a temporary file beside it, synced, then renamed): a failure leaves the
    /// file that was there whole.
    pub fn save(&self, codes: &std::path::Path, tokenizer: &std::path::Path) -> crate::Result<()> {
        crate::json::write_atomically(codes, self.codes().as_bytes())?;
        crate::json::write_atomically(tokenizer, self.tokenizer_json().as_bytes())
    }

    /// The segmentation of one word (merges applied in order of priority, as subword-nmt's
    /// `apply-bpe` and HuggingFace's BPE model do).
    pub fn segment(&self, word: &str) -> Vec<String> {
        let ranks: HashMap<(&str, &str), usize> =
            self.merges.iter().enumerate().map(|(i, (l, r))| ((l.as_str(), r.as_str()), i)).collect();
        let chars: Vec<char> = word.chars().collect();
        let Some(last) = chars.len().checked_sub(1) else { return Vec::new() };
        let mut symbols: Vec<String> = chars
            .iter()
            .enumerate()
            .map(|(i, c)| if i == last { format!("{c}{END_OF_WORD}") } else { c.to_string() })
            .collect();
        loop {
            let best = symbols
                .windows(2)
                .enumerate()
                .filter_map(|(i, p)| ranks.get(&(p[0].as_str(), p[1].as_str())).map(|&r| (r, i)))
                .min();
            let Some((_, i)) = best else { break };
            let joined = format!("{}{}", symbols[i], symbols[i + 1]);
            symbols[i] = joined;
            symbols.remove(i + 1);
        }
        symbols
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's corpus ("low lower newest widest", counts 5, 2, 6, 3) with `</w>` on the
    /// last character: `e s` and `s t</w>` both occur 9 times and the larger pair wins; then
    /// `e st</w>` (9), `l o` (7), and of three pairs seen 6 times the largest, `w est</w>`.
    /// `subword-nmt learn-bpe -s 4` (0.3.8) prints exactly these four.
    #[test]
    fn the_papers_example_learns_its_first_merges() {
        let text = "low ".repeat(5) + &"lower ".repeat(2) + &"newest ".repeat(6) + &"widest ".repeat(3);
        let bpe = learn(&text, 4, 2);
        let pairs: Vec<(&str, &str)> = bpe.merges.iter().map(|(l, r)| (l.as_str(), r.as_str())).collect();
        assert_eq!(pairs, [("s", "t</w>"), ("e", "st</w>"), ("l", "o"), ("w", "est</w>")]);
        assert_eq!(bpe.segment("lowest"), ["lo", "west</w>"]);
        assert_eq!(bpe.codes(), "#version: 0.2\ns t</w>\ne st</w>\nl o\nw est</w>\n");
    }
}
