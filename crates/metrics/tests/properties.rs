//! Invariances of the metrics, checked on random inputs (proptest).

use attend_metrics::bleu::corpus_stats;
use attend_metrics::ngram_lm::{KneserNey, LanguageModel, Vocab};
use attend_metrics::perplexity::{
    bits_from_nats, convert_perplexity, nats_from_bits, nats_from_perplexity, perplexity_from_nats,
};
use attend_metrics::{corpus_bleu, corpus_chrf, BleuConfig, BleuStats, ChrfConfig, Smoothing, Tokenizer};
use proptest::prelude::*;

const WORDS: &[&str] =
    &["the", "cat", "sat", "on", "mat", "3.14", "it's", "end.", "(a)", "Ünïcode", "日本", "—", "x,y"];

fn sentence(min: usize, max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(WORDS), min..max).prop_map(|w| w.join(" "))
}

fn any_config() -> impl Strategy<Value = BleuConfig> {
    let smoothing = prop_oneof![
        Just(Smoothing::Exp),
        Just(Smoothing::Floor(0.1)),
        Just(Smoothing::AddK(1.0)),
        Just(Smoothing::None)
    ];
    (prop::sample::select(Tokenizer::ALL.to_vec()), smoothing, any::<bool>(), any::<bool>()).prop_map(
        |(tokenizer, smoothing, lowercase, effective_order)| BleuConfig {
            tokenizer,
            smoothing,
            lowercase,
            effective_order,
        },
    )
}

/// Checks shared by the corpus-level properties: stats add up, and the score is in [0, 100].
fn check_corpus_props(hyps: &[String], refs: &[Vec<String>], config: &BleuConfig) -> Result<(), TestCaseError> {
    let corpus = corpus_stats(hyps, refs, config).unwrap();
    let summed: BleuStats = (0..hyps.len())
        .map(|i| {
            let r: Vec<&str> = refs.iter().map(|s| s[i].as_str()).collect();
            BleuStats::of_segment(&hyps[i], &r, config)
        })
        .sum();
    prop_assert_eq!(corpus, summed);
    let score = corpus_bleu(hyps, refs, config).unwrap().score;
    prop_assert!((0.0..=100.0 + 1e-9).contains(&score), "score {}", score);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn corpus_statistics_are_the_sum_of_segment_statistics(
        pairs in prop::collection::vec((sentence(0, 15), sentence(0, 15), sentence(0, 15)), 0..20),
        config in any_config(),
    ) {
        let hyps: Vec<String> = pairs.iter().map(|p| p.0.clone()).collect();
        let refs = vec![pairs.iter().map(|p| p.1.clone()).collect(), pairs.iter().map(|p| p.2.clone()).collect()];
        check_corpus_props(&hyps, &refs, &config)?;
    }

    #[test]
    fn bleu_of_a_corpus_against_itself_is_one_hundred(
        corpus in prop::collection::vec(sentence(4, 20), 1..20),
        config in any_config(),
    ) {
        // Every segment has at least 4 words, hence at least one 4-gram, so no order is empty.
        let score = corpus_bleu(&corpus, std::slice::from_ref(&corpus), &config).unwrap();
        prop_assert!((score.score - 100.0).abs() < 1e-9, "{:?}", score);
    }

    #[test]
    fn chrf_of_a_corpus_against_itself_is_one_hundred(
        corpus in prop::collection::vec(sentence(1, 20), 1..20),
        word_order in 0usize..3,
    ) {
        let config = ChrfConfig { word_order, ..ChrfConfig::chrf() };
        let score = corpus_chrf(&corpus, std::slice::from_ref(&corpus), &config).unwrap();
        prop_assert!((score.score - 100.0).abs() < 1e-9, "{:?}", score);
    }

    #[test]
    fn perplexity_conversions_round_trip(nats in 0.0f64..20.0, from in 1u64..100_000, quarters in 1u64..16) {
        prop_assert!((nats_from_perplexity(perplexity_from_nats(nats)) - nats).abs() < 1e-12);
        prop_assert!((nats_from_bits(bits_from_nats(nats)) - nats).abs() < 1e-12);
        // Units of another coding of the same text: between a quarter and four times as many.
        let to = (from * quarters / 4).max(1);
        let ppl = perplexity_from_nats(nats.min(5.0));
        let back = convert_perplexity(convert_perplexity(ppl, from, to), to, from);
        prop_assert!((back - ppl).abs() <= 1e-9 * ppl, "{} vs {}", back, ppl);
    }

    #[test]
    fn kneser_ney_probabilities_sum_to_one_over_the_vocabulary(
        train in prop::collection::vec(sentence(0, 12), 1..30),
        history in prop::collection::vec(prop::sample::select(WORDS), 0..5),
        order in 1usize..6,
    ) {
        let vocab = Vocab::from_lines(&train);
        let sentences: Vec<Vec<u32>> = train.iter().map(|l| vocab.encode_line(l)).collect();
        let model = KneserNey::train(&sentences, &vocab, order).unwrap();
        let mut h = vec![vocab.bos()];
        h.extend(history.iter().map(|w| vocab.id(w)));
        let total: f64 = (0..vocab.len() as u32).map(|w| model.log_prob(&h, w).exp()).sum();
        prop_assert!((total - 1.0).abs() < 1e-9, "sum {}", total);
    }
}
