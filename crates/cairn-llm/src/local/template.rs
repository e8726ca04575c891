//! The chat template of a model family: how a chat becomes the one token sequence the model was
//! trained on. The GGUF's own Jinja template (`tokenizer.chat_template`) says which family a
//! model belongs to; cairn renders the family's layout itself instead of running Jinja, so the
//! markers are always special tokens and a message that contains `<|im_end|>` as text cannot
//! end its turn early (its text is tokenized as text, never as a marker).

use crate::{ChatMessage, Role};

/// A piece of a rendered prompt: a special token by its text (looked up in the vocabulary), or
/// plain text (tokenized with special tokens treated as text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Special(&'static str),
    Text(String),
}

/// The families cairn renders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatTemplate {
    /// `<|im_start|>role\n…<|im_end|>\n` (Qwen2.5, SmolLM2), with the system prompt the
    /// family's template adds when a chat has none.
    ChatMl { default_system: Option<&'static str> },
    /// `<start_of_turn>user\n…<end_of_turn>\n` (Gemma): no system role, the system prompt opens
    /// the first user turn; the assistant is `model`.
    Gemma,
    /// `<|start_header_id|>role<|end_header_id|>\n\n…<|eot_id|>` (Llama 3).
    Llama3,
}

/// System prompts the families' templates add to a chat without one. Kept because the models
/// were tuned with them: Qwen2.5 answers worse without its own.
const DEFAULT_SYSTEMS: &[&str] = &[
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
];

impl ChatTemplate {
    /// The family of a model, from its GGUF's chat template, else its architecture. `None` when
    /// cairn does not know the layout (the model is refused at load, with its name).
    pub fn detect(architecture: &str, jinja: Option<&str>) -> Option<Self> {
        if let Some(jinja) = jinja {
            if jinja.contains("<|im_start|>") {
                let default_system = DEFAULT_SYSTEMS.iter().copied().find(|s| jinja.contains(s));
                return Some(Self::ChatMl { default_system });
            }
            if jinja.contains("<start_of_turn>") {
                return Some(Self::Gemma);
            }
            if jinja.contains("<|start_header_id|>") {
                return Some(Self::Llama3);
            }
        }
        match architecture {
            "qwen2" | "qwen3" => Some(Self::ChatMl { default_system: None }),
            "gemma" | "gemma2" | "gemma3" => Some(Self::Gemma),
            _ => None,
        }
    }

    /// The markers that end the assistant's turn, beside the GGUF's end-of-sequence token.
    pub fn end_of_turn(&self) -> &'static [&'static str] {
        match self {
            Self::ChatMl { .. } => &["<|im_end|>", "<|endoftext|>"],
            Self::Gemma => &["<end_of_turn>", "<eos>"],
            Self::Llama3 => &["<|eot_id|>", "<|end_of_text|>"],
        }
    }

    /// The chat as pieces, ending where the assistant's answer starts.
    pub fn render(&self, messages: &[ChatMessage]) -> Vec<Piece> {
        match self {
            Self::ChatMl { default_system } => render_chatml(messages, *default_system),
            Self::Gemma => render_gemma(messages),
            Self::Llama3 => render_llama3(messages),
        }
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn render_chatml(messages: &[ChatMessage], default_system: Option<&'static str>) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut turn = |role: &str, content: &str| {
        pieces.push(Piece::Special("<|im_start|>"));
        pieces.push(Piece::Text(format!("{role}\n{content}")));
        pieces.push(Piece::Special("<|im_end|>"));
        pieces.push(Piece::Text("\n".to_owned()));
    };
    if let Some(system) = default_system.filter(|_| messages.first().is_none_or(|m| m.role != Role::System)) {
        turn("system", system);
    }
    for message in messages {
        turn(role_name(message.role), &message.content);
    }
    pieces.push(Piece::Special("<|im_start|>"));
    pieces.push(Piece::Text("assistant\n".to_owned()));
    pieces
}

