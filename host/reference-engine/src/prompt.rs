//! What a request asks the model to continue, and how it is counted.

/// One chat message, its content flattened to text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// `system`, `user`, `assistant`, ... (any role is accepted).
    pub role: String,
    /// The text content; a list of text parts is joined with newlines.
    pub content: String,
}

/// The input of a generation request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// `/v1/chat/completions`' messages.
    Chat(Vec<Message>),
    /// `/v1/completions`' prompt.
    Text(String),
}

impl Prompt {
    /// Prompt tokens, approximated as whitespace-separated words of the text
    /// (message contents for chat; roles and templates are not counted). A
    /// real tokenizer counts more, but the count is stable and checkable.
    pub fn tokens(&self) -> u32 {
        match self {
            Prompt::Chat(messages) => messages.iter().map(|m| words(&m.content)).sum(),
            Prompt::Text(text) => words(text),
        }
    }
}

/// Whitespace-separated words of `text`, the engine's token count.
pub fn words(text: &str) -> u32 {
    u32::try_from(text.split_whitespace().count()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_words_of_the_contents() {
        let chat = Prompt::Chat(vec![
            Message {
                role: "system".into(),
                content: "be brief".into(),
            },
            Message {
                role: "user".into(),
                content: "  say\nhello  there ".into(),
            },
        ]);
        assert_eq!(chat.tokens(), 5);
        assert_eq!(Prompt::Text(String::new()).tokens(), 0);
    }
}
