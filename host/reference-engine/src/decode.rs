//! One completion being generated: the pace (prefill, then a delay per
//! token), `max_tokens` and stop words around the [`Generator`].

use std::time::Duration;

use serde::Serialize;

use crate::generator::Generator;

/// Why a completion ended, as OpenAI's `finish_reason` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FinishReason {
    /// `max_tokens` was reached.
    Length,
    /// A stop word was generated.
    Stop,
}

/// How fast the engine generates.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pace {
    /// Once per request, before the first token.
    pub first_token: Duration,
    /// Before every token.
    pub per_token: Duration,
}

/// Generates the tokens of one completion, pacing them.
#[derive(Debug)]
pub struct Decoder {
    generator: Generator,
    max_tokens: u32,
    stop: Vec<String>,
    pace: Pace,
    prefilled: bool,
    produced: u32,
    finish: Option<FinishReason>,
}

impl Decoder {
    /// A decoder that stops after `max_tokens` tokens or at a word equal to
    /// one of `stop` (compared without the stop string's surrounding whitespace).
    pub fn new(generator: Generator, max_tokens: u32, stop: Vec<String>, pace: Pace) -> Self {
        Self {
            generator,
            max_tokens,
            stop,
            pace,
            prefilled: false,
            produced: 0,
            finish: None,
        }
    }

    /// Waits out the prompt's processing; only the first call waits.
    pub async fn prefill(&mut self) {
        if !self.prefilled {
            self.prefilled = true;
            pause(self.pace.first_token).await;
        }
    }

    /// The next token, `" word"`, after the per-token delay; `None` once the
    /// completion has ended, and [`finish_reason`](Self::finish_reason) says why.
    /// A stop word ends the completion and is neither returned nor counted.
    pub async fn next_token(&mut self) -> Option<String> {
        if self.finish.is_some() {
            return None;
        }
        if self.produced >= self.max_tokens {
            self.finish = Some(FinishReason::Length);
            return None;
        }
        self.prefill().await;
        pause(self.pace.per_token).await;
        let word = self.generator.next_word();
        if self.stop.iter().any(|stop| stop.trim() == word) {
            self.finish = Some(FinishReason::Stop);
            return None;
        }
        self.produced += 1;
        Some(format!(" {word}"))
    }

    /// Generates the rest of the completion at once.
    pub async fn collect(&mut self) -> String {
        let mut text = String::new();
        while let Some(token) = self.next_token().await {
            text.push_str(&token);
        }
        text
    }

    /// Tokens returned so far (`completion_tokens`).
    pub fn produced(&self) -> u32 {
        self.produced
    }

    /// Why the completion ended; `None` while it goes on.
    pub fn finish_reason(&self) -> Option<FinishReason> {
        self.finish
    }
}

/// Sleeps for `duration`, without yielding when it is zero: an engine with no
/// delays generates as fast as it can.
async fn pause(duration: Duration) {
    if !duration.is_zero() {
        tokio::time::sleep(duration).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::Prompt;

    fn generator() -> Generator {
        Generator::new(&[0; 32], &Prompt::Text("hi".into()), None)
    }

    #[tokio::test]
    async fn ends_with_length_at_max_tokens() {
        let mut decoder = Decoder::new(generator(), 5, Vec::new(), Pace::default());
        let text = decoder.collect().await;
        assert_eq!(text.split_whitespace().count(), 5);
        assert!(text.starts_with(' '));
        assert_eq!(decoder.produced(), 5);
        assert_eq!(decoder.finish_reason(), Some(FinishReason::Length));
    }

    #[tokio::test]
    async fn a_stop_word_ends_with_stop_and_is_left_out() {
        let mut full = Decoder::new(generator(), 10, Vec::new(), Pace::default());
        let words: Vec<String> = full
            .collect()
            .await
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        let stop = words[3].clone();
        let first = words.iter().position(|w| *w == stop).unwrap();

        let mut stopped = Decoder::new(generator(), 10, vec![format!(" {stop}")], Pace::default());
        let text = stopped.collect().await;
        assert_eq!(text, format!(" {}", words[..first].join(" ")).trim_end());
        assert_eq!(stopped.produced() as usize, first);
        assert_eq!(stopped.finish_reason(), Some(FinishReason::Stop));
    }

    #[tokio::test(start_paused = true)]
    async fn paces_prefill_then_each_token() {
        let pace = Pace {
            first_token: Duration::from_millis(100),
            per_token: Duration::from_millis(10),
        };
        let start = tokio::time::Instant::now();
        let mut decoder = Decoder::new(generator(), 3, Vec::new(), pace);
        decoder.collect().await;
        assert_eq!(start.elapsed(), Duration::from_millis(130));
    }
}