fn render_gemma(messages: &[ChatMessage]) -> Vec<Piece> {
    let mut pieces = vec![Piece::Special("<bos>")];
    let mut system = String::new();
    for message in messages {
        let content = match message.role {
            Role::System => {
                system.push_str(&message.content);
                system.push_str("\n\n");
                continue;
            }
            Role::User => format!("user\n{}{}", std::mem::take(&mut system), message.content),
            Role::Assistant => format!("model\n{}", message.content),
        };
        pieces.push(Piece::Special("<start_of_turn>"));
        pieces.push(Piece::Text(content));
        pieces.push(Piece::Special("<end_of_turn>"));
        pieces.push(Piece::Text("\n".to_owned()));
    }
    pieces.push(Piece::Special("<start_of_turn>"));
    pieces.push(Piece::Text("model\n".to_owned()));
    pieces
}

fn render_llama3(messages: &[ChatMessage]) -> Vec<Piece> {
    fn header(pieces: &mut Vec<Piece>, role: &str) {
        pieces.push(Piece::Special("<|start_header_id|>"));
        pieces.push(Piece::Text(role.to_owned()));
        pieces.push(Piece::Special("<|end_header_id|>"));
    }
    let mut pieces = vec![Piece::Special("<|begin_of_text|>")];
    for message in messages {
        header(&mut pieces, role_name(message.role));
        pieces.push(Piece::Text(format!("\n\n{}", message.content)));
        pieces.push(Piece::Special("<|eot_id|>"));
    }
    header(&mut pieces, "assistant");
    pieces.push(Piece::Text("\n\n".to_owned()));
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    const QWEN_JINJA: &str = "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}";

    fn flat(pieces: &[Piece]) -> String {
        pieces
            .iter()
            .map(|p| match p {
                Piece::Special(s) => (*s).to_owned(),
                Piece::Text(t) => t.clone(),
            })
            .collect()
    }

    #[test]
    fn the_family_comes_from_the_gguf_template_else_the_architecture() {
        assert_eq!(
            ChatTemplate::detect("qwen2", Some(QWEN_JINJA)),
            Some(ChatTemplate::ChatMl { default_system: Some(DEFAULT_SYSTEMS[0]) })
        );
        // SmolLM2 is a llama: only its template says ChatML.
        assert_eq!(
            ChatTemplate::detect("llama", Some("{{'<|im_start|>' + message['role'] + '\\n'}}")),
            Some(ChatTemplate::ChatMl { default_system: None })
        );
        assert_eq!(ChatTemplate::detect("gemma3", None), Some(ChatTemplate::Gemma));
        assert_eq!(ChatTemplate::detect("llama", Some("<|start_header_id|>")), Some(ChatTemplate::Llama3));
        assert_eq!(ChatTemplate::detect("llama", None), None);
    }

    #[test]
    fn chatml_renders_qwen_layout_and_adds_the_family_system_prompt_only_when_missing() {
        let template = ChatTemplate::ChatMl { default_system: Some(DEFAULT_SYSTEMS[0]) };
        let without = template.render(&[ChatMessage::user("Hi")]);
        assert_eq!(
            flat(&without),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n\
             <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let with = template.render(&[ChatMessage::system("Extract facts."), ChatMessage::user("Hi")]);
        assert_eq!(
            flat(&with),
            "<|im_start|>system\nExtract facts.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn a_marker_inside_a_message_stays_text() {
        let pieces = ChatTemplate::ChatMl { default_system: None }.render(&[ChatMessage::user("a<|im_end|>b")]);
        assert!(pieces.contains(&Piece::Text("user\na<|im_end|>b".to_owned())));
        assert_eq!(pieces.iter().filter(|p| **p == Piece::Special("<|im_end|>")).count(), 1);
    }

    #[test]
    fn gemma_folds_the_system_prompt_into_the_first_user_turn() {
        let pieces = ChatTemplate::Gemma.render(&[
            ChatMessage::system("Be brief."),
            ChatMessage::user("Hi"),
            ChatMessage::assistant("Hello"),
            ChatMessage::user("Bye"),
        ]);
        assert_eq!(
            flat(&pieces),
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n\
             <start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    #[test]
    fn llama3_renders_headers() {
        let pieces = ChatTemplate::Llama3.render(&[ChatMessage::user("Hi")]);
        assert_eq!(
            flat(&pieces),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>\
             <|start_header_id|>assistant<|end_header_id|>\n\n"
        );
    }
}
